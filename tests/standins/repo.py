"""Stand-in package sources, built in the test session and served on 127.0.0.1.

One directory tree, laid out like the production URLs, served by a small HTTP server the session starts
and stops by its process id:

    compute/cuda/repos/debian12/x86_64/      NVIDIA's CUDA repository: a flat apt repository (suites: /),
                                             signed (InRelease, Release.gpg), key at 3bf863cc.pub
    doca/2.10.0/debian12.5/x86_64/           NVIDIA's DOCA repository (DOCA-OFED): flat, signed, key at
                                             doca/GPG-KEY-Mellanox.pub
    fsx/ubuntu/dists/bookworm/main/...       the FSx for Lustre client repository (suite bookworm, main)
    fsx/fsx-ubuntu-public-key.asc            its signing key
    site/debian/dists/bookworm/main/...      a site's mirror of its storage vendors' clients (BeeGFS, WEKA's
    site/site-mirror-key.asc                 agent) and the EFS mount helper (amazon-efs-utils, production's
                                             from the cluster's own repository), with its key; named by
                                             site_mirror_variables()
    efa/aws-efa-installer-<version>.tar.gz   the EFA installer tarball (aws-efa-installer/efa_installer.sh,
                                             DEBS/DEBIAN12/x86_64/*.deb)
    dcgm-exporter/dcgm-exporter              the dcgm-exporter binary a site publishes
    NVIDIA/nccl-tests.git                    nccl-tests' git repository (dumb HTTP), tag v2.16.4: a Makefile
                                             like upstream's, built by the stand-in nvcc of the CUDA
                                             repository into *_perf programs printing nccl-tests' output
                                             (tests/standins/nccl-tests, docs/testing.md)

The .deb files are made with dpkg-deb, indexed with apt-ftparchive and signed with a gpg key generated
for the session, so apt verifies signatures, pins and holds exactly as against the real sources.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring

from . import packages as pkgs
from .packages import Package

CUDA_PATH = "compute/cuda/repos/debian12/x86_64"
DOCA_BASE = "doca"
DOCA_PATH = f"{DOCA_BASE}/{pkgs.DOCA_VERSION.split('-')[0]}/debian12.5/x86_64"
NCCL_TESTS_PATH = "NVIDIA/nccl-tests.git"
NCCL_TESTS_SOURCE = Path(__file__).resolve().parent / "nccl-tests"
LUSTRE_PATH = "fsx/ubuntu"
LUSTRE_SUITE = "bookworm"
SITE_MIRROR_PATH = "site/debian"
ARCH = "amd64"


@dataclass
class StandinSources:
    """The built tree and, once served, its base URL; ``variables()`` points the roles at it."""

    root: Path
    efa_installer_sha256: str
    dcgm_exporter_sha256: str
    nccl_tests_commit: str
    url: str = ""
    process: subprocess.Popen[bytes] | None = None

    def variables(self) -> dict[str, Any]:
        """Inventory variables that point every production task at the stand-ins (nothing switched off)."""
        assert self.url, "serve() first"
        return {
            "nvidia_driver_cuda_repo_base_url": f"{self.url}/compute/cuda/repos",
            "nvidia_driver_branch": pkgs.DRIVER_BRANCH,
            # Used where a host's rdma_source is doca (the key URL follows the base URL, as in production).
            "rdma_doca_repo_base_url": f"{self.url}/{DOCA_BASE}",
            "efa_installer_version": pkgs.EFA_INSTALLER_VERSION,
            "efa_installer_url": f"{self.url}/efa/aws-efa-installer-{pkgs.EFA_INSTALLER_VERSION}.tar.gz",
            "efa_installer_checksum": f"sha256:{self.efa_installer_sha256}",
            "dcgm_exporter_binary_url": f"{self.url}/dcgm-exporter/dcgm-exporter",
            "dcgm_exporter_binary_checksum": f"sha256:{self.dcgm_exporter_sha256}",
            # Debian 12 has no FSx client repository of its own (vars/Debian-12.yml): name the stand-in's.
            "lustre_client_repo_url": f"{self.url}/{LUSTRE_PATH}",
            "lustre_client_repo_key_url": f"{self.url}/fsx/fsx-ubuntu-public-key.asc",
            "lustre_client_packages": ["lustre-client-modules-aws"],
            "nccl_tests_repo": f"{self.url}/{NCCL_TESTS_PATH}",
            "nccl_tests_version": pkgs.NCCL_TESTS_VERSION,
            "nccl_tests_commit": self.nccl_tests_commit,
        }

    def site_mirror_variables(self) -> dict[str, Any]:
        """site_mounts variables for a site whose image does not carry its storage clients: the site's mirror
        (the stand-in, signed) and the vendor clients' packages, which carry the stand-in mount helpers.
        Lustre's is lustre_client's (lustre-client-utils, from the FSx stand-in)."""
        assert self.url, "serve() first"
        return {
            "site_mounts_repositories": [
                {
                    "name": "site-storage-clients",
                    "uris": f"{self.url}/{SITE_MIRROR_PATH}",
                    "suites": [LUSTRE_SUITE],
                    "components": ["main"],
                    "signed_by": f"{self.url}/site/site-mirror-key.asc",
                }
            ],
            "site_mounts_packages": {
                "nfs": ["nfs-common"],
                "lustre": ["lustre-client-utils"],
                "beegfs": ["beegfs-client"],
                "weka": ["weka-agent"],
                # The EFS mount helper (production: the cluster's own repository; here the site mirror).
                "efs": [load_aws_wiring().efs.mount_helper.package],
            },
        }

    def serve(self) -> None:
        self.process, self.url = serve_tree(self.root, f"{CUDA_PATH}/InRelease", "stand-in repository server")

    def stop(self) -> None:
        stop_server(self.process)
        self.process = None


def build(root: Path) -> StandinSources:
    """Build every stand-in source under *root*."""
    gnupg = root.parent / f"{root.name}-gnupg"
    gnupg.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        return _build(root, gnupg, _signing_key(gnupg))
    finally:
        # gpg started an agent for this home directory: stop it (by its socket), the keys are no longer needed.
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(gnupg)},
                       capture_output=True, check=False)  # fmt: skip


def _build(root: Path, gnupg: Path, key: str) -> StandinSources:
    debs = root.parent / f"{root.name}-debs"

    cuda = root / CUDA_PATH
    cuda.mkdir(parents=True)
    for package in pkgs.cuda_repository():
        _deb(package, cuda)
    _flat_index(cuda, gnupg, key)
    (cuda / "3bf863cc.pub").write_bytes(_export_key(gnupg, key))

    doca = root / DOCA_PATH
    doca.mkdir(parents=True)
    for package in pkgs.doca_repository():
        _deb(package, doca)
    _flat_index(doca, gnupg, key)
    (root / DOCA_BASE / "GPG-KEY-Mellanox.pub").write_bytes(_export_key(gnupg, key))

    lustre = root / LUSTRE_PATH
    pool = lustre / "pool/main"
    pool.mkdir(parents=True)
    for package in pkgs.lustre_repository():
        _deb(package, pool)
    _suite_index(lustre, LUSTRE_SUITE, gnupg, key)
    (root / "fsx/fsx-ubuntu-public-key.asc").write_bytes(_export_key(gnupg, key))

    site = root / SITE_MIRROR_PATH
    (site / "pool/main").mkdir(parents=True)
    for package in pkgs.site_mirror():
        _deb(package, site / "pool/main")
    _suite_index(site, LUSTRE_SUITE, gnupg, key)
    (root / "site/site-mirror-key.asc").write_bytes(_export_key(gnupg, key))

    installer = debs / "aws-efa-installer"
    deb_dir = installer / "DEBS/DEBIAN12/x86_64"
    deb_dir.mkdir(parents=True)
    for package in pkgs.efa_installer_packages():
        _deb(package, deb_dir)
    script = installer / "efa_installer.sh"
    script.write_text(pkgs.efa_installer_script(pkgs.EFA_INSTALLER_VERSION))
    script.chmod(0o755)
    (root / "efa").mkdir()
    tarball = root / "efa" / f"aws-efa-installer-{pkgs.EFA_INSTALLER_VERSION}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(installer, arcname="aws-efa-installer")

    exporter = root / "dcgm-exporter" / "dcgm-exporter"
    exporter.parent.mkdir()
    exporter.write_text(pkgs.dcgm_exporter_binary())
    return StandinSources(
        root=root,
        efa_installer_sha256=_sha256(tarball),
        dcgm_exporter_sha256=_sha256(exporter),
        nccl_tests_commit=_nccl_tests_repository(root / NCCL_TESTS_PATH, debs / "nccl-tests"),
    )


def _nccl_tests_repository(bare: Path, work: Path) -> str:
    """nccl-tests' repository: the stand-in sources committed and tagged as the release the role pins,
    cloned bare and prepared for dumb HTTP (what `git clone http://...` reads from a plain web server).
    Returns the tagged commit."""
    shutil.copytree(NCCL_TESTS_SOURCE, work)
    for collective, (redop, root) in pkgs.NCCL_TESTS_COLLECTIVES.items():
        (work / "src" / f"{collective}.cu").write_text(
            f'#include "common.h"\nCOLLECTIVE={collective} REDOP={redop} ROOT={root}\n'
        )
    identity = {"GIT_AUTHOR_NAME": "gpuforge tests", "GIT_AUTHOR_EMAIL": "tests@gpuforge.invalid",
                "GIT_COMMITTER_NAME": "gpuforge tests", "GIT_COMMITTER_EMAIL": "tests@gpuforge.invalid"}  # fmt: skip
    for command in (
        ["git", "init", "--quiet", "--initial-branch=master", "."],
        ["git", "add", "."],
        ["git", "commit", "--quiet", "-m", f"nccl-tests {pkgs.NCCL_TESTS_VERSION} (gpuforge test stand-in)"],
        ["git", "tag", pkgs.NCCL_TESTS_VERSION],
    ):
        _run(command, cwd=work, env=identity)
    _run(["git", "clone", "--quiet", "--bare", str(work), str(bare)])
    _run(["git", "update-server-info"], cwd=bare)
    return _run(["git", "rev-parse", f"{pkgs.NCCL_TESTS_VERSION}^{{commit}}"], cwd=bare).strip()


def _deb(package: Package, dest: Path) -> Path:
    """A binary package made with dpkg-deb: the control file and the package's files."""
    staging = dest.parent / f".build-{package.name}-{package.version.replace(':', '_')}"
    (staging / "DEBIAN").mkdir(parents=True)
    control = [
        f"Package: {package.name}",
        f"Version: {package.version}",
        f"Architecture: {ARCH}",
        "Maintainer: gpuforge tests <tests@gpuforge.invalid>",
        "Section: misc",
        "Priority: optional",
    ]
    if package.depends:
        control.append(f"Depends: {', '.join(package.depends)}")
    control.append(f"Description: {package.description}")
    (staging / "DEBIAN/control").write_text("\n".join(control) + "\n")
    for path, content in package.files.items():
        target = staging / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        target.chmod(0o755 if path in package.executables else 0o644)
    for path, link_target in package.symlinks.items():
        link = staging / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(link_target)
    version = package.version.split(":")[-1]
    deb = dest / f"{package.name}_{version}_{ARCH}.deb"
    _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(staging), str(deb)])
    _run(["rm", "-rf", str(staging)])
    return deb


