"""scheduler.notebooks (JupyterHub, each notebook server a Slurm job): the spec refuses what would expose the hub or
start servers that never run, with the field, the value and the fix; the rendered jupyterhub_config.py (golden
file) submits to the spec's partition under the user's own account with its limits, as a hub that is not root;
the inventory carries it only when turned on; the AWS plan admits the allowed ranges on the hub's port to the login
nodes only. Booted: tests/slurm/test_slurm_cluster.py (a server started through the hub runs as the user's job)."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.models import CatalogError, load_data_file
from gpuforge.catalog.notebooks import NOTEBOOKS_FILE, NotebooksCatalog, load_notebooks
from gpuforge.nodes.slurm_inventory import slurm_inventory
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.plan.stacks import load_stack
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.render.notebooks import jupyterhub_config, render_jupyterhub_config
from gpuforge.spec import SpecError, resolve
from tests.support import REPO

GOLDEN = REPO / "tests" / "golden" / "notebooks" / "jupyterhub_config.py"
PATH = "cluster.scheduler.notebooks"
USERS_NET = "10.40.0.0/16"
HUB_ADDRESS = "10.0.16.10"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ON = {"enabled": True, "partition": "gpu", "time_limit": "4:00:00", "gpus": 1, "cpus": 4, "memory_gib": 32}
NETWORK = {**ON, "access": "network", "allowed_cidrs": [USERS_NET], "tls_certificate": "/etc/ssl/certs/nb.pem",
           "tls_key": "/etc/ssl/private/nb.key"}


def _with(stack: str, notebooks: dict[str, Any], **scheduler: Any) -> dict[str, Any]:
    data = copy.deepcopy(load_stack(stack).cluster)
    data["scheduler"]["notebooks"] = notebooks
    data["scheduler"].update(scheduler)
    return data


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: f"{issue.message} | fix: {issue.fix}" for issue in err.value.issues}


def _config(stack: str, notebooks: dict[str, Any]) -> dict[str, Any]:
    config = jupyterhub_config(resolve(_with(stack, notebooks), stack))
    assert config is not None
    return config


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab"])
def test_off_by_default_nothing_is_rendered(stack: str) -> None:
    assert jupyterhub_config(resolve(load_stack(stack).cluster, stack)) is None


def test_open_to_everyone_or_without_tls_is_refused_with_the_reason_and_the_fix() -> None:
    problems = _problems(_with("dev", {**NETWORK, "allowed_cidrs": ["0.0.0.0/0", "10.40.0.1/16"]}))
    assert "0.0.0.0/0 is every address" in problems[f"{PATH}.allowed_cidrs[0]"]
    assert "keep access: ssh_tunnel" in problems[f"{PATH}.allowed_cidrs[0]"]
    assert "host bits set" in problems[f"{PATH}.allowed_cidrs[1]"]
    assert len(problems) == 2, problems
    problems = _problems(_with("dev", {**ON, "access": "network"}))
    (path,) = problems
    assert path == PATH, problems
    assert "no allowed_cidrs" in problems[path] and "without tls_certificate and tls_key" in problems[path]
    problems = _problems(_with("dev", {**ON, "allowed_cidrs": [USERS_NET]}))
    assert "apply to access: network only" in problems[PATH], problems


def test_a_server_that_could_never_run_is_refused_naming_the_field() -> None:
    problems = _problems(_with("dev", {"enabled": True}))
    assert "enabled with no partition" in problems[PATH] and "partition: gpu" in problems[PATH]
    problems = _problems(_with("dev", {**ON, "time_limit": "UNLIMITED"}))
    assert "'UNLIMITED' is not a bounded Slurm time" in problems[f"{PATH}.time_limit"]
    problems = _problems(_with("dev", {**ON, "partition": "gpus"}))
    assert problems[f"{PATH}.partition"] == "no partition named 'gpus' | fix: use one of debug, gpu"
    data = _with("dev", {**ON, "partition": "debug", "time_limit": "3-00:00:00"})
    debug = data["scheduler"]["partitions"]["debug"]
    debug.update(max_time="1-00:00:00", allow_accounts=["ops"])
    data["scheduler"]["accounts"]["ops"] = {"description": "Operations"}
    problems = _problems(data)
    assert problems[f"{PATH}.time_limit"] == (
        "3-00:00:00 is longer than partition debug's max_time 1-00:00:00: Slurm would never start the server"
        " | fix: use at most 1-00:00:00")
    assert "debug admits only accounts ops, not those of alice" in problems[f"{PATH}.partition"]


def test_nobody_to_log_in_is_refused() -> None:
    problems = _problems(_with("dev", ON, users={}))
    assert "scheduler.users lists nobody" in problems[f"{PATH}.enabled"], problems


def test_the_rendered_config_matches_its_golden_file() -> None:
    text = render_jupyterhub_config(_config("dev", ON), HUB_ADDRESS)
    if os.environ.get("GPUFORGE_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


class _Config(dict[str, Any]):
    """traitlets' Config as jupyterhub_config.py uses it: c.Section.trait = value."""

    def __getattr__(self, name: str) -> Any:
        return self.setdefault(name, _Section())


