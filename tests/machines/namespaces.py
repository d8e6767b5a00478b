"""Namespace ids ordered as on a real host: every namespace made after a machine booted is newer than the
machine's own mount namespace.

Why: a process may bind-mount a mount namespace's file (/proc/PID/ns/mnt) only if that namespace is newer
than its own (the kernel's mnt_ns_loop() check against loops); otherwise mount(2) fails with EINVAL.
Slurm's job_container/tmpfs does exactly that for every job: slurmstepd forks a child that unshares a new
mount namespace, then binds the child's /proc/PID/ns/mnt to keep the job's namespace alive
("ns base mount failed: Invalid argument" when refused). On a real node slurmstepd lives in the
host's initial mount namespace, whose id is fixed and lower than any other, so the check always passes.
A booted test machine's services live in the mount namespace systemd-nspawn made at boot. Since Linux
6.18 namespace ids come from per-CPU batches (gen_cookie_next(), 4096 ids per CPU; kernel/nstree.c), so
they are unique but not ordered across CPUs: a job namespace made later on a CPU still drawing from an
older batch gets a *lower* id than the machine's, and the kernel refuses the bind. Whether a job fails
then depends on which CPUs the machine booted and the job ran on: jobs failed at random.

The fix gives the machines what a real host has: after a group boots, every CPU this process may run on
draws namespace ids (cheap UTS namespaces, in a child process) until its next id is above the newest
machine's mount namespace id. Ids never go back on a CPU, and each new batch is above all earlier ones,
so from then on every new namespace is newer than the machines'. On kernels without per-CPU ids (before
6.18, ids were one global sequence) there is nothing to do: NS_GET_ID does not exist there.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
import subprocess
import sys
from pathlib import Path

# ioctl(2) on a namespace file: its 64-bit id (_IOR(NSIO=0xb7, 13, __u64); Linux 6.18, include/uapi/linux/nsfs.h).
NS_GET_ID = 0x8008B70D
CLONE_NEWUTS = 0x04000000
# Ids a CPU draws before it takes a new batch (include/linux/cookie.h COOKIE_LOCAL_BATCH), with room.
MAX_DRAWS_PER_CPU = 2 * 4096


def namespace_id(path: str | Path) -> int | None:
    """The id of the namespace at *path* (/proc/PID/ns/mnt), or None where the kernel has no NS_GET_ID."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        value: int = struct.unpack("Q", fcntl.ioctl(fd, NS_GET_ID, bytes(8)))[0]
        return value
    except OSError:
        return None
    finally:
        os.close(fd)


def advance_past(pids: list[int]) -> None:
    """Make every namespace created from now on newer than the mount namespaces of *pids* (the machines'
    init processes). Raises if a CPU cannot be brought past them."""
    ids = [i for i in (namespace_id(f"/proc/{pid}/ns/mnt") for pid in pids) if i is not None]
    if not ids:
        return
    # A child process: unsharing changes the caller's own namespaces, and pinning its CPU affinity.
    subprocess.run([sys.executable, __file__, str(max(ids))], check=True, capture_output=True, timeout=120)


def _draw_past(newest: int) -> None:
    unshare = ctypes.CDLL(None, use_errno=True).unshare
    for cpu in sorted(os.sched_getaffinity(0)):
        os.sched_setaffinity(0, {cpu})
        for _ in range(MAX_DRAWS_PER_CPU):
            if unshare(CLONE_NEWUTS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
            drawn = namespace_id("/proc/thread-self/ns/uts")
            if drawn is None or drawn > newest:
                break
        else:
            raise RuntimeError(f"CPU {cpu}: namespace ids still not past {newest} after {MAX_DRAWS_PER_CPU}")


if __name__ == "__main__":
    _draw_past(int(sys.argv[1]))
