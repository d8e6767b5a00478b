"""Checks of the slurm.conf settings a stack passes through (scheduler.extra_settings, a partition's
extra_options) against the catalog (data/slurm_settings.yaml, from slurm.conf(5)); every problem at once.

A key gpuforge renders is refused with the field that sets it; an unknown key with the nearest known ones; a
value in a form slurm.conf(5) does not document for its key, or a key (or value) first documented in a newer
Slurm than the stack runs, with that reason. Values are single words or numbers, so none can start another
line of slurm.conf.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from gpuforge.catalog import Catalog
from gpuforge.catalog.models import version_tuple
from gpuforge.catalog.slurm_settings import SettingFacts, fixed_by_gpuforge, slurm_settings

from .errors import SpecIssue
from .models import ClusterSpec, default_image_parameter
from .slurm_os_checks import slurm_image_os
from .slurm_settings import SlurmValue
from .suggest import did_you_mean, shown

PATH = "cluster.scheduler"
# SchedulerParameters: name or name=value, comma separated (slurm.conf(5): "multiple options ... comma separated").
_OPTIONS = re.compile(r"[a-z][a-z0-9_]*(=[A-Za-z0-9_.:/-]+)?(,[a-z][a-z0-9_]*(=[A-Za-z0-9_.:/-]+)?)*")
# A location: a path, a URL or host:port/target, one word (JobCompLoc).
_LOCATION = re.compile(r"[A-Za-z0-9_./:@%+=-]+")


class StackSlurm(NamedTuple):
    """The oldest Slurm the stack's daemons may run (every one of them reads slurm.conf), why, and what would
    allow a newer key."""

    version: str
    why: str
    newer: str  # how a stack gets a newer release, or why it cannot


def stack_slurm_release(spec: ClusterSpec, catalog: Catalog) -> StackSlurm:
    facts = catalog.slurm
    if spec.placement.kind != "aws":
        return StackSlurm(
            facts.minimum.version,
            f"the site's hosts run the site's own Slurm; gpuforge allows {facts.minimum.version} and newer "
            "(catalog slurm.minimum, checked by the slurm_version role)",
            "gpuforge cannot tell that a site runs a newer release",
        )
    production = facts.distributions[facts.production.os or ""]
    oldest = StackSlurm(production.version, f"the controller boots {facts.production.os} ({production.source})",
                        "gpuforge installs no newer release on AWS (catalog slurm.production)")
    for name, group in sorted(spec.node_groups.items()):
        if group.orchestrator != "slurm":
            continue
        os = slurm_image_os(spec, group)
        packaged = facts.distributions.get(os or "")
        if packaged is not None and not facts.supports_release(packaged.version):
            continue  # refused on its own (slurm_os_checks.py): no Slurm of gpuforge's runs there
        version = packaged.version if packaged else facts.minimum.version
        if version_tuple(version) < version_tuple(oldest.version):
            why = (f"node group {name} boots {os}'s Slurm {version}" if packaged else
                   f"node group {name}'s image does not name its distribution, so its Slurm may be as old as "
                   f"{version} (catalog slurm.minimum)")
            oldest = StackSlurm(version, why, f"or give node group {name} an image by an SSM parameter that names "
                                              f"its distribution, e.g. {default_image_parameter('slurm')}")
    return oldest


def check_slurm_settings(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    sched = spec.scheduler
    if sched is None:
        return []
    settings = slurm_settings()
    release = stack_slurm_release(spec, catalog)
    dynamic = spec.placement.kind != "onprem" and any(g.orchestrator == "slurm" for g in spec.node_groups.values())
    issues = _check_map(f"{PATH}.extra_settings", sched.extra_settings, settings.settings, settings.owned, release,
                        dynamic)
    for pname, partition in sched.partitions.items():
        ppath = f"{PATH}.partitions[{pname}]"
        # A partition's own fields are named by their path; gpuforge's fixed values by why.
        owned = {k: owner if fixed_by_gpuforge(owner) else f"{ppath}.{owner}"
                 for k, owner in settings.partition_owned.items()}
        issues += _check_map(f"{ppath}.extra_options", partition.extra_options, settings.partition_options, owned,
                             release, dynamic)
    return issues


def _check_map(
    path: str,
    given: Mapping[str, SlurmValue],
    known: Mapping[str, SettingFacts],
    owned: Mapping[str, str],
    release: StackSlurm,
    dynamic: bool,
) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    folded_owned = {k.casefold(): k for k in owned}
    for key, value in given.items():
        kpath = f"{path}[{key}]"
        if key.casefold() in folded_owned:  # slurm.conf keys are case-insensitive
            issues.append(_owned(kpath, key, owned[folded_owned[key.casefold()]]))
            continue
        facts = known.get(key)
        if facts is None:
            near = did_you_mean(key, known) or sorted(known)[:6]
            issues.append(SpecIssue(
                kpath, f"{key} is not a key gpuforge can pass through ({_manual()}: catalog slurm_settings)",
                f"use one of the nearest known keys: {', '.join(near)}; or ask for {key} to be added to "
                "gpuforge/catalog/data/slurm_settings.yaml with its form from slurm.conf(5)",
            ))
            continue
        if dynamic and facts.owned_with_dynamic_nodes:
            issues.append(SpecIssue(kpath, f"{key} is rendered by gpuforge on this stack: "
                                           f"{facts.owned_with_dynamic_nodes}", f"remove {key}"))
            continue
        issues += _too_new(kpath, key, facts.since, release)
        issues += _form(kpath, key, value, facts, release)
        if facts.requires and facts.requires not in given:
            issues.append(SpecIssue(kpath, f"{key} means nothing without {facts.requires} (slurm.conf(5))",
                                    f"set {facts.requires} beside it, or remove {key}"))
    return issues


def _manual() -> str:
    releases = slurm_settings().releases_read
    return f"slurm.conf(5) of Slurm {releases[0]} to {releases[-1]}"


def _owned(path: str, key: str, owner: str) -> SpecIssue:
    why = fixed_by_gpuforge(owner)
    if why is not None:
        return SpecIssue(path, f"{key} is set by gpuforge itself ({why})",
                         f"remove {key} (docs/slurm.md, \"Settings gpuforge does not set\", says which keys are free)")
    return SpecIssue(path, f"{key} is rendered by gpuforge from {owner}",
                     f"remove {key} here; to change it, change {owner}")


def _too_new(path: str, what: str, since: str, release: StackSlurm) -> list[SpecIssue]:
    if version_tuple(since) <= version_tuple(release.version)[:2]:
        return []
    return [SpecIssue(
        path,
        f"{what} is documented from Slurm {since} (slurm.conf(5)); this stack's Slurm may be {release.version}: "
        f"{release.why}",
        f"remove {what}; {release.newer}",
    )]


def _form(path: str, key: str, value: SlurmValue, facts: SettingFacts, release: StackSlurm) -> list[SpecIssue]:
    text = str(value)
    expected = _expected(facts)
    if facts.form in ("seconds", "count"):
        if text in facts.unlimited:
            return []
        number = value if isinstance(value, int) else int(text) if re.fullmatch(r"-?\d+", text) else None
        if number is None or not (facts.min or 0) <= number <= (facts.max or number):
            return [_not_in_form(path, key, value, expected)]
        return []
    if facts.form == "choice":
        if text not in facts.values:
            return [_not_one_of(path, key, value, facts, expected)]
        return _too_new(path, f"{key}={text}", facts.values[text].since, release)
    if facts.form == "choices":
        parts = text.split(",")
        wrong = [p for p in parts if p not in facts.values]
        if wrong:
            return [_not_one_of(path, key, ",".join(wrong), facts, expected)]
        return [i for p in parts for i in _too_new(path, f"{key}={p}", facts.values[p].since, release)]
    pattern = _OPTIONS if facts.form == "options" else _LOCATION
    return [] if pattern.fullmatch(text) else [_not_in_form(path, key, value, expected)]


def _not_in_form(path: str, key: str, value: SlurmValue, expected: str) -> SpecIssue:
    return SpecIssue(path, f"{shown(value)} is not {expected} (slurm.conf(5), {key})", f"write {key} as {expected}")


def _not_one_of(path: str, key: str, value: SlurmValue, facts: SettingFacts, expected: str) -> SpecIssue:
    hint = did_you_mean(value, facts.values)
    return SpecIssue(path, f"{shown(value)} is not {expected} (slurm.conf(5), {key})",
                     f"use {' or '.join(hint) if hint else 'one of ' + ', '.join(facts.values)}")


def _expected(facts: SettingFacts) -> str:
    bounds = f"{facts.min}..{facts.max}"
    unlimited = f" or {' or '.join(facts.unlimited)}" if facts.unlimited else ""
    return {
        "seconds": f"a number of seconds {bounds}{unlimited}",
        "count": f"a whole number {bounds}{unlimited}",
        "choice": f"one of {', '.join(facts.values)}",
        "choices": f"one or more of {', '.join(facts.values)}, comma separated",
        "options": "options (name or name=value) separated by commas, no spaces",
        "location": "one word (a path, a URL or host:port/target), no spaces",
    }[facts.form]
