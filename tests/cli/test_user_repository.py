"""gpuforge run from a team's own repository of stacks, as `pulumi` is: the project is the nearest
Pulumi.yaml, stacks come from its stackConfigDir, and `gpuforge init` starts such a repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge import __version__
from gpuforge.cli import app
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.stacks import find_project
from gpuforge.scaffold import PROGRAM, InstallSource, install_source, scaffold
from gpuforge.spec import SpecError
from tests.installed import fresh_venv, install_wheel
from tests.support import REPO as SOURCE_ROOT

runner = CliRunner()


def test_the_project_is_found_from_any_directory_below_pulumi_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SOURCE_ROOT / "gpuforge" / "infra" / "aws")
    project = find_project()
    assert project.root == SOURCE_ROOT
    assert project.stack_dir == SOURCE_ROOT / "stacks"  # Pulumi.yaml's stackConfigDir
    assert project.program == SOURCE_ROOT / "__main__.py"
    assert "dev" in project.stack_names()


def test_outside_a_project_the_error_says_how_to_start_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as raised:
        find_project()
    assert "no Pulumi.yaml" in raised.value.report() and "gpuforge init" in raised.value.report()
    result = runner.invoke(app, ["plan", "dev"])
    assert result.exit_code == 2 and "gpuforge init" in result.output and "Traceback" not in result.output


def test_init_scaffolds_a_repository_that_plans_its_dev_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "team-clusters"
    result = runner.invoke(app, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    manifest = yaml.safe_load((repo / "Pulumi.yaml").read_text())
    assert manifest["name"] == "team-clusters" and manifest["stackConfigDir"] == "stacks"
    assert (repo / "requirements.txt").read_text() == install_source().requirement + "\n"
    for pack in ("security", "redundancy", "power", "wiring"):
        assert (repo / "policy-packs" / pack / "PulumiPolicy.yaml").is_file()
    assert (repo / ".github" / "workflows" / "review.yml").is_file()
    assert (repo / "schemas" / "cluster.schema.json").is_file()

    monkeypatch.chdir(repo)
    plan = plan_stack("dev")  # the scaffolded program, the scaffolded stack, found from the current directory
    assert plan.stack == "dev" and plan.summary.gpus > 0
    assert not (repo / ".ansible").exists()


class _Installed:
    """An installed distribution as importlib.metadata gives it: a version and its direct_url.json, if any."""

    def __init__(self, direct_url: dict[str, object] | None) -> None:
        self.version = __version__
        self._direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return json.dumps(self._direct_url) if name == "direct_url.json" and self._direct_url else None


def _installed_as(monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, object] | None) -> InstallSource:
    monkeypatch.setattr("gpuforge.scaffold.metadata.distributions", lambda name: [_Installed(direct_url)])
    return install_source()


def test_init_installs_gpuforge_the_way_it_was_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _installed_as(monkeypatch, None) == InstallSource(f"gpuforge=={__version__}")  # from an index
    git = {"url": "https://git.example.com/infra/gpuforge.git", "vcs_info": {"vcs": "git", "commit_id": "0a1b2c"}}
    assert (
        _installed_as(monkeypatch, git).requirement
        == "gpuforge @ git+https://git.example.com/infra/gpuforge.git@0a1b2c"
    )
    url = {"url": "https://pkgs.example.com/gpuforge-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert _installed_as(monkeypatch, url).requirement == f"gpuforge @ {url['url']}"
    checkout = _installed_as(monkeypatch, {"url": f"file://{tmp_path}", "dir_info": {"editable": True}})
    assert checkout.requirement == f"gpuforge @ file://{tmp_path}" and "only this machine has" in (
        checkout.warning or ""
    )

    wheel = tmp_path / "gpuforge-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    _installed_as(monkeypatch, {"url": wheel.as_uri(), "archive_info": {}})
    repo = tmp_path / "clusters"
    result = runner.invoke(app, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    assert (repo / "requirements.txt").read_text() == f"./wheels/{wheel.name}\n"
    assert (repo / "wheels" / wheel.name).read_bytes() == b"PK"  # CI installs the same file
    assert "requirements.txt installs ./wheels/" in result.output


def test_init_keeps_what_is_already_there(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    done = scaffold(tmp_path)
    assert "Pulumi.yaml" in done.kept and "Pulumi.yaml" not in done.written
    assert (tmp_path / "Pulumi.yaml").read_text() == "name: mine\nruntime: python\n"


def test_this_repository_runs_the_program_init_writes() -> None:
    assert (SOURCE_ROOT / "__main__.py").read_text() == PROGRAM


def test_a_stack_new_in_a_pull_request_diffs_against_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    scaffold(tmp_path)
    monkeypatch.chdir(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    shutil.copy(tmp_path / "stacks" / "Pulumi.dev.yaml", tmp_path / "stacks" / "Pulumi.team.yaml")
    assert runner.invoke(app, ["plan", "team", "--no-tree", "--json", "team.json"]).exit_code == 0

    result = runner.invoke(app, ["diff", "HEAD", "team.json", "--stack", "team", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert "no stack 'team' yet" in result.output
    assert '"action": "create"' in result.output and '"action": "delete"' not in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"gpuforge {__version__}"


@pytest.mark.slow
def test_the_built_wheel_plans_a_stack_from_outside_the_repository(gpuforge_wheel: Path, tmp_path: Path) -> None:
    """What `pip install gpuforge` gives a team: no checkout, the assets as package data, the project
    found from the directory it runs in (tests/installed.py; `bake --check` into a root file system from
    the same wheel: tests/playbooks/test_bake_from_wheel.py)."""
    venv, repo = tmp_path / "venv", tmp_path / "clusters"
    installed, top_level = install_wheel(gpuforge_wheel, venv)
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"gpuforge"}
    site = next(venv.glob("lib/python3*/site-packages"))
    python = str(installed)
    gpuforge = [python, "-m", "gpuforge"]

    where = subprocess.run(
        [python, "-c", "import gpuforge; print(gpuforge.__file__)"], cwd=tmp_path, capture_output=True, text=True
    )
    assert where.stdout.startswith(str(site))  # the wheel's copy, not this checkout

    repo.mkdir()
    assert subprocess.run([*gpuforge, "init"], cwd=repo, capture_output=True).returncode == 0
    plan = subprocess.run([*gpuforge, "plan", "dev", "--json", "-"], cwd=repo, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert '"stack": "dev"' in plan.stdout
    assert not (repo / ".ansible").exists()  # planning writes nothing into the user's directory
    rendered = subprocess.run([*gpuforge, "policies"], cwd=repo, capture_output=True, text=True)
    assert rendered.returncode == 0 and "security-" in rendered.stdout
    inventory = subprocess.run([*gpuforge, "inventory", "dev"], cwd=repo, capture_output=True, text=True)
    assert inventory.returncode == 0 and "slurm_config" in inventory.stdout, inventory.stderr[-2000:]
    # The commands that read bundled files: templates (slurm), monitoring rules and dashboards.
    for kind, stack, expected in (
        ("slurm", "dev", "slurm.conf"),
        ("monitoring", str(SOURCE_ROOT / "stacks" / "Pulumi.prod.yaml"), "etc/prometheus/rules/gpuforge.yml"),
    ):
        out = tmp_path / f"render-{kind}"
        rendered = subprocess.run(
            [*gpuforge, "render", kind, stack, "-o", str(out)], cwd=repo, capture_output=True, text=True
        )
        assert rendered.returncode == 0, rendered.stderr[-2000:]
        assert (out / expected).is_file(), sorted(p.name for p in out.iterdir())


def test_stacks_lists_every_stack_in_deploy_order() -> None:
    result = runner.invoke(app, ["stacks", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["stack"] for r in rows} == set(find_project().stack_names())
    order = [r["environment"] for r in rows]
    assert order == sorted(order, key=["dev", "staging", "prod"].index)  # prod last
    assert next(r for r in rows if r["stack"] == "onprem-lab")["region"] is None


@pytest.mark.slow
def test_what_init_writes_installs_gpuforge_in_a_fresh_environment(gpuforge_wheel: Path, tmp_path: Path) -> None:
    """pip installs the wheel (so it records where from), init writes requirements.txt, and a second,
    fresh environment installs gpuforge from that file alone, as the generated workflows do."""
    repo, wheel = tmp_path / "clusters", gpuforge_wheel

    def pip_install(python: Path, *args: str) -> None:
        # --ignore-installed: the .pth line shows pip this checkout's editable gpuforge, which a CI runner's
        # fresh environment does not have.
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index"]
        proc = subprocess.run([*pip, "--ignore-installed", "--quiet", *args], cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]

    repo.mkdir()
    first = fresh_venv(tmp_path / "first")
    pip_install(first, str(wheel))
    init = subprocess.run([str(first), "-m", "gpuforge", "init"], cwd=repo, capture_output=True, text=True)
    assert init.returncode == 0, init.stderr[-2000:]
    assert (repo / "requirements.txt").read_text() == f"./wheels/{wheel.name}\n"

    second = fresh_venv(tmp_path / "second")
    pip_install(second, "-r", "requirements.txt")  # the command of init's next step and of the workflows
    where = subprocess.run(
        [str(second), "-c", "import gpuforge; print(gpuforge.__file__)"], cwd=repo, capture_output=True, text=True
    )
    assert where.stdout.startswith(str(tmp_path / "second")), where
    plan = subprocess.run([str(second), "-m", "gpuforge", "plan", "dev"], cwd=repo, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr[-2000:]
