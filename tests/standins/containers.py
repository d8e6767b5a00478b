"""Stand-in sources for containers in jobs: enroot, pyxis and NVIDIA's container toolkit, laid out like
the production URLs and served on 127.0.0.1 (the roles' production tasks run unchanged against them):

    NVIDIA/enroot/releases/download/v<version>/   enroot_<v>_amd64.deb, enroot+caps_<v>_amd64.deb: the
                                                  GitHub release assets (the enroot role checks their sha256)
    libnvidia-container/stable/deb/amd64/         NVIDIA's container toolkit: a signed flat apt repository
                                                  with the pinned release and a newer one (the pin must win)
    libnvidia-container/gpgkey                    its signing key
    gpuforge-slurm/                               the cluster's own repository (production: pyxis built with
                                                  its Debian packaging against the cluster's Slurm):
                                                  nvslurm-plugin-pyxis and the EFS mount helper
                                                  (amazon-efs-utils), signed; key at gpuforge-slurm/key.asc

Names, versions and file layout come from the catalog (slurm.containers) and the upstream packaging
(enroot's Makefile and pkg/deb, pyxis's Makefile and debian/). What stands in:
- enroot's programs are scripts: `enroot version` answers with the release, every other command says it
  is a stand-in and fails; its hooks (98-nvidia.sh among them) are placeholders. No container starts here.
- enroot+caps has no postinst: the real one gives enroot's helpers CAP_SYS_ADMIN with setcap.
- nvidia-container-cli answers --version only (there is no GPU driver here).
- spank_pyxis.so is tests/standins/pyxis/spank_pyxis_standin.c, compiled here against Debian's
  libslurm-dev (the Slurm release the test machines run): a real SPANK plugin that srun and slurmstepd
  load, with pyxis's options and plugstack arguments; it records the image instead of starting a container.
- The packages declare no dependencies outside these sources (enroot's jq, parallel, squashfs-tools...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuforge.catalog import load_catalog

from .packages import Package, efs_utils
from .repo import _deb, _export_key, _flat_index, _run, _sha256, _signing_key, serve_tree, stop_server

ARCH = "amd64"
PLUGIN_SOURCE = Path(__file__).resolve().parent / "pyxis" / "spank_pyxis_standin.c"
TOOLKIT_PATH = "libnvidia-container/stable/deb"
CLUSTER_REPO = "gpuforge-slurm"
# A newer toolkit than the catalog's pin: apt must install the pinned one.
TOOLKIT_NEWER = "1.18.0-1"
# Packages the production image would carry that these sources do not (the .debs depend on nothing outside them).
STANDIN_NOTE = "gpuforge test stand-in: no container runtime here"


@dataclass
class ContainerSources:
    """The built tree and, once served, its URL; ``variables()`` points the roles at it."""

    root: Path
    enroot_sha256: dict[str, str]
    url: str = ""
    process: subprocess.Popen[bytes] | None = None

    def slurm_config(self, config: dict[str, Any]) -> None:
        """Point *config* (slurm_config) at these sources: the production keys, stand-in URLs."""
        assert self.url, "serve() first"
        containers = config["containers"]
        enroot = containers["enroot"]
        upstream = enroot["version"].split("-")[0]
        enroot["url"] = f"{self.url}/NVIDIA/enroot/releases/download/v{upstream}"
        enroot["sha256"] = dict(self.enroot_sha256)
        toolkit = containers["nvidia_container_toolkit"]
        toolkit["repository"] = f"{self.url}/{TOOLKIT_PATH}"
        toolkit["key"] = f"{self.url}/libnvidia-container/gpgkey"

    def variables(self) -> dict[str, Any]:
        """Inventory variables: the cluster's repository that carries pyxis (production: the one with Slurm)."""
        assert self.url, "serve() first"
        return {
            "pyxis_repository": {
                "uris": f"{self.url}/{CLUSTER_REPO}/",
                "suites": "/",
                "signed_by": f"{self.url}/{CLUSTER_REPO}/key.asc",
            }
        }

    def efs_helper_variables(self) -> dict[str, Any]:
        """site_mounts variables for an EFS /home: the cluster's repository also serves the EFS mount helper
        (catalog aws_wiring efs.mount_helper.production), under the same name, so apt sees one source."""
        repository = {"name": CLUSTER_REPO, **self.variables()["pyxis_repository"]}
        return {"site_mounts_repositories": [repository]}

    def serve(self) -> None:
        self.process, self.url = serve_tree(self.root, f"{CLUSTER_REPO}/InRelease", "stand-in container sources")

    def stop(self) -> None:
        stop_server(self.process)
        self.process = None


def tools_missing() -> list[str]:
    """What building these sources needs and this host lacks (as apt packages)."""
    missing = [
        pkg
        for tool, pkg in (("dpkg-deb", "dpkg-dev"), ("apt-ftparchive", "apt-utils"), ("gpg", "gnupg"), ("gcc", "gcc"))
        if shutil.which(tool) is None
    ]
    if not Path("/usr/include/slurm/spank.h").exists():
        missing.append("libslurm-dev")
    return missing


