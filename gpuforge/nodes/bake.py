"""Run gpuforge's playbooks through ansible-runner: progress events and a per-host summary.

``run_playbook`` is the driver every command uses (bake, check, the tests); ``bake`` adds what
``gpuforge bake STACK`` needs: the inventory from the stack, or a root file system as the target
(``--target rootfs:PATH``, through the community.general.chroot connection, as an image build does).
"""

from __future__ import annotations

import copy
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog import load_catalog
from gpuforge.nodes.inventory import aws_ec2_inventory, build_inventory, engine_only_values, group_name, node_group_vars
from gpuforge.spec import SpecError, SpecIssue

EventHandler = Callable[[dict[str, Any]], None]


@dataclass
class HostSummary:
    """Task results of one host, as Ansible's PLAY RECAP counts them."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


@dataclass
class TaskFailure:
    host: str
    task: str
    message: str


@dataclass
class PlaybookResult:
    """Outcome of one playbook run."""

    playbook: str
    status: str
    rc: int
    hosts: dict[str, HostSummary] = field(default_factory=dict)
    failures: list[TaskFailure] = field(default_factory=list)
    stdout: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not any(h.failed or h.unreachable for h in self.hosts.values())

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())

    @property
    def failed_hosts(self) -> list[str]:
        return sorted(name for name, h in self.hosts.items() if h.failed or h.unreachable)

    def summary_rows(self) -> list[tuple[str, int, int, int, int, int]]:
        """(host, ok, changed, failed, unreachable, skipped) rows, sorted by host."""
        return [(name, h.ok, h.changed, h.failed, h.unreachable, h.skipped) for name, h in sorted(self.hosts.items())]

    def to_json(self) -> dict[str, Any]:
        """The run as CI reads it (``gpuforge bake --json``)."""
        return {
            "ok": self.ok and bool(self.hosts),
            "playbook": self.playbook,
            "status": self.status,
            "rc": self.rc,
            "hosts": {name: asdict(summary) for name, summary in sorted(self.hosts.items())},
            "failures": [asdict(failure) for failure in self.failures],
        }


def failure_message(res: Mapping[str, Any]) -> str:
    """What a failed task said. A loop's own message is only "One or more items failed": each failed
    item's label and message follow it."""
    message = "failed"
    for key in ("msg", "stderr", "stdout", "reason"):
        value = res.get(key)
        if value:
            message = str(value).strip()
            break
    items = [item for item in res.get("results") or [] if isinstance(item, Mapping) and item.get("failed")]
    if items:
        details = "; ".join(f"{_item_label(item)}: {failure_message(item)}" for item in items)
        message = f"{message}: {details}"
    return message


def _item_label(item: Mapping[str, Any]) -> str:
    label = item.get("_ansible_item_label", item.get("item", "?"))
    return label if isinstance(label, str) else str(label)


def _summarise(stats: Mapping[str, Any] | None) -> dict[str, HostSummary]:
    hosts: dict[str, HostSummary] = {}
    if not stats:
        return hosts
    for stat_key, attr in (
        ("ok", "ok"),
        ("changed", "changed"),
        ("failures", "failed"),
        ("dark", "unreachable"),
        ("skipped", "skipped"),
    ):
        for host, count in (stats.get(stat_key) or {}).items():
            setattr(hosts.setdefault(host, HostSummary()), attr, int(count))
    for host in stats.get("processed") or {}:
        hosts.setdefault(host, HostSummary())
    return hosts


def resolve_playbook(playbook: str | Path) -> Path:
    """A playbook name (``bake-image.yml``) or path, as an absolute path."""
    path = Path(playbook)
    if not path.is_absolute() and not path.exists():
        path = PLAYBOOKS_DIR / path
    if not path.is_file():
        raise FileNotFoundError(f"playbook {playbook} not found (looked in {PLAYBOOKS_DIR})")
    return path.resolve()


Inventory = Mapping[str, Any] | Path
Inventories = Inventory | Sequence[Inventory]


