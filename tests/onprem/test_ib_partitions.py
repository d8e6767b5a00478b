"""InfiniBand partitions per port GUID (site.fabric.partitioning): OpenSM's partitions.conf and the subnet
managers' priorities, UFM's PKey calls, NCCL_IB_PKEY on the members through the plan and inventory, and bad
input refused with every problem at once.

The opensm.conf settings are held against the option names the Debian opensm 3.3.23 package itself writes
(`opensm -c FILE`, its configuration template, kept verbatim in tests/fixtures/opensm/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import plan_stack
from gpuforge.render.ib_partitions import render_fabric
from gpuforge.render.nccl import NcclInputs, nccl_env
from gpuforge.spec import SpecError, resolve
from tests.onprem.test_site_model import ROOT, lab_spec

COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
OPENSM_TEMPLATE = ROOT / "tests" / "fixtures" / "opensm" / "opensm-3.3.23-create-config.conf"


def guid(host: int, rail: int) -> str:
    return f"0x946dae0300{host:02x}{rail:04x}"


def partitioned(manager: str = "opensm") -> dict[str, Any]:
    """The lab site with every host's compute port GUIDs, vision on dgx-a01/a02, llm on dgx-b01."""
    spec = lab_spec()
    for index, (_, host) in enumerate(sorted(spec["site"]["hosts"].items())):
        host["port_guids"] = {device: guid(index, rail) for rail, device in enumerate(COMPUTE)}
    members = {"vision": ["dgx-a01", "dgx-a02"], "llm": ["dgx-b01"]}
    partitioning: dict[str, Any] = {"manager": manager, "members": members}
    if manager == "opensm":
        partitioning["sm_priority"] = {"ufm-01": 15, "ufm-02": 14}
    spec["site"]["fabric"]["partitioning"] = partitioning
    return spec


