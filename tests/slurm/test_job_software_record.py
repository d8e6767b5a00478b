"""The prolog that writes a job's software into its slurmdbd record (slurm_compute files/gpuforge-job-software),
run as slurmd runs it: its environment, the bench's stand-in package versions in a recorded node tree, and a
stand-in scontrol that records what it was asked. The booted proof (sacct shows it) is in test_slurm_cluster.py."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.monitoring.test_collectors import software_root

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "slurm_compute"
PROLOG = ROLE / "files" / "gpuforge-job-software"


def prolog_module() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("gpuforge_job_software", str(PROLOG))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def stand_in_scontrol(tmp_path: Path, exit_code: int = 0) -> tuple[Path, Path]:
    """An scontrol that appends its arguments to calls.jsonl (and fails like slurmctld refusing, if asked)."""
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"if {exit_code}:\n    print('slurm_update error: Access/permission denied', file=sys.stderr)\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return script, calls


def run_prolog(
    tmp_path: Path, node: str, nodelist: str, scontrol: Path, nodelist_name: str = "SLURM_JOB_NODELIST"
) -> subprocess.CompletedProcess[str]:
    root = software_root(tmp_path / "root", module="580.82.07", efa=True)
    env = {
        "PATH": "",  # slurmd gives a prolog no search path
        "SLURM_JOB_ID": "4242",
        nodelist_name: nodelist,
        "SLURMD_NODENAME": node,
        "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
        "GPUFORGE_SOFTWARE_ROOT": str(root),
        "GPUFORGE_SCONTROL": str(scontrol),
    }
    return subprocess.run([sys.executable, str(PROLOG)], env=env, capture_output=True, text=True, timeout=60)


# slurmd 22.05 (Debian 12, the bench) names the allocation SLURM_NODELIST only; later releases SLURM_JOB_NODELIST too.
@pytest.mark.parametrize("nodelist_name", ["SLURM_JOB_NODELIST", "SLURM_NODELIST"])
def test_the_first_node_writes_its_software_into_the_jobs_admin_comment(tmp_path: Path, nodelist_name: str) -> None:
    from tests.standins.packages import EFA_INSTALLER_VERSION, NCCL_PINNED

    scontrol, calls = stand_in_scontrol(tmp_path)
    done = run_prolog(tmp_path, "gpu-03", "gpu-[03-05,09],cpu-1", scontrol, nodelist_name)
    assert done.returncode == 0 and done.stderr == ""
    (call,) = [json.loads(line) for line in calls.read_text().splitlines()]
    assert call[:2] == ["update", "JobId=4242"]
    assert call[2] == (
        "AdminComment=gpuforge-software node=gpu-03 kernel=6.1.0-28-cloud-amd64 nvidia_driver=580.82.07 cuda=12.8 "
        f"nccl={NCCL_PINNED} doca_ofed=2.10.0-1 rdma_core=44.0-2 efa_installer={EFA_INSTALLER_VERSION}"
    )


@pytest.mark.parametrize("node", ["gpu-04", "gpu-09", "cpu-1"])
def test_the_other_nodes_of_the_allocation_leave_the_record_alone(tmp_path: Path, node: str) -> None:
    scontrol, calls = stand_in_scontrol(tmp_path)
    done = run_prolog(tmp_path, node, "gpu-[03-05,09],cpu-1", scontrol)
    assert done.returncode == 0
    assert not calls.exists(), "only the first node of the allocation updates the job"


def test_a_refused_update_never_fails_the_prolog(tmp_path: Path) -> None:
    scontrol, calls = stand_in_scontrol(tmp_path, exit_code=1)
    done = run_prolog(tmp_path, "gpu-1", "gpu-1", scontrol)
    assert done.returncode == 0, "a failing prolog would drain the node"
    assert "job 4242: scontrol: slurm_update error: Access/permission denied" in done.stderr
    assert calls.exists()


def test_a_missing_scontrol_never_fails_the_prolog(tmp_path: Path) -> None:
    done = run_prolog(tmp_path, "gpu-1", "gpu-1", tmp_path / "no-scontrol")
    assert done.returncode == 0
    assert "gpuforge-job-software: job 4242:" in done.stderr


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("gpu-1", "gpu-1"),
        ("gpu-[03-05,09],cpu-1", "gpu-03"),
        ("cpu-1,gpu-[1-2]", "cpu-1"),
        ("rack[2-3]-node[07,01]", "rack2-node07"),
        ("cloud-i-0abc", "cloud-i-0abc"),
    ],
)
def test_the_first_host_of_a_hostlist(nodelist: str, first: str) -> None:
    assert prolog_module().first_host(nodelist) == first


def test_the_role_installs_the_prolog_with_the_collector_it_reads() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    install = next(t for t in tasks if t["name"].startswith("Install the job software record"))
    assert set(install["loop"]) == {"gpuforge-job-software", "software-versions"}
    link = next(t for t in tasks if t["name"] == "Run the job software record as a prolog")
    assert link["ansible.builtin.file"]["dest"] == "/etc/slurm/prolog.d/70-gpuforge-job-software"
    # The record and the metrics read the versions with one piece of code.
    collector = ROOT / "gpuforge/assets/playbooks/roles/node_textfile_collectors/files/software-versions"
    assert (ROLE / "files" / "software-versions").resolve() == collector.resolve()
    assert os.access(PROLOG, os.X_OK)
