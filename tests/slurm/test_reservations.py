"""Reservations as code (issue 25, item 5): maintenance windows and team bookings in the spec, rendered for the
slurm_controller role, and kept in slurmctld by gpuforge/nodes/reservations.py.

The spec and its rendering are checked from the dev stack. The reconciler's parser reads real `scontrol show
reservation` output (tests/fixtures/slurm_reservations, with their sources); its plans are run against a
stand-in slurmctld here that applies scontrol's create/update/delete words and prints reservations in the same
layout, so a second run is shown to change nothing. The booted cluster (test_slurm_cluster.py) runs the same
program against real slurmctld 22.05."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.instance_name import node_name
from gpuforge.nodes.lifecycle import AutoScalingGroup, Decision, Drain, Instance, LifecycleConfig, SlurmNode, decide
from gpuforge.nodes.reservations import PREFIX, Observed, expand_hostlist, nodes_by_feature, parse_reservations, plan
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.render.slurm_reservations import reservations_listing
from gpuforge.spec import SpecError, resolve

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm_reservations"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# sinfo --Node lists a node once per partition; a padded column is read too.
SINFO = "train-1 group_train,h100\ntrain-2   group_train,h100\ntrain-1 group_train,h100\nlogin-1 group_login\n"


def _cluster() -> dict[str, Any]:
    cluster = copy.deepcopy(load_stack("dev").cluster)
    sched = cluster["scheduler"]
    sched["accounts"]["vision"] = {"description": "Vision team"}
    sched["reservations"] = {
        "firmware": {"kind": "maintenance", "node_groups": ["train"], "start": "2026-12-05T02:00:00Z",
                     "duration": "04:00:00"},
        "nightly-checks": {"kind": "maintenance", "node_groups": ["train"], "start": "2026-12-01T23:00:00Z",
                           "duration": "30", "recurrence": "daily"},
        "vision-demo": {"kind": "booking", "accounts": ["vision"], "node_count": 2, "partition": "gpu",
                        "start": "2026-12-03T08:00:00Z", "end": "2026-12-03T18:00:00Z"},
    }
    return cluster


def _entries(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    return list(slurm_config(resolve(cluster, "dev"))["reservations"])


def test_reservations_render_with_slurms_flags_and_utc_windows() -> None:
    by_name = {e["name"]: e for e in _entries(_cluster())}
    assert by_name["gpuforge-firmware"] == {
        "name": "gpuforge-firmware", "kind": "maintenance", "start": "2026-12-05T02:00:00Z",
        "end": "2026-12-05T06:00:00Z", "flags": ["MAINT", "IGNORE_JOBS"], "users": ["root"], "accounts": [],
        "node_features": ["group_train"], "node_count": 0, "partition": ""}
    assert by_name["gpuforge-nightly-checks"]["flags"] == ["MAINT", "IGNORE_JOBS", "DAILY"]
    assert by_name["gpuforge-nightly-checks"]["end"] == "2026-12-01T23:30:00Z"
    assert by_name["gpuforge-vision-demo"] | {} == {
        "name": "gpuforge-vision-demo", "kind": "booking", "start": "2026-12-03T08:00:00Z",
        "end": "2026-12-03T18:00:00Z", "flags": ["IGNORE_JOBS"], "users": [], "accounts": ["vision"],
        "node_features": [], "node_count": 2, "partition": "gpu"}


def test_gpuforge_diff_lists_each_reservation_on_a_line() -> None:
    listing = reservations_listing(slurm_config(resolve(_cluster(), "dev")))
    assert ("ReservationName=gpuforge-firmware StartTime=2026-12-05T02:00:00Z EndTime=2026-12-05T06:00:00Z "
            "Duration=04:00:00 Flags=MAINT,IGNORE_JOBS NodeGroups=train Users=root Accounts=(null)") in listing
    assert "Duration=10:00:00 Flags=IGNORE_JOBS NodeCnt=2 PartitionName=gpu Users=(null) Accounts=vision" in listing


def test_bad_reservations_are_refused_at_once_with_every_field_path() -> None:
    cluster = _cluster()
    resv = cluster["scheduler"]["reservations"]
    resv["overlap"] = {"kind": "maintenance", "node_groups": ["train"], "start": "2026-12-05T05:00:00Z",
                       "duration": "60"}
    resv["vision-demo"]["accounts"] = ["physics"]
    resv["vision-demo"]["end"] = "2026-12-03T07:00:00Z"
    resv["elsewhere"] = {"kind": "maintenance", "node_groups": ["gpus"], "start": "2026-12-09T00:00:00Z",
                         "duration": "60", "users": ["alice"]}
    resv["local-time"] = {"kind": "booking", "users": ["alice"], "node_count": 1, "start": "2026-12-09T00:00:00+01:00",
                          "duration": "60"}
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    problems = {issue.path: issue.message for issue in err.value.issues}
    assert problems == {
        "cluster.scheduler.reservations[overlap]":
            "overlaps maintenance window firmware on node group(s) train (both cover 2026-12-05T05:00Z)",
        "cluster.scheduler.reservations[vision-demo].accounts[0]": "no account named 'physics'",
        "cluster.scheduler.reservations[vision-demo].end": "2026-12-03T07:00:00Z is not after the window's "
                                                           "beginning, 2026-12-03T08:00:00Z",
        "cluster.scheduler.reservations[elsewhere].node_groups[0]": "no Slurm node group named 'gpus'",
        "cluster.scheduler.reservations[elsewhere].users":
            "a maintenance window admits no one's jobs (Flags=MAINT, root only)",
        "cluster.scheduler.reservations[local-time].start": problems.get(
            "cluster.scheduler.reservations[local-time].start", "missing"),
    }, problems
    assert "is not in UTC" in problems["cluster.scheduler.reservations[local-time].start"]


def test_recurring_maintenance_overlapping_a_later_one_is_found() -> None:
    cluster = _cluster()
    cluster["scheduler"]["reservations"]["late"] = {
        "kind": "maintenance", "node_groups": ["train"], "start": "2026-12-10T23:15:00Z", "duration": "60"}
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    assert [i.message for i in err.value.issues] == [
        "overlaps maintenance window nightly-checks on node group(s) train (both cover 2026-12-10T23:15Z)"]


def test_scontrols_own_output_is_parsed() -> None:
    text = (FIXTURES / "pcluster-maint.txt").read_text() + "\n" + (FIXTURES / "nyush-booking.txt").read_text()
    found = parse_reservations(text, UTC)
    assert found["root_7"] == Observed(
        name="root_7", start=datetime(2023, 10, 25, 9, 46, 49, tzinfo=UTC), end=datetime(2024, 10, 24, 9, 46, 49,
                                                                                             tzinfo=UTC),
        flags=frozenset({"MAINT", "SPEC_NODES"}), users=frozenset({"root"}), accounts=frozenset(),
        nodes=frozenset(f"queuep4d-dy-crp4d-{i}" for i in range(1, 6)), node_count=5, partition="")
    assert found["manager"].users == {"gh2440"} and found["manager"].nodes == {"compute133"}
    assert parse_reservations("No reservations in the system\n", UTC) == {}
    # The controller's clock is not UTC: scontrol's local times are converted.
    east = parse_reservations((FIXTURES / "nyush-booking.txt").read_text(), timezone(timedelta(hours=8)))
    assert east["manager"].start == datetime(2024, 8, 16, 1, 55, tzinfo=UTC)


def test_a_comment_and_no_watts_as_newer_slurm_prints_them() -> None:
    # 24.11's layout: Watts gone, a Comment line last (its words are no keys of the reservation).
    text = ("ReservationName=gpuforge-x StartTime=2026-12-05T02:00:00 EndTime=2026-12-05T06:00:00 Duration=04:00:00\n"
            "   Nodes=gpu-[01-02],gpu-10 NodeCnt=3 CoreCnt=16 Features=(null) PartitionName=gpu "
            "Flags=MAINT,SPEC_NODES\n"
            "   TRES=cpu=16\n"
            "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null)\n"
            "   MaxStartDelay=(null)\n"
            "   Comment=window Users=nobody\n")
    (resv,) = parse_reservations(text, UTC).values()
    assert resv.users == {"root"} and resv.partition == "gpu"
    assert resv.nodes == {"gpu-01", "gpu-02", "gpu-10"}


def test_hostlists_expand_like_scontrol_show_hostnames() -> None:
    assert expand_hostlist("q1-st-cr2-1,q2-dy-cr4-[1-3]") == ["q1-st-cr2-1", "q2-dy-cr4-1", "q2-dy-cr4-2",
                                                                "q2-dy-cr4-3"]
    assert expand_hostlist("n[08-10,12]") == ["n08", "n09", "n10", "n12"]
    assert expand_hostlist("(null)") == []


class StandInSlurmctld:
    """slurmctld's reservations as scontrol's words change them, printed in 22.05's layout."""

    def __init__(self, tz: timezone = UTC) -> None:
        self.tz = tz
        self.records: dict[str, dict[str, str]] = {}
        self.now = NOW

    def apply(self, argv: list[str]) -> None:
        words = dict(w.split("=", 1) for w in argv if "=" in w)
        name = words["ReservationName"]
        if argv[1] == "delete":
            del self.records[name]
            return
        record = self.records.setdefault(name, {}) if argv[1] == "update" else {}
        for key, value in words.items():
            if key in ("StartTime", "EndTime") and value == "now":
                value = self.now.astimezone(self.tz).strftime("%Y-%m-%dT%H:%M:%S")
            record[key] = value
        if argv[1] == "create":
            record["Flags"] = ",".join(f for f in record["Flags"].split(",") if f != "IGNORE_JOBS") + ",SPEC_NODES"
            self.records[name] = record

    def show(self) -> str:
        if not self.records:
            return "No reservations in the system\n"
        out = []
        for name, r in self.records.items():
            nodes = r.get("Nodes", f"picked-[1-{r.get('NodeCnt', '1')}]")
            count = len(expand_hostlist(nodes))
            out.append(
                f"ReservationName={name} StartTime={r['StartTime']} EndTime={r['EndTime']} Duration=00:00:00\n"
                f"   Nodes={_compressed(nodes)} NodeCnt={count} CoreCnt=8 Features=(null) "
                f"PartitionName={r.get('PartitionName', '(null)')} Flags={r['Flags']}\n   TRES=cpu=8\n"
                f"   Users={r.get('Users', '(null)')} Groups=(null) Accounts={r.get('Accounts', '(null)')} "
                "Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a\n   MaxStartDelay=(null)\n")
        return "\n".join(out)

    def reconcile(self, entries: list[dict[str, Any]]) -> tuple[list[list[str]], list[str]]:
        result = plan(entries, parse_reservations(self.show(), self.tz), nodes_by_feature(SINFO), self.now, self.tz)
        for argv in result.commands:
            self.apply(argv)
        return result.commands, result.notes


