"""Power by hall and feed (issue 28, item 5): a site's halls, the feeds (A/B) that supply each, and the checks
that roll every rack's load up to them.

A hall's feeds are its upstream power paths (a UPS system, a switchboard: `feeds: {a: 2400, b: 2400}` kW rated);
each rack feed (PDU circuit) draws from one of them: the hall feed of the same name, or the one
`racks[r].hall_feeds` names (a rack with PDUs a, b, c on a two-path hall: `{a: a, b: b, c: a}`). Checked per hall,
with the rack feeds' arithmetic (gpuforge/spec/power.py, `feed_loss`): the hall's IT load within `budget_kw`; every
hall feed within its continuous rating (80 % of rated) in normal operation; and with any one hall feed lost, every
server keeps its N PSUs and every surviving feed carries what it picks up within its continuous rating (2N: either
path alone carries the hall).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from .base import SpecModel
from .errors import SpecIssue
from .power import CONTINUOUS_DERATE, Feed, Headroom, PsuLoad, RackLoad, feed_loss

if TYPE_CHECKING:
    from .resolved_site import ResolvedSite

HallFeedKw = Annotated[float, Field(gt=0, le=1_000_000)]
SITE = "cluster.site"


class Hall(SpecModel):
    """A data hall: the feeds that supply its racks and its IT power budget."""

    feeds: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")], HallFeedKw] = Field(
        min_length=1,
        description="Upstream power paths into the hall (UPS systems, switchboards) by name and rated kW, before "
        "the 80 % continuous derate, e.g. {a: 2400, b: 2400}. Rack feeds draw from the one of the same name "
        "(or as racks[r].hall_feeds maps them).",
    )
    budget_kw: float | None = Field(
        default=None, gt=0, le=1_000_000, description="The hall's IT power budget, kW (none: only the feeds limit it)."
    )


@dataclass(frozen=True)
class HallPower:
    """A hall's load rolled up from its racks: IT kW, and per hall feed in normal operation."""

    name: str
    load_kw: float
    budget: Headroom | None
    feeds: dict[str, Headroom]
    racks: tuple[str, ...]


def _hall_feed(rack_feed: str, mapping: dict[str, str]) -> str:
    return mapping.get(rack_feed, rack_feed)


def hall_load(site: ResolvedSite, hall: str) -> RackLoad:
    """The hall as one load: its feeds, and every device of its racks with PSUs counted per hall feed."""
    spec = site.spec.halls[hall]
    devices: list[PsuLoad] = []
    for rack_name, rack in site.spec.racks.items():
        if rack.hall != hall:
            continue
        for device in site.rack_devices(rack_name):
            by_hall: dict[str, int] = {}
            for feed, psus in device.psus_by_feed.items():
                target = _hall_feed(feed, rack.hall_feeds)
                by_hall[target] = by_hall.get(target, 0) + psus
            devices.append(PsuLoad(f"{rack_name}/{device.name}", device.load_kw, by_hall, device.required))
    feeds = tuple(Feed(name, name, capacity_kw=kw) for name, kw in sorted(spec.feeds.items()))
    return RackLoad(hall, sum(d.load_kw for d in devices), feeds, budget_kw=spec.budget_kw, devices=tuple(devices))


def hall_power(site: ResolvedSite) -> list[HallPower]:
    """Every hall's IT load, budget headroom and per-feed load in normal operation (load over working PSUs)."""
    out = []
    for name in sorted(site.spec.halls):
        load = hall_load(site, name)
        per_feed = dict.fromkeys((f.name for f in load.feeds), 0.0)
        for device in load.devices:
            total = sum(device.psus_by_feed.values())
            for feed, psus in device.psus_by_feed.items():
                if total and feed in per_feed:
                    per_feed[feed] += device.load_kw * psus / total
        out.append(
            HallPower(
                name,
                load.load_kw,
                Headroom(load.load_kw, load.budget_kw) if load.budget_kw is not None else None,
                {f.name: Headroom(per_feed[f.name], f.continuous_kw()) for f in load.feeds},
                tuple(r for r, rack in sorted(site.spec.racks.items()) if rack.hall == name),
            )
        )
    return out


