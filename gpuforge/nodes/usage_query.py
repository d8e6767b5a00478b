"""The SSH step of `gpuforge usage STACK`: slurm-usage.yml runs sacct (and `scontrol show config`, for the
energy plugin) on the inventory's slurm_controller hosts, the same path `gpuforge check --drain slurm`
takes to scontrol; the records come back in the tasks' results and gpuforge/nodes/usage.py adds them up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuforge.nodes.bake import EventHandler, Inventories, run_playbook
from gpuforge.nodes.usage import SACCT_ENVIRONMENT, EnergyBasis, UsageReport, aggregate, parse_sacct, sacct_args

PLAYBOOK = "slurm-usage.yml"
CONFIG_TASK = "Read the energy plugin the controller runs"
RECORDS_TASK = "Read the job records from slurmdbd"

# sacct's words when it cannot read accounting, and what they mean for the person running the command.
SACCT_FAILURES = (
    (
        "accounting storage is disabled",
        "accounting is off: the controller's AccountingStorageType is not accounting_storage/slurmdbd, so "
        "there are no job records to count (the stack's scheduler.accounting turns it on)",
    ),
    (
        "problem talking to the database",
        "slurmdbd did not answer sacct: check `systemctl status slurmdbd` and its database on the controller",
    ),
    (
        "connection refused",
        "slurmdbd did not answer sacct: check `systemctl status slurmdbd` and its database on the controller",
    ),
)


class UsageUnavailable(RuntimeError):
    """No job records could be read: no controller in the inventory, none reachable, or sacct failed."""


@dataclass(frozen=True)
class ControllerAnswer:
    host: str
    rc: int
    stdout: str
    stderr: str


def energy_plugin(config_text: str) -> str | None:
    """AcctGatherEnergyType from `scontrol show config` (`AcctGatherEnergyType   = acct_gather_energy/none`)."""
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "AcctGatherEnergyType":
            return value.strip()
    return None


def sacct_failure(host: str, answer: ControllerAnswer) -> str:
    """What a failed sacct means, in sacct's words and ours."""
    said = (answer.stderr or answer.stdout).strip() or f"exit status {answer.rc}"
    lowered = said.lower()
    for words, meaning in SACCT_FAILURES:
        if words in lowered:
            return f"{meaning} (sacct on {host}: {said})"
    if answer.rc == 2 and "no such file" in lowered:
        return f"sacct is not installed on {host}: the controller's slurm roles install it ({said})"
    return f"sacct on {host} failed (exit status {answer.rc}): {said}"


class _Answers:
    """An event handler that keeps each controller's answer to the two tasks, and passes events on."""

    def __init__(self, then: EventHandler | None) -> None:
        self.then = then
        self.by_task: dict[str, dict[str, ControllerAnswer]] = {CONFIG_TASK: {}, RECORDS_TASK: {}}

    def __call__(self, event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        task = data.get("task")
        if event.get("event") == "runner_on_ok" and task in self.by_task:
            res: Mapping[str, Any] = data.get("res") or {}
            host = str(data.get("host", "?"))
            self.by_task[task][host] = ControllerAnswer(
                host=host,
                rc=int(res["rc"]) if res.get("rc") is not None else 1,
                stdout=str(res.get("stdout") or ""),
                stderr=str(res.get("stderr") or res.get("msg") or ""),
            )
        if self.then is not None:
            self.then(event)


def collect_usage(
    inventory: Inventories,
    since: datetime,
    until: datetime,
    *,
    pue: float,
    pue_source: str,
    account_teams: Mapping[str, str] | None = None,
    on_event: EventHandler | None = None,
    user: str | None = None,
    private_key: Path | None = None,
) -> UsageReport:
    """Read the job records of [since, until) from the first controller that answers, and add them up (by team
    too, with *account_teams*: account -> team)."""
    answers = _Answers(on_event)
    result = run_playbook(
        PLAYBOOK,
        inventory,
        extravars={"slurm_usage_sacct": sacct_args(since, until), "slurm_usage_environment": SACCT_ENVIRONMENT},
        on_event=answers,
        user=user,
        private_key=private_key,
    )
    if not result.hosts:
        raise UsageUnavailable(
            "the inventory has no slurm_controller host to read the job records on (does the stack have a "
            "scheduler section? On AWS, is it deployed? See `gpuforge inventory STACK`)"
        )
    records = answers.by_task[RECORDS_TASK]
    answered = [records[host] for host in sorted(records) if records[host].rc == 0]
    if not answered:
        reasons = [sacct_failure(host, records[host]) for host in sorted(records)]
        reasons += [f"{f.host} is unreachable: {f.message}" for f in result.failures if f.host not in records]
        raise UsageUnavailable("no controller gave the job records: " + "; ".join(reasons or [result.status]))
    chosen = answered[0]
    config = answers.by_task[CONFIG_TASK].get(chosen.host)
    plugin = energy_plugin(config.stdout) if config is not None and config.rc == 0 else None
    energy = EnergyBasis(plugin=plugin, pue=pue, pue_source=pue_source)
    return aggregate(parse_sacct(chosen.stdout), since, until, energy, account_teams)
