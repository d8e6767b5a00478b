"""`gpuforge usage`'s arithmetic (gpuforge/nodes/usage.py) on sacct output in the shape the command asks for
(`sacct --allusers --allocations --duplicates --parsable2 --noheader --format=<SACCT_FIELDS>` with
SLURM_TIME_FORMAT=%s): "|" between fields and none after the last, Start/End in epoch seconds or Unknown,
AllocTRES as sacct prints it (`billing=8,cpu=8,gres/gpu=2,mem=16000M,node=1`, a typed GPU entry beside the
untyped one), "CANCELLED by <uid>", a requeued run as its own REQUEUED line, a pending job with no start and
no AllocTRES (a backslash in SACCT only folds a long line). Every expected figure is worked by hand below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gpuforge.nodes.usage import (
    SACCT_FIELDS,
    EnergyBasis,
    SacctFormatError,
    aggregate,
    gpus_allocated,
    parse_sacct,
    sacct_args,
)
from gpuforge.nodes.usage_query import ControllerAnswer, energy_plugin, sacct_failure

SINCE = datetime(2026, 11, 20, tzinfo=UTC)  # 1795132800
UNTIL = datetime(2026, 11, 27, tzinfo=UTC)  # 1795737600

SACCT = """\
101|alice|research|gpu|COMPLETED|1795136400|1795143600|7200|billing=8,cpu=8,gres/gpu=8,mem=64000M,node=1|14400000
102|bob|research|gpu|COMPLETED|1795131000|1795134600|3600|billing=4,cpu=4,gres/gpu=4,mem=32000M,node=1|3600000
103|carol|vision|batch|RUNNING|1795732200|Unknown|7200|billing=2,cpu=2,gres/gpu=2,mem=16000M,node=1|7200000
104|alice|research|gpu|REQUEUED|1795232800|1795233700|900|billing=8,cpu=8,gres/gpu=8,mem=64000M,node=1|1800000
104|alice|research|gpu|COMPLETED|1795233800|1795235600|1800|billing=8,cpu=8,gres/gpu=8,mem=64000M,node=1|3600000
105|dave|vision|debug|PENDING|Unknown|Unknown|0||
106|erin|vision|cpu|COMPLETED|1795137800|1795138400|600|billing=1,cpu=1,mem=4000M,node=1|360000
107|bob|research|gpu|CANCELLED by 1001|1795332800|1795333160|360|billing=2,cpu=2,gres/gpu:h100=1,\
gres/gpu=1,mem=8000M,node=1|
"""
# Seconds inside [SINCE, UNTIL) x GPUs, by job:
#   101: 3600 s after SINCE for 7200 s, 8 GPUs                          -> 16 GPU-h; 14.4 MJ = 4 kWh
#   102: started 1800 s before SINCE, 1800 s inside of 3600, 4 GPUs      ->  2 GPU-h; half of 1 kWh = 0.5 kWh
#   103: running, started 5400 s before UNTIL (7200 s so far), 2 GPUs    ->  3 GPU-h; 5400/7200 of 2 kWh = 1.5 kWh
#   104: a requeued run of 900 s and the run that completed, 1800 s, 8 GPUs -> 2 + 4 GPU-h; 0.5 + 1 kWh
#   105: pending, never started                                          -> not counted
#   106: no GPUs, 600 s                                                  -> a job, 0 GPU-h; 0.1 kWh
#   107: 360 s, 1 GPU (the typed entry repeats it)                       -> 0.1 GPU-h; no energy figure
IPMI = EnergyBasis(plugin="acct_gather_energy/ipmi", pue=1.25, pue_source="site lab's measured PUE")
NO_ENERGY = EnergyBasis(plugin="acct_gather_energy/none", pue=1.25, pue_source="site lab's measured PUE")


def test_sacct_lines_become_records() -> None:
    records = parse_sacct(SACCT)
    assert [r.job_id for r in records] == ["101", "102", "103", "104", "104", "105", "106", "107"]
    running, pending, cancelled = records[2], records[5], records[7]
    assert (running.start, running.end, running.elapsed_s, running.gpus) == (1795732200, None, 7200, 2)
    assert (pending.start, pending.gpus, pending.energy_j) == (None, 0, None)
    assert (cancelled.state, cancelled.gpus, cancelled.energy_j) == ("CANCELLED", 1, None)


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=8,cpu=8,gres/gpu=2,mem=16000M,node=1", 2),
        ("billing=2,cpu=2,gres/gpu:a10g=2,gres/gpu=2,mem=8000M,node=1", 2),
        ("billing=1,cpu=1,mem=4000M,node=1", 0),
        ("", 0),
    ],
)
def test_gpus_come_from_the_untyped_gres_entry(tres: str, gpus: int) -> None:
    assert gpus_allocated(tres) == gpus


def test_gpu_hours_by_account_user_and_partition_are_cut_to_the_window() -> None:
    report = aggregate(parse_sacct(SACCT), SINCE, UNTIL, IPMI)
    hours = {key: (u.jobs, u.gpu_hours) for key, u in report.rows.items()}
    assert hours == {
        ("research", "alice", "gpu"): (3, 16 + 2 + 4),
        ("research", "bob", "gpu"): (2, pytest.approx(2 + 0.1)),
        ("vision", "carol", "batch"): (1, 3),
        ("vision", "erin", "cpu"): (1, 0),
    }
    assert {a: (u.jobs, u.gpu_hours) for a, u in report.accounts.items()} == {
        "research": (5, pytest.approx(24.1)),
        "vision": (2, 3),
    }
    assert report.users["alice"].gpu_hours == 22 and report.users["carol"].jobs == 1
    assert (report.total.jobs, report.total.gpu_hours) == (7, pytest.approx(27.1))


def test_kwh_and_facility_kwh_where_the_records_carry_energy() -> None:
    report = aggregate(parse_sacct(SACCT), SINCE, UNTIL, IPMI)
    assert report.energy_note is None
    document = report.to_json()
    # alice: 4 + 0.5 + 1 kWh; x PUE 1.25
    assert document["users"]["alice"]["energy"] == {"it_kwh": 5.5, "facility_kwh": 6.875, "jobs_with_energy": 3}
    # bob: 0.5 kWh from 102; 107 carries no figure
    assert document["users"]["bob"]["energy"] == {"it_kwh": 0.5, "facility_kwh": 0.625, "jobs_with_energy": 1}
    # 4 + 0.5 + 1.5 + 0.5 + 1 + 0.1 = 7.6 kWh, x 1.25 = 9.5
    assert document["total"]["energy"] == {"it_kwh": 7.6, "facility_kwh": 9.5, "jobs_with_energy": 6}
    assert document["energy"] == {
        "recorded": True,
        "plugin": "acct_gather_energy/ipmi",
        "note": None,
        "pue": 1.25,
        "pue_source": "site lab's measured PUE",
    }


def test_a_team_counts_its_accounts_jobs_and_an_account_of_no_team_counts_under_none() -> None:
    """monitoring.slurm_teams {llm: [research, llm-eval]}: research's jobs are llm's (llm-eval ran none);
    vision is in no team, so its jobs are in no team's figure (as the team recording rules join)."""
    report = aggregate(parse_sacct(SACCT), SINCE, UNTIL, IPMI, {"research": "llm", "llm-eval": "llm"})
    document = report.to_json()
    assert list(document["teams"]) == ["llm"]
    assert document["teams"]["llm"] == document["accounts"]["research"]
    assert document["teams"]["llm"]["energy"]["it_kwh"] == document["accounts"]["research"]["energy"]["it_kwh"] > 0
    assert aggregate(parse_sacct(SACCT), SINCE, UNTIL, IPMI).to_json()["teams"] == {}


