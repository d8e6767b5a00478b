"""site.yml over SSH on two booted machines with the production defaults, every package source pointed at
the stand-ins: a first run that fails after the sysctl task, a re-run that converges and applies what
the first run changed, then a run that changes nothing. The daemons the roles start run under systemd;
the FSx and site file systems mount for real (stand-in client helpers mounting a tmpfs); LNet for the
EFA-enabled FSx and the o2ib network of the site's Lustre (on the machines' ibp170s0f0) are configured by its unit,
and again by it at boot: the last tests reboot both machines."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.infra.aws.lustre_mount import fsx_mount_entry
from gpuforge.infra.aws.node_group import EFS_MOUNT_OPTIONS
from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.nodes.inventory import lustre_efa_interfaces
from tests.machines import SSH_IMAGE, Machine, MachinePool, Machines
from tests.standins import packages as standin
from tests.standins.repo import StandinSources
from tests.support import site_mounts_from_spec

from .profiles import EFA_P5, profile_vars

pytestmark = pytest.mark.slow

# A kernel parameter of the machine's own IPC namespace, so the live value this test reads is the
# machine's and not one the host (whose kernel the machines share) already had.
PROBE_SYSCTL = ("kernel.msgmax", "65536")
LIMITS_DIR = "/etc/security/limits.d"
# The RDMA devices each machine's stand-in sysfs lists (this host has none): gpu1 a p5's 32 EFA devices
# and a ConnectX port, gpu2 only the ConnectX port (no EFA: LNet stays on tcp).
EFA_DEVICES = [f"rdmap{bus}s0" for bus in range(10, 42)]
MLX_DEVICE = "mlx5_0"
# FSx's setup puts 8 of a p5's EFA devices on LNet (every fourth), the inventory's value for p5.
EFA_LNET_DEVICES = EFA_DEVICES[::4]
FSX_SOURCE = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"
# The site's file systems (a Lustre over o2ib, a BeeGFS, a WEKA) come from a spec as a user writes it
# (tests/fixtures/stacks/Pulumi.booted-site.yaml) through the inventory (site_mounts_from_spec); their clients
# from the site's mirror (stand-in packages with the vendors' names: tests/standins/packages.py, site_mirror).
# Each mount point's fstab source and type, as site_mounts writes them.
# An Amazon EFS mount as the Slurm inventory gives one (slurm_config.home on AWS: kind efs, the deployed file
# system's id and DNS name, AWS's NFS options), at /home as on a controller: site_mounts installs the EFS mount
# helper (amazon-efs-utils, the stand-in from the site mirror) and writes the mount helper's entry with tls (the
# stand-in mount.efs refuses a mount without it). The machines' /home holds the admin user this play logs in
# as, as an image's holds its default user: the first mount keeps it (issue 23, defect 10), or every later
# login of this module would fail. Its contents outlive a reboot, as EFS's do: the stand-in helper binds the
# machine's EFS_STORE (tests/standins/mount-helper.sh) rather than mount a new tmpfs.
EFS_ID = "fs-0123456789abcdef0"
EFS_STORE = f"/var/lib/gpuforge-standin/exports/{EFS_ID}"
EFS_MOUNT = {"name": "efs-home", "kind": "efs", "mount_point": "/home", "export": "/", "source": EFS_ID,
             "server": f"{EFS_ID}.efs.us-east-1.amazonaws.com", "nfs_options": load_aws_wiring().efs.nfs_options}
SITE_FSTAB = {
    "/site/scratch": ("10.64.9.10@o2ib:10.64.9.11@o2ib:/scratch", "lustre"),
    "/site/projects": ("beegfs_nodev", "beegfs"),
    "/site/datasets": ("10.64.9.30,10.64.9.31/datasets", "wekafs"),
    EFS_MOUNT["mount_point"]: (f"{EFS_ID}:/", "efs"),
}


@dataclass
class SiteRuns:
    machines: Machines
    inventory: dict[str, Any]
    failed: PlaybookResult
    converged: PlaybookResult
    again: PlaybookResult


@pytest.fixture(scope="module")
def site_runs(machine_pool: MachinePool, standin_sources: StandinSources, ipoib_interface: str) -> SiteRuns:
    machines = machine_pool.group("gpu", 2, SSH_IMAGE, writable_proc_sys=True)
    host_vars = profile_vars(EFA_P5, standin_sources)
    defaults_sysctls = _role_default("os_tuning", "os_tuning_sysctls")
    host_vars |= {
        "os_tuning_sysctls": {**defaults_sysctls, PROBE_SYSCTL[0]: PROBE_SYSCTL[1]},
        # The profile's file system is EFA-enabled: LNet gets a tcp network, and an efa network where there are
        # EFA devices. It is mounted (the production default) through the stand-in mount.lustre.
        "lustre_client_sysfs": standin.STANDIN_SYSFS,
        "lustre_client_efa_interfaces": lustre_efa_interfaces(EFA_P5["gpuforge_instance_type"]),
        # The machines have no NVMe: the scratch unit runs (installed, enabled, started as in production) and
        # finds none, which a p5 would call an error. The script itself runs on loop devices standing in for
        # instance store in tests/playbooks/test_local_scratch.py.
        "local_scratch_required": False,
        # The site's Lustre (o2ib), BeeGFS and WEKA as the inventory gives them (site_mounts_mounts), and LNet's
        # o2ib network on the machines' ibp170s0f0 for the Lustre's MGS NIDs (lustre_client_o2ib_networks).
        **copy.deepcopy(site_mounts_from_spec()),
        **standin_sources.site_mirror_variables(),
    }
    host_vars["site_mounts_mounts"].append(copy.deepcopy(EFS_MOUNT))
    if not Path("/proc/sys/kernel/yama").is_dir():
        # This host's kernel (shared by the machines) has no Yama LSM, so kernel.yama.ptrace_scope does
        # not exist to be set: the EFA role writes its sysctl file without applying it. CI's Debian
        # kernel has Yama, and there the task applies the value live.
        host_vars["efa_apply_runtime"] = False
    assert host_vars["lustre_client_o2ib_networks"] == {"o2ib": [ipoib_interface]}
    inventory = machines.inventory(host_vars=host_vars)
    _rdma_devices(machines[0], [*EFA_DEVICES, MLX_DEVICE])
    _rdma_devices(machines[1], [MLX_DEVICE])
    # Make the run fail right after the sysctl task: the next task writes into limits.d, now a file.
    for machine in machines:
        machine.run(f"rm -rf {LIMITS_DIR} && touch {LIMITS_DIR} && mkdir -p {EFS_STORE}", root=True)
    failed = run_playbook("site.yml", inventory)
    for machine in machines:
        machine.run(f"rm -f {LIMITS_DIR} && mkdir -m 0755 {LIMITS_DIR}", root=True)
    converged = run_playbook("site.yml", inventory)
    again = run_playbook("site.yml", inventory)
    return SiteRuns(machines, inventory, failed, converged, again)


def _rdma_devices(machine: Machine, devices: list[str]) -> None:
    """RDMA devices in the machine's stand-in sysfs, linked as the kernel links them: class/infiniband/<dev>
    -> the PCI function's infiniband/<dev>, whose device/driver -> bus/pci/drivers/<efa|mlx5_core>."""
    root = standin.STANDIN_SYSFS
    lines = [f"mkdir -p {root}/class/infiniband {root}/bus/pci/drivers/efa {root}/bus/pci/drivers/mlx5_core"]
    for slot, device in enumerate(devices):
        function = f"pci0000:00/0000:00:{slot:02x}.0"
        pci = f"{root}/devices/{function}"
        driver = "mlx5_core" if device.startswith("mlx5") else "efa"
        lines += [
            f"mkdir -p {pci}/infiniband/{device}",
            f"ln -sfn ../../../bus/pci/drivers/{driver} {pci}/driver",
            f"ln -sfn ../../../0000:00:{slot:02x}.0 {pci}/infiniband/{device}/device",
            f"ln -sfn ../../devices/{function}/infiniband/{device} {root}/class/infiniband/{device}",
        ]
    machine.run(" && ".join(lines), root=True)


