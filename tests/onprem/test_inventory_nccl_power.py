"""Inventory and NCCL values for InfiniBand hosts (through gpuforge/render/nccl.py, the one derivation),
and the power pack reading racks, feeds and the site off a real plan."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, RuleContext, Stack
from gpuforge.render.nccl import NcclInputs, nccl_env

# DGX H100 compute ports in GPU order (catalog servers.dgx-h100.compute_hcas, from the DGX H100/H200
# user guide's network ports table): the onprem-lab hosts list none, so they get these.
HCAS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


def test_inventory_hosts_carry_address_bmc_rack_and_rails(lab: Plan) -> None:
    inventory = build_inventory("onprem-lab", outputs=lab.outputs)
    train = inventory["all"]["children"]["ng_train"]
    assert "ng_train" in inventory["all"]["children"]["gpu_nodes"]["children"]
    assert set(train["hosts"]) == {f"dgx-{x}0{i}" for x in "ab" for i in range(1, 5)}
    b02 = train["hosts"]["dgx-b02"]
    assert b02["ansible_host"] == "10.64.1.16" and b02["gpuforge_bmc_address"] == "10.64.0.16"
    assert b02["gpuforge_rack"] == "r02" and b02["gpuforge_scalable_unit"] == "su1"
    assert b02["gpuforge_ib_hcas_by_rail"] == {str(i): hca for i, hca in enumerate(HCAS)}
    assert b02["nccl_tuning_ib_hcas"] == HCAS
    group = train["vars"]
    assert group["rdma_fabric"] == "infiniband" and group["nccl_tuning_rail_optimized"] is True
    assert group["nccl_tuning_sharp"] is False and group["gpuforge_gpus_per_node"] == 8  # SHARP refused (spec)
    assert group["nccl_tuning_ib_hcas"] == HCAS and group["gpu_healthcheck_ib_hcas"] == HCAS


def test_dgx_hosts_get_fabric_manager_and_nvlinks_from_the_catalog(lab: Plan) -> None:
    """A DGX H100 is an NVSwitch system: without Fabric Manager CUDA fails to initialise (error 802),
    and the NVLink check expects the H100's 18 links per GPU."""
    group = build_inventory("onprem-lab", outputs=lab.outputs)["all"]["children"]["ng_train"]["vars"]
    assert group["gpuforge_server_model"] == "dgx-h100"
    assert group["nvidia_fabricmanager_enabled"] is True
    assert group["gpu_healthcheck_nvlinks_per_gpu"] == 18


@pytest.mark.parametrize(
    ("model", "nvswitch", "nvlinks"), [("dgx-h200", True, 18), ("hgx-h100-8gpu", True, 18), ("dgx-a100", True, 12)]
)
def test_every_nvswitch_server_model_gets_fabric_manager(model: str, nvswitch: bool, nvlinks: int) -> None:
    outputs = {
        "cluster": {"name": "lab"},
        "nodeGroups": {"g": {"role": "training", "fabric": "none", "gpusPerNode": 8, "serverModel": model}},
    }
    group = build_inventory("lab", outputs=outputs)["all"]["children"]["ng_g"]["vars"]
    assert group["nvidia_fabricmanager_enabled"] is nvswitch
    assert group["gpu_healthcheck_nvlinks_per_gpu"] == nvlinks


def _check_with_hcas(lab: Plan, hcas: dict[str, int]) -> tuple[Any, list[Any]]:
    from gpuforge.spec.site_checks import check_site

    spec = lab.resolved.spec
    assert spec.site is not None
    hosts = dict(spec.site.hosts)
    hosts["dgx-a01"] = hosts["dgx-a01"].model_copy(update={"hcas": hcas})
    site_spec = spec.site.model_copy(update={"hosts": hosts})
    return check_site(spec.model_copy(update={"site": site_spec}), lab.resolved.catalog)


def test_explicit_hcas_win_over_the_catalog(lab: Plan) -> None:
    """A host may cable the model's compute ports to rails in another order (its own list wins)."""
    reversed_rails = {device: 7 - rail for rail, device in enumerate(HCAS)}
    resolved, issues = _check_with_hcas(lab, reversed_rails)
    assert not issues and resolved is not None
    assert resolved.hosts["dgx-a01"].spec.hcas_by_rail() == list(reversed(HCAS))
    assert resolved.hosts["dgx-a02"].spec.hcas_by_rail() == HCAS


