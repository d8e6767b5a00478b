"""Plan rendering: a rich tree for the terminal, Markdown for a pull request."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.policy_check import console_policies, markdown_policies
from gpuforge.plan.summary import NODE_GROUP
from gpuforge.review.pins import pin_warnings
from gpuforge.review.windows import block_windows
from gpuforge.spec.models import NodeGroup as NodeGroupSpec
from gpuforge.spec.site_halls import hall_power


def children_by_parent(resources: Iterable[PlanResource]) -> dict[str | None, list[PlanResource]]:
    children: dict[str | None, list[PlanResource]] = defaultdict(list)
    urns = {r.urn for r in resources}
    for r in resources:
        children[r.parent if r.parent in urns else None].append(r)
    return children


def _label(r: PlanResource) -> str:
    mark = " [bold yellow]protected[/]" if r.protect else ""
    kind = "[cyan]" if not r.custom else "[dim]"
    return f"{kind}{escape(r.type)}[/] {escape(r.name)}{mark}"


def resource_tree(plan: Plan) -> Tree:
    children = children_by_parent(plan.resources)
    tree = Tree(f"[bold]{plan.stack}[/] ({plan.placement})")

    def add(node: Tree, parent: str | None) -> None:
        for r in children.get(parent, []):
            add(node.add(_label(r)), r.urn)

    add(tree, None)
    return tree


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary_rows(plan: Plan) -> list[tuple[str, str]]:
    s = plan.summary
    budget = f" of {s.power_budget_kw:,.1f} kW budget" if s.power_budget_kw else ""
    return [
        ("resources", f"{s.resources} ({plural(s.node_groups, 'node group')})"),
        ("nodes", _nodes(plan)),
        ("GPUs", f"{s.gpus}"),
        ("EFA interfaces", f"{s.efa_interfaces}"),
        ("parallel file system", _parallel_fs(plan)),
        ("power (estimate, with PUE)", f"{s.power_kw:,.1f} kW{budget}"),
        ("monthly cost (on-demand)", _cost(plan)),
        *placement_rows(plan),
        *[("Capacity Block", w.text()) for w in block_windows(r.inputs for r in plan.by_type(NODE_GROUP))],
        *reservation_rows(plan),
        *[("unpinned image", line) for line in pin_warnings(plan)],
    ]


def reservation_rows(plan: Plan) -> list[tuple[str, str]]:
    """Per reservation or Capacity Block: the groups launching into it and their nodes against its size.
    Spares stay per group (a spare is an instance of one group's launch template and partition), so teams
    sharing a reservation each keep their own; one group with a partition per team shares them."""
    sharing: dict[str, list[tuple[str, NodeGroupSpec]]] = {}
    for name, group in plan.resolved.node_groups.items():
        if group.spec.reservation is not None:
            sharing.setdefault(group.spec.reservation.reservation_id, []).append((name, group.spec))
    rows = []
    for rid, groups in sharing.items():
        parts = " + ".join(f"{name} {spec.nodes_text}" for name, spec in groups)
        size = next((c for _, spec in groups if (c := getattr(spec.capacity, "instance_count", None))), None)
        total = sum(spec.total_nodes for _, spec in groups)
        of = f" of {size}" if size else " (size not in the spec: capacity.instance_count; preflight asks AWS)"
        text = f"{parts} = {total}{of}"
        if len(groups) > 1:
            text += "; spares are per group, not shared across the reservation"
        rows.append((f"reservation {rid}", text))
    return rows


def _nodes(plan: Plan) -> str:
    """Fixed nodes as active + spare; elastic groups apart as min-max, never counted active at their max."""
    s = plan.summary
    elastic = [g.spec.scaling for g in plan.resolved.node_groups.values() if g.spec.scaling is not None]
    most = sum(scaling.max for scaling in elastic)
    text = f"{s.nodes - most} active + {s.spare_nodes} spare"
    if elastic:
        text += f" + elastic {sum(scaling.min for scaling in elastic)}-{most} (following the queue)"
    return text


def _parallel_fs(plan: Plan) -> str:
    s, site = plan.summary, plan.resolved.site
    cloud = f"{s.parallel_fs_tib:,.2f} TiB, {s.parallel_fs_throughput_mbps:,.0f} MB/s"
    mounts = site.spec.storage.mounts if site is not None else {}
    if not mounts:
        return cloud
    on_site = ", ".join(f"{m.kind} {m.mount_point}" for m in mounts.values())
    return f"site: {on_site}" + (f"; cloud: {cloud}" if s.parallel_fs_tib else "")


def _cost(plan: Plan) -> str:
    total = plan.summary.monthly_cost_usd
    if total is None or plan.cost is None:
        return "not priced"
    floor = plan.cost.total_min
    # An elastic group runs its min around the clock and its max only while jobs wait: a range, not a max.
    text = f"${floor:,.0f}..${total:,.0f} (elastic groups min..max)" if floor != total else f"${total:,.0f}"
    if plan.cost.unpriced:  # never a total that silently drops a group
        text += f" + not priced: {', '.join(plan.cost.unpriced)}"
    if plan.cost.size_unknown:
        text += f" + size unknown: {', '.join(plan.cost.size_unknown)}"
    notes = len(plan.cost.caveats) + (1 if plan.cost.not_priced_resources else 0)
    if notes:
        text += f" ({plural(notes, 'caveat')} below)"
    # Site hardware is owned, not rented: only the cloud side has a price list.
    return text + (" (cloud resources only; site hosts not priced)" if plan.placement != "aws" else "")


def cost_caveats(plan: Plan) -> list[str]:
    if plan.cost is None:
        return []
    billed = plan.cost.not_priced_resources
    return [*plan.cost.caveats, *([f"billed by AWS, not priced here: {'; '.join(billed)}"] if billed else [])]


def placement_rows(plan: Plan) -> list[tuple[str, str]]:
    """On-prem and hybrid plans: the site, its fabric, and the site-to-cloud link."""
    site = plan.resolved.site
    if site is None:
        return []
    spec = site.spec
    rows = [
        ("placement", plan.placement),
        ("site", f"{spec.name}: {plural(len(spec.racks), 'rack')}, {plural(len(site.hosts), 'host')}"),
    ]
    if spec.fabric is not None:
        f = spec.fabric
        sus = len({r.scalable_unit for r in spec.racks.values()})
        rows.append(
            (
                "fabric",
                f"{f.kind} {f.topology.replace('_', '-')}, {f.rails} rails x {f.rate_gbps} Gb/s, "
                f"{sus} SU x {f.rails} leaves, {f.spines} spines"
                + (" (rail islands)" if f.rail_islands else "")
                + f", SHARP {'on' if f.sharp else 'off'}",
            )
        )
        per_leaf = max(
            (sum(1 for h in site.hosts.values() if h.spec.hcas and h.scalable_unit == su) for su in site.su_names()),
            default=0,
        )
        rows.append(
            (
                "leaf oversubscription",
                (
                    f"{f.downlinks}:{f.uplinks} host:uplink ports ({f.oversubscription:.2f}:1"
                    + (", non-blocking" if f.oversubscription <= 1 else "")
                    + ")"
                    if f.spines
                    else "none: no spine layer, traffic stays on its rail's leaf"
                )
                + f"; {per_leaf} of {f.downlinks} host ports per leaf in use",
            )
        )
    rows.append(
        (
            "site IT load",
            f"{site.it_kw:,.1f} kW: hosts {site.hosts_kw:,.1f}, fabric switches {site.switch_kw:,.1f} "
            f"({'+'.join(map(str, site.fabric_switches))}), equipment {site.equipment_kw:,.1f}",
        )
    )
    for hall in hall_power(site):
        budget = f" of {hall.budget.limit_kw:,.1f} kW budget" if hall.budget else ""
        feeds = ", ".join(f"{f} {room.load_kw:,.1f}/{room.limit_kw:,.1f}" for f, room in hall.feeds.items())
        rows.append(
            (
                f"hall {hall.name}",
                f"{hall.load_kw:,.1f} kW{budget} ({plural(len(hall.racks), 'rack')}); feeds {feeds} kW "
                "(normal load / continuous rating)",
            )
        )
    link = (plan.outputs.get("hybrid") or {}).get("link")
    if link:
        rows.append(("site-to-cloud link", str(link.get("description"))))
    sync = (plan.outputs.get("hybrid") or {}).get("objectSync")
    if sync:
        rows.append(("object sync", str(sync.get("description"))))
    return rows


def site_table(plan: Plan) -> Table:
    table = Table("host", "rack", "U", "model", "pool", "GPUs", "HCAs (by rail)", "kW", title_justify="left")
    site = plan.resolved.site
    for name, h in sorted(site.hosts.items()) if site else []:
        height = h.spec.u_height or h.server.rack_units or 1
        table.add_row(
            name,
            h.spec.rack,
            f"{h.spec.u_position}-{h.spec.u_position + height - 1}",
            h.spec.model,
            h.spec.pool,
            str(h.gpus),
            ",".join(h.spec.hcas_by_rail()) or "-",
            f"{h.node_power_kw:.1f}",
        )
    return table


def summary_table(plan: Plan) -> Table:
    table = Table(title=f"plan: {plan.stack}", show_header=False, title_justify="left")
    for key, value in summary_rows(plan):
        table.add_row(key, escape(value))  # values are plain text: node_groups[train] is no markup
    return table


def node_group_table(plan: Plan) -> Table:
    table = Table("node group", "role", "instance", "nodes", "GPUs", "fabric", "AZ", "kW/node", title_justify="left")
    for name, g in plan.resolved.node_groups.items():
        table.add_row(
            name,
            g.spec.role,
            g.spec.instance_type,
            g.spec.nodes_text,
            str(g.spec.active_nodes * g.gpus_per_node),
            f"efa x{g.efa_interfaces}" if g.efa_interfaces else g.spec.fabric,
            ",".join(g.azs),
            f"{g.node_power_kw:.2f}",
        )
    return table


NODES_LEGEND = (
    "nodes: 64+2 = 64 active + 2 hot spares, always running; 0-4 = elastic, 0 to 4 following the queue "
    "(its GPUs and power at 4)"
)


SECRET_STATE = {"set": "[green]set (secure)[/]", "missing": "[red]missing[/]", "clear text": "[red]clear text[/]"}


def secrets_lines(plan: Plan) -> Text:
    """Each secret `pulumi up` reads: its key, whether the stack file holds it, and the command (no value)."""
    lines = ["[bold]secrets[/] `pulumi up` reads (values never shown):"]
    for secret in plan.secrets:
        lines.append(
            f"  {escape(secret.config_key)}  {SECRET_STATE[secret.state]}  {escape(secret.purpose)} "
            f"({escape(secret.used_by)})"
        )
        if secret.state != "set":
            lines.append(f"    {escape(secret.command(plan.stack))}")
    return Text.from_markup("\n".join(lines))


def console_plan(plan: Plan, tree: bool = True) -> Group:
    parts: list[Table | Tree | Group | Text] = [summary_table(plan)]
    if plan.resolved.node_groups or plan.resolved.site is None:
        parts.append(node_group_table(plan))
        parts.append(Text(NODES_LEGEND, style="dim"))
    if plan.resolved.site is not None:
        parts.append(site_table(plan))
    if plan.secrets:
        parts.append(secrets_lines(plan))
    if tree:
        parts.insert(0, resource_tree(plan))
    if cost_caveats(plan):
        parts.append(Text("cost caveats:\n" + "\n".join(f"  - {c}" for c in cost_caveats(plan)), style="yellow"))
    if plan.policy is not None:
        parts.append(console_policies(plan.policy))
    return Group(*parts)


def markdown_plan(plan: Plan) -> str:
    lines = [f"## gpuforge plan: `{plan.stack}` ({plan.placement})", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary_rows(plan)]
    if cost_caveats(plan):
        lines += ["", "Cost caveats:", "", *[f"- {c}" for c in cost_caveats(plan)]]
    lines += [
        "",
        "### Node groups",
        "",
        "| group | role | instance | nodes | GPUs | fabric | AZ |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, g in plan.resolved.node_groups.items():
        fabric = f"efa x{g.efa_interfaces}" if g.efa_interfaces else g.spec.fabric
        lines.append(
            f"| {name} | {g.spec.role} | {g.spec.instance_type} | {g.spec.nodes_text} | "
            f"{g.spec.active_nodes * g.gpus_per_node} | {fabric} | {', '.join(g.azs)} |"
        )
    lines += ["", NODES_LEGEND]
    if plan.secrets:
        lines += ["", "### Secrets `pulumi up` reads", "", "| config key | used by | in the stack file | set it with |",
                  "|---|---|---|---|"]
        lines += [
            f"| `{s.config_key}` | `{s.used_by}` | {'set (secure)' if s.state == 'set' else s.state} | "
            f"`{s.command(plan.stack)}` |"
            for s in plan.secrets
        ]
    counts = Counter(r.type for r in plan.resources if r.custom)
    lines += ["", "### Resources by type", "", "| type | count |", "|---|---|"]
    lines += [f"| `{t}` | {n} |" for t, n in sorted(counts.items())]
    protected = [r.name for r in plan.resources if r.protect]
    if protected:
        lines += ["", "### Protected", "", ", ".join(f"`{n}`" for n in protected)]
    policy = markdown_policies(plan.policy) if plan.policy is not None else ""
    return "\n".join(lines) + "\n" + policy
