"""The stand-in mount helpers (tests/standins/mount-helper.sh) accept the sources and options the production
roles write and refuse what the real clients refuse, before they mount anything; the booted site test mounts
through them (test_site_booted.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.standins.packages import mount_helper

# mount(8) and systemctl stand-ins: mount prints what it was asked; systemctl says whether weka-agent runs.
FAKE_MOUNT = '#!/bin/sh\necho "mount $*"\n'
FAKE_SYSTEMCTL = "#!/bin/sh\nexit ${AGENT_RC:-0}\n"


def _helper(tmp: Path, fstype: str, *args: str, agent_rc: int = 0) -> subprocess.CompletedProcess[str]:
    # EFS_STANDIN_RUN: where the stand-in mount.efs records its mounts (on a machine: /run/efs-standin).
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("mount", FAKE_MOUNT), ("systemctl", FAKE_SYSTEMCTL)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    helper = tmp / f"mount.{fstype}"
    helper.write_text(mount_helper(fstype, "stand-in"))
    helper.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "AGENT_RC": str(agent_rc), "EFS_STANDIN_RUN": str(tmp / "efs-run"),
           "STANDIN_EXPORTS": str(tmp / "exports")}  # fmt: skip
    return subprocess.run([str(helper), *args], capture_output=True, text=True, env=env, timeout=30)


def test_a_shared_export_is_bound_where_the_test_put_it_and_any_other_is_a_tmpfs(tmp_path: Path) -> None:
    """An NFS export several machines share (the Slurm controllers' state) is the host directory a test bound
    into each of them under exports/<server>/<export>: the helper binds it, so they see the same files; an
    export no test shared gets a tmpfs of its own; a source not of mount.nfs's form is refused."""
    shared = tmp_path / "exports" / "10.64.8.21" / "export" / "slurm-state"
    shared.mkdir(parents=True)
    bound = _helper(tmp_path, "nfs", "10.64.8.21:/export/slurm-state", "/var/spool/slurmctld", "-o", "vers=4.2")
    assert bound.returncode == 0 and bound.stdout == f"mount -i --bind {shared} /var/spool/slurmctld\n", bound.stderr
    alone = _helper(tmp_path, "nfs", "10.64.8.20:/export/home", "/home")
    assert alone.stdout == "mount -i -t tmpfs -o size=16m,mode=0755 10.64.8.20:/export/home /home\n"
    refused = _helper(tmp_path, "nfs", "/export/home", "/home")
    assert refused.returncode == 32 and "not <server>:/<export>" in refused.stderr


def test_beegfs_mounts_with_the_management_host_and_refuses_without(tmp_path: Path) -> None:
    good, empty = tmp_path / "good.conf", tmp_path / "empty.conf"
    good.write_text("sysMgmtdHost = 10.64.9.20\n")
    empty.write_text("sysMgmtdHost                  =\n")
    ok = _helper(tmp_path, "beegfs", "beegfs_nodev", "/site/projects", "-o", f"_netdev,cfgFile={good}")
    assert ok.returncode == 0 and ok.stdout == "mount -i -t tmpfs -o size=16m,mode=0755 beegfs_nodev /site/projects\n"
    refused = _helper(tmp_path, "beegfs", "beegfs_nodev", "/site/projects", "-o", f"cfgFile={empty}")
    assert refused.returncode == 32 and "sysMgmtdHost is empty" in refused.stderr
    assert _helper(tmp_path, "beegfs", "beegfs_nodev", "/site/projects", "-o", "rw").returncode == 32


def test_weka_needs_its_agent(tmp_path: Path) -> None:
    source = "10.64.9.30,10.64.9.31/datasets"
    assert _helper(tmp_path, "wekafs", source, "/site/datasets", "-o", "_netdev").returncode == 0
    stopped = _helper(tmp_path, "wekafs", source, "/site/datasets", agent_rc=3)
    assert stopped.returncode == 32 and "weka-agent service is not running" in stopped.stderr
    assert _helper(tmp_path, "wekafs", "10.64.9.30/a/b", "/site/datasets").returncode == 32


@pytest.mark.parametrize(
    "source",
    ["10.64.9.10@o2ib", "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com:/abcdefgh", "10.0.0.1@tcp:fsname"],
)
def test_lustre_refuses_a_source_that_is_not_mgs_nids_and_fsname(tmp_path: Path, source: str) -> None:
    refused = _helper(tmp_path, "lustre", source, "/lustre")
    assert refused.returncode == 32 and "not <mgsnid>[:<mgsnid>]:/<fsname>" in refused.stderr


def test_lustre_accepts_failover_nids_on_o2ib_and_fsx_on_tcp() -> None:
    """The source check alone (the rest of mount.lustre loads modules): the forms site_mounts and lustre_client
    write, failover NIDs over o2ib and FSx's DNS name over tcp."""
    line = next(line for line in mount_helper("lustre", "x").splitlines() if "grep -Eq" in line)
    pattern = line.split("grep -Eq '")[1].split("'")[0]
    for source in ("10.64.9.10@o2ib:10.64.9.11@o2ib:/scratch", "fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh",
                   "10.0.0.1@o2ib3:/fs_1"):  # fmt: skip
        assert subprocess.run(["grep", "-Eq", pattern], input=source + "\n", text=True).returncode == 0, source


def test_lustre_needs_the_mgs_nids_network_among_lnets(tmp_path: Path) -> None:
    """mount.lustre with the stand-in lnetctl: loading lustre.ko brings LNet up on tcp alone, which has no route
    to NIDs on o2ib (the mount fails, as the real one does); with o2ib configured first (gpuforge-lnet.service's
    job) the same source mounts."""
    import sys

    bin_dir, run_dir = tmp_path / "bin", tmp_path / "run"
    bin_dir.mkdir()
    lnetctl = Path(__file__).resolve().parents[1] / "standins" / "lnetctl.py"
    (bin_dir / "lnetctl").write_text(f'#!/bin/sh\nexec {sys.executable} {lnetctl} "$@"\n')
    # What the stand-in package's modprobe.d rules do (lustre.ko depends on lnet.ko).
    modprobe = f'#!/bin/sh\nm=$1; shift\n[ "$m" = lustre ] && {bin_dir}/lnetctl --standin-load lnet\n'
    (bin_dir / "modprobe").write_text(modprobe + f'exec {bin_dir}/lnetctl --standin-load "$m" "$@"\n')
    (bin_dir / "mount").write_text(FAKE_MOUNT)
    (tmp_path / "route").write_text("Iface\tDestination\nlo\t00000000\n")
    helper = tmp_path / "mount.lustre"
    helper.write_text(
        mount_helper("lustre", "stand-in")
        .replace("/sbin/modprobe", f"{bin_dir}/modprobe")
        .replace("/proc/net/route", str(tmp_path / "route"))
        .replace("/run/lustre-standin", str(run_dir))
    )
    for path in (*bin_dir.iterdir(), helper):
        path.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LNETCTL_STANDIN_RUN": str(run_dir)}

    def mount(source: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(helper), source, "/site/scratch"], capture_output=True, text=True, env=env,
                              timeout=30)  # fmt: skip

    site = "10.64.9.10@o2ib:10.64.9.11@o2ib:/scratch"
    refused = mount(site)
    assert (
        refused.returncode == 32 and "no route to the MGS NIDs' network o2ib (LNet networks: lo,tcp)" in refused.stderr
    )
    assert mount("fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh").returncode == 0  # tcp is there
    subprocess.run(["lnetctl", "net", "add", "--net", "o2ib", "--if", "lo"], env=env, check=True, timeout=30)
    mounted = mount(site)
    assert mounted.returncode == 0, mounted.stderr
    assert mounted.stdout == f"mount -i -t tmpfs -o size=16m,mode=0755 {site} /site/scratch\n"
    assert (run_dir / "mounts").read_text().splitlines()[-1] == "/site/scratch lo,tcp,o2ib"


