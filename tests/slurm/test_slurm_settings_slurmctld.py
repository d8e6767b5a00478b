"""A real slurmctld reads the settings a stack passes through, without booting a machine: Debian 12's
slurmctld (22.05, the oldest release gpuforge allows) runs in a chroot of the booted tests' Slurm image, in a
UTS and network namespace named and addressed as the controller, on the slurm.conf gpuforge renders with
every catalog example set. It parses the whole file (global keys and PartitionName lines) and loads its
plugins, then stops because no slurmdbd answers (the chroot runs none): what it does with the values once
running (building partitions, opening the job completion log) is not reached. A key it does not know stops
it before that ("Parse error", "Unable to process configuration file").

The keys the catalog says 22.05 lacks are the negative controls: each one alone stops this slurmctld, so
the release rule (slurm_settings_checks.py) refuses what would stop the site's controller."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.catalog.models import version_tuple
from gpuforge.catalog.slurm_settings import SettingFacts, slurm_settings
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve
from tests.machines.images import Image, build, mount_overlay
from tests.support import skip_or_fail

from .cluster import SLURM_IMAGE
from .test_slurm_trixie import _manual
from .trixie import TRIXIE_SLURM_IMAGE

pytestmark = pytest.mark.slow

SITE = "onprem-lab"  # a site: its Slurm may be 22.05, and TreeWidth is the stack's (static nodes)
RUN_S = 20  # a bound: slurmctld stops by itself within seconds (no slurmdbd)
PARSED = "Accounting storage SLURMDBD plugin loaded"  # logged after slurm.conf and the plugins are loaded
NO_SLURMDBD = "slurmdbd and/or database must be up at slurmctld start time"


def _release(facts: SettingFacts) -> tuple[int, ...]:
    return version_tuple(facts.since)


def _examples(known: dict[str, SettingFacts], oldest: bool) -> dict[str, Any]:
    first = version_tuple(slurm_settings().releases_read[0])
    return {key: facts.example for key, facts in known.items() if (_release(facts) <= first) == oldest}


@pytest.fixture(scope="module")
def controller_root(tmp_path_factory: pytest.TempPathFactory, rendered: Rendered) -> Iterator[Path]:
    """The Slurm image's layers under a scratch upper directory (the image stays as built)."""
    if os.geteuid() != 0:
        skip_or_fail("needs root: an overlay mount, a chroot and a UTS namespace")
    for tool in ("unshare", "chroot", "mount"):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} not installed")
    build(SLURM_IMAGE)
    scratch = tmp_path_factory.mktemp("slurmctld")
    merged, upper, work = scratch / "merged", scratch / "upper", scratch / "work"
    for path in (merged, upper, work):
        path.mkdir()
    mount_overlay(merged, SLURM_IMAGE.layers(), upper, work)
    try:
        for directory in ("var/spool/slurmctld", "var/log/slurm", "etc/slurm/prolog.d", "etc/slurm/epilog.d"):
            (merged / directory).mkdir(parents=True, exist_ok=True)
        subprocess.run(["chroot", str(merged), "chown", "slurm:", "/var/spool/slurmctld", "/var/log/slurm"],
                       check=True)
        with (merged / "etc/hosts").open("a") as hosts:
            hosts.write(f"{rendered.address} {rendered.host}\n")  # slurmctld and slurmdbd's host, no DNS
        yield merged
    finally:
        subprocess.run(["umount", str(merged)], check=True)


def _site_with_examples() -> tuple[dict[str, Any], str]:
    data = copy.deepcopy(load_stack(SITE).cluster)
    settings = slurm_settings()
    data["scheduler"]["extra_settings"] = _examples(settings.settings, oldest=True)
    partition = next(iter(data["scheduler"]["partitions"]))
    data["scheduler"]["partitions"][partition]["extra_options"] = _examples(settings.partition_options, oldest=True)
    # Both AccountingStoreFlags gpuforge renders (the job's script, by default, and its environment, opted in).
    data["scheduler"]["accounting"]["store_job_environment"] = True
    return data, partition


def _slurmctld(root: Path, slurm_conf: str, rendered: Rendered) -> str:
    for name in ("cgroup.conf", "gres.conf"):
        (root / "etc/slurm" / name).write_text(rendered.files[name])
    (root / "etc/slurm/slurm.conf").write_text(slurm_conf)
    run = subprocess.run(
        ["unshare", "--uts", "--net", "chroot", str(root), "sh", "-c",
         f"hostname {rendered.host} && ip link set lo up && ip address add {rendered.address}/32 dev lo && "
         f"exec timeout {RUN_S} slurmctld -D -i -v"],
        capture_output=True, text=True, timeout=RUN_S + 30,
    )
    return run.stdout + run.stderr


