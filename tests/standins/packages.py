"""What the stand-in sources hold: packages with the production names, versions and file layouts.

Each package installs files only: no kernel module, no GPU library that works. A daemon's binary is a
placeholder that stays up (so systemd starts, supervises and restarts the unit the package ships, as
it would the real one) and says in its first line that it is a stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The driver the stand-in CUDA repository carries: two point releases of branch 580, so apt must pick
# the newest of each package and Fabric Manager must match the driver's version exactly.
DRIVER_BRANCH = "580"
DRIVER_VERSIONS = ("580.82.07-1", "580.95.05-1")
# NCCL: the version gpuforge pins (nccl role defaults) and a newer one, so the pin is what picks it.
NCCL_PINNED = "2.26.2-1+cuda12.8"
NCCL_NEWER = "2.27.7-1+cuda12.9"
DCGM_VERSION = "1:4.2.3-1"
# DCGM's command line without a GPU: `dcgmi diag` replays a real run's recorded output (see dcgmi_script()).
DCGMI_DIAG_RECORDED = HERE.parent / "fixtures" / "healthcheck" / "dcgmi-diag-r3-pass.txt"
DCGMI_STANDIN_OUTPUT = "/etc/dcgmi-standin/diag.txt"
EFA_INSTALLER_VERSION = "1.43.1"
AWS_OFI_NCCL_VERSION = "1.16.3-1"
# Where EFA installers put aws-ofi-nccl: lib/, or lib/x86_64-linux-gnu/ on Debian-family hosts (the nccl
# role's nccl_aws_ofi_nccl_libdirs, in its order). The installer stand-in the bakes install uses the first;
# tests/playbooks/test_nccl_plugin_dir.py lays out both to see the role pick the one holding the plugin.
AWS_OFI_NCCL_LIBDIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu")
# DOCA-OFED (rdma role, rdma_source doca): the release the role defaults to and the MLNX_OFED it carries
# (DOCA 2.10.0 is MLNX_OFED 25.01-0.6.0.0: its repository's mlnx-fw-updater_25.01-0.6.0.0). The
# metapackage's own version string is not recorded here: the stand-in uses the release number.
DOCA_VERSION = "2.10.0-1"
DOCA_OFED_VERSION = "25.01-0.6.0.0"
LUSTRE_VERSION = "2.15.6-1fsx1"
# The stand-in lnetctl (a script that keeps LNet's state in a file): tests/standins/lnetctl.py.
LNETCTL = (HERE / "lnetctl.py").read_text()
# Where tests lay out RDMA devices for a machine (its sysfs, the host's, has none); lnetctl.py reads it too.
# On the machine's disk, not under /run: the devices are there again after a reboot, as the kernel's are.
STANDIN_SYSFS = "/var/lib/gpuforge-standin/sysfs"
# The mount helper the stand-in clients install as /sbin/mount.<fstype> (tests/standins/mount-helper.sh).
MOUNT_HELPER = (HERE / "mount-helper.sh").read_text()
# The site's vendor clients (BeeGFS 7.4, WEKA's agent) in the stand-in site mirror.
BEEGFS_VERSION = "7.4.5"
WEKA_VERSION = "4.4.2"
# The keys of BeeGFS's client configuration the role and the helper read, laid out as BeeGFS's own file is.
BEEGFS_CLIENT_CONF = "sysMgmtdHost                  =\nconnClientPortUDP             = 8004\n"
# The CUDA toolkit pieces nccl-tests builds against (CUDA 12.8 update 1 in NVIDIA's repository): the
# compiler and the runtime's headers and library, under /usr/local/cuda-12.8 as the real packages lay them out.
CUDA_VERSION = "12.8"
CUDA_NVCC_VERSION = "12.8.93-1"
CUDA_CUDART_VERSION = "12.8.90-1"
CUDA_HOME = f"/usr/local/cuda-{CUDA_VERSION}"
# nccl-tests: the release the nccl_tests role pins, and each collective's reduction and root column.
NCCL_TESTS_VERSION = "v2.16.4"
NCCL_TESTS_COLLECTIVES = {
    "all_reduce": ("sum", -1),
    "all_gather": ("none", -1),
    "broadcast": ("none", 0),
    "reduce_scatter": ("sum", -1),
    "reduce": ("sum", 0),
    "alltoall": ("none", -1),
    "scatter": ("none", 0),
    "gather": ("none", 0),
    "sendrecv": ("sum", -1),
    "hypercube": ("none", -1),
}

STANDIN_DAEMON = (
    "#!/bin/sh\n"
    "# gpuforge test stand-in for {name}: no GPU here. It stays up so systemd supervises the unit\n"
    "# the package ships, as it would the real daemon.\n"
    'echo "stand-in {name} $*"\n'
    "exec sleep infinity\n"
)

# nvidia-smi as the real one behaves on a machine whose driver is not loaded (no GPU, no kernel module).
NVIDIA_SMI_WITHOUT_DRIVER = (
    "#!/bin/sh\n"
    "# gpuforge test stand-in for nvidia-smi {version}: there is no GPU and no nvidia.ko here, so it fails\n"
    "# as the real one does without a driver.\n"
    'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\n'
    "exit 9\n"
)


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    depends: tuple[str, ...] = ()
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # path -> content (bytes: a binary)
    executables: frozenset[str] = frozenset()  # paths installed mode 0755
    symlinks: dict[str, str] = field(default_factory=dict)  # path -> target
    description: str = "gpuforge test stand-in (files only)"


def _unit(description: str, exec_start: str, *, wanted_by: str = "multi-user.target") -> str:
    return (
        f"[Unit]\nDescription={description} (gpuforge test stand-in)\n\n"
        f"[Service]\nExecStart={exec_start}\nRestart=on-failure\n\n[Install]\nWantedBy={wanted_by}\n"
    )


def _daemon(name: str, binary: str, unit: str, description: str) -> tuple[dict[str, str], frozenset[str]]:
    return (
        {binary: STANDIN_DAEMON.format(name=name), f"/usr/lib/systemd/system/{unit}": _unit(description, binary)},
        frozenset({binary}),
    )


def cuda_repository() -> list[Package]:
    """NVIDIA's CUDA repository (compute/cuda/repos/debian12/x86_64/): driver, Fabric Manager, NCCL, DCGM."""
    packages: list[Package] = []
    for version in DRIVER_VERSIONS:
        upstream = version.split("-")[0]
        persistenced_files, persistenced_exec = _daemon(
            "nvidia-persistenced",
            "/usr/bin/nvidia-persistenced",
            "nvidia-persistenced.service",
            "NVIDIA Persistence Daemon",
        )
        fm_files, fm_exec = _daemon(
            "nv-fabricmanager",
            "/usr/bin/nv-fabricmanager",
            "nvidia-fabricmanager.service",
            "NVIDIA fabric manager service",
        )
        packages += [
            Package("nvidia-persistenced", version, files=persistenced_files, executables=persistenced_exec),
            Package(
                "nvidia-driver-cuda",  # the driver's user space, without a kernel module
                version,
                files={"/usr/bin/nvidia-smi": NVIDIA_SMI_WITHOUT_DRIVER.format(version=upstream)},
                executables=frozenset({"/usr/bin/nvidia-smi"}),
            ),
            Package(
                f"cuda-drivers-{DRIVER_BRANCH}",
                version,
                depends=(f"nvidia-persistenced (= {version})", f"nvidia-driver-cuda (= {version})"),
            ),
            Package(f"nvidia-fabricmanager-{DRIVER_BRANCH}", version, files=fm_files, executables=fm_exec),
        ]
    for version in (NCCL_PINNED, NCCL_NEWER):
        upstream = version.split("-")[0]
        lib = "/usr/lib/x86_64-linux-gnu"
        packages += [
            Package(
                "libnccl2",
                version,
                files={f"{lib}/libnccl.so.{upstream}": ""},
                symlinks={f"{lib}/libnccl.so.2": f"libnccl.so.{upstream}"},
            ),
            Package(
                "libnccl-dev",
                version,
                depends=(f"libnccl2 (= {version})",),
                files={"/usr/include/nccl.h": f"/* NCCL {upstream} stand-in header */\n"},
                symlinks={f"{lib}/libnccl.so": "libnccl.so.2"},
            ),
        ]
    packages += cuda_toolkit()
    dcgm_files, dcgm_exec = _daemon(
        "nv-hostengine", "/usr/bin/nv-hostengine", "nvidia-dcgm.service", "NVIDIA DCGM service"
    )
    packages += [
        Package(
            "datacenter-gpu-manager-4-core",
            DCGM_VERSION,
            files={**dcgm_files, "/usr/bin/dcgmi": dcgmi_script()},
            executables=dcgm_exec | {"/usr/bin/dcgmi"},
        ),
        Package(
            "datacenter-gpu-manager-4-cuda12",
            DCGM_VERSION,
            depends=(f"datacenter-gpu-manager-4-core (= {DCGM_VERSION})",),
            files={"/usr/lib/x86_64-linux-gnu/datacenter-gpu-manager-4/cuda12/STANDIN": ""},
        ),
        Package(
            "datacenter-gpu-manager-4-dev",
            DCGM_VERSION,
            depends=(f"datacenter-gpu-manager-4-core (= {DCGM_VERSION})",),
            files={"/usr/include/dcgm_agent.h": "/* DCGM stand-in header */\n"},
        ),
    ]
    return packages