def test_efs_mounts_with_tls_and_is_refused_without(tmp_path: Path) -> None:
    """The stand-in mount.efs (amazon-efs-utils) takes the entry site_mounts writes (<fs-id>:/, options with tls)
    and, like the file systems' policy that denies requests not over TLS, refuses the same mount without tls."""
    from gpuforge.infra.aws.node_group import EFS_MOUNT_OPTIONS

    source = "fs-0123456789abcdef0:/"
    ok = _helper(tmp_path, "efs", source, "/home", "-o", EFS_MOUNT_OPTIONS)
    assert "tls" in EFS_MOUNT_OPTIONS.split(",")
    assert ok.returncode == 0 and ok.stdout == f"mount -i -t tmpfs -o size=16m,mode=0755 {source} /home\n", ok.stderr
    assert (tmp_path / "efs-run/mounts").read_text() == f"/home {EFS_MOUNT_OPTIONS}\n"
    plain = EFS_MOUNT_OPTIONS.replace(",tls,", ",")
    refused = _helper(tmp_path, "efs", source, "/home", "-o", plain)
    assert refused.returncode == 32 and "access denied by server" in refused.stderr and "-o tls" in refused.stderr
    # A DNS name (the kernel client's form) is not the helper's fs-id form here.
    dns = _helper(tmp_path, "efs", "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/", "/home", "-o", "tls")
    assert dns.returncode == 32 and "not <file-system-id>:/<path>" in dns.stderr