def run_playbook(
    playbook: str | Path,
    inventory: Inventories,
    *,
    extravars: Mapping[str, Any] | None = None,
    limit: str | None = None,
    check: bool = False,
    on_event: EventHandler | None = None,
    private_data_dir: Path | None = None,
    verbosity: int = 0,
    forks: int | None = None,
    user: str | None = None,
    private_key: Path | None = None,
) -> PlaybookResult:
    """Run *playbook* against *inventory* with ansible-runner.

    *inventory* is a YAML inventory dict, a file or directory Ansible reads (a hosts file, a dynamic
    inventory plugin's config), or a list of them, merged by Ansible in order (later sources win).
    """
    import ansible_runner  # type: ignore[import-untyped]  # imported late: plans need no Ansible

    playbook_path = resolve_playbook(playbook)
    failures: list[TaskFailure] = []

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            failures.append(
                TaskFailure(
                    host=str(data.get("host", "?")),
                    task=str(data.get("task", "?")),
                    message=failure_message(data.get("res") or {}),
                )
            )
        if on_event is not None:
            on_event(event)
        return True

    cmdline: list[str] = []
    if check:
        cmdline.append("--check")
    if verbosity:
        cmdline.append("-" + "v" * verbosity)
    if user:
        cmdline += ["--user", user]
    if private_key:
        cmdline += ["--private-key", str(private_key.expanduser().resolve())]
    env = {
        # ansible-playbook from the same environment as this Python (a venv need not be activated).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_PIPELINING": "True",
        # Facts only under ansible_facts (the roles read nothing else), not also copied into top-level
        # ansible_* variables: with the package facts there, that copy cost every task about 0.03 s, some
        # 4.5 s of a 39 s idempotent re-bake (docs/benchmarks.md).
        "ANSIBLE_INJECT_FACT_VARS": "False",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_ROLES_PATH": str(PLAYBOOKS_DIR / "roles"),
    }
    with tempfile.TemporaryDirectory(prefix="gpuforge-runner-") as tmp:
        pdd = Path(private_data_dir or tmp)
        pdd.mkdir(parents=True, exist_ok=True)
        sources = list(inventory) if isinstance(inventory, Sequence) else [inventory]
        inventory_args: list[str] = []
        for index, source in enumerate(sources):
            if isinstance(source, Path):
                inventory_args.append(str(source.resolve()))
            else:
                inv_file = pdd / f"inventory-{index}.yml"
                inv_file.write_text(yaml.safe_dump(dict(source), sort_keys=False))
                inventory_args.append(str(inv_file))
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = env["PATH"]
        try:
            runner = ansible_runner.run(
                private_data_dir=str(pdd),
                playbook=str(playbook_path),
                inventory=inventory_args if len(inventory_args) > 1 else inventory_args[0],
                extravars=dict(extravars or {}),
                limit=limit,
                forks=forks,
                cmdline=" ".join(shlex.quote(arg) for arg in cmdline) or None,
                envvars=env,
                event_handler=handle,
                quiet=True,
                suppress_env_files=True,
            )
        finally:
            os.environ["PATH"] = old_path
        stdout = runner.stdout.read() if runner.stdout else ""
        return PlaybookResult(
            playbook=playbook_path.name,
            status=str(runner.status),
            rc=int(runner.rc if runner.rc is not None else 1),
            hosts=_summarise(runner.stats),
            failures=failures,
            stdout=stdout,
        )


def rootfs_inventory(
    rootfs: Path, host_vars: Mapping[str, Any] | None = None, *, name: str = "rootfs", group: str = "gpu_nodes"
) -> dict[str, Any]:
    """An inventory with one host: the root file system at *rootfs*, reached with chroot (needs root)."""
    hostvars: dict[str, Any] = {
        "ansible_connection": "community.general.chroot",
        "ansible_host": str(Path(rootfs).resolve()),
        "ansible_python_interpreter": "/usr/bin/python3",
        # Already root inside the chroot: no sudo in a minimal root file system.
        "ansible_become": False,
    }
    hostvars.update(host_vars or {})
    return {"all": {"children": {group: {"hosts": {name: hostvars}}}}}