def problems(spec: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    found: dict[str, str] = {}
    for issue in caught.value.issues:  # several problems at one path are joined
        found[issue.path] = found.get(issue.path, "") + f"{issue.message}; fix: {issue.fix}\n"
    return found


def statements(text: str) -> dict[str, list[str]]:
    """partitions.conf as OpenSM reads it: comments dropped, statements split at ';', definition -> members."""
    body = " ".join(line.split("#", 1)[0] for line in text.splitlines())
    parsed: dict[str, list[str]] = {}
    for statement in filter(None, (s.strip() for s in body.split(";"))):
        definition, members = statement.split(":", 1)
        parsed.setdefault(" ".join(definition.split()), []).extend(m.strip() for m in members.split(","))
    return parsed


def test_opensm_partitions_bind_each_tenant_key_to_its_hosts_ports_at_index_0() -> None:
    files = render_fabric(resolve(partitioned()))
    assert set(files) == {"partitions.conf", "opensm-ufm-01.conf", "opensm-ufm-02.conf"}
    parsed = statements(files["partitions.conf"])
    assert parsed["vision=0x0010, indx0"] == [f"{guid(h, r)}=full" for h in (0, 1) for r in range(8)]
    assert parsed["llm=0x0020, indx0"] == [f"{guid(4, r)}=full" for r in range(8)]
    # Tenants' ports are limited members of Default; hosts in no tenant (a03, a04, b02-b04) full members.
    default = parsed["Default=0x7fff, ipoib"] + parsed["Default=0x7fff"]
    assert default[:3] == ["ALL=limited", "ALL_SWITCHES=full", "SELF=full"]
    assert default[3:] == [f"{guid(h, r)}=full" for h in (2, 3, 5, 6, 7) for r in range(8)]
    assert all(len(line) < 4096 for line in files["partitions.conf"].splitlines())  # OpenSM's line limit


def test_subnet_managers_get_their_priorities_as_opensm_names_them() -> None:
    files = render_fabric(resolve(partitioned()))
    options = {line.split()[0] for line in OPENSM_TEMPLATE.read_text().splitlines() if line and line[0] != "#"}
    for host, priority, role in (("ufm-01", "15", "master"), ("ufm-02", "14", "standby")):
        text = files[f"opensm-{host}.conf"]
        settings = dict(line.split(None, 1) for line in text.splitlines() if line and not line.startswith("#"))
        assert settings == {"sm_priority": priority, "partition_config_file": "/etc/opensm/partitions.conf"}
        assert set(settings) <= options and f"({role})" in text


def test_ufm_gets_one_pkey_call_per_tenant_at_index_0() -> None:
    files = render_fabric(resolve(partitioned("ufm")))
    calls = json.loads(files["ufm-pkeys.json"])
    assert [(c["method"], c["path"]) for c in calls] == [("POST", "/ufmRest/resources/pkeys")] * 2
    vision = calls[0]["body"]
    assert vision["pkey"] == "0x0010" and vision["membership"] == "full" and vision["index0"] is True
    assert vision["guids"] == [guid(h, r) for h in (0, 1) for r in range(8)]
    assert calls[1]["body"]["pkey"] == "0x0020"


def test_members_get_nccl_ib_pkey_through_plan_and_inventory(tmp_path: Path) -> None:
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    stack["config"]["gpuforge:cluster"] = partitioned()
    path = tmp_path / "Pulumi.onprem-lab-pkeys.yaml"
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    inventory = build_inventory("onprem-lab-pkeys", outputs=plan_stack(path).outputs)["all"]["children"]
    hosts = {name: h for group in inventory.values() for name, h in (group.get("hosts") or {}).items()}
    assert hosts["dgx-a01"]["nccl_tuning_ib_pkey_index"] == 0 and hosts["dgx-b01"]["nccl_tuning_ib_pkey_index"] == 0
    assert "nccl_tuning_ib_pkey_index" not in hosts["dgx-a03"]  # in no tenant: NCCL's default
    env = nccl_env(NcclInputs(fabric="infiniband", ib_hcas=tuple(COMPUTE), ib_pkey_index=0))
    assert env["NCCL_IB_PKEY"] == "0"
    assert "NCCL_IB_PKEY" not in nccl_env(NcclInputs(fabric="infiniband", ib_hcas=tuple(COMPUTE)))


def test_render_fabric_cli_writes_the_files(tmp_path: Path) -> None:
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    stack["config"]["gpuforge:cluster"] = partitioned()
    path = tmp_path / "Pulumi.pkeys.yaml"
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    result = CliRunner().invoke(app, ["render", "fabric", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "opensm-ufm-01.conf",
        "opensm-ufm-02.conf",
        "partitions.conf",
    ]
    bare = CliRunner().invoke(app, ["render", "fabric", "onprem-lab"])
    assert bare.exit_code == 2 and "declares no site.fabric.partitioning" in bare.output


def test_bad_keys_and_guid_forms_are_reported_together() -> None:
    """The keys' and GUIDs' own form: the models' validators, beside any other field's problem."""
    spec = partitioned()
    spec["site"]["fabric"]["partitions"] = {"vision": "0x8010", "llm": "0x0020", "research": "0x0020", "ops": "16"}
    spec["site"]["hosts"]["dgx-a01"]["port_guids"]["mlx5_0"] = "946dae0300000000"  # no 0x
    spec["site"]["hosts"]["dgx-a02"]["bmc_address"] = "not-an-ip"
    found = problems(spec)
    assert "outside 0x0001-0x7ffe" in found["cluster.site.fabric.partitions[vision]"]
    assert "already tenant llm's" in found["cluster.site.fabric.partitions[research]"]
    assert "'16' is not a partition key; fix: write it in hex" in found["cluster.site.fabric.partitions[ops]"]
    assert "is not a port GUID" in found["cluster.site.hosts[dgx-a01].port_guids[mlx5_0]"]
    assert "cluster.site.hosts[dgx-a02].bmc_address" in found


def test_guids_members_and_priorities_are_all_reported_at_once() -> None:
    spec = partitioned()
    fabric, hosts = spec["site"]["fabric"], spec["site"]["hosts"]
    hosts["dgx-a02"]["port_guids"]["mlx5_3"] = guid(4, 0)  # dgx-b01's mlx5_0
    hosts["dgx-a03"]["port_guids"]["mlx5_7"] = guid(9, 9)  # a storage port
    del hosts["dgx-b02"]["port_guids"]["mlx5_11"]
    fabric["partitioning"]["members"]["llm"].append("dgx-a02")  # already vision's
    fabric["partitioning"]["members"]["ops"] = ["dgx-z99"]
    fabric["partitioning"]["sm_priority"] = {"ufm-01": 15, "ufm-02": 15}
    found = problems(spec)
    assert "is also dgx-a02 mlx5_3's" in found["cluster.site.hosts[dgx-b01].port_guids[mlx5_0]"]
    assert "mlx5_7 is not one of dgx-a03's compute HCAs" in found["cluster.site.hosts[dgx-a03].port_guids[mlx5_7]"]
    assert "mlx5_11 are not listed" in found["cluster.site.hosts[dgx-b02].port_guids"]
    assert "dgx-a02 is already a member of vision" in found["cluster.site.fabric.partitioning.members[llm]"]
    ops = found["cluster.site.fabric.partitioning.members[ops]"]
    assert "ops has no key" in ops and "dgx-z99 is not a site host" in ops
    assert "share priority 15" in found["cluster.site.fabric.partitioning.sm_priority"]


def test_subnet_manager_ha_and_ufm_priorities_are_refused_with_the_fix() -> None:
    spec = partitioned()
    spec["site"]["fabric"]["subnet_managers"] = {"ufm-01": "10.64.1.2"}
    spec["site"]["fabric"]["partitioning"]["sm_priority"] = {"ufm-01": 15}
    assert "nothing reconfigures the fabric" in problems(spec)["cluster.site.fabric.subnet_managers"]
    spec = partitioned("ufm")
    spec["site"]["fabric"]["partitioning"]["sm_priority"] = {"ufm-01": 15}
    assert "UFM runs its own" in problems(spec)["cluster.site.fabric.partitioning.sm_priority"]
