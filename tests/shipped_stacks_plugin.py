"""Fails a test that reads a shipped example stack unless it is one of the examples' tests (see
tests/shipped_stacks.py). Loaded for every test directory by tests/conftest.py.

A read is seen two ways while a test sets up and runs: gpuforge's code opening a shipped stack file
(Python's audit hook, so the CLI run in-process, load_stack, plan_stack and the inventory are all seen), and a
fixture value that is a plan of a shipped stack made by tests.support.planned (whose cache would otherwise
hide every read after the first). An open by test code itself is left to the scan of the test files
(tests/unit/test_examples_apart.py): a test that reads every file of the checkout (tests/unit/test_lint_scope.py
looks for Python shebangs) uses no example. Tests marked slow boot what an example plans: they are the examples'
tests by definition. A stack read by a subprocess (the CLI run as a command) is not seen here.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import gpuforge
from tests.shipped_stacks import SHIPPED_PLANS, is_shipped_stack, may_read_examples, what_to_do

GPUFORGE = str(Path(gpuforge.__file__).resolve().parent)

_reads: list[str] | None = None  # the shipped stacks opened by the test now setting up or running
_READS = pytest.StashKey[list[str]]()  # what a test's setup and call read, judged after its call


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if _reads is None or event != "open" or not isinstance(args[0], str | Path):
        return
    path = str(args[0])
    if "Pulumi." in path and is_shipped_stack(path) and _opened_by_gpuforge():
        _reads.append(Path(path).name)


def _opened_by_gpuforge() -> bool:
    frame: FrameType | None = sys._getframe(2)  # past this function and the hook
    while frame is not None:
        if frame.f_code.co_filename.startswith(GPUFORGE):
            return True
        frame = frame.f_back
    return False


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(_on_audit)  # an audit hook cannot be removed; it does nothing outside a test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_READS] = []
    yield from _recorded(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _recorded(item)
    reads = item.stash[_READS]
    funcargs = getattr(item, "funcargs", {})
    reads += [SHIPPED_PLANS[id(value)] for value in funcargs.values() if id(value) in SHIPPED_PLANS]
    if reads and not item.get_closest_marker("slow") and not may_read_examples(item.path):
        pytest.fail(what_to_do(item.nodeid.split("::")[0], sorted(set(reads))), pytrace=False)


def _recorded(item: pytest.Item) -> Generator[None, None, None]:
    global _reads
    _reads = item.stash[_READS]
    try:
        yield
    finally:
        _reads = None
