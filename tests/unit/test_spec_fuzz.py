"""No stack file crashes gpuforge: every input resolves, or fails with the project's SpecError.

Inputs are the real stack files and spec fixtures, mutated the way people and tools break
them: a value replaced by one of YAML's surprises (dates, yes/no, octal, .inf, IPv6, host-bit
CIDRs, look-alike letters, 10**30), keys dropped, misspelt or repeated, lists and mappings
swapped, text encodings changed, bytes cut. Seeded and derandomized: the same examples every
run, bounded in number so the suite stays fast.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.plan.stacks import stack_from_text
from gpuforge.plan.validation import check_stack
from gpuforge.spec import ClusterSpec, SpecError
from gpuforge.spec.loader import decode_stack, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
# The example stacks, the test stacks (a Kubernetes site, a MultiKueue burst, booted labs) and the valid specs.
SEEDS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml")) + sorted(
    (ROOT / "tests" / "fixtures" / "stacks").glob("Pulumi.*.yaml")
)
SPECS = sorted((ROOT / "tests" / "fixtures" / "specs" / "valid").glob("*.yaml"))
SECTIONS = list(ClusterSpec.model_fields)  # every top-level section of the spec


def _documents() -> list[dict[str, Any]]:
    docs = [yaml.safe_load(p.read_text()) for p in SEEDS]
    docs += [{"config": {"gpuforge:cluster": yaml.safe_load(p.read_text())}} for p in SPECS]
    return [_plain(d) for d in docs]


def _plain(value: Any) -> Any:
    """YAML 1.1 dates from safe_load back to text, as the stack files hold them."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


DOCUMENTS = _documents()
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# What a value gets replaced by: YAML 1.1 surprises written as text, and hostile plain values.
YAML_TEXT = [
    "yes", "no", "on", "off", "2026-02-30", "2026-09-30", "1.33", "580", "0x10", "010", "0o17", "1_000",
    "12:30", ".inf", "-.inf", ".nan", "-0.0", "1e400", "~", "null", "''", "[]", "{}", "!!binary aGk=",
    "1" + "0" * 30, "&a [*a]", "!!python/name:os.system", "*undefined",
]
HOSTILE: list[Any] = [
    None, True, False, 0, -1, 1, 16, 2**31, 10**30, -(10**30), 0.5, -0.0, float("inf"), float("nan"), 1e308,
    "", " ", "x", "16", "yes", "P5.48XLARGE", "p5.48xlarge", "p5\u201348xlarge", "tr\u0430in", "us-esat-1",
    "10.40.1.0/16", "10.0.0.0/33", "fd00::/8", "2001:db8::1", "::", "10.0.0.1", "0.0.0.0/0",
    "SCRATCH_2", "PERSISTENT_2", "efa", "infiniband", "aws", "onprem", "hybrid", "eks", "kubernetes",
    "a" * 300, "\u200b", "\x00", "\ufeff", "../../etc/passwd", "cr-0123456789abcdef0", "2026-02-30",
    [], [None], [1, 2], ["ssh"], [{"a": 1}], {}, {"kind": "gcp"}, {"type": "spot"}, {"a": {"b": {"c": {}}}},
]
KEY_TYPOS = ["instance_typ", "Count", "cout", "kind", "spares", "typo", "\u0441ount", "", "0", "[key]"]


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    doc = DOCUMENTS[draw(st.integers(0, len(DOCUMENTS) - 1))]
    for _ in range(draw(st.integers(1, 4))):
        doc = _mutate(doc, draw)
    return doc


def _random_path(doc: Any, draw: st.DrawFn) -> tuple[Any, ...]:
    """A path into the document, descending at random (cheaper than listing every path)."""
    path: list[Any] = []
    value = doc
    while isinstance(value, dict | list) and value and draw(st.integers(0, 4)) != 0:
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        key = keys[draw(st.integers(0, len(keys) - 1))]
        path.append(key)
        value = value[key]
    return tuple(path)


def _mutate(doc: Any, draw: st.DrawFn) -> Any:
    path = _random_path(doc, draw)
    action = ("replace", "replace", "replace", "drop", "rename", "add", "wrap")[draw(st.integers(0, 6))]
    new = HOSTILE[draw(st.integers(0, len(HOSTILE) - 1))]
    return _apply(doc, path, action, new, KEY_TYPOS[draw(st.integers(0, len(KEY_TYPOS) - 1))])


def _apply(value: Any, path: tuple[Any, ...], action: str, new: Any, key: str) -> Any:
    if path:
        head, rest = path[0], path[1:]
        if isinstance(value, dict):
            return {k: (_apply(v, rest, action, new, key) if k == head else v) for k, v in value.items()}
        return [(_apply(v, rest, action, new, key) if i == head else v) for i, v in enumerate(value)]
    if action == "replace":
        return new
    if action == "wrap":
        return [value] if not isinstance(value, list) else {"wrapped": value}
    if isinstance(value, dict) and value:
        first = next(iter(value))
        if action == "drop":
            return {k: v for k, v in value.items() if k != first}
        if action == "rename":
            return {(key if k == first else k): v for k, v in value.items()}
        return {**value, key: new}
    return new


def _seeds_with(section: str) -> list[dict[str, Any]]:
    return [d for d in DOCUMENTS if section in (d.get("config", {}).get("gpuforge:cluster") or {})]