def _compressed(nodes: str) -> str:
    """train-1,train-2 -> train-[1-2], as slurmctld prints a node list."""
    names = sorted(expand_hostlist(nodes))
    match = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if len(names) > 1 and all(match) and len({m.group(1) for m in match if m}) == 1:
        numbers = [m.group(2) for m in match if m]
        return f"{match[0].group(1) if match[0] else ''}[{numbers[0]}-{numbers[-1]}]"
    return ",".join(names)


def test_the_reconciler_creates_then_changes_nothing() -> None:
    slurmctld = StandInSlurmctld(tz=timezone(timedelta(hours=-5)))
    slurmctld.records["maint-by-hand"] = {"StartTime": "2026-12-02T00:00:00", "EndTime": "2026-12-02T01:00:00",
                                          "Flags": "MAINT,SPEC_NODES", "Users": "root", "Nodes": "train-2"}
    commands, _ = slurmctld.reconcile(_entries(_cluster()))
    creates = {c[3]: c for c in commands}
    assert set(creates) == {"ReservationName=gpuforge-firmware", "ReservationName=gpuforge-nightly-checks",
                            "ReservationName=gpuforge-vision-demo"}
    # 02:00Z is 21:00 the day before on a UTC-5 controller.
    assert creates["ReservationName=gpuforge-firmware"] == [
        "scontrol", "create", "reservation", "ReservationName=gpuforge-firmware", "StartTime=2026-12-04T21:00:00",
        "EndTime=2026-12-05T01:00:00", "Flags=MAINT,IGNORE_JOBS", "Users=root", "Nodes=train-1,train-2"]
    assert creates["ReservationName=gpuforge-vision-demo"][-3:] == ["Accounts=vision", "NodeCnt=2",
                                                                    "PartitionName=gpu"]
    assert slurmctld.reconcile(_entries(_cluster())) == ([], [])
    assert "maint-by-hand" in slurmctld.records