def parse_target(target: str) -> tuple[str, Path | None]:
    """``--target`` values: ``hosts`` (the stack's nodes over SSH) or ``rootfs:PATH``."""
    if target == "hosts":
        return "hosts", None
    kind, sep, path = target.partition(":")
    if kind == "rootfs" and sep and path:
        return "rootfs", Path(path)
    raise ValueError(f"--target {target!r}: expected 'hosts' or 'rootfs:PATH'")


class NoHostsMatched(RuntimeError):
    """The run configured nothing: no host of the inventory matched (the message says why)."""


def bake(
    stack: str,
    *,
    target: str = "hosts",
    check: bool = False,
    limit: str | None = None,
    node_group: str | None = None,
    on_event: EventHandler | None = None,
    extravars: Mapping[str, Any] | None = None,
    inventory_files: Sequence[Path] = (),
    user: str | None = None,
    private_key: Path | None = None,
    forks: int | None = None,
) -> PlaybookResult:
    """``gpuforge bake STACK``: site.yml on the stack's nodes, or bake-image.yml into a root file system.

    Hosts come from the stack (on-premises hosts; on AWS the aws_ec2 plugin, with credentials) and from
    *inventory_files*, which Ansible merges over the stack's groups and variables (a hosts file that
    puts machines into ``ng_<group>``, or overrides an address). With ``target="rootfs:PATH"`` the node
    group's variables (the first group, or *node_group*) are applied to the root file system, as an
    image build for that group does. Raises NoHostsMatched when the run matched no host.
    """

    kind, rootfs = parse_target(target)
    for path in inventory_files:
        if not path.exists():
            raise FileNotFoundError(f"--inventory {path}: no such file or directory")
    if private_key is not None and not private_key.expanduser().is_file():
        raise FileNotFoundError(f"--private-key {private_key}: no such file")
    inventory = build_inventory(stack)
    options: dict[str, Any] = {
        "extravars": extravars,
        "check": check,
        "limit": limit,
        "on_event": on_event,
        "forks": forks,
        "user": user,
        "private_key": private_key,
    }
    if kind == "rootfs":
        assert rootfs is not None
        if not rootfs.is_dir():
            raise FileNotFoundError(f"--target rootfs:{rootfs}: no such directory")
        # An image holds no deployed stack's values: leave out what only the engine knows.
        image_unknown = {path.split(".")[-2] for path in engine_only_values(inventory)}
        group_vars = {k: v for k, v in node_group_vars(inventory, node_group).items() if k not in image_unknown}
        group_vars.update(image_slurm_vars(inventory, group_vars.get("gpuforge_node_group", "")))
        _refuse_unverified_enroot(stack, inventory, extravars, group_vars.get("gpuforge_node_group", ""))
        return run_playbook("bake-image.yml", rootfs_inventory(rootfs, group_vars), **options)
    aws_hosts = _aws_credentials() and any(
        not group.get("hosts") for name, group in inventory["all"]["children"].items() if name.startswith("ng_")
    )
    # Named by the variable --extra-vars would set: a group variable (lustre_client_filesystem) or, for the
    # Slurm cluster's deployed values (database endpoint, EFS names), slurm_config.
    unknown = sorted({"slurm_config" if path.startswith("all.vars.slurm_config.") else path.split(".")[-2]
                      for path in engine_only_values(inventory)} - set(extravars or {}))
    if unknown and (aws_hosts or inventory_files):
        raise ValueError(
            f"stack {stack}: its outputs come from the offline plan, which does not know {', '.join(unknown)}; "
            "deploy the stack and read its outputs (Pulumi CLI), or pass them with --extra-vars"
        )
    listed = any(group.get("hosts") for name, group in inventory["all"]["children"].items() if name.startswith("ng_"))
    if not (listed or aws_hosts or inventory_files):
        # No node is known: site.yml would reach only the planned Slurm controller (slurm.yml's plays),
        # a cluster with no nodes to schedule. Configure nothing and say where hosts come from.
        raise NoHostsMatched(_no_hosts_reason(stack, inventory, inventory_files, limit, aws_hosts))
    _refuse_unverified_enroot(stack, inventory, extravars, None)
    sources: list[Inventory] = [inventory, *inventory_files]
    with tempfile.TemporaryDirectory(prefix="gpuforge-inventory-") as tmp:
        if aws_hosts:

            # The aws_ec2 plugin fills ng_<group> with each node group's running instances (by tag).
            plugin_file = Path(tmp) / "cluster.aws_ec2.yml"
            plugin_file.write_text(yaml.safe_dump(aws_ec2_inventory(stack), sort_keys=False))
            sources.insert(1, plugin_file)
        result = run_playbook("site.yml", sources, **options)
    if not result.hosts:
        raise NoHostsMatched(_no_hosts_reason(stack, inventory, inventory_files, limit, aws_hosts))
    return result