def cuda_toolkit() -> list[Package]:
    """The CUDA toolkit packages nccl-tests needs (nccl_tests role): nvcc and the runtime, laid out as the real
    ones are (targets/x86_64-linux/{include,lib} with include/ and lib64/ links beside bin/)."""
    dashed = CUDA_VERSION.replace(".", "-")
    target = f"{CUDA_HOME}/targets/x86_64-linux"
    runtime = CUDA_CUDART_VERSION.split("-")[0]
    return [
        Package(
            f"cuda-cudart-{dashed}",
            CUDA_CUDART_VERSION,
            files={f"{target}/lib/libcudart.so.{runtime}": ""},
            symlinks={
                f"{target}/lib/libcudart.so.12": f"libcudart.so.{runtime}",
                f"{CUDA_HOME}/include": "targets/x86_64-linux/include",
                f"{CUDA_HOME}/lib64": "targets/x86_64-linux/lib",
            },
        ),
        Package(
            f"cuda-cudart-dev-{dashed}",
            CUDA_CUDART_VERSION,
            depends=(f"cuda-cudart-{dashed} (>= {CUDA_CUDART_VERSION})",),
            files={f"{target}/include/cuda_runtime.h": f"/* CUDA {runtime} runtime stand-in header */\n"},
            symlinks={f"{target}/lib/libcudart.so": "libcudart.so.12"},
        ),
        Package(
            f"cuda-nvcc-{dashed}",
            CUDA_NVCC_VERSION,
            files={f"{CUDA_HOME}/bin/nvcc": nvcc_script()},
            executables=frozenset({f"{CUDA_HOME}/bin/nvcc"}),
        ),
    ]