def test_changes_update_and_a_removed_reservation_is_deleted() -> None:
    slurmctld = StandInSlurmctld()
    slurmctld.reconcile(_entries(_cluster()))
    cluster = _cluster()
    resv = cluster["scheduler"]["reservations"]
    resv["firmware"]["duration"] = "06:00:00"
    resv["vision-demo"]["node_count"] = 3
    del resv["nightly-checks"]
    commands, _ = slurmctld.reconcile(_entries(cluster))
    assert commands == [
        ["scontrol", "delete", "ReservationName=gpuforge-nightly-checks"],
        ["scontrol", "update", "ReservationName=gpuforge-firmware", "StartTime=2026-12-05T02:00:00",
         "EndTime=2026-12-05T08:00:00"],
        ["scontrol", "update", "ReservationName=gpuforge-vision-demo", "NodeCnt=3"],
    ]
    assert slurmctld.reconcile(_entries(cluster)) == ([], [])


def test_a_recurring_window_moved_on_by_slurm_is_still_the_spec() -> None:
    slurmctld = StandInSlurmctld()
    slurmctld.reconcile(_entries(_cluster()))
    record = slurmctld.records["gpuforge-nightly-checks"]
    assert record["StartTime"] == "2026-12-01T23:00:00"
    # Two days later Slurm has moved the DAILY window on twice.
    slurmctld.now = NOW + timedelta(days=2)
    record.update(StartTime="2026-12-03T23:00:00", EndTime="2026-12-03T23:30:00")
    commands, _ = slurmctld.reconcile(_entries(_cluster()))
    assert [c for c in commands if "ReservationName=gpuforge-nightly-checks" in c] == []