@dataclass(frozen=True)
class Rendered:
    files: dict[str, str]
    host: str  # the controller's name and address (SlurmctldHost)
    address: str
    partition: str  # the partition with every option example


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    data, partition = _site_with_examples()
    config = slurm_config(resolve(data, SITE), stand_in_gpus=True)
    controller = config["controllers"][0]
    return Rendered(render_slurm(config), controller["name"], controller["address"], partition)


def test_slurmctld_reads_every_passed_through_setting(controller_root: Path,
                                                      rendered: Rendered) -> None:
    conf = rendered.files["slurm.conf"]
    settings = slurm_settings()
    lines = {line.split("=", 1)[0]: line for line in conf.splitlines() if "=" in line and not line.startswith("#")}
    for key, value in _examples(settings.settings, oldest=True).items():
        assert lines[key].endswith(str(value)), key  # SchedulerParameters: after gpuforge's option
    assert lines["AccountingStoreFlags"] == "AccountingStoreFlags=job_script,job_env"
    out = _slurmctld(controller_root, conf, rendered)
    assert "slurmctld version 22.05" in out, out
    assert PARSED in out, out
    # It stops only where the chroot falls short: no slurmdbd answers (AccountingStorageEnforce needs it).
    fatal = [line for line in out.splitlines() if "fatal" in line or "Parse error" in line]
    assert fatal == [f"slurmctld: fatal: {NO_SLURMDBD}"], out


@pytest.mark.parametrize("key", sorted(_examples(slurm_settings().settings, oldest=False)))
def test_a_setting_newer_than_22_05_stops_its_slurmctld(controller_root: Path,
                                                        rendered: Rendered, key: str) -> None:
    """What the catalog dates after 22.05 is refused on a site, and 22.05's slurmctld agrees."""
    example = slurm_settings().settings[key].example
    out = _slurmctld(controller_root, f"{rendered.files['slurm.conf']}{key}={example}\n", rendered)
    assert f"unrecognized key: {key}" in out and PARSED not in out, out


@pytest.mark.parametrize("key", sorted(_examples(slurm_settings().partition_options, oldest=False)))
def test_a_partition_option_newer_than_22_05_stops_its_slurmctld(
    controller_root: Path, rendered: Rendered, key: str
) -> None:
    example = slurm_settings().partition_options[key].example
    lines = [
        f"{line} {key}={example}" if line.startswith(f"PartitionName={rendered.partition} ") else line
        for line in rendered.files["slurm.conf"].splitlines()
    ]
    out = _slurmctld(controller_root, "\n".join(lines) + "\n", rendered)
    assert f"unrecognized key: {key}" in out and PARSED not in out, out


@pytest.mark.parametrize("image", [SLURM_IMAGE, TRIXIE_SLURM_IMAGE], ids=lambda image: image.name)
def test_the_catalog_dates_each_key_as_the_packaged_manuals_do(image: Image) -> None:
    """slurm.conf(5) as Debian 12 (22.05) and Debian 13 (24.11) install it: a key the catalog lists is in the
    manual's section for it exactly when the release is at least the key's `since`, and so is each dated value."""
    manual = _manual(image, "slurm.conf")
    debian = f"debian-{image.release.name.removeprefix('debian')}"
    release = version_tuple(load_catalog().slurm.distributions[debian].version)[:2]
    partition_section = manual.index('.SH "PARTITION CONFIGURATION"')
    sections = {"settings": manual[:partition_section], "partition_options": manual[partition_section:]}
    settings = slurm_settings()
    wrong = []
    for section, known in (("settings", settings.settings), ("partition_options", settings.partition_options)):
        for key, facts in known.items():
            if (f"\\fB{key}\\fR" in sections[section]) != (release >= version_tuple(facts.since)):
                wrong.append(f"{section}.{key} (since {facts.since})")
            dated = {value: version_tuple(v.since) for value, v in facts.values.items()
                     if version_tuple(v.since) > version_tuple(facts.since)}
            wrong += [f"{section}.{key}={value}" for value, since in dated.items()
                      if (value in manual) != (release >= since)]
    assert not wrong, wrong