def test_hcas_outside_the_models_compute_ports_are_refused(lab: Plan) -> None:
    """mlx5_0..mlx5_7 on a DGX H100 (the hybrid stack's old list): mlx5_1/mlx5_7 are its storage ports and
    mlx5_2 an in-band management port (User Guide, Table 5); each is refused with the port it is and the fix."""
    _, issues = _check_with_hcas(lab, {f"mlx5_{i}": i for i in range(8)})
    by_path = {i.path: i for i in issues}
    assert set(by_path) == {f"cluster.site.hosts[dgx-a01].hcas[mlx5_{n}]" for n in (1, 2, 7)}
    storage = by_path["cluster.site.hosts[dgx-a01].hcas[mlx5_7]"]
    assert "storage port Slot1 P1 (ibp170s0f0)" in storage.message and "mlx5_9 (rail 5)" in storage.message
    assert "Table 5" in storage.message and "remove hcas" in storage.fix
    assert "management port Slot2 P2" in by_path["cluster.site.hosts[dgx-a01].hcas[mlx5_2]"].message


def test_nccl_values_per_rail_on_a_rail_optimized_fabric(lab: Plan) -> None:
    train = build_inventory("onprem-lab", outputs=lab.outputs)["all"]["children"]["ng_train"]
    host, group = train["hosts"]["dgx-a03"], train["vars"]
    env = nccl_env(
        NcclInputs(
            fabric=group["nccl_tuning_fabric"],
            nccl_version=group["nccl_tuning_nccl_version"],
            ib_hcas=tuple(host["nccl_tuning_ib_hcas"]),  # the host var wins over the group's, as in Ansible
            rail_optimized=group["nccl_tuning_rail_optimized"],
            sharp=group["nccl_tuning_sharp"],
        )
    )
    assert env["NCCL_IB_HCA"] == "=" + ",".join(HCAS)  # exactly these, in rail order
    assert env["NCCL_CROSS_NIC"] == "0"
    assert "NCCL_COLLNET_ENABLE" not in env  # no SHARP plugin on the nodes: sharp: true is refused


def test_hca_order_follows_rails_not_names(lab: Plan) -> None:
    site = lab.resolved.site
    assert site is not None
    host = site.hosts["dgx-a01"].spec.model_copy(update={"hcas": {"mlx5_1": 0, "mlx5_0": 1}})
    assert host.hcas_by_rail() == ["mlx5_1", "mlx5_0"]


def _violations(plan: Plan, rule: str, **changes: dict[str, float]) -> list[str]:
    resources = to_rule_resources(plan.resources)
    patched = [replace(r, inputs={**r.inputs, **changes[r.name]}) if r.name in changes else r for r in resources]
    ctx = RuleContext("prod", {k: p.default for k, p in REGISTRY[rule].params.items()})
    return [v.urn.split("::")[-1] for v in REGISTRY[rule].run(patched, ctx)]


def test_power_pack_reads_racks_feeds_and_site(lab: Plan) -> None:
    assert _violations(lab, "power-rack-feed-redundancy") == []
    assert _violations(lab, "power-cluster-budget") == []
    # The same rack on two feeds: each DGX H100 (4+2) splits 3+3, so losing either feed leaves three PSUs.
    r01 = next(r for r in lab.resources if r.name == "forge-lab-lab-east-r01")
    two_feeds = {
        "feeds": [f for f in r01.inputs["feeds"] if f["name"] != "c"],
        "devices": [{**d, "psusByFeed": {"a": 3, "b": 3}} for d in r01.inputs["devices"]],
    }
    over = _violations(lab, "power-rack-feed-redundancy", **{"forge-lab-lab-east-r01": two_feeds})
    assert over == ["forge-lab-lab-east-r01", "forge-lab-lab-east-r01"]  # losing a, losing b
    # The site at PUE 1.9: 1.9 x 112.5 = 214 kW against 160.
    tight = _violations(lab, "power-cluster-budget", **{"forge-lab-lab-east": {"pue": 1.9}})
    assert tight == ["forge-lab-lab-east"]


def test_site_report_in_plan_json(lab: Plan) -> None:
    power = lab.to_json()["power"]
    assert power["sites"]["lab-east"]["budget"]["limitKw"] == 160
    assert power["racks"]["r02"]["without b"]["limitKw"] == pytest.approx(46.0)
    assert power["racks"]["r02"]["without b"]["loadKw"] == pytest.approx(20.4)
    assert Stack(to_rule_resources(lab.resources)).cluster() is not None


def test_site_lustre_on_o2ib_brings_its_ipoib_interfaces_to_the_hosts(lab: Plan) -> None:
    """The lab's Lustre (MGS NIDs on o2ib, no lnet_interfaces) reaches the hosts as the mount and as the o2ib
    network gpuforge-lnet.service adds before it, on the DGX H100's storage ports from the catalog (User Guide,
    Table 5: Slot1 P1 ibp170s0f0, Slot2 P1 ibp41s0f0); the NFS mount needs no LNet."""
    group = build_inventory("onprem-lab", outputs=lab.outputs)["all"]["children"]["ng_train"]["vars"]
    mounts = {m["name"]: m for m in group["site_mounts_mounts"]}
    assert mounts["scratch"]["lnet_interfaces"] == [] and mounts["home"]["kind"] == "nfs"
    assert group["lustre_client_o2ib_networks"] == {"o2ib": ["ibp170s0f0", "ibp41s0f0"]}