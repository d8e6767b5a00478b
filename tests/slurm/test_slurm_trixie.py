"""The Slurm roles on Debian 13 (trixie): its slurm-wlm 24.11 and systemd 257, as well as Debian 12's 22.05
(tests/slurm/trixie.py says what stands in). The roles converge unmodified and idempotently, the daemons
run what the rendering gives the installed release, and a user's job runs to completion and is accounted.

Ubuntu stays unproven here: its archive is no registry this project may use, so Ubuntu 24.04's 23.11 (the
production release, catalog slurm.production) is covered only by the releases on either side of it."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve
from tests.machines import Image, MachinePool
from tests.machines.images import build

from .cluster import SLURM_IMAGE, USER, wait_for
from .test_slurm_render import SLURM_STACKS
from .trixie import TRIXIE_SLURM_IMAGE, TrixieCluster, build_trixie

pytestmark = pytest.mark.slow

JOB_TIMEOUT_S = 180
MANUALS = ("slurm.conf", "cgroup.conf", "gres.conf", "topology.conf")


@pytest.fixture(scope="module")
def slurm_trixie(machine_pool: MachinePool) -> Iterator[TrixieCluster]:
    machines = machine_pool.group("trixie", 2, TRIXIE_SLURM_IMAGE, own_network=True)
    cluster = build_trixie(machines)
    if not cluster.first.ok:
        failures = "\n".join(f"{f.host} {f.task}: {f.message}" for f in cluster.first.failures)
        pytest.fail(f"slurm.yml failed on Debian 13:\n{failures}\n{cluster.diagnostics()}")
    yield cluster


def test_the_machines_run_debian_13s_slurm_and_systemd(slurm_trixie: TrixieCluster) -> None:
    packaged = load_catalog().slurm.distributions["debian-13"].version
    for machine in slurm_trixie.machines:
        assert 'VERSION_ID="13"' in machine.run("cat /etc/os-release").stdout
        assert machine.run("systemctl --version").stdout.split()[1] == "257"
    # Debian's build answers "slurm-wlm 24.11.5" (the role slurm_version reads the last word too).
    assert slurm_trixie.controller.run("slurmctld -V", root=True).stdout.split()[-1] == packaged
    assert slurm_trixie.compute.run("slurmd -V", root=True).stdout.split()[-1] == packaged


def test_the_roles_converge_idempotently(slurm_trixie: TrixieCluster) -> None:
    second = slurm_trixie.second
    assert second.ok, [f"{f.host} {f.task}: {f.message}" for f in second.failures]
    assert second.changed == 0, second.summary_rows()


def test_the_controller_serves_the_rendered_files(slurm_trixie: TrixieCluster) -> None:
    """24.11 runs the same files 22.05 runs, as `gpuforge render slurm` writes them."""
    expected = render_slurm(slurm_trixie.config)
    for name in ("slurm.conf", "cgroup.conf", "gres.conf"):
        served = slurm_trixie.controller.run(f"cat /etc/slurm/{name}", root=True).stdout
        assert served == expected[name], name


@pytest.mark.parametrize("conf", MANUALS)
def test_every_rendered_key_is_documented_by_both_releases(conf: str) -> None:
    """Every key the rendering writes, for every shipped stack, is one Debian 12's 22.05 and Debian 13's 24.11
    both document in their manual page (slurm.conf(5), cgroup.conf(5), ...; the packages' own, in the image
    layers): an option one release renamed or dropped would show here (CryptoType did: an alias of CredType
    neither documents)."""
    manuals = {image.name: _manual(image, conf) for image in (SLURM_IMAGE, TRIXIE_SLURM_IMAGE)}
    keys: dict[str, set[str]] = {}
    for stack in SLURM_STACKS:
        text = render_slurm(slurm_config(resolve(load_stack(stack).cluster, stack))).get(conf, "")
        for key in re.findall(r"^([A-Za-z]+)=", text, re.MULTILINE):
            keys.setdefault(key, set()).add(stack)
    assert keys, f"no stack renders {conf}"
    undocumented = {
        (image, key): sorted(stacks)
        for image, manual in manuals.items()
        for key, stacks in keys.items()
        if f"\\fB{key}\\fR" not in manual
    }
    assert not undocumented, undocumented


def _manual(image: Image, conf: str) -> str:
    """The manual page of *conf* as *image*'s packages install it (section 5, troff source)."""
    build(image)
    page = next(
        layer / f"usr/share/man/man5/{conf}.5.gz"
        for layer in image.layers()
        if (layer / f"usr/share/man/man5/{conf}.5.gz").is_file()
    )
    return gzip.decompress(page.read_bytes()).decode(errors="replace")


def test_a_users_job_runs_to_completion_and_is_accounted(slurm_trixie: TrixieCluster) -> None:
    compute = slurm_trixie.compute.name
    wait_for(f"{compute} idle", lambda: "idle" in slurm_trixie.as_user(f"sinfo -h -n {compute} -o %t"), 120)
    script = "hostname; cat /proc/self/cgroup"
    # Submitted from the user's home: the output lands in the same directory on the compute (no shared /home here).
    out = slurm_trixie.as_user(f"sbatch --parsable --mem=64M --wrap {json.dumps(script)}")
    job = out.strip().split(";")[0]

    def accounted() -> str:
        rows = slurm_trixie.as_user(f"sacct -X -n -P -j {job} --format=State,NodeList,User,ExitCode")
        return rows.strip() if rows.strip().startswith("COMPLETED") else ""

    assert wait_for(f"job {job} completed in accounting", accounted, JOB_TIMEOUT_S) == f"COMPLETED|{compute}|{USER}|0:0"
    output = slurm_trixie.compute.run(f"cat /home/{USER}/slurm-{job}.out", root=True).stdout
    assert output.splitlines()[0] == compute
    # Confined by Slurm's cgroup plugins (proctrack/cgroup, task/cgroup): the job's step cgroup.
    assert f"job_{job}" in output, output