def nvcc_script() -> str:
    """nvcc as nccl-tests' Makefile uses it, without compiling GPU code (HERE/nvcc.sh)."""
    release = CUDA_NVCC_VERSION.split("-")[0]
    return (HERE / "nvcc.sh").read_text().replace("@RELEASE@", CUDA_VERSION).replace("@VERSION@", release)


def rdma_sysfs_script(devices: list[str], root: str = STANDIN_SYSFS) -> str:
    """A shell line that lists *devices* in the stand-in sysfs under *root* as the kernel links them:
    class/infiniband/<dev> -> the PCI function's infiniband/<dev>, whose device/driver -> bus/pci/drivers/<efa|
    mlx5_core> (mlx5_* are ConnectX ports, the rest EFA devices). lnetctl's and fi_info's stand-ins read it."""
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
    return " && ".join(lines)


def efa_installer_packages() -> list[Package]:
    """What the EFA installer tarball carries under DEBS/DEBIAN12/x86_64/ (user space only, no efa.ko)."""
    return [
        Package("efa-config", "1.18-1", files={"/etc/modprobe.d/efa.conf": "# EFA stand-in\n"}),
        Package("efa-profile", "1.7-1", files={"/etc/profile.d/zippy_efa.sh": "PATH=$PATH:/opt/amazon/efa/bin\n"}),
        Package("libfabric1-aws", "2.1.0amzn5.0", files={"/opt/amazon/efa/lib/libfabric.so.1": ""}),
        Package(
            "libfabric-aws-bin",
            "2.1.0amzn5.0",
            depends=("libfabric1-aws",),
            # Where the installer puts it (not on PATH but for login shells: efa-profile's zippy_efa.sh).
            files={"/opt/amazon/efa/bin/fi_info": (HERE / "fi_info.sh").read_text().replace("@SYSFS@", STANDIN_SYSFS)},
            executables=frozenset({"/opt/amazon/efa/bin/fi_info"}),
        ),
        aws_ofi_nccl(AWS_OFI_NCCL_LIBDIRS[0]),
    ]


