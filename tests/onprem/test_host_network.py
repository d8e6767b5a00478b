"""The hybrid stack's hosts as a DGX H100 is built (User Guide, Tables 5 and 6, in the catalog): compute HCAs in
rail order, IPoIB addresses on the storage ports rendered, LNet on those ports with the NIDs they make, and the
site's file systems on site pools only (a cloud burst node has no IPoIB port for o2ib)."""

from __future__ import annotations

from gpuforge.catalog import load_catalog
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.model import Plan
from gpuforge.render.host_network import render_ipoib

COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


def test_the_catalog_holds_every_port_of_a_dgx_h100_with_its_source() -> None:
    server = load_catalog().server("dgx-h100")
    assert list(server.compute_hcas) == COMPUTE
    assert [(p.label, p.device, p.interface) for p in server.ports("storage")] == [
        ("Slot1 P1", "mlx5_7", "ibp170s0f0"),
        ("Slot2 P1", "mlx5_1", "ibp41s0f0"),
    ]
    assert [p.device for p in server.ports("management")] == ["mlx5_8", "mlx5_2"]
    assert [p.interface for p in server.ports("compute")][:2] == ["ibp24s0", "ibp64s0"]
    assert server.network_ports_source and "Table 5" in server.network_ports_source


def test_hybrid_hosts_use_the_compute_ports_and_address_the_storage_ports(hybrid_slurm: Plan) -> None:
    inventory = build_inventory("hybrid", outputs=hybrid_slurm.outputs)["all"]["children"]
    host = inventory["ng_train"]["hosts"]["dgx-01"]
    assert host["nccl_tuning_ib_hcas"] == COMPUTE
    assert host["rdma_ipoib_addresses"] == {"ibp170s0f0": "10.72.16.11/22", "ibp41s0f0": "10.72.17.11/22"}
    assert host["gpuforge_lnet_nids"] == {"o2ib": ["10.72.16.11@o2ib", "10.72.17.11@o2ib"]}
    assert inventory["ng_train"]["vars"]["lustre_client_o2ib_networks"] == {"o2ib": ["ibp170s0f0", "ibp41s0f0"]}


def test_site_mounts_reach_site_pools_only(hybrid_slurm: Plan) -> None:
    """The cloud group gets no site_mounts (no o2ib Lustre, no LNet network): its /home comes with the burst."""
    children = build_inventory("hybrid", outputs=hybrid_slurm.outputs)["all"]["children"]
    site, cloud = children["ng_train"]["vars"], children["ng_cloud"]["vars"]
    assert {m["name"] for m in site["site_mounts_mounts"]} == {"scratch", "home"}
    assert "site_mounts_mounts" not in cloud and "lustre_client_o2ib_networks" not in cloud


def test_ipoib_units_as_the_host_receives_them() -> None:
    files = render_ipoib({"ibp41s0f0": "10.72.17.11/22", "ibp170s0f0": "10.72.16.11/22"})
    assert list(files) == ["05-gpuforge-ipoib-ibp170s0f0.network", "05-gpuforge-ipoib-ibp41s0f0.network"]
    unit = files["05-gpuforge-ipoib-ibp170s0f0.network"]
    assert "[Match]\nName=ibp170s0f0\n" in unit and "[Network]\nAddress=10.72.16.11/22\n" in unit
