"""Machine images as cached overlay layers: Debian 12 or 13 (debootstrap), then sshd, then what a test adds.

An image is a stack of directories under ``.cache/machines/layers/``. The bottom one is the debootstrap
root file system of tests/playbooks/rootfs.py for the bottom image's release (Image.base), unpacked once.
Each image above it holds only what its own step changed (an overlay upper directory: new files, and
whiteouts for deleted ones), and is named by a hash of everything that shapes it: its parent's key, its
Debian packages and its setup commands.
So a Slurm or Prometheus image installs its packages once, every later test session reuses the layer,
and a changed package list makes a new layer beside the old one.

A machine boots from an overlay of the image's layers (read-only) with an upper directory of its own.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from tests.playbooks import rootfs

LAYERS_DIR = rootfs.REPO_ROOT / ".cache" / "machines" / "layers"
# What every booted machine needs to be reached and administered like a real node: sshd, sudo for the
# admin user, D-Bus (systemctl and hostnamectl for a non-root user), iproute2 (addresses, sockets).
SSH_PACKAGES = ("openssh-server", "sudo", "dbus", "iproute2")
ADMIN_USER = "admin"


@dataclass(frozen=True)
class Image:
    """A layer on top of *parent*: Debian *packages* installed, then *setup* shell commands run (as root,
    inside the image, no services started). ``Image("slurm", ("slurmd",), parent=SSH_IMAGE)``."""

    name: str
    packages: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    parent: Image | None = field(default=None, repr=False)
    # The Debian release of the bottom image (one without a parent); derived images inherit it.
    base: rootfs.Release = rootfs.BOOKWORM

    @property
    def release(self) -> rootfs.Release:
        return self.parent.release if self.parent else self.base

    @cached_property
    def key(self) -> str:
        spec = {
            "parent": self.parent.key if self.parent else rootfs.cache_key(self.base),
            "packages": sorted(self.packages),
            "setup": list(self.setup),
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def path(self) -> Path:
        return LAYERS_DIR / f"{self.name}-{self.key}"

    def layers(self) -> list[Path]:
        """This image's directories, top first (overlayfs' lowerdir order), the base file system last."""
        below = self.parent.layers() if self.parent else [base_layer(self.base)]
        return [self.path, *below]

    def derive(self, name: str, packages: tuple[str, ...] = (), setup: tuple[str, ...] = ()) -> Image:
        """An image with more packages and setup on top of this one."""
        return Image(name=name, packages=packages, setup=setup, parent=self)


def base_layer(release: rootfs.Release = rootfs.BOOKWORM) -> Path:
    """The debootstrap root file system (built and cached by tests/playbooks/rootfs.py), unpacked once."""
    tarball, _ = rootfs.build_tarball(release)
    path = LAYERS_DIR / f"base-{rootfs.cache_key(release)}"
    with _building(path) as build:
        if build is not None:
            with tarfile.open(tarball) as tar:
                tar.extractall(build, filter="fully_trusted")  # our own debootstrap output, device nodes included
    return path


@contextmanager
def _building(path: Path) -> Iterator[Path | None]:
    """Yield a staging directory to fill when *path* does not exist yet (None when it does); rename it into
    place on success. A lock file serialises concurrent test sessions building the same layer."""
    LAYERS_DIR.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_dir():
            yield None
            return
        staging = path.with_name(path.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            yield staging
            staging.rename(path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def build(image: Image) -> Image:
    """Make sure every layer of *image* exists (building the missing ones, parents first); return it."""
    if image.parent is not None:
        build(image.parent)
    lower = image.parent.layers() if image.parent else [base_layer(image.base)]
    with _building(image.path) as upper:
        if upper is not None:
            _build_layer(upper, lower, image)
    return image


def _build_layer(upper: Path, lower: list[Path], image: Image) -> None:
    """Install *image*'s packages and run its setup in an overlay of *lower*, capturing the changes in *upper*."""
    scratch = upper.with_name(upper.name + ".scratch")
    work, merged = scratch / "work", scratch / "merged"
    shutil.rmtree(scratch, ignore_errors=True)
    work.mkdir(parents=True)
    merged.mkdir()
    rootfs.ARCHIVES_DIR.mkdir(parents=True, exist_ok=True)
    mount_overlay(merged, lower, upper, work)
    try:
        script = ["set -eu", "export DEBIAN_FRONTEND=noninteractive"]
        if image.packages:
            script += [
                "apt-get update -qq",
                f"apt-get install -y -qq --no-install-recommends {' '.join(image.packages)}",
                "apt-get clean",
            ]
        script += list(image.setup)
        # systemd-nspawn without --boot: a container with /proc, /dev and /dev/pts, but no init, so package
        # scripts enable services without starting them. The shared .deb cache is bound in so downloads
        # are kept for the next build.
        subprocess.run(
            [
                "systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "-D", str(merged),
                f"--bind={rootfs.ARCHIVES_DIR}:/var/cache/apt/archives",
                "/bin/sh", "-c", "\n".join(script),
            ],
            check=True,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"building image {image.name} failed:\n{exc.stdout}\n{exc.stderr}") from exc
    finally:
        subprocess.run(["umount", str(merged)], check=False, capture_output=True)
        if not os.path.ismount(merged):  # never delete through a mounted overlay
            shutil.rmtree(scratch, ignore_errors=True)


def mount_overlay(merged: Path, lower: list[Path], upper: Path, work: Path) -> None:
    options = f"lowerdir={':'.join(str(p) for p in lower)},upperdir={upper},workdir={work}"
    subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", options, str(merged)],
        check=True,
        capture_output=True,
        text=True,
    )


# Debian 12 with sshd and an admin user allowed to sudo without a password (as a cloud image's default
# user is). Host keys are removed here: each machine gets its own when it boots.
SSH_IMAGE = Image(
    name="debian12-ssh",
    packages=SSH_PACKAGES,
    setup=(
        f"useradd --create-home --shell /bin/bash --groups sudo {ADMIN_USER}",
        f"echo '{ADMIN_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-{ADMIN_USER}",
        f"chmod 0440 /etc/sudoers.d/90-{ADMIN_USER}",
        "rm -f /etc/ssh/ssh_host_*",
        # The machine id is made at first boot, so machines booted from one image differ.
        "rm -f /etc/machine-id /var/lib/dbus/machine-id",
        ": > /etc/machine-id",
        # No /run/nologin at boot: systemd-tmpfiles writes it and systemd-user-sessions removes it, and on
        # this loaded host that unit once failed to start, which left the admin user locked out of SSH
        # (CI: "no SSH after 180s", Permit User Sessions FAILED). Test machines gate nothing on it.
        "ln -sf /dev/null /etc/tmpfiles.d/systemd-nologin.conf",
    ),
)

# The same on Debian 13 (trixie): its Slurm 24.11 and systemd 257 (tests/slurm/test_slurm_trixie.py).
TRIXIE_SSH_IMAGE = replace(SSH_IMAGE, name="debian13-ssh", base=rootfs.TRIXIE)