def aws_ofi_nccl(libdir: str) -> Package:
    """aws-ofi-nccl as the installer lays it out in *libdir*: the plugin and its libnccl-net.so alias."""
    return Package(
        "libnccl-ofi",
        AWS_OFI_NCCL_VERSION,
        depends=("libfabric1-aws",),
        files={f"{libdir}/libnccl-net-ofi.so": "", f"{libdir}/libnccl-net.so": ""},
    )


def lustre_repository() -> list[Package]:
    """The FSx for Lustre client repository (dists/<codename>/main): the client's modules and utilities.

    The modules package carries no lustre.ko/lnet.ko/kefalnd.ko: its modprobe.d rules make `modprobe lnet`
    (kefalnd, ksocklnd, ko2iblnd) record the load in the stand-in lnetctl's state instead. lustre-client-utils puts
    lnetctl where Lustre's packaging does (debian/lustre-client-utils.install.in: usr/sbin)."""
    # lustre.ko depends on lnet.ko: modprobe loads lnet first.
    loads = "".join(
        f"install {module} {'/usr/sbin/lnetctl --standin-load lnet && ' if module == 'lustre' else ''}"
        f"/usr/sbin/lnetctl --standin-load {module} $CMDLINE_OPTS\n"
        for module in ("lnet", "kefalnd", "ksocklnd", "ko2iblnd", "lustre")
    )
    return [
        Package(
            "lustre-client-utils",
            LUSTRE_VERSION,
            # mount.lustre where Lustre's packaging puts it (debian/lustre-client-utils.install.in: sbin).
            files={"/usr/sbin/lnetctl": LNETCTL, "/sbin/mount.lustre": mount_helper("lustre", "lustre-client-utils")},
            executables=frozenset({"/usr/sbin/lnetctl", "/sbin/mount.lustre"}),
        ),
        Package(
            "lustre-client-modules-aws",
            LUSTRE_VERSION,
            depends=(f"lustre-client-utils (= {LUSTRE_VERSION})",),
            files={
                "/etc/modprobe.d/lustre-standin.conf": "# gpuforge test stand-in: no Lustre kernel modules\n" + loads
            },
        ),
    ]


def mount_helper(fstype: str, package: str) -> str:
    return MOUNT_HELPER.replace("@FSTYPE@", fstype).replace("@PACKAGE@", package)


def site_mirror() -> list[Package]:
    """A site's mirror of its storage vendors' clients (suite bookworm, main), as site_mounts_repositories
    names it. BeeGFS publishes beegfs-client and beegfs-helperd (BeeGFS 7); WEKA's agent comes from the
    cluster's own installer (`curl http://<backend>:14000/dist/v1/install | sh`), here as a package named
    weka-agent. Each carries a stand-in mount helper in place of the kernel module."""
    helperd_files, helperd_exec = _daemon(
        "beegfs-helperd", "/opt/beegfs/sbin/beegfs-helperd", "beegfs-helperd.service", "BeeGFS Helperd"
    )
    agent_files, agent_exec = _daemon("weka-agent", "/usr/bin/weka-agent", "weka-agent.service", "WEKA agent")
    return [
        Package("beegfs-helperd", BEEGFS_VERSION, files=helperd_files, executables=helperd_exec),
        Package(
            "beegfs-client",
            BEEGFS_VERSION,
            depends=(f"beegfs-helperd (= {BEEGFS_VERSION})",),
            files={
                "/etc/beegfs/beegfs-client.conf": BEEGFS_CLIENT_CONF,
                "/sbin/mount.beegfs": mount_helper("beegfs", "beegfs-client"),
            },
            executables=frozenset({"/sbin/mount.beegfs"}),
        ),
        Package(
            "weka-agent",
            WEKA_VERSION,
            files={**agent_files, "/sbin/mount.wekafs": mount_helper("wekafs", "weka-agent")},
            executables=agent_exec | {"/sbin/mount.wekafs"},
        ),
        efs_utils(),
    ]


