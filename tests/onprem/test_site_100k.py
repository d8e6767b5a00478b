"""examples/Pulumi.site-100k.yaml: a 100,000-GPU, 150 MW-class site as a page of YAML that validates and
renders Slurm's node lines and three-tier topology readably (its plan is timed by `make bench`)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import NODE_LINE_HOSTS, render_slurm, slurm_config
from gpuforge.spec import ResolvedSpec, resolve

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "Pulumi.site-100k.yaml"


@lru_cache(maxsize=1)
def example() -> ResolvedSpec:
    return resolve(load_stack(EXAMPLE).cluster, "site-100k")


@lru_cache(maxsize=1)
def rendered() -> tuple[dict[str, Any], dict[str, str]]:
    config = slurm_config(example())
    return config, render_slurm(config)


def test_the_example_is_a_page_of_yaml_for_100k_gpus_and_150_mw() -> None:
    assert len(EXAMPLE.read_text().splitlines()) < 250
    site = example().site
    assert site is not None
    assert len(site.hosts) == 12_511 and sum(h.gpus for h in site.hosts.values()) >= 100_000
    assert 150_000 <= site.facility_kw <= site.spec.power.budget_kw
    fabric = site.spec.fabric
    assert fabric is not None and site.fabric_switches == (391 * 8, 1788) and fabric.cores == 224
    assert len(fabric.pods(site.su_names())) == 56 and fabric.spine_oversubscription == 7.0


def test_node_lines_are_split_and_every_host_is_on_one() -> None:
    config, files = rendered()
    named = [line for line in files["slurm.conf"].splitlines() if line.startswith("NodeName=")]
    assert len(named) == -(-12_511 // NODE_LINE_HOSTS)
    assert max(len(line) for line in files["slurm.conf"].splitlines()) < 500
    addresses = [a for node in config["nodes"] for a in node["addresses"].split(",")]
    assert len(addresses) == len(set(addresses)) == 12_511
    assert named[0].startswith("NodeName=dgx-[00001-00016] NodeAddr=10.64.64.1,10.64.64.2,")
    assert "NodeSet=ns_train Nodes=dgx-[00001-12511]" in files["slurm.conf"]


def test_topology_has_leaves_spine_groups_and_cores() -> None:
    _, files = rendered()
    topology = files["topology.conf"]
    assert "SwitchName=su001-leaves Nodes=dgx-[00001-00031]" in topology
    assert "SwitchName=su002-leaves Nodes=dgx-[00032-00063]" in topology
    assert ("SwitchName=spines01 Switches=su001-leaves,su002-leaves,su003-leaves,su004-leaves,su005-leaves,"
            "su006-leaves,su007-leaves") in topology
    assert "SwitchName=spines56 Switches=su386-leaves," in topology
    assert re.search(r"^SwitchName=cores Switches=spines\[01-56\]$", topology, re.MULTILINE)
    assert topology.count("SwitchName=") == 391 + 56 + 1