def test_a_window_under_way_starts_now_and_an_ended_one_is_left_to_slurm() -> None:
    cluster = _cluster()
    resv = cluster["scheduler"]["reservations"]
    resv["firmware"]["start"] = "2026-12-01T11:00:00Z"  # an hour before NOW, until 15:00
    resv["vision-demo"].update(start="2026-11-30T08:00:00Z", end="2026-11-30T18:00:00Z")
    slurmctld = StandInSlurmctld()
    commands, notes = slurmctld.reconcile(_entries(cluster))
    (firmware,) = [c for c in commands if "ReservationName=gpuforge-firmware" in c]
    assert firmware[4:6] == ["StartTime=now", "EndTime=2026-12-01T15:00:00"]
    assert notes == ["gpuforge-vision-demo: its window ended at 2026-11-30T18:00:00Z; Slurm removes an ended "
                     "reservation itself"]
    slurmctld.now += timedelta(minutes=10)
    assert slurmctld.reconcile(_entries(cluster))[0] == []


def test_a_group_without_nodes_yet_is_said_and_not_made() -> None:
    entries = _entries(_cluster())
    result = plan(entries, {}, nodes_by_feature("login-1 group_login\n"), NOW, UTC)
    assert "gpuforge-firmware: node group(s) train have no nodes in Slurm yet; not made this run" in result.notes
    assert all(PREFIX + "firmware" not in " ".join(c) for c in result.commands)


# --- rolling image updates respect the maintenance windows (gpuforge/nodes/lifecycle.py) ---------------------


def _lifecycle(cluster: dict[str, Any]) -> LifecycleConfig:
    return LifecycleConfig.from_dict(slurm_config(resolve(cluster, "dev"))["lifecycle"])