def check_halls(site: ResolvedSite) -> list[SpecIssue]:
    """Every rack in a declared hall on feeds the hall has; each hall within its budget and feeds, normal and
    with any one hall feed lost."""
    halls = site.spec.halls
    issues = _check_rack_halls(site)
    if issues or not halls:
        return issues
    derate = f"{CONTINUOUS_DERATE:.0%} of rated"
    for power in hall_power(site):
        path = f"{SITE}.halls[{power.name}]"
        if power.budget is not None and not power.budget.ok:
            issues.append(
                SpecIssue(
                    f"{path}.budget_kw",
                    f"the hall's racks draw {power.budget.describe()} ({len(power.racks)} racks)",
                    f"move racks to another hall, or raise budget_kw to at least {power.load_kw:,.1f}",
                )
            )
        for feed, room in power.feeds.items():
            if not room.ok:
                issues.append(
                    SpecIssue(
                        f"{path}.feeds.{feed}",
                        f"in normal operation feed {feed} carries {room.describe()} (continuous, {derate})",
                        f"rate feed {feed} at least {room.load_kw / CONTINUOUS_DERATE:,.1f} kW, or move racks",
                    )
                )
        if len(halls[power.name].feeds) < 2:
            continue  # one path: nothing to lose over to (the rack checks still judge the PDUs)
        for lost, result in feed_loss(hall_load(site, power.name)).items():
            if result.short:
                first, left, need = result.short[0]
                issues.append(
                    SpecIssue(
                        f"{path}.feeds.{lost}",
                        f"losing hall feed {lost} leaves {len(result.short)} servers short of PSUs ({first}: {left} "
                        f"of {need} needed): their rack feeds all land on too few hall feeds",
                        "map the racks' feeds over the hall's feeds (racks[r].hall_feeds) so no hall feed carries "
                        "more PSUs of a server than its spares",
                    )
                )
            for feed, room in sorted(result.feeds.items()):
                if not room.ok:
                    issues.append(
                        SpecIssue(
                            f"{path}.feeds.{feed}",
                            f"with hall feed {lost} lost, feed {feed} carries {room.describe()} (continuous, {derate})",
                            f"rate feed {feed} at least {room.load_kw / CONTINUOUS_DERATE:,.1f} kW, or move racks "
                            "to another hall",
                        )
                    )
    return issues


def _check_rack_halls(site: ResolvedSite) -> list[SpecIssue]:
    halls = site.spec.halls
    issues: list[SpecIssue] = []
    unplaced = sorted(r for r, rack in site.spec.racks.items() if halls and rack.hall is None)
    if unplaced:
        issues.append(
            SpecIssue(
                f"{SITE}.racks[{unplaced[0]}].hall",
                f"{len(unplaced)} racks name no hall ({', '.join(unplaced[:5])}{', ...' if len(unplaced) > 5 else ''}) "
                f"while the site declares halls ({', '.join(sorted(halls))})",
                "give every rack (or rack range) hall: <name>",
            )
        )
    for name, rack in sorted(site.spec.racks.items()):
        if rack.hall is None:
            continue
        if rack.hall not in halls:
            issues.append(
                SpecIssue(
                    f"{SITE}.racks[{name}].hall",
                    f"{rack.hall} is not a hall of the site (halls: {', '.join(sorted(halls)) or 'none'})",
                    f"declare site.halls.{rack.hall}, or name one of the site's halls",
                )
            )
            continue
        for feed in sorted(rack.hall_feeds):
            if feed not in rack.feeds:
                issues.append(
                    SpecIssue(
                        f"{SITE}.racks[{name}].hall_feeds.{feed}",
                        f"{feed} is not a feed of the rack (feeds: {', '.join(sorted(rack.feeds))})",
                        "map only the rack's own feeds",
                    )
                )
        hall_feeds = halls[rack.hall].feeds
        for feed in sorted(rack.feeds):
            target = _hall_feed(feed, rack.hall_feeds)
            if target not in hall_feeds:
                issues.append(
                    SpecIssue(
                        f"{SITE}.racks[{name}].hall_feeds" if rack.hall_feeds else f"{SITE}.racks[{name}].feeds",
                        f"rack feed {feed} draws from hall feed {target}, which hall {rack.hall} does not have "
                        f"(its feeds: {', '.join(sorted(hall_feeds))})",
                        f"map it in hall_feeds, e.g. hall_feeds: {{{feed}: {sorted(hall_feeds)[0]}}}",
                    )
                )
    return issues