def _flat_index(repo: Path, gnupg: Path, key: str) -> None:
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo)
    (repo / "Packages").write_text(packages)
    release = _run(["apt-ftparchive", "release", "."], cwd=repo)
    (repo / "Release").write_text(release)
    _sign(repo / "Release", gnupg, key)


def _suite_index(repo: Path, suite: str, gnupg: Path, key: str) -> None:
    binary = repo / f"dists/{suite}/main/binary-{ARCH}"
    binary.mkdir(parents=True)
    (binary / "Packages").write_text(_run(["apt-ftparchive", "packages", "pool"], cwd=repo))
    release = _run(
        [
            "apt-ftparchive",
            "-o", f"APT::FTPArchive::Release::Suite={suite}",
            "-o", f"APT::FTPArchive::Release::Codename={suite}",
            "-o", "APT::FTPArchive::Release::Components=main",
            "-o", f"APT::FTPArchive::Release::Architectures={ARCH}",
            "release", f"dists/{suite}",
        ],
        cwd=repo,
    )  # fmt: skip
    (repo / f"dists/{suite}/Release").write_text(release)
    _sign(repo / f"dists/{suite}/Release", gnupg, key)


def _signing_key(gnupg: Path) -> str:
    uid = "gpuforge test repository <repo@gpuforge.invalid>"
    _run(
        ["gpg", "--homedir", str(gnupg), "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "1d"]
    )
    listing = _run(["gpg", "--homedir", str(gnupg), "--batch", "--with-colons", "--list-secret-keys"])
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def _sign(release: Path, gnupg: Path, key: str) -> None:
    base = ["gpg", "--homedir", str(gnupg), "--batch", "--yes", "--local-user", key]
    _run([*base, "--clearsign", "--output", str(release.with_name("InRelease")), str(release)])
    _run([*base, "--armor", "--detach-sign", "--output", str(release.with_name("Release.gpg")), str(release)])


def _export_key(gnupg: Path, key: str) -> bytes:
    return subprocess.run(
        ["gpg", "--homedir", str(gnupg), "--batch", "--armor", "--export", key], check=True, capture_output=True
    ).stdout


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def serve_tree(root: Path, probe: str, what: str) -> tuple[subprocess.Popen[bytes], str]:
    """Serve *root* over HTTP on a free 127.0.0.1 port; return the server and its URL once *probe* answers."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(root), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/{probe}", timeout=2):
                return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_server(process)
                raise RuntimeError(f"{what} did not start on {url}") from None
            time.sleep(0.2)


def stop_server(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C", **(env or {})}
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout
