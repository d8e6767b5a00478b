"""The policy packs, run offline on a plan: the same rule functions the engine's packs run.

`check_plan` is the one call gpuforge/plan/engine.py makes. Each violation becomes a finding at the
level the environment and the stack's gpuforge:policy give it (mandatory, advisory), or
`waived` while a waiver holds; an expired waiver leaves the violation at its level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuforge.plan.model import COMPUTED, PlanResource
from gpuforge.policy.rules import PACKS, REGISTRY, UNKNOWN, Resource, RuleContext, Stack, rules_for
from gpuforge.policy.rules.power import PowerReport, power_report
from gpuforge.policy.settings import Settings, resource_name, settings_from_config

LEVEL_ORDER = ("mandatory", "advisory", "waived")
LEVEL_STYLE = {"mandatory": "bold red", "advisory": "yellow", "waived": "dim"}


@dataclass(frozen=True)
class Finding:
    pack: str
    rule: str
    level: str  # mandatory | advisory | waived
    urn: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"pack": self.pack, "rule": self.rule, "level": self.level, "urn": self.urn, "message": self.message}


@dataclass
class PolicyReport:
    environment: str
    findings: list[Finding]
    power: PowerReport
    rules_run: int = 0
    levels: dict[str, str] = field(default_factory=dict)  # rule id -> effective level

    @property
    def blocking(self) -> bool:
        return any(f.level == "mandatory" for f in self.findings)

    def by_level(self, level: str) -> list[Finding]:
        return [f for f in self.findings if f.level == level]

    def rule_ids(self, level: str | None = None) -> set[str]:
        return {f.rule for f in self.findings if level is None or f.level == level}

    def to_json(self) -> dict[str, Any]:
        return {"policies": [f.to_json() for f in self.findings], "power": self.power.to_json()}


def _with_unknowns(value: Any, computed: str = COMPUTED) -> Any:
    """The plan's placeholder for values only the engine knows becomes UNKNOWN, as in the engine."""
    if value == computed:
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _with_unknowns(v, computed) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_unknowns(v, computed) for v in value]
    return value


def to_rule_resources(resources: Iterable[PlanResource]) -> list[Resource]:
    return [
        Resource(
            urn=r.urn,
            type=r.type,
            name=r.name,
            inputs=_with_unknowns(r.inputs),
            parent=r.parent,
            protect=r.protect,
            dependencies={k: tuple(v) for k, v in getattr(r, "dependencies", {}).items()},
            depends_on=tuple(getattr(r, "depends_on", ())),
            provider=getattr(r, "provider", None),
        )
        for r in resources
    ]


def run_packs(
    resources: Sequence[Resource], settings: Settings, today: date | None = None, packs: Iterable[str] = PACKS
) -> PolicyReport:
    day = today or date.today()
    findings: list[Finding] = []
    levels: dict[str, str] = {}
    run = 0
    for pack in packs:
        for rule in rules_for(pack):
            level = settings.level(rule)
            levels[rule.id] = level
            if level == "disabled":
                continue
            run += 1
            ctx = RuleContext(settings.environment, settings.params(rule))
            for v in rule.run(resources, ctx):
                waiver = settings.waiver_for(v)
                if waiver is not None and not waiver.expired(day):
                    findings.append(
                        Finding(
                            pack,
                            v.rule,
                            "waived",
                            v.urn,
                            f"{v.message} [waived until {waiver.expires}: {waiver.reason}]",
                        )
                    )
                elif waiver is not None:
                    findings.append(
                        Finding(
                            pack,
                            v.rule,
                            level,
                            v.urn,
                            f"{v.message} [waiver expired {waiver.expires}: {waiver.reason}]",
                        )
                    )
                else:
                    findings.append(Finding(pack, v.rule, level, v.urn, v.message))
    findings.sort(key=lambda f: (LEVEL_ORDER.index(f.level), f.pack, f.rule, f.urn))
    return PolicyReport(settings.environment, findings, power_report(Stack(resources)), run, levels)