@st.composite
def section_documents(draw: st.DrawFn, section: str) -> Any:
    """A seed holding `section`, mutated inside that section only: every section gets its own share of
    examples, however rarely the free walk of `mutated_documents` reaches it."""
    seeds = _seeds_with(section)
    doc = seeds[draw(st.integers(0, len(seeds) - 1))]
    for _ in range(draw(st.integers(1, 3))):
        prefix = ("config", "gpuforge:cluster", section)
        value: Any = doc
        for key in prefix:
            value = value[key]
        path = prefix + _random_path(value, draw)
        action = ("replace", "replace", "replace", "drop", "rename", "add", "wrap")[draw(st.integers(0, 6))]
        new = HOSTILE[draw(st.integers(0, len(HOSTILE) - 1))]
        doc = _apply(doc, path, action, new, KEY_TYPOS[draw(st.integers(0, len(KEY_TYPOS) - 1))])
    return doc


@st.composite
def stack_texts(draw: st.DrawFn, documents: st.SearchStrategy[Any] | None = None) -> str:
    """YAML text of a mutated stack, sometimes with a scalar spliced in as raw YAML text."""
    document = draw(mutated_documents() if documents is None else documents)
    text = yaml.dump(document, Dumper=DUMPER, allow_unicode=True, sort_keys=False)
    if draw(st.booleans()):
        values = [m.start() for m in re.finditer(r": (?=\S)", text)]
        if values:
            at = draw(st.sampled_from(values)) + 2
            end = text.find("\n", at)
            text = text[:at] + draw(st.sampled_from(YAML_TEXT)) + text[end:]
    if draw(st.integers(0, 9)) == 0:  # a duplicated line: a repeated key, or broken indentation
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        text = "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    return text


@st.composite
def stack_bytes(draw: st.DrawFn) -> bytes:
    text = draw(stack_texts())
    encoding = draw(st.sampled_from(["utf-8"] * 8 + ["latin-1", "utf-16", "utf-8-sig", "cut"]))
    if encoding == "latin-1":
        return text.replace("a", "\u00e9", 1).encode("latin-1", "replace")
    if encoding == "cut":
        raw = text.encode()
        return raw[: draw(st.integers(0, len(raw)))]
    if encoding == "utf-8-sig":
        return codecs.BOM_UTF8 + text.encode()
    return text.encode(encoding)


def check(raw: bytes) -> None:
    """What `gpuforge validate` does with a file's bytes, short of the waiver look."""
    path = Path("Pulumi.fuzz.yaml")
    check_stack(stack_from_text(decode_stack(raw, str(path)), path))


FUZZ = settings(
    max_examples=1000,
    derandomize=True,  # seeded: the same inputs every run
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(stack_bytes())
def test_any_stack_file_resolves_or_raises_spec_error(raw: bytes) -> None:
    try:
        check(raw)
    except SpecError as error:
        assert error.issues, "a SpecError always names at least one problem"
        assert all(issue.path and issue.message for issue in error.issues)
        report = error.report()
        assert "Traceback" not in report and "pydantic" not in report.lower()
        assert "Input should" not in report and "discriminator" not in report, report


def test_every_top_level_section_has_a_seed_to_fuzz() -> None:
    """A section added to ClusterSpec without a seed stack or valid spec that uses it is never fuzzed:
    add one (a stack in stacks/ or tests/fixtures/stacks/, or a spec in tests/fixtures/specs/valid/)."""
    unseeded = [section for section in SECTIONS if not _seeds_with(section)]
    assert not unseeded, f"no fuzz seed holds {unseeded}"


@pytest.mark.parametrize("section", SECTIONS)
@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_each_section_mutated_resolves_or_raises_spec_error(section: str, data: st.DataObject) -> None:
    if not _seeds_with(section):
        pytest.fail(f"no fuzz seed holds {section}")
    text = data.draw(stack_texts(section_documents(section)))
    try:
        check(text.encode())
    except SpecError as error:
        report = error.report()
        assert error.issues and all(issue.path and issue.message for issue in error.issues)
        assert "Traceback" not in report and "pydantic" not in report.lower() and "Input should" not in report


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(st.text(max_size=400) | st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace")))
def test_arbitrary_text_never_escapes_the_loader(text: str) -> None:
    with contextlib.suppress(SpecError):
        parse_yaml(text, "fuzz.yaml")


runner = CliRunner()
CLI_SAMPLE = settings(FUZZ, max_examples=24)


def _invoke(command: str, raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stack = Path(tmp) / "Pulumi.fuzz.yaml"
        stack.write_bytes(raw)
        # validate --spec-only: the spec's exits (0 or 2); the program and the packs are plan's fuzz
        options = {"plan": ["--no-tree"], "validate": ["--spec-only"]}[command]
        result = runner.invoke(app, [command, str(stack), *options], env={"COLUMNS": "200"})
    # plan exits 1 for a mandatory policy violation on a valid spec; never anything else
    assert result.exit_code in ((0, 2) if command == "validate" else (0, 1, 2)), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


@CLI_SAMPLE
@given(stack_bytes())
def test_cli_validate_exits_0_or_2_without_a_traceback(raw: bytes) -> None:
    _invoke("validate", raw)


@settings(FUZZ, max_examples=8)
@given(stack_bytes())
def test_cli_plan_exits_without_a_traceback(raw: bytes) -> None:
    _invoke("plan", raw)