def test_no_energy_plugin_is_said_not_printed_as_zero() -> None:
    # With acct_gather_energy/none, sacct prints ConsumedEnergyRaw 0: that is no measurement, not zero kWh.
    zeros = SACCT.replace("|14400000\n", "|0\n")
    report = aggregate(parse_sacct(zeros), SINCE, UNTIL, NO_ENERGY)
    document = report.to_json()
    assert "energy" not in document["total"] and all("energy" not in row for row in document["rows"])
    assert document["energy"]["recorded"] is False
    assert "acct_gather_energy/none" in document["energy"]["note"]
    unset = aggregate(parse_sacct(zeros), SINCE, UNTIL, EnergyBasis(plugin="(null)", pue=1.25, pue_source="x"))
    assert "AcctGatherEnergyType is unset (acct_gather_energy/none)" in (unset.energy_note or "")
    unknown = aggregate(parse_sacct(SACCT), SINCE, UNTIL, EnergyBasis(plugin=None, pue=1.25, pue_source="x"))
    assert unknown.energy_note is not None and "scontrol show config" in unknown.energy_note


def test_a_plugin_with_no_figures_in_any_record_says_so() -> None:
    blank = "".join(line.rsplit("|", 1)[0] + "|\n" for line in SACCT.splitlines())
    report = aggregate(parse_sacct(blank), SINCE, UNTIL, IPMI)
    assert report.energy_note == "no energy recorded: none of the 7 job(s) carries ConsumedEnergyRaw"


