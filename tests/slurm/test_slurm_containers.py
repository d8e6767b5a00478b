"""Containers for jobs on the booted Slurm cluster (tests/slurm/cluster.py): enroot, pyxis and NVIDIA's
container toolkit installed by the enroot and pyxis roles in the cluster's own converge, from the stand-in
sources of tests/standins/containers.py. Real here: the packages' names and pinned versions, apt's
signature checks, the release assets' sha256, the rendered enroot.conf, pyxis.conf and plugstack.conf on
the nodes, and srun/sbatch on the login machine and slurmstepd on the computes loading a SPANK plugin
named pyxis through that plugin stack. Standing in: the plugin records the image a step asked for instead
of starting a container, and enroot's programs are scripts."""

from __future__ import annotations

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.render.slurm import render_slurm
from tests.machines import Machine

from .cluster import USER, SlurmCluster, wait_for

pytestmark = pytest.mark.slow

FACTS = load_catalog().slurm.containers
IMAGE = "nvcr.io#nvidia/pytorch:24.05-py3"
JOB_TIMEOUT_S = 300
# The batch script's step id (SLURM_BATCH_SCRIPT in slurm.h).
BATCH_STEP = 0xFFFFFFFB


def _versions(machine: Machine, *packages: str) -> dict[str, str]:
    out = machine.run("dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\\n' " + " ".join(packages),
                      check=False).stdout  # fmt: skip
    return {
        name: version for name, version, status in (line.split() for line in out.splitlines()) if status == "installed"
    }


def test_enroot_and_pyxis_are_installed_at_the_catalog_releases(slurm_cluster: SlurmCluster) -> None:
    enroot = f"{FACTS.enroot.version}-{FACTS.enroot.package_release}"
    pyxis = f"{FACTS.pyxis.version}-{FACTS.pyxis.package_release}"
    for machine in (slurm_cluster.login, *slurm_cluster.computes, slurm_cluster.cloud):
        versions = _versions(machine, "enroot", "enroot+caps", FACTS.pyxis.package)
        assert versions == {"enroot": enroot, "enroot+caps": enroot, FACTS.pyxis.package: pyxis}, machine.name
        assert machine.run("enroot version").stdout.strip() == FACTS.enroot.version
        assert machine.run(f"test -f {FACTS.pyxis.plugin}", check=False).returncode == 0, machine.name
    # The controller runs no job steps: no container runtime there.
    assert _versions(slurm_cluster.controller, "enroot", FACTS.pyxis.package) == {}


def test_nodes_hold_the_rendered_container_configuration(slurm_cluster: SlurmCluster) -> None:
    files = render_slurm(slurm_cluster.config)
    groups = {slurm_cluster.login.name: "login", slurm_cluster.cloud.name: "cloud"}
    groups |= {m.name: "gpu" for m in slurm_cluster.computes}
    for machine in (slurm_cluster.login, *slurm_cluster.computes, slurm_cluster.cloud):
        assert machine.run("cat /etc/enroot/enroot.conf").stdout == files[f"enroot.conf.{groups[machine.name]}"]
        assert machine.run("cat /etc/slurm/plugstack.conf.d/pyxis.conf").stdout == files["pyxis.conf"]
        # Each user's enroot directories go under sticky, world-writable parents, made again at boot.
        for parent in ("/run/enroot", "/var/lib/enroot/cache", "/var/lib/enroot/data"):
            assert machine.run(f"stat -c %a {parent}").stdout.strip() == "1777", (machine.name, parent)
        assert "d /run/enroot 1777 root root -" in machine.run("cat /etc/tmpfiles.d/gpuforge-enroot.conf").stdout
    # The plugin stack: served by the controller (configless computes fetch it), the clients' own on login.
    assert slurm_cluster.controller.run("cat /etc/slurm/plugstack.conf").stdout == files["plugstack.conf"]
    assert slurm_cluster.login.run("cat /etc/slurm/plugstack.conf").stdout == files["plugstack.conf"]


def test_gpu_nodes_get_the_pinned_toolkit_for_enroots_gpu_hook(slurm_cluster: SlurmCluster) -> None:
    tools = ("libnvidia-container1", "libnvidia-container-tools")
    pinned = FACTS.nvidia_container_toolkit.version
    for machine in (*slurm_cluster.computes, slurm_cluster.cloud):
        # The stand-in repository also carries a newer release: the pin is what chose this one.
        assert _versions(machine, *tools) == dict.fromkeys(tools, pinned), machine.name
        assert machine.run("test -x /etc/enroot/hooks.d/98-nvidia.sh", check=False).returncode == 0
        assert machine.run("nvidia-container-cli --version").stdout.splitlines()[0].endswith(pinned.split("-")[0])
    assert _versions(slurm_cluster.login, *tools) == {}


def test_srun_on_the_login_machine_offers_pyxis_options(slurm_cluster: SlurmCluster) -> None:
    for command in ("srun --help", "sbatch --help"):
        help_text = slurm_cluster.as_user(command)
        for option in ("--container-image", "--container-mounts", "--container-name", "--container-workdir"):
            assert option in help_text, (command, option)


def test_srun_container_image_reaches_pyxis_in_the_job_step(slurm_cluster: SlurmCluster) -> None:
    # printenv, not a shell line: sudo -i would let the login shell expand $VARIABLES before srun runs.
    out = slurm_cluster.as_user(
        f"srun -p gpu -N1 --container-image={IMAGE} printenv SLURM_JOB_ID SLURM_STEP_ID SLURMD_NODENAME "
        "PYXIS_STANDIN_IMAGE",
        timeout=JOB_TIMEOUT_S,
    )
    job, step, host, image = out.split()
    assert image == IMAGE
    # slurmstepd on that compute loaded the plugin (pyxis.conf: runtime_path) and recorded the image.
    compute = next(m for m in slurm_cluster.computes if m.name == host)
    assert compute.run(f"cat /run/pyxis/standin-{job}.{step}", root=True).stdout.strip() == IMAGE


def test_sbatch_container_image_reaches_pyxis_in_the_batch_step(slurm_cluster: SlurmCluster) -> None:
    """sbatch_support=1: `#SBATCH --container-image` applies to the batch script's own step."""
    script = "'printenv PYXIS_STANDIN_IMAGE'"
    job = (
        slurm_cluster.as_user(f"sbatch --parsable -p gpu -N1 --container-image={IMAGE} -o pyxis-%j.out --wrap {script}")
        .strip()
        .split(";")[0]
    )

    def finished() -> str | None:
        state = slurm_cluster.as_user(f"sacct -j {job} -X --noheader --parsable2 --format=State,NodeList").strip()
        return state if state and state.split("|")[0] not in ("PENDING", "RUNNING", "REQUEUED") else None

    state, node = wait_for(f"batch job {job} to finish", finished, JOB_TIMEOUT_S).split("|")
    assert state == "COMPLETED", state
    # The batch script ran in the home directory it was submitted from, on the compute that ran it.
    compute = next(m for m in slurm_cluster.computes if m.name == node)
    assert compute.run(f"cat ~{USER}/pyxis-{job}.out", root=True).stdout.strip() == IMAGE
    assert compute.run(f"cat /run/pyxis/standin-{job}.{BATCH_STEP}", root=True).stdout.strip() == IMAGE