def efs_utils() -> Package:
    """The EFS mount helper as ./build-deb.sh of the catalog's efs-utils release packages it (amazon-efs-utils,
    /sbin/mount.efs), served in production from the cluster's own repository (here: the site mirror). The
    stand-in helper refuses a mount without tls, as the file systems' policy does. No dependencies: the real
    package's nfs-common and stunnel4 do the NFS and TLS this stand-in does not."""
    from gpuforge.catalog.aws_wiring import load_aws_wiring

    helper = load_aws_wiring().efs.mount_helper
    return Package(
        helper.package,
        f"{helper.version}-1",
        files={f"/sbin/mount.{helper.fstype}": mount_helper(helper.fstype, helper.package)},
        executables=frozenset({f"/sbin/mount.{helper.fstype}"}),
    )


def dcgmi_script() -> str:
    """dcgmi as the gpu_healthcheck role runs it (`dcgmi diag -r N [-p ...]`): there is no GPU, so it prints
    the output of a real `dcgmi diag -r 3` (DCGM 3.3.9 on 8 H100s, DCGMI_DIAG_RECORDED and its .source), or
    what a test put in DCGMI_STANDIN_OUTPUT to make a node fail. Other subcommands are not recorded: they fail."""
    recorded = DCGMI_DIAG_RECORDED.read_text()
    assert "GPUFORGE_RECORDED" not in recorded
    return (
        "#!/bin/sh\n"
        "# gpuforge test stand-in for dcgmi (DCGM {version}): no GPU here. `dcgmi diag` prints recorded output.\n"
        'if [ "$1" != diag ]; then echo "stand-in dcgmi: only diag is recorded" >&2; exit 1; fi\n'
        "if [ -f {override} ]; then cat {override}; exit 0; fi\n"
        "cat <<'GPUFORGE_RECORDED'\n{recorded}GPUFORGE_RECORDED\n"
    ).format(version=DCGM_VERSION.split(":")[-1], override=DCGMI_STANDIN_OUTPUT, recorded=recorded)


def doca_repository() -> list[Package]:
    """NVIDIA's DOCA repository for DOCA-OFED hosts (doca/<version>/<distribution>/x86_64/, a flat repository):
    the doca-ofed metapackage and the Mellanox packages it adds, files only (mlnx-ofed-kernel-dkms builds no
    module here). The user-space verbs stack it depends on (rdma-core, ibverbs-utils, infiniband-diags,
    perftest) comes from Debian's archive; DOCA ships its own builds of those, which the stand-in does not."""
    return [
        Package("mlnx-ofed-kernel-dkms", DOCA_OFED_VERSION, files={"/usr/src/mlnx-ofed-kernel-25.01/STANDIN": ""}),
        Package(
            "mlnx-ofed-kernel-utils",
            DOCA_OFED_VERSION,
            depends=(f"mlnx-ofed-kernel-dkms (= {DOCA_OFED_VERSION})",),
            files={"/usr/sbin/ibdev2netdev": "#!/bin/sh\n# gpuforge test stand-in: no ConnectX device here\n"},
            executables=frozenset({"/usr/sbin/ibdev2netdev"}),
        ),
        Package(
            "doca-ofed",
            DOCA_VERSION,
            depends=(
                f"mlnx-ofed-kernel-utils (= {DOCA_OFED_VERSION})",
                "rdma-core",
                "ibverbs-utils",
                "infiniband-diags",
                "perftest",
            ),
        ),
    ]


def dcgm_exporter_binary() -> str:
    return STANDIN_DAEMON.format(name="dcgm-exporter")


def efa_installer_script(version: str) -> str:
    """efa_installer.sh as the role relies on it: installs the DEBs, records the version where the real one does."""
    return f"""#!/bin/sh
# gpuforge test stand-in for efa_installer.sh {version}: installs the user-space packages of
# DEBS/DEBIAN12/x86_64 (no kernel module) and records the version where the real installer does.
set -eu
cd "$(dirname "$0")"
apt-get install -y --no-install-recommends ./DEBS/DEBIAN12/x86_64/*.deb
mkdir -p /opt/amazon
echo "# EFA installer version: {version}" > /opt/amazon/efa_installed_packages
for deb in DEBS/DEBIAN12/x86_64/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' ' >> /opt/amazon/efa_installed_packages
done
"""
