"""The spec corpus: every valid spec resolves; every invalid one fails naming its field paths,
and declares nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpuforge.plan import engine as plan_module
from gpuforge.spec import ClusterSpec, SpecError, resolve

SPECS = Path(__file__).parent.parent / "fixtures" / "specs"
VALID = sorted((SPECS / "valid").glob("*.yaml"))
INVALID = sorted((SPECS / "invalid").glob("*.yaml"))


def expected_paths(path: Path) -> list[str]:
    return re.findall(r"^# expect: (\S+)$", path.read_text(), flags=re.MULTILINE)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_spec_resolves(path: Path) -> None:
    resolved = resolve(yaml.safe_load(path.read_text()), source=str(path))
    assert resolved.node_groups, "a valid spec resolves every node group"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_spec_names_its_field_paths(path: Path) -> None:
    expected = expected_paths(path)
    assert expected, f"{path.name} states no '# expect: <path>' line"
    with pytest.raises(SpecError) as caught:
        resolve(yaml.safe_load(path.read_text()), source=str(path))
    reported = [issue.path for issue in caught.value.issues]
    for field_path in expected:
        assert field_path in reported, f"{field_path} not in {reported}"
    assert all(issue.message for issue in caught.value.issues)


def test_every_problem_is_reported_at_once() -> None:
    path = SPECS / "invalid" / "many-problems-at-once.yaml"
    with pytest.raises(SpecError) as caught:
        resolve(yaml.safe_load(path.read_text()))
    assert len(caught.value.issues) >= 4


def test_invalid_spec_declares_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    evaluated: list[object] = []
    monkeypatch.setattr(plan_module, "run_program", lambda *args: evaluated.append(args) or ([], {}))
    stack = tmp_path / "Pulumi.broken.yaml"
    spec = yaml.safe_load((SPECS / "invalid" / "efa-on-type-without-efa.yaml").read_text())
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    with pytest.raises(SpecError):
        plan_module.plan_stack(stack)
    assert evaluated == [], "the program must not run for an invalid spec"


def test_messages_say_what_to_do() -> None:
    path = SPECS / "invalid" / "type-not-offered-in-region.yaml"
    with pytest.raises(SpecError) as caught:
        resolve(yaml.safe_load(path.read_text()))
    (issue,) = caught.value.issues
    assert "not offered in eu-west-1" in issue.message
    assert "us-east-1" in issue.message  # where it is offered


def test_unknown_instance_type_suggests_close_names() -> None:
    path = SPECS / "invalid" / "unknown-instance-type.yaml"
    with pytest.raises(SpecError) as caught:
        resolve(yaml.safe_load(path.read_text()))
    assert "p5.48xlarge" in str(caught.value)


def test_every_top_level_section_has_an_invalid_fixture() -> None:
    """A section added to ClusterSpec arrives with at least one invalid fixture (a spec here, or a stack in
    tests/fixtures/stacks/invalid) whose '# expect:' names a path inside it."""
    stacks = sorted((SPECS.parent / "stacks" / "invalid").glob("*.yaml"))
    covered = {
        match.group(1)
        for path in [*INVALID, *stacks]
        for expected in expected_paths(path)
        for match in [re.match(r"cluster\.([a-z_]+)", expected)]
        if match
    }
    missing = [section for section in ClusterSpec.model_fields if section not in covered]
    assert not missing, f"no invalid fixture expects a problem in {missing}"
