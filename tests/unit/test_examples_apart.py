"""The shipped example stacks are read only by the examples' own tests (issue 29, item 7): the guard that
keeps it so (tests/shipped_stacks.py, tests/shipped_stacks_plugin.py) and the list that only shrinks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.shipped_stacks import EXAMPLES_TESTS, NOT_YET_APART, REPO, SHIPPED_DIRS, may_read_examples

SHIPPED_NAMES = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml") for d in SHIPPED_DIRS for p in d.glob("Pulumi.*.yaml")
)
# What a test file says when it reads a shipped stack by path or by name: a command run as a subprocess is
# seen only this way (the plugin sees the reads of its own process, helpers and conftests included).
NAMES_A_SHIPPED_STACK = re.compile(
    r"(?<![\w/])(?:stacks|examples)/Pulumi\.[\w-]+\.ya?ml"
    r"|\b(?:\w*ROOT|REPO)\s*/\s*\"(?:stacks|examples)\""
    rf"|(?:planned|plan_stack|load_stack|build_inventory)\(\s*\"(?:{'|'.join(map(re.escape, SHIPPED_NAMES))})\""
)

# A file whose every test boots machines (marked slow): it boots what an example plans, so it is one of the
# examples' tests by definition (the plugin lets a slow test read the examples too).
BOOTED_FILE = re.compile(r"^pytestmark = .*\bslow\b", re.MULTILINE)


def test_the_shipped_stacks_are_found() -> None:
    assert {"dev", "prod", "site-100k"} <= set(SHIPPED_NAMES), SHIPPED_NAMES


def test_every_file_not_yet_apart_exists_and_is_a_test_file() -> None:
    missing = sorted(name for name in NOT_YET_APART if not (REPO / name).is_file())
    assert not missing, f"tests/shipped_stacks.py NOT_YET_APART lists files that are gone: {missing}; remove them"
    assert all(Path(name).name.startswith("test_") for name in NOT_YET_APART)
    inside = sorted(name for name in NOT_YET_APART if (REPO / name).resolve().is_relative_to(EXAMPLES_TESTS))
    assert not inside, f"tests/examples/ may read the examples; drop these from NOT_YET_APART: {inside}"


def test_no_test_outside_the_examples_names_a_shipped_stack() -> None:
    found = []
    for source in sorted((REPO / "tests").rglob("test_*.py")):
        text = source.read_text(encoding="utf-8")
        if source.name == "test_examples_apart.py" or may_read_examples(source) or BOOTED_FILE.search(text):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if match := NAMES_A_SHIPPED_STACK.search(line):
                found.append(f"{source.relative_to(REPO)}:{number}: {match.group(0)}")
    assert not found, (
        "tests outside tests/examples/ name a shipped example stack:\n  " + "\n  ".join(found) + "\nbuild the "
        "input with tests/specs.py (a unit test) or move the test to tests/examples/ (a test of the example)"
    )


def test_the_guard_fails_a_test_that_reads_an_example_and_passes_one_that_builds_its_own(tmp_path: Path) -> None:
    """gpuforge loading an example, a cached plan of one (each use): failures; a test building its own input, or
    test code reading every file as a lint does (the scan of the test files judges test code): passes."""
    dev = REPO / "stacks" / "Pulumi.dev.yaml"
    (tmp_path / "test_borrow.py").write_text(
        textwrap.dedent(f"""
            from pathlib import Path

            import pytest
            from gpuforge.plan.stacks import load_stack
            from tests.specs import minimal_aws_cluster, write_stack
            from tests.support import planned

            @pytest.fixture(scope="session")
            def example():
                return planned({str(dev)!r})

            def test_loads_the_file():
                load_stack({str(dev)!r})

            def test_reads_every_file_of_a_directory_as_a_lint_does():
                assert all(path.read_bytes() for path in Path({str(dev.parent)!r}).glob("*.yaml"))

            def test_first_use_of_the_cached_plan(example):
                pass

            def test_later_use_of_the_cached_plan(example):
                pass

            def test_builds_its_own(tmp_path):
                write_stack(tmp_path, minimal_aws_cluster()).read_text()
        """),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.shipped_stacks_plugin",
         "test_borrow.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "3 failed, 2 passed" in out, out
    assert "test_borrow.py reads the shipped example stack(s) Pulumi.dev.yaml" in out, out
    assert "tests/specs.py" in out and "tests/examples/" in out, out