def test_a_narrow_window_cuts_a_job_at_both_ends() -> None:
    # 101 ran 1795136400-1795143600 (8 GPUs): a window of its second hour and the hour after counts 8 GPU-hours
    # (106 ended before it, 102 long before).
    since = datetime.fromtimestamp(1795136400 + 3600, UTC)
    report = aggregate(parse_sacct(SACCT), since, since + timedelta(hours=2), IPMI)
    assert (report.total.jobs, report.total.gpu_hours) == (1, 8)
    # an hour of 7200 s of 4 kWh
    assert report.to_json()["total"]["energy"]["it_kwh"] == 2


def test_output_of_another_shape_is_refused_with_the_line() -> None:
    with pytest.raises(SacctFormatError, match=r"sacct line 2 has 3 fields, expected 10"):
        parse_sacct(SACCT.splitlines()[0] + "\n101|alice|research\n")
    with pytest.raises(SacctFormatError, match="neither epoch seconds nor ISO 8601: 'yesterday'"):
        parse_sacct("1|a|b|c|COMPLETED|yesterday|Unknown|5||\n")


def test_sacct_asks_for_the_window_in_utc() -> None:
    since = datetime(2026, 11, 20, 10, 0, tzinfo=timezone(timedelta(hours=2)))
    args = sacct_args(since, since + timedelta(days=7))
    assert "--starttime=2026-11-20T08:00:00" in args and "--endtime=2026-11-27T08:00:00" in args
    assert {"--allusers", "--allocations", "--duplicates", "--parsable2", "--noheader"} <= set(args)
    assert args[-1] == "--format=" + ",".join(SACCT_FIELDS)


def test_the_energy_plugin_is_read_from_scontrol_show_config() -> None:
    config = (
        "Configuration data as of 2026-11-27T19:40:00\n"
        "AccountingStorageType   = accounting_storage/slurmdbd\n"
        "AcctGatherEnergyType    = acct_gather_energy/none\n"
        "AcctGatherNodeFreq      = 0 sec\n"
    )
    assert energy_plugin(config) == "acct_gather_energy/none"
    assert energy_plugin("ClusterName = lab\n") is None


@pytest.mark.parametrize(
    ("stderr", "meaning"),
    [
        ("sacct: error: Slurm accounting storage is disabled", "accounting is off"),
        (
            "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to "
            "host:slurm1:6819: Connection refused\nsacct: error: Problem talking to the database: Connection refused",
            "slurmdbd did not answer sacct",
        ),
        ("[Errno 2] No such file or directory: b'sacct'", "sacct is not installed on slurm1"),
    ],
)
def test_sacct_failures_say_what_they_mean(stderr: str, meaning: str) -> None:
    rc = 2 if "Errno 2" in stderr else 1
    message = sacct_failure("slurm1", ControllerAnswer(host="slurm1", rc=rc, stdout="", stderr=stderr))
    assert message.startswith(meaning) and stderr.splitlines()[-1] in message
