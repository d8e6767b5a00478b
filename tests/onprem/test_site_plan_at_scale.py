"""A site planned at scale: a Slurm host is its rack's data, not a component (docs/onprem-hybrid.md, "Why a
Slurm host is no resource"), so a site of N hosts registers about one component per rack; the summary still
counts every host and GPU, the stack outputs still inventory every host, and the console plan lists hosts by
kind past 64 of them. The bench's 128-host site (gpuforge/bench_sites.py), planned once."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from gpuforge.bench_sites import site_stack
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.review.report import SITE_TABLE_HOST_ROWS, console_plan

HOSTS = 128


@cache
def site_plan(tmp: Path) -> Plan:
    stack = tmp / f"Pulumi.site-{HOSTS}.yaml"
    stack.write_text(yaml.safe_dump(site_stack(HOSTS)))
    return plan_stack(stack)


def test_a_slurm_site_registers_racks_not_hosts(tmp_path_factory: pytest.TempPathFactory) -> None:
    plan = site_plan(tmp_path_factory.mktemp("site"))
    racks = plan.by_type("gpuforge:onprem:Rack")
    assert not plan.by_type("gpuforge:onprem:Host")
    assert len(plan.resources) < len(racks) + 8  # the site, its Slurm control plane, the stack: not a host each
    assert sum(len(r.inputs["hosts"]) for r in racks) == HOSTS
    assert (plan.summary.nodes, plan.summary.gpus, plan.summary.node_groups) == (HOSTS, 8 * HOSTS, 1)
    hosts = plan.outputs["nodeGroups"]["train"]["hosts"]
    assert len(hosts) == HOSTS
    first = hosts["dgx-001"]
    assert first["rack"] == "r0001" and first["managementIp"] and len(first["ibHcas"]) == 8
    assert first["nodeLabels"] is None and first["kubeletConfig"] is None  # Slurm hosts: no Kubernetes node


def test_the_console_lists_hosts_by_kind_past_the_row_limit(tmp_path_factory: pytest.TempPathFactory) -> None:
    plan = site_plan(tmp_path_factory.mktemp("site"))
    assert HOSTS > SITE_TABLE_HOST_ROWS
    console = Console(record=True, width=250)
    console.print(console_plan(plan, tree=False))
    text = console.export_text()
    assert f"{HOSTS} hosts, by kind" in text
    # One row for the 128 identical DGX H100 hosts, named as host and rack lists, not 128 rows.
    assert "dgx-[001-128]" in text and "r[0001-0033]" in text  # the first SU: 31 hosts over 8 racks
    assert "dgx-002 " not in text