ENROOT_ARCH = {"x86_64": "amd64", "arm64": "arm64"}  # EC2 architecture -> the release's .deb architecture


def _refuse_unverified_enroot(
    stack: str, inventory: Mapping[str, Any], extravars: Mapping[str, Any] | None, group: str | None
) -> None:
    if {"slurm_config", "enroot_checksums"} & set(extravars or {}):
        return  # the user passes the release's digests (or a whole slurm_config) themselves
    issue = unverified_enroot_assets(inventory, group)
    if issue is not None:
        raise SpecError([issue], stack)


def unverified_enroot_assets(inventory: Mapping[str, Any], group: str | None = None) -> SpecIssue | None:
    """The enroot release assets this bake would install without a sha256 in the catalog (all the cluster's
    compute and login groups, or the image's *group*): the enroot role refuses them (enroot+caps gives its
    helpers CAP_SYS_ADMIN), so the bake would stop there, halfway; say so before anything runs."""

    config = inventory["all"]["vars"].get("slurm_config") or {}
    containers = config.get("containers") or {}
    if containers.get("runtime") != "enroot_pyxis":
        return None
    if group is not None and group not in containers["enroot"]["settings"]:
        return None  # an image of a group outside the Slurm cluster carries no enroot
    catalog = load_catalog()
    arches: set[str] = set()
    for name, entry in inventory["all"]["children"].items():
        instance_type = (entry.get("vars") or {}).get("gpuforge_instance_type") if name.startswith("ng_") else None
        if instance_type and catalog.has_instance_type(instance_type):
            arches |= {ENROOT_ARCH[a] for a in catalog.instance_type(instance_type).architectures if a in ENROOT_ARCH}
    enroot = containers["enroot"]
    assets = [f"{p}_{enroot['version']}_{arch}.deb" for arch in sorted(arches or {"amd64"}) for p in enroot["packages"]]
    missing = [asset for asset in assets if asset not in enroot["sha256"]]
    if not missing:
        return None
    return SpecIssue(
        path="catalog.slurm.containers.enroot.sha256",
        message=f"no sha256 for {', '.join(missing)}: scheduler.containers is enroot_pyxis, and the enroot role "
        "installs only verified assets (enroot+caps gives its helpers CAP_SYS_ADMIN)",
        fix=f"add each asset's digest from {enroot['url']} (the release page lists them) to the catalog's "
        "slurm.containers.enroot.sha256 or the stack's catalog overrides (gpuforge:cluster catalog: "
        "slurm: containers: enroot: sha256: {<asset>: <hex>}), or set scheduler.containers: none",
    )


