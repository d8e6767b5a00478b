"""Whole stack files through `gpuforge validate`: each invalid one exits 2 naming its field paths,
with no traceback; messages say what was received, what was expected and the fix."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.spec import SpecError

ROOT = Path(__file__).resolve().parents[2]
INVALID = sorted((ROOT / "tests" / "fixtures" / "stacks" / "invalid").glob("*.yaml"))
runner = CliRunner()


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check_stack(load_stack(path))
    return [str(issue) for issue in caught.value.issues]


def validate(path: Path) -> str:
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(result.exception, SystemExit)
    return result.output


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_stack_exits_2_naming_its_paths(path: Path) -> None:
    expected = re.findall(r"^# expect: (.+)$", path.read_text(), flags=re.MULTILINE)
    assert expected, f"{path.name} states no '# expect: <path>' line"
    output = validate(path)
    found = problems(path)
    for field_path in expected:
        assert any(p.startswith(f"{field_path}: ") for p in found), f"{field_path} not in {found}"
        assert field_path in output
    assert not any(word in output for word in ("Input should", "pydantic", "discriminator", "^["))


def message(name: str, field_path: str) -> str:
    found = problems(ROOT / "tests" / "fixtures" / "stacks" / "invalid" / f"{name}.yaml")
    return next(p for p in found if p.startswith(f"{field_path}: "))


def test_yaml_11_values_say_how_to_quote() -> None:
    assert "YAML reads 1.33 unquoted as a number" in message("unquoted-version", "cluster.kubernetes.version")
    assert "quote it: '1.33'" in message("unquoted-version", "cluster.kubernetes.version")
    assert "quote it: '580'" in message("unquoted-driver-branch", "cluster.software.nvidia_driver_branch")
    assert "quote it: '0x0010'" in message("hex-partition-key-unquoted", "cluster.software.nccl_version")
    spares = message("yaml11-yes-for-a-number", "cluster.node_groups[train].spares")
    assert "got 'yes'" in spares and "expected a whole number" in spares
    count = message("quoted-count", "cluster.node_groups[train].count")
    assert "got '16'" in count and "write the number without quotes: 16" in count


def test_addresses_say_the_network_meant() -> None:
    host_bits = message("host-bits-cidr", "cluster.network.cidr")
    assert "the /16 network it falls in is 10.40.0.0/16; fix: write 10.40.0.0/16" in host_bits
    assert "IPv6" in message("ipv6-vpc", "cluster.network.cidr")


def test_names_get_did_you_mean_in_any_case_and_lookalikes_are_pointed_out() -> None:
    instance_type = message("instance-type-in-capitals", "cluster.node_groups[train].instance_type")
    assert "did you mean g5.12xlarge?" in instance_type
    key = message("cyrillic-letter-in-a-key", "cluster.node_groups[train].\u0441ount")
    assert "U+0441 CYRILLIC SMALL LETTER ES, which looks like 'c'" in key and "rename it to count" in key


def test_a_region_typo_is_one_problem() -> None:
    found = problems(ROOT / "tests" / "fixtures" / "stacks" / "invalid" / "region-typo-is-one-problem.yaml")
    assert len(found) == 1 and "did you mean us-east-1?" in found[0]


def test_spec_and_policy_problems_come_together_with_lines() -> None:
    found = problems(ROOT / "tests" / "fixtures" / "stacks" / "invalid" / "spec-and-policy-problems-together.yaml")
    assert any(p.startswith("cluster.node_groups[train].count: got -1; expected from 0 to 4096") for p in found)
    assert any(p.startswith("policy.levels[security]: got 'blocking'") for p in found)
    assert all(re.search(r"\(line \d+\)$", p) for p in found), found


def test_file_problems_name_the_file_and_the_fix(tmp_path: Path) -> None:
    text = (ROOT / "tests" / "fixtures" / "stacks" / "invalid" / "quoted-count.yaml").read_text()
    cases = {
        "latin1": (text.replace("fixture", "fixtur\u00e9").encode("latin-1"), "save it as UTF-8"),
        "utf16": (text.encode("utf-16"), "is UTF-16 or UTF-32"),
        "bom": (codecs.BOM_UTF8 + text.encode(), "byte-order mark"),
        "empty": (b"", "is empty"),
        "list": (b"- a\n- b\n", "holds a list, not a mapping"),
        "tabs": (b"config:\n\tgpuforge:cluster: {}\n", "indent with spaces"),
        "deep": (b"config: " + b"[" * 500 + b"]" * 500 + b"\n", "nested more than 64 levels"),
        "alias-bomb": (
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e]\n",
            "once YAML aliases are expanded",
        ),
        "two-documents": (b"config: {}\n---\nconfig: {}\n", "one YAML document"),
        "huge": (b"# " + b"x" * (5 * 1024 * 1024) + b"\n", "a stack file is at most"),
        "control-character": (b"config:\n  a: \x07\n", "control character U+0007"),
        "python-tag": (b"config: !!python/object/apply:os.system [true]\n", "tag"),
        "no-cluster": (b"config:\n  gpuforge:clustr: {}\n", "rename gpuforge:clustr to gpuforge:cluster"),
    }
    for name, (raw, expected) in cases.items():
        stack = tmp_path / f"Pulumi.{name}.yaml"
        stack.write_bytes(raw)
        output = validate(stack)
        assert str(stack.name) in output.replace("\n", ""), (name, output)
        assert expected in output.replace("\n", " "), (name, output)


def test_rails_mismatch_is_named_at_the_fabric(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    doc["config"]["gpuforge:cluster"]["site"]["fabric"]["rails"] = 10
    stack = tmp_path / "Pulumi.rails.yaml"
    stack.write_text(yaml.safe_dump(doc))
    found = problems(stack)
    # Ten rails also mean ten leaves per unit, whose uplinks the spines must have ports for (the tier check).
    rails = [problem for problem in found if problem.startswith("cluster.site.fabric.rails: 10 rails")]
    assert len(rails) == 1 and "set rails: 8" in rails[0], found
    assert all(problem.startswith(("cluster.site.fabric.rails:", "cluster.site.fabric.spines:")) for problem in found)


def test_waivers_that_match_nothing_or_expired_fail_validate(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.waivers.yaml"
    stack.write_text(
        (ROOT / "tests" / "fixtures" / "specs" / "valid" / "minimal-efa.yaml").read_text().replace("\n", "\n    ")
        .join(["config:\n  gpuforge:cluster:\n    ", "\n"])
        + "  gpuforge:policy:\n    waivers:\n"
        "    - {rule: security-bucket-versioning, resource: no-such-bucket, reason: migrating (OPS-1), "
        "expires: 2020-01-01}\n"
    )
    output = validate(stack).replace("\n", " ")
    assert "policy.waivers[0].expires: expired on 2020-01-01" in output
    assert "policy.waivers[0].resource: 'no-such-bucket' matches no resource" in output


def test_plan_reports_spec_and_policy_problems_before_running_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuforge.plan import engine

    evaluated: list[object] = []
    monkeypatch.setattr(engine, "run_program", lambda *args: evaluated.append(args) or ([], {}))
    stack = ROOT / "tests" / "fixtures" / "stacks" / "invalid" / "spec-and-policy-problems-together.yaml"
    result = runner.invoke(app, ["plan", str(stack), "--no-tree"], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert "cluster.node_groups[train].count" in result.output and "policy.levels[security]" in result.output
    assert evaluated == [], "a stack with problems declares nothing"
