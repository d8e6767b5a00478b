"""GPU-hours and energy by account, team, user and partition over a window, from slurmdbd's job records.

The records come from `sacct` (SACCT_ARGS), not `sreport`: sreport reads slurmdbd's hourly rollups, so a
job that ended in the last hour is not there yet and a window cannot start mid-hour, and it has no
partition breakdown; sacct reads the job records themselves, one line per allocation (--allocations),
each run of a requeued job apart (--duplicates), with the running jobs. Everything here is pure: the
caller brings sacct's text and the controller's energy plugin (gpuforge/nodes/usage_query.py asks).

A job is counted for the part of its run inside the window: a job that started before --since or is
still running at --until counts only its seconds in between (never more than its ElapsedRaw, which
leaves out time suspended). Its energy (ConsumedEnergyRaw, joules over the whole job) is cut in the same
proportion. A job's team is its account's (monitoring.slurm_teams, as the monitoring's team recording rules
join); a job of an account in no team counts under no team.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# The fields read, in this order; with --parsable2 a line is these values joined by "|".
SACCT_FIELDS = (
    "JobID",
    "User",
    "Account",
    "Partition",
    "State",
    "Start",
    "End",
    "ElapsedRaw",
    "AllocTRES",
    "ConsumedEnergyRaw",
)
# sacct runs with TZ=UTC (the window's times are read as UTC) and SLURM_TIME_FORMAT=%s (Start and End
# as seconds since the epoch: no time zone to guess when reading them back).
SACCT_ENVIRONMENT = {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"}
GPU_TRES = "gres/gpu"
# What `scontrol show config` says for AcctGatherEnergyType when no energy plugin gathers anything.
NO_ENERGY_PLUGINS = ("", "(null)", "acct_gather_energy/none")
JOULES_PER_KWH = 3_600_000


class SacctFormatError(ValueError):
    """sacct's output is not the shape SACCT_FIELDS asked for."""


def sacct_args(since: datetime, until: datetime) -> list[str]:
    """The sacct command line for the window [since, until) (aware datetimes, sent as UTC)."""
    return [
        "sacct",
        "--allusers",
        "--allocations",
        "--duplicates",
        "--parsable2",
        "--noheader",
        f"--starttime={_utc(since)}",
        f"--endtime={_utc(until)}",
        "--format=" + ",".join(SACCT_FIELDS),
    ]


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class JobRecord:
    """One allocation (one run of a job) as sacct -P gave it."""

    job_id: str
    user: str
    account: str
    partition: str
    state: str
    start: int | None  # epoch seconds; None while the job has not started
    end: int | None  # None while it runs
    elapsed_s: int
    gpus: int
    energy_j: int | None  # None when the record carries no energy figure


def _epoch(value: str) -> int | None:
    """Start/End under SLURM_TIME_FORMAT=%s; "Unknown" or "None" for a time that has not come."""
    if value.isdigit():
        return int(value) or None
    if value in ("", "Unknown", "None"):
        return None
    try:  # a controller whose sacct ignored SLURM_TIME_FORMAT: ISO 8601, in UTC since TZ=UTC
        return int(datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp())
    except ValueError:
        raise SacctFormatError(f"a time sacct gave is neither epoch seconds nor ISO 8601: {value!r}") from None


def gpus_allocated(alloc_tres: str) -> int:
    """The GPUs in an AllocTRES string (`billing=8,cpu=8,gres/gpu=2,mem=16G,node=1`); typed entries
    (`gres/gpu:a10g=2`) repeat the untyped count and are not added again."""
    for item in alloc_tres.split(","):
        key, _, value = item.partition("=")
        if key == GPU_TRES:
            return int(value)
    return 0