def _role_default(role: str, name: str) -> Any:
    from gpuforge.nodes.bake import PLAYBOOKS_DIR

    return yaml.safe_load((PLAYBOOKS_DIR / "roles" / role / "defaults/main.yml").read_text())[name]


def test_first_run_fails_after_the_sysctl_task(site_runs: SiteRuns) -> None:
    assert site_runs.failed.failed_hosts == site_runs.machines.names
    assert {f.task for f in site_runs.failed.failures} == {"Allow unlimited locked memory for login sessions"}


def test_rerun_converges_and_applies_the_sysctls_live(site_runs: SiteRuns) -> None:
    result = site_runs.converged
    assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
    for machine in site_runs.machines:
        live = machine.run(f"cat /proc/sys/{PROBE_SYSCTL[0].replace('.', '/')}").stdout.strip()
        assert live == PROBE_SYSCTL[1]
        assert f"{PROBE_SYSCTL[0]} = {PROBE_SYSCTL[1]}" in machine.run("cat /etc/sysctl.d/90-gpuforge.conf").stdout


def test_third_run_changes_nothing(site_runs: SiteRuns) -> None:
    result = site_runs.again
    assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
    assert sorted(result.hosts) == site_runs.machines.names
    assert {name: h.changed for name, h in result.hosts.items()} == dict.fromkeys(site_runs.machines.names, 0), (
        result.stdout[-6000:]
    )


