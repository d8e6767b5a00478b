"""The Slurm contract (gpuforge/render/slurm_contract.py): one typed model that the inventory's dict, the roles'
argument specs, docs/slurm.md's table and the "which files exist" rule all come from; Ansible refusing a
malformed slurm_config before a task runs; the controller's tasks leaving a hybrid site's topology.conf alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from gpuforge.assets import PLAYBOOK_TEMPLATES_DIR, PLAYBOOKS_DIR
from gpuforge.nodes.bake import run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render import slurm_contract
from gpuforge.render.slurm import TEMPLATES, render_slurm, slurm_config
from gpuforge.render.slurm import slurm_contract as build_contract
from gpuforge.render.slurm_contract import SlurmConfig
from gpuforge.render.slurm_contract_views import ROLES, with_generated_option, with_generated_table
from gpuforge.spec import resolve

REPO = Path(__file__).resolve().parents[2]
ROLES_DIR = PLAYBOOKS_DIR / "roles"
SLURM_STACKS = ("dev", "prod", "onprem-lab", "hybrid")
LOCALHOST = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": os.sys.executable}}}}


def _config(stack: str) -> dict[str, Any]:
    return slurm_config(resolve(load_stack(stack).cluster, stack))


def _hybrid_without_fabric() -> SlurmConfig:
    cluster = load_stack("hybrid").cluster
    del cluster["site"]["fabric"]
    for host in cluster["site"]["hosts"].values():
        host.pop("hcas", None)
    return build_contract(resolve(cluster, "hybrid"))


def test_committed_argument_specs_are_generated_from_the_contract() -> None:
    for role in ROLES:
        path = ROLES_DIR / role / "meta" / "argument_specs.yml"
        text = path.read_text()
        assert with_generated_option(text) == text, f"{path} is stale: run `make slurm-contract`"
        for entry in yaml.safe_load(text)["argument_specs"].values():
            options = entry["options"]["slurm_config"]["options"]
            assert set(options) == set(SlurmConfig.model_fields) | {"files"}, role
            assert options["topology"]["options"]["kind"]["choices"] == ["site", "ec2", "hybrid", "none"]


def test_committed_docs_table_is_generated_from_the_contract() -> None:
    text = (REPO / "docs" / "slurm.md").read_text()
    assert with_generated_table(text) == text, "docs/slurm.md's slurm_config table is stale: run `make slurm-contract`"
    # The fields the hand-written table had wrong or left out.
    for path in ("versions.minimum", "directory.bind_dn", "secrets.cloud_munge_key", "topology.static_nodes"):
        assert f"| `{path}` |" in text, path


def test_every_part_is_frozen_closed_and_described() -> None:
    parts = [m for m in vars(slurm_contract).values()
             if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == slurm_contract.__name__]
    assert SlurmConfig in parts and len(parts) > 20
    for model in parts:
        assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid", model.__name__
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"


@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_the_inventory_dict_reads_back_as_the_same_contract(stack: str) -> None:
    config = _config(stack)
    assert SlurmConfig.model_validate(config).to_vars() == config
    assert list(render_slurm(config)) == config["files"]


def test_a_malformed_or_stale_dict_is_refused() -> None:
    config = _config("dev")
    with pytest.raises(ValidationError, match=r"topology\.kind"):
        SlurmConfig.model_validate({**config, "topology": {**config["topology"], "kind": "mesh"}})
    with pytest.raises(ValidationError, match="nodez"):
        SlurmConfig.model_validate({**config, "nodez": []})
    # files is derived: a dict whose files say otherwise than the rest would split the renderer and the roles.
    with pytest.raises(ValidationError, match="files is derived"):
        SlurmConfig.model_validate({**config, "job_container": {**config["job_container"], "enabled": False}})


def test_which_files_exist_is_one_rule() -> None:
    dev, lab = _config("dev"), _config("onprem-lab")
    assert {"topology.conf", "plugstack.conf", "pyxis.conf"} <= set(dev["files"])
    assert "slurm.conf" in lab["files"] and "topology.conf" in lab["files"]
    hybrid = _hybrid_without_fabric()
    assert hybrid.topology.kind == "hybrid" and hybrid.topology.switches == []
    assert "topology.conf" in hybrid.files and "TopologyPlugin=topology/tree" in render_slurm(hybrid)["slurm.conf"]
    none = SlurmConfig.model_validate({**{k: v for k, v in dev.items() if k != "files"},
                                       "topology": {"kind": "none", "source": "none", "switches": []}})
    assert "topology.conf" not in none.files and "TopologyPlugin" not in render_slurm(none)["slurm.conf"]
    # The controller role renders and removes from the same names the renderer's templates have.
    role_vars = yaml.safe_load((ROLES_DIR / "slurm_controller" / "vars" / "main.yml").read_text())
    assert role_vars["__slurm_controller_files"] == list(TEMPLATES)


def test_site_and_cloud_node_lines_are_one_form() -> None:
    """A cloud group's --conf string is the site line's hardware part, from the same macro."""
    lab, dev = render_slurm(_config("onprem-lab"))["slurm.conf"], _config("dev")
    (site_line,) = [line for line in lab.splitlines() if line.startswith("NodeName=")]
    assert site_line.split(" CPUs=")[1].startswith("224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=")
    conf = dev["dynamic_groups"][0]["conf"]
    assert conf.startswith("CPUs=") and " CoresPerSocket=" in conf and " Feature=group_" in conf
    keys = [part.split("=")[0] for part in f"CPUs={site_line.split(' CPUs=')[1]}".split()]
    assert [part.split("=")[0] for part in conf.split()] == [k for k in keys if k not in ("Sockets", "State")]


def _role_playbook(tmp_path: Path, role: str) -> Path:
    playbook = tmp_path / "role.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": f"Run {role}", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": f"Run the {role} role", "ansible.builtin.include_role": {"name": str(ROLES_DIR / role)}}],
    }], sort_keys=False))
    return playbook


@pytest.mark.slow
@pytest.mark.parametrize("role", ["slurm_login", "slurm_controller"])
def test_ansible_refuses_a_malformed_slurm_config_before_a_task_runs(tmp_path: Path, role: str) -> None:
    config = _config("dev")
    malformed = {**config, "topology": {**config["topology"], "kind": "mesh"},
                 "controllers": [{"name": "ctl"}], "login_access": "telnet"}
    result = run_playbook(_role_playbook(tmp_path, role), LOCALHOST, extravars={"slurm_config": malformed})
    assert not result.ok
    (failure,) = result.failures
    assert "Validating arguments against arg spec" in failure.task, failure
    for expected in ("kind must be one of: site, ec2, hybrid, none", "address", "telnet"):
        assert expected in failure.message, failure.message
    # Nothing ran: the validation is the role's first task.
    assert result.changed == 0


@pytest.mark.slow
def test_every_stack_s_slurm_config_passes_the_roles_argument_specs(tmp_path: Path) -> None:
    """The same validator Ansible runs for a role, on each role's generated spec: the rendered dicts pass."""
    tasks = []
    for role in ROLES:
        specs = yaml.safe_load((ROLES_DIR / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        for stack in SLURM_STACKS:
            tasks.append({"name": f"Validate {stack} against {role}", "ansible.builtin.validate_argument_spec": {
                "argument_spec": {"slurm_config": specs["main"]["options"]["slurm_config"]},
                "provided_arguments": {"slurm_config": _config(stack)}}})
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Validate", "hosts": "localhost", "gather_facts": False,
                                         "tasks": tasks}], sort_keys=False))
    result = run_playbook(playbook, LOCALHOST)
    assert result.ok, [f.message for f in result.failures]