def image_slurm_vars(inventory: Mapping[str, Any], group: str = "") -> dict[str, Any]:
    """What an image of a Slurm cluster's node carries from slurm_config. A compute group's image carries the
    whole of it (bake-image-slurm.yml: slurmd configless against the controllers' planned addresses,
    dynamic registration, the users, the key's store and id with the region the boot unit reads it from):
    an Auto Scaling instance joins with no Ansible run on it. Other groups' images carry enroot
    (containers) and the job_container BasePath the local scratch binds; the rest is the live cluster's,
    configured by slurm.yml."""
    all_vars = inventory["all"]["vars"]
    config = all_vars.get("slurm_config")
    if not config:
        return {}
    if group in config["groups"]:

        computes = inventory["all"]["children"].get("slurm_compute", {}).get("children", {})
        group_vars = computes.get(group_name("ng", group), {}).get("vars") or {}
        # A hybrid cluster's cloud group reads its own key (slurm_inventory.py's munge_key_ref).
        key_ref = group_vars.get("munge_key_ref") or config["secrets"]["munge_key"]
        region = all_vars.get("gpuforge_region") or ""
        return {"slurm_config": _without_deployed_values(config), "munge_key_ref": key_ref,
                "munge_key_aws_region": region}
    return {"slurm_config": {"containers": config["containers"], "job_container": config["job_container"]}}


def _without_deployed_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """slurm_config without what only the deployed stack knows and an image never reads: the accounting
    database's endpoint (slurmd has no database) and the EFS file systems' names (a cloud node's user data
    mounts its /home; the state file system is the controllers'). An image is baked before or apart from
    `pulumi up`, so these read "" rather than a value that may be stale or a placeholder."""
    image = copy.deepcopy(dict(config))
    image["accounting"]["database"]["host"] = ""
    for mount in (image["home"], image["state_shared"]):
        if mount.get("kind") == "efs":
            mount.update(server="", source="")
    return image


def _no_hosts_reason(
    stack: str, inventory: Mapping[str, Any], inventory_files: Sequence[Path], limit: str | None, aws: bool
) -> str:
    groups = inventory["all"]["children"]
    listed = sum(len(group.get("hosts") or {}) for name, group in groups.items() if name.startswith("ng_"))
    parts = [f"site.yml matched no host of stack {stack}: nothing was configured."]
    if limit:
        parts.append(f"--limit {limit!r} selected none of them.")
    if not listed and not inventory_files:
        if aws:
            parts.append("The aws_ec2 inventory found no running instance tagged gpuforge:node-group in this cluster.")
        else:
            parts.append(
                "Its node groups list no hosts: AWS instances are found by the aws_ec2 inventory, which needs "
                "AWS credentials (and boto3); or pass --inventory FILE with hosts in the ng_<group> groups "
                "(gpuforge inventory STACK shows them), or --target rootfs:PATH to bake an image."
            )
    elif inventory_files:
        parts.append(
            "Hosts in --inventory files must be in a GPU node group (ng_<group> under gpu_nodes) to be configured."
        )
    return " ".join(parts)


def _aws_credentials() -> bool:
    """Whether boto3 finds AWS credentials (what the aws_ec2 inventory plugin needs)."""
    try:
        import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return False
    return boto3.session.Session().get_credentials() is not None


def parse_extra_vars(values: Sequence[str]) -> dict[str, Any]:
    """``--extra-vars`` as ansible-playbook takes them: ``KEY=VALUE`` pairs, a YAML/JSON mapping, or
    ``@FILE``; later ones win. Raises ValueError naming every value that is none of these."""
    merged: dict[str, Any] = {}
    problems: list[str] = []
    for value in values:
        text = value.strip()
        if text.startswith("@"):
            path = Path(text[1:]).expanduser()
            if not path.is_file():
                problems.append(f"{value}: no such file")
                continue
            text = path.read_text()
        if text.startswith(("{", "---")) or value.startswith("@"):
            try:
                loaded = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                problems.append(f"{value}: not YAML/JSON ({str(exc).splitlines()[0]})")
                continue
            if not isinstance(loaded, dict):
                problems.append(f"{value}: expected a mapping of variables")
                continue
            merged.update(loaded)
            continue
        pairs = shlex.split(text)
        bad = [pair for pair in pairs if "=" not in pair or not pair.split("=", 1)[0].isidentifier()]
        if bad or not pairs:
            problems.append(f"{value}: expected KEY=VALUE, a YAML/JSON mapping or @FILE")
            continue
        merged.update(dict(pair.split("=", 1) for pair in pairs))
    if problems:
        raise ValueError("--extra-vars: " + "; ".join(problems))
    return merged