class _Section(dict[str, Any]):
    def __getattr__(self, name: str) -> Any:
        return self[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def _loaded(text: str) -> _Config:
    config = _Config()
    exec(compile(text, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    return config


def test_the_hub_submits_to_the_partition_under_the_users_account_with_the_limits() -> None:
    c = _loaded(render_jupyterhub_config(_config("dev", ON), HUB_ADDRESS))
    assert c.JupyterHub.authenticator_class == "pam" and c.Authenticator.allowed_users == {"alice"}
    assert c.JupyterHub.spawner_class == "batchspawner.SlurmSpawner"
    assert (c.JupyterHub.ip, c.JupyterHub.port) == ("127.0.0.1", 8000)  # ssh_tunnel: the loopback only
    assert "ssl_cert" not in c.JupyterHub
    assert c.JupyterHub.hub_connect_url == "http://10.0.16.10:8081"
    spawner = c.SlurmSpawner
    assert (spawner.req_partition, spawner.req_runtime, spawner.req_nprocs, spawner.req_memory, spawner.req_gres) == (
        "gpu", "4:00:00", "4", "32G", "gpu:1")

    class User:
        name = "alice"

    class Spawner:
        user = User()
        req_account = ""

    chosen = Spawner()
    c.Spawner.pre_spawn_hook(chosen)
    assert chosen.req_account == "research"
    # batchspawner renders the script with Jinja (format_template), each req_<x> as <x>.
    script = jinja2.Template(spawner.batch_script).render(
        homedir="/home/alice", keepvars="PATH", account=chosen.req_account, partition=spawner.req_partition,
        runtime=spawner.req_runtime, nprocs=spawner.req_nprocs, memory=spawner.req_memory, gres=spawner.req_gres,
        srun="srun", cmd="batchspawner-singleuser jupyterhub-singleuser")
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    for wanted in ("--account=research", "--partition=gpu", "--time=4:00:00", "--cpus-per-task=4", "--mem=32G",
                   "--gres=gpu:1"):
        assert f"#SBATCH {wanted}" in directives, directives
    assert script.rstrip().endswith("srun batchspawner-singleuser jupyterhub-singleuser")


def test_network_access_serves_tls_on_every_address() -> None:
    c = _loaded(render_jupyterhub_config(_config("dev", NETWORK), HUB_ADDRESS))
    assert (c.JupyterHub.ip, c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key) == (
        "", "/etc/ssl/certs/nb.pem", "/etc/ssl/private/nb.key")


def test_sudo_lets_the_hub_run_the_slurm_commands_as_the_notebook_users_only(tmp_path: Path) -> None:
    config = _config("dev", ON)
    template = (PLAYBOOKS_DIR / "roles/jupyterhub/templates/sudoers.j2").read_text()
    text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(jupyterhub_config=config)
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert rules == ["Cmnd_Alias JUPYTERHUB_SLURM = /usr/bin/sbatch, /usr/bin/squeue, /usr/bin/scancel",
                     "jupyterhub ALL=(alice) NOPASSWD:SETENV: JUPYTERHUB_SLURM"]
    if visudo := shutil.which("visudo"):
        (tmp_path / "jupyterhub").write_text(text)
        subprocess.run([visudo, "-cf", str(tmp_path / "jupyterhub")], check=True, capture_output=True)


def test_the_inventory_carries_the_hub_only_when_turned_on(tmp_path: Path) -> None:
    all_vars, _ = slurm_inventory("dev", {}, lambda prefix, name: f"{prefix}_{name}")
    assert "jupyterhub_config" not in all_vars
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["gpuforge:cluster"]["scheduler"]["notebooks"] = ON
    stack = tmp_path / "Pulumi.dev-notebooks.yaml"
    stack.write_text(yaml.safe_dump(document))
    all_vars, _ = slurm_inventory(str(stack), {}, lambda prefix, name: f"{prefix}_{name}")
    assert all_vars["jupyterhub_config"]["users"] == {"alice": "research"}


def test_the_catalog_pins_are_its_constraints_at_the_same_versions() -> None:
    catalog = load_notebooks()
    assert catalog.requirements() == ["jupyterhub==4.1.6", "batchspawner==1.3.0", "jupyter-server==2.14.2"]
    assert all("pypi.org/project/" in pin.source for pin in catalog.packages.values())
    data = yaml.safe_load(NOTEBOOKS_FILE.read_text())
    data["constraints"]["jupyterhub"] = "5.0.0"
    stale = REPO / ".cache" / "notebooks-stale.yaml"
    stale.parent.mkdir(exist_ok=True)
    stale.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError, match=r"packages\.jupyterhub 4\.1\.6 is not in constraints at that version"):
        load_data_file(stale, NotebooksCatalog)
    stale.unlink()


# --- the AWS plan ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def notebooks_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["gpuforge:cluster"]["scheduler"]["notebooks"] = NETWORK
    path = tmp_path_factory.mktemp("notebooks") / "Pulumi.dev-notebooks.yaml"
    path.write_text(yaml.safe_dump(document))
    return plan_stack(str(path))


def test_the_plan_admits_the_users_range_on_the_hubs_port_to_the_login_nodes_only(notebooks_plan: Plan) -> None:
    low, high = load_flows().ports["jupyterhub"].ports
    opened = [r.inputs for r in notebooks_plan.resources if r.type == INGRESS and r.inputs.get("cidrIpv4") == USERS_NET]
    assert [(r["securityGroupId"], r["fromPort"], r["toPort"], r["ipProtocol"]) for r in opened] == [
        ("forge-dev-net-management-sg-id", low, high, "tcp")], opened
    resources = to_rule_resources(notebooks_plan.resources)
    assert [v.message for v in REGISTRY["wiring-flows-security-groups"].run(resources, RuleContext("prod"))] == []


def test_the_plan_opens_the_hub_api_and_the_servers_ports_inside_the_cluster_only_with_notebooks_on(
    notebooks_plan: Plan,
) -> None:
    rules = {r.name: r.inputs for r in notebooks_plan.resources if r.type == INGRESS}
    api, servers = rules["forge-dev-slurm-management-in-jupyterhub-api-compute"], rules[
        "forge-dev-slurm-compute-in-notebook-servers-login"]
    assert (api["fromPort"], api["toPort"], servers["fromPort"], servers["toPort"]) == (8081, 8081, 32768, 60999)
    resources = to_rule_resources(notebooks_plan.resources)
    dropped = [r for r in resources if not r.name.endswith("-in-notebook-servers-login")]
    found = [v.message for v in REGISTRY["wiring-flows-security-groups"].run(dropped, RuleContext("prod"))]
    assert found and all("tcp 32768-60999 from login to compute" in f for f in found), found
    off = [r.name for r in plan_stack("dev").resources if r.type == INGRESS]
    assert not [name for name in off if "jupyterhub" in name or "notebook" in name], off