def _installed(machine: Machine) -> dict[str, str]:
    out = machine.run("dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\\n'").stdout
    rows = (line.split(" ", 2) for line in out.splitlines())
    return {name: version for name, version, status in rows if status == "installed"}


def test_production_packages_at_their_pinned_versions_and_held(site_runs: SiteRuns) -> None:
    driver = standin.DRIVER_VERSIONS[-1]  # the newest of the branch, as apt picks it
    for machine in site_runs.machines:
        installed = _installed(machine)
        assert installed[f"cuda-drivers-{standin.DRIVER_BRANCH}"] == driver
        assert installed[f"nvidia-fabricmanager-{standin.DRIVER_BRANCH}"] == driver
        # The repository also carries a newer NCCL: the pin, not the newest, decides.
        assert installed["libnccl2"] == standin.NCCL_PINNED
        assert installed["libnccl-dev"] == standin.NCCL_PINNED
        assert {"datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-dev", "lustre-client-modules-aws"} <= set(
            installed
        )
        assert {"libfabric1-aws", "libnccl-ofi", "prometheus-node-exporter", "python3-debian"} <= set(installed)
        held = {line.split()[0] for line in machine.run("apt-mark showhold").stdout.splitlines()}
        assert {f"cuda-drivers-{standin.DRIVER_BRANCH}", f"nvidia-fabricmanager-{standin.DRIVER_BRANCH}"} <= held
        assert {"libnccl2", "libnccl-dev"} <= held
        # apt trusts the sources through the keys the roles installed, not a trusted=yes shortcut.
        sources = machine.run("cat /etc/apt/sources.list.d/nvidia-cuda.sources").stdout
        assert "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc" in sources
        assert "trusted" not in sources.lower()


def test_efa_installer_ran_and_nccl_finds_the_plugin(site_runs: SiteRuns) -> None:
    for machine in site_runs.machines:
        record = machine.run("cat /opt/amazon/efa_installed_packages").stdout
        assert f"EFA installer version: {standin.EFA_INSTALLER_VERSION}" in record
        assert "/opt/amazon/ofi-nccl/lib" in machine.run("cat /etc/ld.so.conf.d/gpuforge-aws-ofi-nccl.conf").stdout
        machine.run("test -e /opt/amazon/ofi-nccl/lib/libnccl-net.so")