def _outdated_train(now: datetime, config: LifecycleConfig) -> Decision:
    """One train node serving from launch template v1 while its group launches v2."""
    name = node_name("train", "i-0aaa")
    asg = AutoScalingGroup("asg-train", "train", 1, 0, 4, (Instance("i-0aaa", "InService", None, "lt-1", "1"),),
                           template_id="lt-1", template_version="2")
    node = SlurmNode(name, "IDLE", frozenset(), features=frozenset({"group_train"}))
    return decide(config, {name: node}, [], {"train": asg}, now)


def test_a_rolling_update_drains_only_inside_the_groups_maintenance_window() -> None:
    config = _lifecycle(_cluster())
    assert [w.name for w in config.groups["train"].windows] == ["firmware", "nightly-checks"]
    drain = [Drain(node_name("train", "i-0aaa"), "gpuforge rolling update: launch template lt-1 v1 -> lt-1 v2")]
    # 12:00Z, between the nightly window (23:00-23:30 daily) and the firmware one: it waits, and says for what.
    before = _outdated_train(NOW, config)
    assert not [a for a in before.actions if isinstance(a, Drain)]
    assert "group train: 1 node(s) to roll; waiting for maintenance window nightly-checks at 2026-12-01T23:00Z" \
        in before.notes
    # Inside the nightly window (three days on: it recurs) and inside the firmware window it drains.
    assert _outdated_train(datetime(2026, 12, 4, 23, 10, tzinfo=UTC), config).actions == drain
    assert _outdated_train(datetime(2026, 12, 5, 3, 0, tzinfo=UTC), config).actions == drain
    # The cycle's own clock is the controller's naive local time: the same instant, read as local, is compared.
    local = datetime(2026, 12, 4, 23, 10, tzinfo=UTC).astimezone().replace(tzinfo=None)
    assert _outdated_train(local, config).actions == drain


def test_a_group_no_window_covers_rolls_any_time_unless_the_spec_refuses() -> None:
    cluster = _cluster()
    del cluster["scheduler"]["reservations"]["firmware"]
    del cluster["scheduler"]["reservations"]["nightly-checks"]
    assert _outdated_train(NOW, _lifecycle(cluster)).actions != []
    cluster["scheduler"]["rolling_updates_outside_windows"] = False
    refused = _outdated_train(NOW, _lifecycle(cluster))
    assert refused.actions == []
    assert refused.notes == ["group train: 1 node(s) to roll; refused: no maintenance window covers the group and "
                             "scheduler.rolling_updates_outside_windows is false; declare one in "
                             "scheduler.reservations"]


def test_real_slurmctld_2205_output_of_what_the_role_made_is_read_back() -> None:
    """22.05 keeps IGNORE_JOBS among the flags and adds SPEC_NODES to a reservation over named nodes; neither is
    compared, so what the role made reads back as unchanged."""
    found = parse_reservations((FIXTURES / "slurmctld-22.05-booted.txt").read_text(), UTC)
    assert found["gpuforge-maint"].flags == {"MAINT", "IGNORE_JOBS", "SPEC_NODES"}
    assert found["gpuforge-booking"].accounts == {"research"} and found["gpuforge-booking"].partition == "gpu"
    window = {"start": "2026-11-27T23:39:01Z", "end": "2026-11-28T00:10:01Z", "accounts": [], "node_count": 0,
              "partition": ""}
    entries = [
        {**window, "name": "gpuforge-maint", "kind": "maintenance", "flags": ["MAINT", "IGNORE_JOBS"],
         "users": ["root"], "node_features": ["group_cloud"]},
        {**window, "name": "gpuforge-booking", "kind": "booking", "flags": ["IGNORE_JOBS"], "users": [],
         "accounts": ["research"], "node_features": [], "node_count": 1, "partition": "gpu"},
    ]
    features = nodes_by_feature("cloud-i-0c10d0000000000a1 group_cloud,a10g\nslurm3 group_gpu,a10g\n")
    result = plan(entries, found, features, datetime(2026, 11, 27, 23, 41, tzinfo=UTC), UTC)
    assert (result.commands, result.notes) == ([], [])