@pytest.mark.slow
def test_a_hybrid_site_without_fabric_keeps_its_topology_conf(tmp_path: Path) -> None:
    """The controller role's configuration tasks and ec2_topology.yml's first topology.conf, as the role has
    them, run twice against a directory: the second run changes nothing (the role used to delete the file
    on every run, then write it again), and the file is never removed. scontrol is a stand-in handler."""
    tasks_dir = ROLES_DIR / "slurm_controller" / "tasks"
    main = yaml.safe_load((tasks_dir / "main.yml").read_text())
    first = yaml.safe_load((tasks_dir / "ec2_topology.yml").read_text())
    wanted = ["Render the cluster's Slurm configuration", "Remove the configuration files the cluster no longer has"]
    tasks = [t for t in main if t["name"] in wanted] + [
        t for t in first if t["name"] == "Create the first topology.conf, without switches"]
    assert len(tasks) == 3
    role_vars = yaml.safe_load((ROLES_DIR / "slurm_controller" / "vars" / "main.yml").read_text())
    config_dir = tmp_path / "etc-slurm"
    config_dir.mkdir()
    playbook = tmp_path / "controller-files.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "The controller's configuration files", "hosts": "localhost", "gather_facts": False,
        "vars": {**role_vars, "slurm_controller_config_dir": str(config_dir),
                 "slurm_controller_templates_dir": str(PLAYBOOK_TEMPLATES_DIR / "slurm")},
        "tasks": tasks,
        "handlers": [{"name": "Reconfigure slurm", "ansible.builtin.debug": {"msg": "scontrol reconfigure"}}],
    }], sort_keys=False))
    config = _hybrid_without_fabric().to_vars()
    events: list[dict[str, Any]] = []
    for _ in (1, 2):
        events.clear()
        result = run_playbook(playbook, LOCALHOST, extravars={"slurm_config": config}, on_event=events.append)
        assert result.ok, [f.message for f in result.failures]
        assert (config_dir / "topology.conf").exists()
    changed = [(e["event_data"].get("task"), e["event_data"]["res"].get("item"))
               for e in events if e.get("event") in ("runner_item_on_ok", "runner_on_ok")
               and e["event_data"].get("res", {}).get("changed")]
    assert changed == [], changed
    removed = [e["event_data"]["res"].get("item") for e in events
               if e.get("event") == "runner_item_on_ok" and "Remove" in e["event_data"].get("task", "")]
    assert "topology.conf" not in removed and "plugstack.conf" not in removed