def test_daemons_run_under_systemd(site_runs: SiteRuns) -> None:
    units = [
        "prometheus-node-exporter.service",
        "nvidia-persistenced.service",
        "nvidia-fabricmanager.service",
        "nvidia-dcgm.service",
        "dcgm-exporter.service",
        "gpuforge-cpu-governor.service",
        "gpuforge-scratch.service",
    ]
    for machine in site_runs.machines:
        states = machine.run(f"systemctl is-active {' '.join(units)}", check=False).stdout.split()
        assert dict(zip(units, states, strict=True)) == dict.fromkeys(units, "active")
        assert machine.run("systemctl is-enabled " + " ".join(units)).stdout.split() == ["enabled"] * len(units)
        # The real node_exporter answers on the machine's own address.
        url = f"http://{machine.address}:9100/metrics"
        metrics = machine.run(
            f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"{url}\").read().decode())'"
        ).stdout
        assert "node_textfile_scrape_error" in metrics
        scratch = machine.run("journalctl -u gpuforge-scratch --no-pager -o cat", root=True).stdout
        assert "no local NVMe: nothing to assemble" in scratch, scratch


def _lnet_nets(machine: Machine) -> dict[str, list[str]]:
    """`lnetctl net show` on the machine: each LNet network and the interfaces of its NIs."""
    shown = yaml.safe_load(machine.run("lnetctl net show", root=True).stdout)
    return {
        net["net type"]: [iface for ni in net["local NI(s)"] for iface in (ni.get("interfaces") or {}).values()]
        for net in shown["net"]
    }


# The site's Lustre over InfiniBand: LNet's o2ib network on the declared IPoIB interface, on both machines.
SITE_O2IB = {"o2ib": ["ibp170s0f0"]}


def test_lnet_runs_efa_on_efa_devices_and_tcp_where_there_are_none(site_runs: SiteRuns) -> None:
    efa_node, tcp_node = site_runs.machines
    default_if = _default_interface(efa_node)
    # The EFA node: the tcp network on the default route's interface, 8 of its 32 EFA devices on efa
    # (the ConnectX port is not an EFA device), kefalnd loaded on the default route's interface; and the site's
    # o2ib network on ibp170s0f0 (ko2iblnd loaded).
    assert _lnet_nets(efa_node) == {"lo": [], "tcp": [default_if], "efa": EFA_LNET_DEVICES, **SITE_O2IB}
    # No EFA device: LNet falls back to tcp alone (with the site's o2ib), and the EFA driver is never loaded.
    assert _lnet_nets(tcp_node) == {"lo": [], "tcp": [default_if], **SITE_O2IB}
    for machine in site_runs.machines:
        assert "ko2iblnd" in machine.run("cat /run/lustre-standin/modules", root=True).stdout
    assert f"kefalnd ipif_name={default_if}" in efa_node.run("cat /run/lustre-standin/modules", root=True).stdout
    assert "kefalnd" not in tcp_node.run("cat /run/lustre-standin/modules", root=True).stdout
    for machine in site_runs.machines:
        # The mount still names the servers' tcp NID (the management service answers on tcp), and requires the
        # LNet unit, which is enabled for every boot and ran now.
        source, fstype, options = _fstab(machine)["/fsx"]
        assert (source, fstype) == (FSX_SOURCE, "lustre")
        assert {"x-systemd.requires=gpuforge-lnet.service", "x-systemd.after=gpuforge-lnet.service"} <= set(
            options.split(",")
        )
        # One template, two renderers: the entry a launched node's user data writes
        # (gpuforge/infra/aws/lustre_mount.py).
        dns_name, _, mount_name = FSX_SOURCE.partition("@tcp:/")
        launched = fsx_mount_entry(dns_name, mount_name, "/fsx", efa=True)
        assert (source, fstype, options) == (launched["src"], launched["fstype"], launched["opts"])
        assert machine.run("systemctl is-enabled gpuforge-lnet.service").stdout.strip() == "enabled"
        assert machine.run("systemctl is-active gpuforge-lnet.service").stdout.strip() == "active"
        assert yaml.safe_load(machine.run("lnetctl global show", root=True).stdout)["global"]["discovery"] == 1
    # EFA preferred where there is an efa network (FSx's `udsp add --src efa --priority 0`); none without one.
    rules = yaml.safe_load(efa_node.run("lnetctl udsp show", root=True).stdout)["udsp"]
    assert [(r["src"], r["action"]["priority"]) for r in rules] == [("efa", 0)]
    assert tcp_node.run("lnetctl udsp show", root=True).stdout.strip() == ""
    # The FSx file system is mounted (the production default), after LNet was configured.
    for machine in site_runs.machines:
        assert _mounted(machine, "/fsx") == (FSX_SOURCE, "tmpfs")


