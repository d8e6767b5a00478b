"""The hybrid cluster's guard against heterogeneous jobs that span the VPN (stacks/Pulumi.hybrid.yaml: partition
site on the DGX rack, partition cloud on p5 nodes): the rendered cli_filter.lua run by a real Lua interpreter
(Debian's lua5.4) through tests/slurm/het_job_harness.lua, which calls it as Slurm's cli_filter/lua plugin does
for one sbatch (slurm_cli_pre_submit per component, offset 0 first). Not a booted slurmctld: the booted Slurm
cluster is not hybrid, and Debian's Slurm is not built here with the lua cli_filter."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve
from tests.support import REPO, skip_unless_ci

LUA = shutil.which("lua5.4")
HARNESS = Path(__file__).with_name("het_job_harness.lua")

pytestmark = skip_unless_ci(LUA is None, "lua5.4 is not installed (apt-get install lua5.4)")


@pytest.fixture(scope="module")
def cli_filter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import yaml

    stack = yaml.safe_load((REPO / "stacks" / "Pulumi.hybrid.yaml").read_text())
    files = render_slurm(slurm_config(resolve(stack["config"]["gpuforge:cluster"])))
    assert "CliFilterPlugins=lua" in files["slurm.conf"]
    path = tmp_path_factory.mktemp("cli_filter") / "cli_filter.lua"
    path.write_text(files["cli_filter.lua"])
    return path


def submit(cli_filter: Path, *partitions: str) -> subprocess.CompletedProcess[str]:
    assert LUA is not None
    return subprocess.run(
        [LUA, str(HARNESS), str(cli_filter), *partitions], capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    "components",
    [("site",), ("cloud",), ("-",), ("site", "site"), ("cloud", "cloud"), ("-", "site"), ("site,cloud",)],
)
def test_jobs_on_one_side_are_submitted(cli_filter: Path, components: tuple[str, ...]) -> None:
    result = submit(cli_filter, *components)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"submitted {len(components)} component(s)\n" and result.stderr == ""


@pytest.mark.parametrize(
    ("components", "refused_at"),
    [
        (("site", "cloud"), 1),
        (("cloud", "site"), 1),
        (("-", "cloud"), 1),
        (("site", "site", "cloud"), 2),
        (("site,cloud", "site"), 1),
        (("cloud", "site,cloud"), 1),
    ],
)
def test_heterogeneous_jobs_across_the_vpn_are_refused(
    cli_filter: Path, components: tuple[str, ...], refused_at: int
) -> None:
    result = submit(cli_filter, *components)
    assert result.returncode == 1 and result.stdout == f"refused at component {refused_at}\n"
    assert f"heterogeneous job component {refused_at} is in partition" in result.stderr
    assert "would span the site-to-cloud VPN" in result.stderr and "separate jobs" in result.stderr


def test_only_a_hybrid_cluster_gets_the_filter() -> None:
    import yaml

    stack = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    files = render_slurm(slurm_config(resolve(stack["config"]["gpuforge:cluster"])))
    assert "cli_filter.lua" not in files and "CliFilterPlugins" not in files["slurm.conf"]
