"""Debian root file systems for the playbook and machine tests, made with debootstrap and cached.

Debian 12 (bookworm, Slurm 22.05) is the default; Debian 13 (trixie, Slurm 24.11 and a newer systemd) is
the second release the Slurm roles are proven on (tests/slurm/test_slurm_trixie.py). Each tarball under
.cache/rootfs/ is keyed by a hash of everything that shapes it (suite, variant, components, packages,
mirror), so a second run reuses it and a changed package list rebuilds it. Downloaded .deb files (their
names carry their versions, so both releases share the directory) are kept in .cache/rootfs/apt-archives/
between runs for the same reason.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache" / "rootfs"
ARCHIVES_DIR = CACHE_DIR / "apt-archives"

SUITE = "bookworm"
VARIANT = "minbase"
MIRROR = os.environ.get("GPUFORGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# non-free carries nvidia-smi / libnvidia-ml1 / nvidia-persistenced; debootstrap writes these
# components into the root file system's sources.list.
COMPONENTS = ["main", "contrib", "non-free", "non-free-firmware"]
# What Ansible needs in the target (python3, python3-apt for the apt module) and what the roles
# expect of any Debian host (systemd for unit enablement, procps, kmod).
PACKAGES = ["python3", "python3-apt", "systemd", "procps", "kmod", "ca-certificates"]


@dataclass(frozen=True)
class Release:
    """A Debian release a root file system is debootstrapped from: *name* prefixes its cache files."""

    name: str
    suite: str


BOOKWORM = Release("debian12", SUITE)
TRIXIE = Release("debian13", "trixie")


def cache_key(release: Release = BOOKWORM) -> str:
    spec = {
        "suite": release.suite,
        "variant": VARIANT,
        "mirror": MIRROR,
        "components": COMPONENTS,
        "packages": PACKAGES,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def tarball_path(release: Release = BOOKWORM) -> Path:
    return CACHE_DIR / f"{release.name}-{VARIANT}-{cache_key(release)}.tar"


def build_tarball(release: Release = BOOKWORM) -> tuple[Path, bool]:
    """The cached tarball, built with debootstrap when missing. Returns (path, built_now)."""
    tarball = tarball_path(release)
    if tarball.is_file():
        return tarball, False
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    # Several test sessions may start at once on one host: one builds, the others wait and reuse.
    with open(CACHE_DIR / f"{cache_key(release)}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.is_file():
            return tarball, False
        _debootstrap(tarball, release)
    return tarball, True


def _debootstrap(tarball: Path, release: Release) -> None:
    staging = CACHE_DIR / f"staging-{cache_key(release)}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        subprocess.run(
            [
                "debootstrap",
                f"--variant={VARIANT}",
                f"--components={','.join(COMPONENTS)}",
                f"--include={','.join(PACKAGES)}",
                release.suite,
                str(staging),
                MIRROR,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        partial = tarball.with_suffix(".tar.partial")
        with tarfile.open(partial, "w") as tar:
            tar.add(staging, arcname=".")
        partial.rename(tarball)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def extract(tarball: Path, dest: Path) -> Path:
    """A fresh root file system at *dest*, with the cached .deb files put back in its apt cache."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="fully_trusted")  # our own debootstrap output, device nodes included
    if ARCHIVES_DIR.is_dir():
        target = dest / "var/cache/apt/archives"
        target.mkdir(parents=True, exist_ok=True)
        for deb in ARCHIVES_DIR.glob("*.deb"):
            shutil.copy2(deb, target / deb.name)
    return dest


def keep_downloads(rootfs: Path) -> None:
    """Save the .deb files apt downloaded into the root file system for the next run."""
    ARCHIVES_DIR.mkdir(parents=True, exist_ok=True)
    for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        if not (ARCHIVES_DIR / deb.name).exists():
            shutil.copy2(deb, ARCHIVES_DIR / deb.name)


def dpkg_status(rootfs: Path) -> dict[str, str]:
    """Installed packages of *rootfs* and their versions, read with dpkg-query inside it."""
    out = subprocess.run(
        ["chroot", str(rootfs), "dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Status}\n"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    installed: dict[str, str] = {}
    for line in out.splitlines():
        name, version, status = line.split(" ", 2)
        if status == "installed":
            installed[name] = version
    return installed


def enabled_units(rootfs: Path) -> set[str]:
    """Units enabled in *rootfs*: the symlinks under etc/systemd/system/*.wants/."""
    return {link.name for link in (rootfs / "etc/systemd/system").glob("*.wants/*") if link.is_symlink()}