def _default_interface(machine: Machine) -> str:
    route = machine.run("ip -4 -o route show default").stdout.split()
    return route[route.index("dev") + 1]


def _mounted(machine: Machine, path: str) -> tuple[str, str] | None:
    """The source and type of the top mount at *path* in /proc/mounts (an automount point shows systemd's autofs
    first), after a stat of it, which triggers the automount."""
    machine.run(f"stat {path}/. >/dev/null", root=True)
    found = None
    for line in machine.run("cat /proc/mounts").stdout.splitlines():
        source, where, fstype = line.split()[:3]
        if where == path:
            found = (source, fstype)
    return found


def _fstab(machine: Machine) -> dict[str, tuple[str, str, str]]:
    """/etc/fstab: mount point -> (source, type, options)."""
    rows = [line.split() for line in machine.run("cat /etc/fstab").stdout.splitlines()]
    return {row[1]: (row[0], row[2], row[3]) for row in rows if len(row) >= 4 and not row[0].startswith("#")}


def _mount_status(machine: Machine, path: str) -> str:
    unit = machine.run(f"systemd-escape --path --suffix=mount {path}").stdout.strip()
    return machine.run(f"systemctl status --no-pager {unit}", root=True, check=False).stdout


def test_site_file_systems_are_in_fstab_and_mount_on_first_access(site_runs: SiteRuns) -> None:
    """site_mounts wrote each production entry and started its automount unit; the first access mounts it
    through the client's mount helper (the stand-in's tmpfs named by the production source), which checks
    what the real client checks: the BeeGFS management host in the client configuration, the WEKA agent
    running (the entry requires weka-agent.service, so systemd started it)."""
    for machine in site_runs.machines:
        fstab = _fstab(machine)
        for path, (source, fstype) in SITE_FSTAB.items():
            assert fstab[path][:2] == (source, fstype)
            assert "x-systemd.automount" in fstab[path][2].split(",")
            assert _mounted(machine, path) == _stand_in(machine, path, source), _mount_status(machine, path)
            machine.run(f"touch {path}/written-by-test", root=True)
        # The Lustre on o2ib requires the LNet unit that adds o2ib (its NIDs are unreachable without it): the
        # stand-in mount.lustre refuses a source whose NIDs' network LNet does not have, and recorded o2ib.
        options = set(fstab["/site/scratch"][2].split(","))
        assert {"x-systemd.requires=gpuforge-lnet.service", "x-systemd.after=gpuforge-lnet.service"} <= options
        requires = machine.run("systemctl show -p Requires --value site-scratch.mount").stdout.split()
        assert "gpuforge-lnet.service" in requires
        assert "o2ib" in _mount_record(machine, "/site/scratch").split(",")
        # Only the Lustre mounts need LNet.
        assert "gpuforge-lnet" not in fstab["/site/projects"][2] + fstab["/site/datasets"][2]
        assert "sysMgmtdHost = 10.64.9.20" in machine.run("cat /etc/beegfs/beegfs-client.conf").stdout
        assert machine.run("systemctl is-active weka-agent.service").stdout.strip() == "active"
        assert machine.run("dpkg-query -W -f '${Status}' beegfs-client").stdout == "install ok installed"
        sources = machine.run("cat /etc/apt/sources.list.d/site-storage-clients.sources").stdout
        assert "Signed-By: /etc/apt/keyrings/site-storage-clients.asc" in sources


