"""The kubelet_config role run for real into a fresh Debian 12 root file system through the chroot
connection, with the drop-in the site-Kubernetes plan's inventory carries (the onprem-lab site as a
Kubernetes cluster, tests/fixtures/stacks/Pulumi.onprem-k8s.yaml): the file is the host's
KubeletConfiguration with its registration taints, a second run changes nothing, a host without the
variable is left alone, and a drop-in that is not a KubeletConfiguration is refused."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.nodes.bake import rootfs_inventory, run_playbook
from gpuforge.nodes.inventory import build_inventory
from tests.support import ONPREM_K8S

from . import rootfs

pytestmark = pytest.mark.slow

PLAYBOOK = Path(__file__).with_name("kubelet_config.yml")
DROPIN = "etc/kubernetes/kubelet.conf.d/50-gpuforge.conf"
# Connection variables only: the inventory's ansible_host (the BMC network address) would replace
# the chroot path rootfs_inventory sets.
CONNECTION_KEYS = {"ansible_host"}


def _lab_host() -> tuple[str, dict[str, Any]]:
    """The first site host that carries a drop-in, with its host variables."""

    def hosts(node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        yield from (node.get("hosts") or {}).items()
        for child in (node.get("children") or {}).values():
            yield from hosts(child)

    inventory = build_inventory(ONPREM_K8S, source="plan")
    for name, host_vars in hosts(inventory["all"]):
        if host_vars and "kubelet_config_dropin" in host_vars:
            return name, {k: v for k, v in host_vars.items() if k not in CONNECTION_KEYS}
    raise AssertionError("no onprem-k8s host carries kubelet_config_dropin")


@pytest.fixture
def fresh_root(rootfs_tarball: Path, tmp_path: Path) -> Iterator[Path]:
    root = rootfs.extract(rootfs_tarball, tmp_path / "rootfs")
    yield root
    shutil.rmtree(root, ignore_errors=True)


# A root file system runs no kubelet to restart (test_node_services_booted.py restarts a running one).
NO_KUBELET = {"kubelet_config_restart": False}


def test_lab_dropin_installed_with_its_taints_and_idempotent(fresh_root: Path) -> None:
    name, host_vars = _lab_host()
    inventory = rootfs_inventory(fresh_root, host_vars | NO_KUBELET)
    first = run_playbook(PLAYBOOK, inventory)
    assert first.ok, [f"{f.task}: {f.message}" for f in first.failures]
    assert first.hosts["rootfs"].changed == 2  # the directory and the file

    path = fresh_root / DROPIN
    assert path.read_text() == host_vars["kubelet_config_dropin"]
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == "kubelet.config.k8s.io/v1beta1" and doc["kind"] == "KubeletConfiguration"
    taints = {(t["key"], t["effect"]) for t in doc["registerWithTaints"]}
    assert ("nvidia.com/gpu", "NoSchedule") in taints, (name, doc)
    # CIS Kubernetes benchmark 4.1.11: root-owned, directory 0755, files 0644.
    assert path.stat().st_mode & 0o777 == 0o644 and path.stat().st_uid == 0
    assert path.parent.stat().st_mode & 0o777 == 0o755

    second = run_playbook(PLAYBOOK, inventory)
    assert second.ok
    assert second.hosts["rootfs"].changed == 0, second.stdout[-4000:]


def test_host_without_dropin_is_left_alone(fresh_root: Path) -> None:
    result = run_playbook(PLAYBOOK, rootfs_inventory(fresh_root, {}))
    assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    assert result.hosts["rootfs"].changed == 0
    assert not (fresh_root / "etc/kubernetes").exists()


def test_dropin_that_is_not_a_kubelet_configuration_is_refused(fresh_root: Path) -> None:
    bad = yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "registerWithTaints": []})
    result = run_playbook(PLAYBOOK, rootfs_inventory(fresh_root, {"kubelet_config_dropin": bad}))
    assert not result.ok and result.failed_hosts == ["rootfs"]
    message = " ".join(f.message for f in result.failures)
    assert "not a KubeletConfiguration" in message and "got apiVersion v1, kind Node" in message
    assert not (fresh_root / DROPIN).exists()