def check_plan(
    resources: Iterable[PlanResource], config: Mapping[str, Any], source: str = "", today: date | None = None
) -> PolicyReport:
    """Run every pack on a plan's resources with the stack's settings (raises SpecError when
    gpuforge:policy is invalid)."""
    return run_packs(to_rule_resources(resources), settings_from_config(config, source), today)


# --- rendering -------------------------------------------------------------------------------


def power_lines(report: PolicyReport) -> list[str]:
    p = report.power
    lines: list[str] = []
    if not p.sites or p.it_kw:  # an on-premises-only plan has no cloud load to show
        lines.append(f"IT load {p.it_kw:,.1f} kW x PUE {p.pue} = {p.facility_kw:,.1f} kW")
        if p.pue_source:
            lines.append(f"PUE from {p.pue_source}")
        lines.append(f"budget: {p.budget.describe()}" if p.budget else "budget: none declared (power.budget_kw)")
        if p.budget and p.placement in ("aws", "hybrid"):
            lines.append("cloud: the budget is the facility power this cluster answers for, not a limit AWS enforces")
    for name, site in p.sites.items():
        lines.append(f"site {name}: IT {site.it_kw:,.1f} kW x PUE {site.pue} = {site.budget.load_kw:,.1f} kW")
        lines.append(f"site {name} budget: {site.budget.describe()}")
    for rack, sides in p.racks.items():
        lines += [f"rack {rack} {side}: {room.describe()}" for side, room in sides.items()]
    return lines


def console_policies(report: PolicyReport) -> Group:
    """Power headroom, then the findings grouped by level (mandatory, advisory, waived)."""
    counts = ", ".join(f"{len(report.by_level(lv))} {lv}" for lv in LEVEL_ORDER)
    parts = [Text.from_markup("[bold]power[/]")] + [Text("  " + line) for line in power_lines(report)]
    parts.append(
        Text.from_markup(f"[bold]policies[/] ({escape(report.environment)}): {report.rules_run} rules, {counts}")
    )
    if not report.findings:
        parts.append(Text.from_markup("  [green]no violations[/]"))
    for level in LEVEL_ORDER:
        found = report.by_level(level)
        if found:
            parts.append(Text.from_markup(f"  [{LEVEL_STYLE[level]}]{level}[/] ({len(found)})"))
        for f in found:
            parts.append(
                Text.from_markup(f"    [{LEVEL_STYLE[level]}]{escape(f.rule)}[/] {escape(resource_name(f.urn))}")
            )
            parts.append(Text("      " + f.message))
    return Group(*parts)


def markdown_policies(report: PolicyReport) -> str:
    lines = ["", "### Power", ""] + [f"- {line}" for line in power_lines(report)]
    lines += ["", f"### Policies ({report.environment})", ""]
    if not report.findings:
        lines.append(f"All {report.rules_run} rules pass.")
        return "\n".join(lines) + "\n"
    for level in LEVEL_ORDER:
        found = report.by_level(level)
        if not found:
            continue
        lines += [f"**{level}** ({len(found)})", "", "| rule | resource | message |", "|---|---|---|"]
        lines += [f"| `{f.rule}` | `{resource_name(f.urn)}` | {f.message.replace('|', '/')} |" for f in found]
        lines.append("")
    return "\n".join(lines) + "\n"


def rules_table() -> Table:
    table = Table("rule", "pack", "levels prod/staging/dev", "why", title="gpuforge policy rules", title_justify="left")
    table.columns[0].no_wrap = True
    for pack in PACKS:
        for rule in rules_for(pack):
            levels = "/".join(rule.level(env) for env in ("prod", "staging", "dev"))
            table.add_row(rule.id, rule.pack, levels, rule.why)
    return table


def rules_json() -> list[dict[str, Any]]:
    return (
        [
            {
                "id": r.id,
                "pack": r.pack,
                "kind": r.kind,
                "levels": dict(r.levels),
                "why": r.why,
                "fix": r.fix,
                "types": list(r.types),
                "params": {k: {"default": p.default, "description": p.description} for k, p in r.params.items()},
            }
            for pack in PACKS
            for r in rules_for(pack)
        ]
        if REGISTRY
        else []
    )
