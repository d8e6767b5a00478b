"""Booted Debian 12 machines for tests: systemd-nspawn --boot, real systemd and sshd, loopback addresses.

``images`` makes the cached, layered root file systems; ``boot`` boots and stops machines; ``plugin`` holds
the pytest fixtures (``machine_pool``, ``two_machines``). docs/testing.md explains what is real.
"""

from .boot import Machine, MachineError, MachinePool, Machines
from .images import ADMIN_USER, SSH_IMAGE, Image

__all__ = ["ADMIN_USER", "SSH_IMAGE", "Image", "Machine", "MachineError", "MachinePool", "Machines"]
