"""GPU energy by account, partition, user and team over a window, measured: DCGM's energy counter
(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION) as the monitoring's recording rules attribute it to Slurm jobs
(gpuforge/assets/monitoring/recording.yaml, group gpuforge-energy), read through Prometheus' HTTP API.

The rules record watts every evaluation interval (slurm_account_partition_user:gpu_energy_watts:irate,
team:gpu_energy_watts:irate); the kWh of a window [since, until) is the sum of its samples x the interval, as the
rules' own `:1h` figures are summed, asked at --until over a range as long as the window:

  sum by (account, partition, user) (sum_over_time(<watts rule>[<window>s])) * <interval> / 3600000

The interval is the stack's monitoring.scrape_interval_s (the rules' evaluation interval). What the rules leave
out is left out here too: each job's first scrape interval on each GPU, and all non-GPU power (recording.yaml).
Kept apart from the sacct figures (gpuforge/nodes/usage.py): these are the GPUs' energy as DCGM measures it, not
Slurm's ConsumedEnergy (what an acct_gather_energy plugin records, where one runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuforge.nodes.usage import JOULES_PER_KWH

ROW_RULE = "slurm_account_partition_user:gpu_energy_watts:irate"
TEAM_RULE = "team:gpu_energy_watts:irate"
ROW_LABELS = ("account", "partition", "user")

Query = Callable[[str, datetime], Any]  # (PromQL, evaluation time) -> the API's JSON answer


class EnergyAnswerError(ValueError):
    """Prometheus answered, but not with the vector these queries ask for."""


def window_query(rule: str, labels: tuple[str, ...], since: datetime, until: datetime, interval_s: int) -> str:
    seconds = int((until - since).total_seconds())
    return f"sum by ({', '.join(labels)}) (sum_over_time({rule}[{seconds}s])) * {interval_s} / {JOULES_PER_KWH}"


def _vector(document: Any, query: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of each sample of an instant vector answer."""
    if not isinstance(document, Mapping) or document.get("status") != "success":
        error = document.get("error") if isinstance(document, Mapping) else None
        raise EnergyAnswerError(f"{query}: Prometheus answered {error or document!r}")
    data = document.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise EnergyAnswerError(f"{query}: expected a vector result, got {data!r}")
    samples = []
    for sample in data["result"]:
        try:
            samples.append(({str(k): str(v) for k, v in sample["metric"].items()}, float(sample["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise EnergyAnswerError(f"{query}: a sample is not {{metric, value: [time, number]}}: {sample!r}") from None
    return samples


@dataclass
class MeasuredEnergy:
    """GPU kWh (IT) per (account, user, partition), account, user and team, with where they came from."""

    source: str
    since: datetime
    until: datetime
    interval_s: int
    rows: dict[tuple[str, str, str], float] = field(default_factory=dict)
    accounts: dict[str, float] = field(default_factory=dict)
    users: dict[str, float] = field(default_factory=dict)
    teams: dict[str, float] = field(default_factory=dict)
    total: float = 0.0

    def to_json(self, pue: float) -> dict[str, Any]:
        def figures(kwh: float) -> dict[str, float]:
            return {"gpu_kwh": round(kwh, 4), "facility_kwh": round(kwh * pue, 4)}

        return {
            "source": self.source,
            "since": self.since.astimezone(UTC).isoformat(),
            "until": self.until.astimezone(UTC).isoformat(),
            "interval_s": self.interval_s,
            "total": figures(self.total),
            "accounts": {name: figures(kwh) for name, kwh in sorted(self.accounts.items())},
            "teams": {name: figures(kwh) for name, kwh in sorted(self.teams.items())},
            "users": {name: figures(kwh) for name, kwh in sorted(self.users.items())},
            "rows": [
                {"account": a, "user": u, "partition": p, **figures(kwh)}
                for (a, u, p), kwh in sorted(self.rows.items())
            ],
        }


def measured_energy(query: Query, source: str, since: datetime, until: datetime, interval_s: int) -> MeasuredEnergy:
    """The GPU kWh of [since, until) from the recording rules' series, asked through *query*."""
    energy = MeasuredEnergy(source=source, since=since, until=until, interval_s=interval_s)
    rows_query = window_query(ROW_RULE, ROW_LABELS, since, until, interval_s)
    for labels, kwh in _vector(query(rows_query, until), rows_query):
        account, partition, user = (labels.get(name, "") for name in ROW_LABELS)
        energy.rows[(account, user, partition)] = kwh
        energy.accounts[account] = energy.accounts.get(account, 0.0) + kwh
        energy.users[user] = energy.users.get(user, 0.0) + kwh
        energy.total += kwh
    teams_query = window_query(TEAM_RULE, ("team",), since, until, interval_s)
    for labels, kwh in _vector(query(teams_query, until), teams_query):
        energy.teams[labels.get("team", "")] = kwh
    return energy