def test_efs_is_mounted_by_the_mount_helper_with_tls(site_runs: SiteRuns) -> None:
    """The efs kind: the production task installed the EFS mount helper from the repository the role added (the
    cluster's own in production), wrote the EFS User Guide's entry (<fs-id>:/ <dir> efs ...,tls,_netdev) with the
    options a cloud node's user data writes, and the first access mounted it through mount.efs with tls (the
    stand-in refuses a mount without tls, as the file systems' policy does)."""
    helper = load_aws_wiring().efs.mount_helper
    path = EFS_MOUNT["mount_point"]
    for machine in site_runs.machines:
        status = machine.run(f"dpkg-query -W -f '${{Status}} ${{Version}}' {helper.package}").stdout
        assert status == f"install ok installed {helper.version}-1"
        assert machine.run(f"test -x /sbin/mount.{helper.fstype}", check=False).returncode == 0
        assert _fstab(machine)[path] == (f"{EFS_ID}:/", helper.fstype, EFS_MOUNT_OPTIONS)
        assert _mounted(machine, path) == _stand_in(machine, path, f"{EFS_ID}:/"), _mount_status(machine, path)
        records = machine.run("cat /run/efs-standin/mounts", root=True).stdout.splitlines()
        assert records and all(r.split()[0] == path and helper.tls_option in r.split()[1].split(",") for r in records)
        # The admin's home (and key) the image held was copied into the file system and nothing was left aside:
        # this very command logged in with that key, after the mount.
        kept = machine.run(f"stat -c '%U' {path}/admin/.ssh/authorized_keys; "
                           "ls -d /var/lib/gpuforge/before-mount.* 2>/dev/null | wc -l", root=True)
        assert kept.stdout.split() == ["admin", "0"], kept.stdout


LNET_UNIT = "/etc/systemd/system/gpuforge-lnet.service"
LNET_PROGRAM = "/usr/local/sbin/gpuforge-lnet"
LUSTRE_AUTOMOUNTS = ("fsx.automount", "site-scratch.automount")


@pytest.fixture(scope="module")
def image_baked(site_runs: SiteRuns) -> PlaybookResult:
    """The image path on the converged machines: the LNet unit and its program are removed, then bake-image.yml
    (as an image build runs the roles: units enabled, not started) runs with the same variables. An image runs
    no automount either: the Lustre automounts are stopped first, or the first access after the bake (the
    Lustre collector's timer reads /fsx) would mount and so start the LNet unit the mounts require."""
    for machine in site_runs.machines:
        machine.run(f"systemctl stop {' '.join(LUSTRE_AUTOMOUNTS)} && systemctl disable --now gpuforge-lnet.service "
                    f"&& rm {LNET_UNIT} {LNET_PROGRAM} && systemctl daemon-reload", root=True)  # fmt: skip
    return run_playbook("bake-image.yml", site_runs.inventory)


def test_the_image_path_installs_and_enables_the_lnet_unit_without_starting_it(
    site_runs: SiteRuns, image_baked: PlaybookResult
) -> None:
    assert image_baked.ok, [f"{f.host} {f.task}: {f.message}" for f in image_baked.failures]
    for machine in site_runs.machines:
        machine.run(f"test -x {LNET_PROGRAM} && test -f {LNET_UNIT}")
        assert machine.run("systemctl is-enabled gpuforge-lnet.service").stdout.strip() == "enabled"
        assert machine.run("systemctl is-active gpuforge-lnet.service", check=False).stdout.strip() == "inactive"