def parse_sacct(text: str) -> list[JobRecord]:
    """The records in sacct's --parsable2 --noheader output of SACCT_FIELDS."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(SACCT_FIELDS):
            raise SacctFormatError(
                f"sacct line {number} has {len(values)} fields, expected {len(SACCT_FIELDS)} "
                f"({','.join(SACCT_FIELDS)}): {line!r}"
            )
        row = dict(zip(SACCT_FIELDS, values, strict=True))
        energy = row["ConsumedEnergyRaw"]
        try:
            records.append(
                JobRecord(
                    job_id=row["JobID"],
                    user=row["User"],
                    account=row["Account"],
                    partition=row["Partition"],
                    state=row["State"].split(" ")[0],  # "CANCELLED by 1000"
                    start=_epoch(row["Start"]),
                    end=_epoch(row["End"]),
                    elapsed_s=int(row["ElapsedRaw"] or 0),
                    gpus=gpus_allocated(row["AllocTRES"]),
                    energy_j=int(energy) if energy.isdigit() else None,
                )
            )
        except ValueError as error:
            if isinstance(error, SacctFormatError):
                raise
            raise SacctFormatError(f"sacct line {number}: {error}: {line!r}") from None
    return records


def seconds_in_window(job: JobRecord, since: int, until: int) -> int:
    """The seconds of *job*'s run inside [since, until): its start to its end (a running job: start plus
    its ElapsedRaw so far), cut to the window, and never more than ElapsedRaw."""
    if job.start is None or job.elapsed_s <= 0:
        return 0
    end = job.end if job.end is not None else job.start + job.elapsed_s
    inside = min(end, until) - max(job.start, since)
    return max(0, min(inside, job.elapsed_s))


@dataclass
class Usage:
    """GPU-hours and energy of one group of jobs (an account, a user, an account-user-partition row)."""

    jobs: int = 0
    gpu_seconds: int = 0
    energy_j: float = 0.0
    jobs_with_energy: int = 0

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600

    def add(self, job: JobRecord, seconds: int) -> None:
        self.jobs += 1
        self.gpu_seconds += job.gpus * seconds
        if job.energy_j is not None and job.elapsed_s > 0:
            self.energy_j += job.energy_j * seconds / job.elapsed_s
            self.jobs_with_energy += 1

    def to_json(self, energy: EnergyBasis | None) -> dict[str, Any]:
        document: dict[str, Any] = {"jobs": self.jobs, "gpu_hours": round(self.gpu_hours, 4)}
        if energy is not None:
            it_kwh = self.energy_j / JOULES_PER_KWH
            document["energy"] = {
                "it_kwh": round(it_kwh, 4),
                "facility_kwh": round(it_kwh * energy.pue, 4),
                "jobs_with_energy": self.jobs_with_energy,
            }
        return document


@dataclass(frozen=True)
class EnergyBasis:
    """How energy is reported: the controller's energy plugin and the stack's PUE with its source."""

    plugin: str | None  # AcctGatherEnergyType as the controller runs it; None when scontrol did not say
    pue: float
    pue_source: str

    @property
    def recorded(self) -> bool:
        return self.plugin is not None and self.plugin.strip() not in NO_ENERGY_PLUGINS


@dataclass
class UsageReport:
    since: datetime
    until: datetime
    energy: EnergyBasis
    rows: dict[tuple[str, str, str], Usage] = field(default_factory=dict)  # (account, user, partition)
    accounts: dict[str, Usage] = field(default_factory=dict)
    teams: dict[str, Usage] = field(default_factory=dict)  # monitoring.slurm_teams: the accounts' teams
    users: dict[str, Usage] = field(default_factory=dict)
    total: Usage = field(default_factory=Usage)

    @property
    def energy_note(self) -> str | None:
        """Why no kWh are shown, or None when they are."""
        if self.energy.plugin is None:
            return (
                "energy unknown: `scontrol show config` on the controller did not answer (is slurmctld running?), "
                "so whether job records carry ConsumedEnergy cannot be told"
            )
        if not self.energy.recorded:
            plugin = self.energy.plugin.strip()
            plugin = plugin if plugin.startswith("acct_gather_energy/") else "unset (acct_gather_energy/none)"
            return (
                f"no energy recorded: the controller's AcctGatherEnergyType is {plugin}, so job records carry "
                "no ConsumedEnergy (set an acct_gather_energy plugin: ipmi, rapl, gpu, pm_counters)"
            )
        if self.total.jobs and not self.total.jobs_with_energy:
            return f"no energy recorded: none of the {self.total.jobs} job(s) carries ConsumedEnergyRaw"
        return None

    def to_json(self) -> dict[str, Any]:
        energy = self.energy if self.energy_note is None else None
        return {
            "since": self.since.astimezone(UTC).isoformat(),
            "until": self.until.astimezone(UTC).isoformat(),
            "source": "sacct (slurmdbd job records)",
            "total": self.total.to_json(energy),
            "accounts": {name: u.to_json(energy) for name, u in sorted(self.accounts.items())},
            "teams": {name: u.to_json(energy) for name, u in sorted(self.teams.items())},
            "users": {name: u.to_json(energy) for name, u in sorted(self.users.items())},
            "rows": [
                {"account": a, "user": user, "partition": p, **u.to_json(energy)}
                for (a, user, p), u in sorted(self.rows.items())
            ],
            "energy": {
                "recorded": energy is not None,
                "plugin": self.energy.plugin,
                "note": self.energy_note,
                "pue": self.energy.pue,
                "pue_source": self.energy.pue_source,
            },
        }


def aggregate(
    records: Iterable[JobRecord],
    since: datetime,
    until: datetime,
    energy: EnergyBasis,
    account_teams: Mapping[str, str] | None = None,
) -> UsageReport:
    """Add up *records* cut to [since, until): per (account, user, partition), per account, per team (of
    *account_teams*, account -> team), per user and in total. Jobs with no GPUs count as jobs with zero
    GPU-hours; jobs that never ran in the window are left out."""
    teams = account_teams or {}
    report = UsageReport(since=since, until=until, energy=energy)
    start, stop = int(since.timestamp()), int(until.timestamp())
    for job in records:
        seconds = seconds_in_window(job, start, stop)
        if seconds == 0:
            continue
        for usage in (
            report.rows.setdefault((job.account, job.user, job.partition), Usage()),
            report.accounts.setdefault(job.account, Usage()),
            report.users.setdefault(job.user, Usage()),
            report.total,
        ):
            usage.add(job, seconds)
        if job.account in teams:
            report.teams.setdefault(teams[job.account], Usage()).add(job, seconds)
    return report
