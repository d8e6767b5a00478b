"""gpuforge validate, the published JSON Schema and check-jsonschema judge a stack's types alike.

Types are strict (`count: "16"` and `spares: yes` are errors everywhere); YAML dates are text, so
a waiver's `expires` is judged by the schema's `format: date` and by gpuforge the same way. What a
JSON Schema cannot say (catalog facts, CIDR arithmetic, non-finite numbers, which JSON has no
literal for) is gpuforge's alone and not part of this comparison.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema

from gpuforge.policy.settings import parse_policy
from gpuforge.spec import SpecError, parse_spec
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "cluster.schema.json"
INVALID = ROOT / "tests" / "fixtures" / "stacks" / "invalid"
VALID = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
# Invalid stack files whose problem is a type, a bound, a name or a date: things a schema can say.
SCHEMA_CLASSES = [
    "quoted-count",
    "yaml11-yes-for-a-number",
    "unquoted-version",
    "unquoted-driver-branch",
    "huge-count",
    "hex-partition-key-unquoted",
    "waiver-impossible-date",
    "cyrillic-letter-in-a-key",
    "policy-parameter-out-of-range",
]
WAIVER = (
    "  gpuforge:policy:\n    waivers:\n"
    "    - {rule: security-bucket-versioning, resource: b, reason: migrating (OPS-1), expires: 2030-01-31}\n"
)


def cases(tmp: Path) -> dict[Path, bool]:
    """Stack file -> whether it is valid as far as a schema can tell."""
    out = {path: True for path in VALID}
    out.update({INVALID / f"{name}.yaml": False for name in SCHEMA_CLASSES})
    dated = tmp / "Pulumi.unquoted-waiver-date.yaml"  # a YAML 1.1 date, valid text in YAML 1.2
    dated.write_text((INVALID / "quoted-count.yaml").read_text().replace('count: "16"', "count: 16") + WAIVER)
    out[dated] = True
    return out


def gpuforge_says_valid(path: Path) -> bool:
    config = parse_yaml(path.read_text(), str(path))["config"]
    try:
        parse_spec(config["gpuforge:cluster"])
        parse_policy(config.get("gpuforge:policy"))
    except SpecError:
        return False
    return True


def jsonschema_says_valid(path: Path) -> bool:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    return validator.is_valid(parse_yaml(path.read_text(), str(path)))


def test_gpuforge_and_the_schema_agree(tmp_path: Path) -> None:
    for path, valid in cases(tmp_path).items():
        assert gpuforge_says_valid(path) is valid, path.name
        assert jsonschema_says_valid(path) is valid, path.name


def test_check_jsonschema_agrees(tmp_path: Path) -> None:
    """The real CLI editors' pre-commit hooks and CI run, over all the files in one call."""
    binary = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which("check-jsonschema")
    assert binary, "check-jsonschema is a dev dependency (pyproject.toml)"
    judged = cases(tmp_path)
    result = subprocess.run(
        [binary, "--schemafile", str(SCHEMA), "-o", "json", *map(str, judged)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    report = json.loads(result.stdout)
    assert report["parse_errors"] == []
    failing = {Path(e["filename"]).name for e in report["errors"]}
    for path, valid in judged.items():
        assert (path.name not in failing) is valid, f"{path.name}: {[e for e in report['errors']]}"