@pytest.fixture(scope="module")
def rebooted(site_runs: SiteRuns, image_baked: PlaybookResult, machine_pool: MachinePool) -> Machines:
    """Both machines rebooted after the image path: LNet's configuration (the stand-in's state under /run, as the
    kernel's) is gone; the disk, with the stand-in sysfs, stays. What configures LNet now is the unit the image
    path enabled."""
    machine_pool.reboot(site_runs.machines)
    return site_runs.machines


def test_lnet_is_configured_again_at_boot_before_the_mount(rebooted: Machines) -> None:
    efa_node, tcp_node = rebooted
    default_if = _default_interface(efa_node)
    for machine in rebooted:
        journal = machine.run("journalctl -b -u gpuforge-lnet.service --no-pager", root=True, check=False).stdout
        assert machine.run("systemctl is-active gpuforge-lnet.service").stdout.strip() == "active", journal
    assert _lnet_nets(efa_node) == {"lo": [], "tcp": [default_if], "efa": EFA_LNET_DEVICES, **SITE_O2IB}
    assert _lnet_nets(tcp_node) == {"lo": [], "tcp": [default_if], **SITE_O2IB}
    # The first access mounts /fsx through its automount unit, which requires the LNet unit: the mount found
    # LNet configured (efa on the EFA node), not brought up on tcp alone as loading lustre.ko would.
    for machine, nets in ((efa_node, "lo,tcp,efa,o2ib"), (tcp_node, "lo,tcp,o2ib")):
        assert machine.run("systemctl is-active fsx.automount").stdout.strip() == "active"
        assert _mounted(machine, "/fsx") == (FSX_SOURCE, "tmpfs"), _mount_status(machine, "/fsx")
        # (The Lustre collector's timer may have triggered the automount first; the record is the same.)
        assert f"/fsx {nets}" in machine.run("cat /run/lustre-standin/mounts", root=True).stdout.splitlines()
        assert "gpuforge-lnet.service" in machine.run("systemctl show -p After --value fsx.mount").stdout.split()


def test_site_file_systems_mount_again_after_a_reboot(rebooted: Machines) -> None:
    for machine in rebooted:
        for path, (source, _) in SITE_FSTAB.items():
            assert _mounted(machine, path) == _stand_in(machine, path, source), _mount_status(machine, path)
            # A new tmpfs: what the test wrote before the reboot is gone (no file server keeps it here); the
            # EFS kept it, and the admin's key with which this test logs in.
            kept = machine.run(f"test -e {path}/written-by-test", check=False).returncode == 0
            assert kept == (path == EFS_MOUNT["mount_point"]), path
        # The site's Lustre mounted after the boot's LNet unit had put o2ib back on ibp170s0f0.
        after = machine.run("systemctl show -p After --value site-scratch.mount").stdout.split()
        assert "gpuforge-lnet.service" in after
        assert "o2ib" in _mount_record(machine, "/site/scratch").split(",")


def _stand_in(machine: Machine, path: str, source: str) -> tuple[str, str] | None:
    """What the stand-in mount helper mounts at *path*: a tmpfs named by the production source, or for the EFS
    the machine's EFS_STORE bound there (the top mount then shows the file system EFS_STORE is on)."""
    if path != EFS_MOUNT["mount_point"]:
        return (source, "tmpfs")
    store_source, store_type = machine.run(f"findmnt -n -o SOURCE,FSTYPE --target {EFS_STORE}").stdout.split()
    return (store_source, store_type)


def _mount_record(machine: Machine, path: str) -> str:
    """The LNet networks the stand-in mount.lustre found when it last mounted *path* (since the last boot)."""
    records = machine.run("cat /run/lustre-standin/mounts", root=True).stdout.splitlines()
    return [line for line in records if line.split()[0] == path][-1].split()[1]
