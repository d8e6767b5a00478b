"""site.host_os dgx_os through the plan, the inventory and the roles: on DGX OS the driver, Fabric Manager, DCGM and
NCCL came with the OS from NVIDIA's DGX repositories, so nvidia_driver, nvidia_fabricmanager, nccl and dcgm add no
repository and install or hold nothing; they check what the host has against the plan's pins and refuse a host
that differs, each with the fix.

The roles run as site.yml orders them, in Ansible's check mode against this host (local connection: nothing here
would change), with the inventory variables the plan gives the onprem-lab stack's DGX H100 pool on DGX OS. What
each host "has" is a stand-in tree (nvidia_driver_host_root): a dpkg status file in dpkg's format, read by the real
dpkg-query, and the loaded module's /sys/module/nvidia/version. It is written here from the pins, not copied from
a DGX: no DGX OS dpkg database is published to copy. One run, one stand-in host per case."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.nodes.bake import run_playbook
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import plan_stack
from tests.onprem.test_host_os import lab_with_host_os

pytestmark = pytest.mark.slow  # Ansible runs the roles

DRIVER_CHECK = "Check that DGX OS runs the driver"
ROLES = ["nvidia_driver", "nvidia_fabricmanager", "nccl", "dcgm"]  # site.yml's order
# Installs, repositories and holds: on DGX OS none of them may run.
CHANGING_TASKS = (
    "Install what the repository module needs",
    "Add NVIDIA's CUDA repository",
    "Install the NVIDIA driver",
    "Hold the driver packages",
    "Install Fabric Manager",
    "Hold Fabric Manager",
    "Install NCCL",
    "Hold NCCL",
    "Install DCGM",
)


@pytest.fixture(scope="module")
def dgx_pool_vars(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The train pool's inventory variables (DGX H100 hosts) with site.host_os default dgx_os."""
    path = tmp_path_factory.mktemp("stack") / "Pulumi.onprem-lab-dgx-os.yaml"
    path.write_text(yaml.safe_dump(lab_with_host_os({"default": "dgx_os"}), sort_keys=False))
    group: dict[str, Any] = build_inventory("onprem-lab-dgx-os", outputs=plan_stack(path).outputs)["all"]["children"][
        "ng_train"
    ]["vars"]
    return group


def _dpkg_status(packages: dict[str, str]) -> str:
    return "".join(
        f"Package: {name}\nStatus: install ok installed\nPriority: optional\nSection: libs\nInstalled-Size: 1\n"
        f"Maintainer: NVIDIA <cudatools@nvidia.com>\nArchitecture: amd64\nVersion: {version}\n"
        f"Description: {name}\n\n"
        for name, version in packages.items()
    )


def _host_tree(root: Path, driver: str | None, packages: dict[str, str]) -> Path:
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(_dpkg_status(packages))
    if driver is not None:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(driver + "\n")
    return root


def test_the_plan_marks_dgx_os_pools_and_gives_them_no_repository(dgx_pool_vars: dict[str, Any]) -> None:
    assert dgx_pool_vars["nvidia_driver_host_os"] == "dgx_os"
    assert "nvidia_driver_cuda_repo_base_url" not in dgx_pool_vars
    assert dgx_pool_vars["nvidia_fabricmanager_enabled"] is True  # DGX H100: NVSwitch


def test_on_dgx_os_the_roles_install_nothing_and_refuse_what_differs_from_the_pins(
    tmp_path: Path, dgx_pool_vars: dict[str, Any]
) -> None:
    branch = str(dgx_pool_vars["nvidia_driver_branch"])
    nccl = f"{dgx_pool_vars['nccl_version']}-1+cuda{dgx_pool_vars['nccl_cuda_version']}"
    driver = f"{branch}.65.06"
    good = {
        f"nvidia-fabricmanager-{branch}": f"{driver}-1",
        "datacenter-gpu-manager-4-cuda12": "1:4.2.3-1",
        "datacenter-gpu-manager-4-dev": "1:4.2.3-1",
        "libnccl2": nccl,
        "libnccl-dev": nccl,
    }
    other_branch = str(int(branch) - 10)
    trees = {
        "matches": (driver, good),
        "driver-branch": (f"{other_branch}.172.08", good),
        "no-driver": (None, good),
        "fabricmanager": (driver, {**good, f"nvidia-fabricmanager-{branch}": f"{branch}.82.07-1"}),
        "nccl": (driver, {**good, "libnccl2": "2.21.5-1+cuda12.4"}),
        "dcgm": (driver, {k: v for k, v in good.items() if not k.startswith("datacenter-gpu-manager")}),
    }
    hosts = {
        name: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "nvidia_driver_host_root": str(_host_tree(tmp_path / name, *tree)),
        }
        for name, tree in trees.items()
    }
    playbook = tmp_path / "dgx-os.yml"
    playbook.write_text(yaml.safe_dump([{"name": "DGX OS", "hosts": "all", "roles": ROLES}]))
    ran: list[tuple[str, str]] = []

    def record(event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_item_on_ok"):
            ran.append((str(data.get("host")), str(data.get("task"))))

    inventory = {"all": {"hosts": hosts, "vars": copy.deepcopy(dgx_pool_vars)}}
    result = run_playbook(playbook, inventory, check=True, on_event=record)

    failures = {f.host: f for f in result.failures}
    assert sorted(failures) == sorted(set(trees) - {"matches"}), [(f.host, f.task, f.message) for f in result.failures]
    assert result.hosts["matches"].changed == 0 and not result.hosts["matches"].failed
    assert any(task.startswith(DRIVER_CHECK) for host, task in ran if host == "matches")
    changing = [(host, task) for host, task in ran if task.startswith(CHANGING_TASKS)]
    assert changing == [], changing
    assert sum(h.changed for h in result.hosts.values()) == 0

    expected = {
        "driver-branch": (DRIVER_CHECK, [f"runs NVIDIA driver {other_branch}.172.08", f"not branch {branch}",
                                         "software.nvidiaDriverBranch"]),
        "no-driver": (DRIVER_CHECK, ["No NVIDIA driver is loaded", "/sys/module/nvidia/version"]),
        "fabricmanager": ("Check that DGX OS's Fabric Manager equals the running driver",
                          [f"{branch}.82.07-1", f"running driver is {driver}", "does not start"]),
        "nccl": ("Check DGX OS's NCCL", ["libnccl2=2.21.5-1+cuda12.4", f"libnccl2={nccl}", "software.ncclVersion"]),
        "dcgm": ("Check that DGX OS brought DCGM", ["datacenter-gpu-manager-4-cuda12, datacenter-gpu-manager-4-dev"]),
    }
    for host, (task, words) in expected.items():
        failure = failures[host]
        assert failure.task.startswith(task), (host, failure.task, failure.message)
        assert all(word in failure.message for word in words), (host, failure.message)
        assert "DGX" in failure.message and "gpuforge" in failure.message, failure.message