def build(root: Path) -> ContainerSources:
    facts = load_catalog().slurm.containers
    gnupg = root.parent / f"{root.name}-gnupg"
    gnupg.mkdir(mode=0o700, parents=True)
    key = _signing_key(gnupg)
    try:
        enroot_dir = root / f"NVIDIA/enroot/releases/download/v{facts.enroot.version}"
        enroot_dir.mkdir(parents=True)
        version = f"{facts.enroot.version}-{facts.enroot.package_release}"
        debs = [_deb(package, enroot_dir) for package in enroot_packages(facts.enroot.version, version)]

        toolkit = root / TOOLKIT_PATH / ARCH
        toolkit.mkdir(parents=True)
        for toolkit_version in (facts.nvidia_container_toolkit.version, TOOLKIT_NEWER):
            for package in toolkit_packages(toolkit_version):
                _deb(package, toolkit)
        _flat_index(toolkit, gnupg, key)
        (root / "libnvidia-container/gpgkey").write_bytes(_export_key(gnupg, key))

        cluster = root / CLUSTER_REPO
        cluster.mkdir()
        plugin = _compile_plugin(root.parent / f"{root.name}-build")
        _deb(pyxis_package(f"{facts.pyxis.version}-{facts.pyxis.package_release}", facts.pyxis.plugin, plugin), cluster)
        _deb(efs_utils(), cluster)
        _flat_index(cluster, gnupg, key)
        (cluster / "key.asc").write_bytes(_export_key(gnupg, key))
    finally:
        subprocess.run(
            ["gpgconf", "--kill", "gpg-agent"],
            env={**os.environ, "GNUPGHOME": str(gnupg)},
            capture_output=True,
            check=False,
        )
    return ContainerSources(root=root, enroot_sha256={deb.name: _sha256(deb) for deb in debs})


def _compile_plugin(build_dir: Path) -> bytes:
    build_dir.mkdir(parents=True, exist_ok=True)
    out = build_dir / "spank_pyxis.so"
    _run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out), str(PLUGIN_SOURCE)])
    return out.read_bytes()


def _script(name: str, body: str) -> str:
    return f"#!/bin/sh\n# {STANDIN_NOTE} ({name}).\n{body}"


def enroot_packages(upstream: str, version: str) -> list[Package]:
    """enroot and enroot+caps as the release's .debs lay them out (prefix= exec_prefix=/usr: /usr/bin,
    /usr/lib/enroot, /etc/enroot, /usr/share/enroot)."""
    enroot = _script(
        "enroot",
        f'case "${{1:-}}" in\n  version) echo "{upstream}" ;;\n'
        f'  *) echo "enroot: {STANDIN_NOTE}" >&2; exit 1 ;;\nesac\n',
    )
    helpers = (
        "enroot-aufs2ovlfs",
        "enroot-mksquashovlfs",
        "enroot-mount",
        "enroot-switchroot",
        "enroot-nsenter",
        "enroot-makeself",
    )
    failing = _script("helper", f'echo "{STANDIN_NOTE}" >&2\nexit 1\n')
    hooks = (
        "10-aptfix.sh",
        "10-cgroups.sh",
        "10-devices.sh",
        "10-home.sh",
        "10-localtime.sh",
        "10-shadow.sh",
        "98-nvidia.sh",
        "99-mellanox.sh",
    )
    files: dict[str, str | bytes] = {"/usr/bin/enroot": enroot}
    files |= {f"/usr/bin/{helper}": failing for helper in helpers}
    files |= {
        f"/usr/lib/enroot/{src}": f"# {STANDIN_NOTE}\n" for src in ("common.sh", "bundle.sh", "docker.sh", "runtime.sh")
    }
    files |= {f"/etc/enroot/hooks.d/{hook}": _script(hook, "exit 0\n") for hook in hooks}
    files["/etc/enroot/enroot.conf"] = f"# {STANDIN_NOTE}: the packaged defaults are all commented out\n"
    files["/etc/enroot/mounts.d/10-system.fstab"] = f"# {STANDIN_NOTE}\n"
    files["/etc/enroot/environ.d/10-terminal.env"] = f"# {STANDIN_NOTE}\n"
    executables = frozenset(p for p in files if p.startswith(("/usr/bin/", "/etc/enroot/hooks.d/")))
    return [
        Package(
            "enroot",
            version,
            files=files,
            executables=executables,
            description="Unprivileged container sandboxing utility (gpuforge test stand-in)",
        ),
        Package(
            "enroot+caps",
            version,
            depends=(f"enroot (= {version})",),
            description="Unprivileged container sandboxing utility, extra capabilities (gpuforge test stand-in)",
        ),
    ]


def toolkit_packages(version: str) -> list[Package]:
    """libnvidia-container1 and libnvidia-container-tools: the library and nvidia-container-cli."""
    upstream = version.split("-")[0]
    lib = "/usr/lib/x86_64-linux-gnu"
    cli = _script(
        "nvidia-container-cli",
        f'case "${{1:-}}" in\n  --version) echo "cli-version: {upstream}"; echo "lib-version: {upstream}" ;;\n'
        '  *) echo "nvidia-container-cli: initialization error: load library failed: no NVIDIA driver" >&2; exit 1 ;;\n'
        "esac\n",
    )
    return [
        Package(
            "libnvidia-container1",
            version,
            files={f"{lib}/libnvidia-container.so.{upstream}": ""},
            symlinks={f"{lib}/libnvidia-container.so.1": f"libnvidia-container.so.{upstream}"},
        ),
        Package(
            "libnvidia-container-tools",
            version,
            depends=(f"libnvidia-container1 (>= {version})",),
            files={"/usr/bin/nvidia-container-cli": cli},
            executables=frozenset({"/usr/bin/nvidia-container-cli"}),
        ),
    ]


def pyxis_package(version: str, plugin_path: str, plugin: bytes) -> Package:
    """nvslurm-plugin-pyxis as pyxis's debian/ packaging builds it: the plugin and share/pyxis/pyxis.conf."""
    return Package(
        "nvslurm-plugin-pyxis",
        version,
        depends=("enroot (>= 3.1.0) | enroot-hardened (>= 3.1.0)",),
        files={plugin_path: plugin, "/usr/share/pyxis/pyxis.conf": f"required {plugin_path}\n"},
        description="Slurm plugin for launching containerized tasks (gpuforge test stand-in)",
    )
