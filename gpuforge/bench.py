"""`make bench`: offline plan time and peak memory against the Pulumi SDK floor; re-bake time.

For each stack size, two fresh worker processes run: one plans the stack (spec resolution,
component logic, the real program under the mock monitor), the other registers the very
same resources (types, names, parents, inputs) straight through the mock monitor with no
component logic: the SDK floor. Both warm up first (imports, first registrations), then
time REPEAT runs in two interleaved rounds; the report gives the minimum of each (on a shared
machine noise only ever adds time) and the plan/floor ratio measured in the same run.
Then `gpuforge plan prod` end to end, as a user runs it (`python -m gpuforge`, imports included).

On-premises sites (gpuforge/bench_sites.py): the 100,000-GPU example resized to 128, 1,024 and 12,500 DGX
hosts, plan against floor the same way (the 12,500-host plan once after its warm-up), reported per host
against the aim of 2 ms; then `gpuforge plan examples/Pulumi.site-100k.yaml` end to end with its peak RSS.
`--sites-only` measures and rewrites that section alone.

A measured command that fails fails the bench (exit 1, its exit status and the end of its output):
a time of a command that did not do its work is no figure.

Re-bake: bake-image.yml twice into a fresh Debian 12 root file system (the EFA p5 profile of the
playbook tests, every package source pointed at the stand-ins of tests/standins): the second run
changes nothing, and its time against the first is the figure to watch. It needs root, debootstrap,
dpkg-deb, apt-ftparchive and gpg (as the playbook tests do); without them it is not measured.

`--output FILE` replaces only what was measured, between the markers of each section (`<!-- make bench:
plan -->` ... `<!-- make bench: end plan -->`, the same for `rebake`): the hand-written text around them
(earlier measurements, what changed, where the time goes) is kept, and a section that was not measured
here (the re-bake without root) keeps its last figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from gpuforge.bench_sites import SITE_CASES, SITE_EXAMPLE, site_stack

REPEAT = 5
REPEAT_ENV = "GPUFORGE_BENCH_REPEAT"  # a worker's runs after its warm-up, where the case sets fewer (large sites)
# (node groups, nodes per group): growing groups, and one group growing in nodes only.
CASES = [(1, 8), (1, 4096), (8, 64), (64, 64)]


def bench_stack(groups: int, nodes_per_group: int) -> dict[str, Any]:
    """A prod-shaped spec: p5.48xlarge EFA groups, Lustre sized from the workload, buckets."""
    return {
        "config": {
            "gpuforge:cluster": {
                "name": "bench",
                "environment": "prod",
                "placement": {"kind": "aws", "region": "us-east-1"},
                "network": {"cidr": "10.0.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"]},
                "node_groups": {
                    f"g{i:02d}": {
                        "instance_type": "p5.48xlarge",
                        "count": nodes_per_group,
                        "spares": max(1, nodes_per_group // 32),
                        "fabric": "efa",
                        "availability_zone": "us-east-1a",
                    }
                    for i in range(groups)
                },
                "storage": {
                    "parallel_fs": {
                        "kind": "fsx_lustre",
                        "deployment_type": "PERSISTENT_2",
                        "per_unit_storage_throughput": 1000,
                        "efa": True,
                        "metadata": {"mode": "AUTOMATIC"},
                        "workload": {"read_mbps_per_gpu": 10},
                    },
                    "object_stores": {"checkpoints": {"purpose": "checkpoints", "replication_region": "us-west-2"}},
                },
            }
        }
    }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time(fn: Any) -> list[float]:
    fn()  # warm-up: imports and first registrations are start-up, not plan time
    times = []
    for _ in range(int(os.environ.get(REPEAT_ENV, REPEAT))):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def worker_plan(stack: Path) -> dict[str, Any]:
    # Imported in the worker: the import of the SDKs is part of what a plan costs, so it is measured here.
    from gpuforge.plan.engine import plan_stack

    captured: dict[str, Any] = {}

    def run() -> None:
        plan = plan_stack(stack)
        captured["resources"] = [
            {"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "custom": r.custom, "inputs": r.inputs}
            for r in plan.resources
        ]
        captured["nodes"] = plan.summary.nodes + plan.summary.spare_nodes

    times = _time(run)
    return {"times": times, "rss_mib": _peak_rss_mib(), **captured}


def sdk_resource(registration: dict[str, Any], opts: Any) -> Any:
    """Register one recorded resource through its own SDK class (pulumi_aws.ec2.LaunchTemplate, ...)
    with its recorded inputs: the cost the SDK charges for that resource, without our logic."""
    import importlib

    import pulumi
    from pulumi import _types

    type_, name, inputs = registration["type"], registration["name"], registration["inputs"]
    if not registration["custom"]:
        return pulumi.ComponentResource(type_, name, inputs, opts)
    package, module_path, class_name = type_.split(":")
    if package == "pulumi" and module_path == "providers":
        module_name, class_name = f"pulumi_{class_name}", "Provider"
    else:
        module = module_path.split("/")[0]
        module_name = f"pulumi_{package}" + ("" if module == "index" else f".{module}")
    cls = getattr(importlib.import_module(module_name), class_name)
    names = _types.resource_pulumi_to_py_names(cls)

    def py_name(key: str) -> str:
        return names.get(key) or re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()

    return cls(name, opts=opts, **{py_name(key): value for key, value in inputs.items()})


def worker_floor(resources_file: Path) -> dict[str, Any]:
    import pulumi
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    # Imported in the worker, as in worker_plan: the floor pays the same imports.
    from gpuforge.plan.engine import _offline_runtime, _RecordingMonitor

    registrations = json.loads(resources_file.read_text())

    def run() -> None:
        monitor = _RecordingMonitor()
        _offline_runtime(monitor, "bench")  # the same harness as the plan: only component logic differs

        def program() -> None:
            made: dict[str, pulumi.Resource] = {}
            for r in registrations:
                opts = pulumi.ResourceOptions(parent=made.get(r["parent"]))
                made[r["urn"]] = sdk_resource(r, opts)

        _sync_await(run_pulumi_func(program))
        assert len(monitor.recorded) == len(registrations)

    return {"times": _time(run), "rss_mib": _peak_rss_mib()}


class MeasuredCommandFailed(Exception):
    """A command `make bench` times did not succeed: its time means nothing."""

    def __init__(self, command: list[str], done: subprocess.CompletedProcess[str]) -> None:
        tail = "\n".join((done.stderr or done.stdout or "").strip().splitlines()[-15:])
        super().__init__(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{tail}")


def run_measured(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise MeasuredCommandFailed(command, done)
    return done


def _spawn(*args: str, repeat: int = REPEAT) -> dict[str, Any]:
    done = run_measured(
        [sys.executable, "-m", "gpuforge.bench", "--worker", *args], env={**os.environ, REPEAT_ENV: str(repeat)}
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure_stack(name: str, stack_doc: dict[str, Any], workdir: Path, repeat: int = REPEAT, rounds: int = 2) -> (
    dict[str, Any]
):
    """Plan and SDK floor of one stack, interleaved in *rounds* rounds of *repeat* runs after a warm-up each:
    the minimum of each side, and its peak RSS."""
    stack = workdir / f"Pulumi.{name}.yaml"
    stack.write_text(yaml.safe_dump(stack_doc))
    resources_file = workdir / f"resources-{name}.json"
    plan: dict[str, Any] = {"times": []}
    floor: dict[str, Any] = {"times": []}
    # Interleaved rounds, so both sides see the same background load, and the minimum: on a shared machine
    # noise only ever adds time.
    for _ in range(rounds):
        planned = _spawn("plan", str(stack), repeat=repeat)
        if not resources_file.exists():
            resources_file.write_text(json.dumps(planned["resources"]))
        plan = {**planned, "times": plan["times"] + planned["times"]}
        floored = _spawn("floor", str(resources_file), repeat=repeat)
        floor = {**floored, "times": floor["times"] + floored["times"]}
    plan_s, floor_s = min(plan["times"]), min(floor["times"])
    return {
        "nodes": plan["nodes"],
        "resources": len(plan["resources"]),
        "plan_s": plan_s,
        "floor_s": floor_s,
        "ratio": plan_s / floor_s,
        "plan_rss_mib": plan["rss_mib"],
        "floor_rss_mib": floor["rss_mib"],
    }


def measure(groups: int, nodes_per_group: int, workdir: Path) -> dict[str, Any]:
    row = measure_stack(f"bench-{groups}x{nodes_per_group}", bench_stack(groups, nodes_per_group), workdir)
    return {"groups": groups, **row}


def measure_site(hosts: int, workdir: Path) -> dict[str, Any]:
    """An on-prem site of *hosts* DGX H100 (bench_sites.py); the largest planned once after its warm-up."""
    large = hosts > 2048
    row = measure_stack(
        f"site-{hosts}", site_stack(hosts), workdir, repeat=1 if large else 3, rounds=1 if large else 2
    )
    return {"hosts": hosts, "ms_per_host": 1000 * row["plan_s"] / hosts, **row}


SITE_PLAN = ["-m", "gpuforge", "plan", str(SITE_EXAMPLE), "--json", "/dev/null"]


def worker_example() -> dict[str, Any]:
    """`gpuforge plan` of the 100,000-GPU example as a user runs it, in a child of this worker, so the peak RSS
    reported is that command's alone."""
    start = time.perf_counter()
    run_measured([sys.executable, *SITE_PLAN])
    wall = time.perf_counter() - start
    return {"wall_s": wall, "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


PROD_PLAN = ["-m", "gpuforge", "plan", "prod", "--json", "/dev/null"]


def prod_plan_seconds() -> float:
    """End to end, as a user runs it: a fresh process, imports included (exit 0: prod plans unblocked)."""
    start = time.perf_counter()
    run_measured([sys.executable, *PROD_PLAN])
    return time.perf_counter() - start


def rebake_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the chroot connection)"
    for tool in ("debootstrap", "dpkg-deb", "apt-ftparchive", "gpg", "git"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if not (Path.cwd() / "tests" / "standins").is_dir():
        return "run from a gpuforge checkout: the stand-in sources live in tests/standins"
    return None


def _task_timer(durations: dict[str, float]) -> Any:
    """An ansible-runner event handler adding each task's wall time (start to next start) to *durations*."""
    from datetime import datetime

    last: list[tuple[str, datetime]] = []

    def handle(event: dict[str, Any]) -> None:
        kind = event.get("event")
        created = event.get("created")
        if kind not in ("playbook_on_task_start", "playbook_on_stats") or not created:
            return
        now = datetime.fromisoformat(str(created))
        if last:
            name, start = last.pop()
            durations[name] = durations.get(name, 0.0) + (now - start).total_seconds()
        if kind == "playbook_on_task_start":
            data = event.get("event_data") or {}
            last.append((f"{data.get('role', '')} : {data.get('task', '')}".strip(" :"), now))

    return handle


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def measure_rebake() -> dict[str, Any]:
    """Two runs of bake-image.yml into a fresh root file system, timed; the slowest tasks of the second;
    when, and the machine's load average (1 minute) at the start and the end: times follow the load."""
    # Only this measurement needs Ansible and the test harness's root file systems (a checkout's tests/).
    from gpuforge.nodes.bake import rootfs_inventory, run_playbook
    from tests.playbooks import rootfs
    from tests.playbooks.profiles import EFA_P5, profile_vars
    from tests.standins.repo import build

    started, load_start = _now(), os.getloadavg()[0]
    tarball, _ = rootfs.build_tarball()
    with tempfile.TemporaryDirectory(prefix="gpuforge-rebake-") as tmp:
        target = rootfs.extract(tarball, Path(tmp) / "rootfs")
        sources = build(Path(tmp) / "www")
        sources.serve()
        try:
            inventory = rootfs_inventory(target, profile_vars(EFA_P5, sources))
            runs = []
            for _ in range(2):
                durations: dict[str, float] = {}
                start = time.perf_counter()
                result = run_playbook("bake-image.yml", inventory, on_event=_task_timer(durations))
                runs.append((time.perf_counter() - start, result, durations))
        finally:
            sources.stop()
    (first_s, first, _), (second_s, second, slowest) = runs
    if not (first.ok and second.ok):
        failures = [f"{f.task}: {f.message}" for f in first.failures + second.failures]
        raise RuntimeError(f"bake-image.yml failed: {failures}")
    return {
        "first_s": first_s,
        "second_s": second_s,
        "ratio": second_s / first_s,
        "first_changed": first.changed,
        "second_changed": second.changed,
        "slowest": sorted(slowest.items(), key=lambda kv: -kv[1])[:8],
        "started": started,
        "finished": _now(),
        "load": (load_start, os.getloadavg()[0]),
    }


REBAKE_TARGET = 0.40
# Headings above each section's markers in a new document (hand-written text goes around the markers).
_HEADINGS = {"plan": [], "onprem": ["## On-premises sites", ""], "rebake": ["## Re-bake", ""]}
SITE_AIM_MS_PER_HOST = 2.0  # issue 28: a flat per-host cost of at most 2 ms
SITE_AIM_EXAMPLE_S, SITE_AIM_EXAMPLE_MIB = 60.0, 4096.0  # issue 28: the whole example under 60 s and 4 GiB


def example_plan() -> dict[str, Any]:
    return _spawn("example", str(SITE_EXAMPLE))


def sites_report(rows: list[dict[str, Any]], example: dict[str, Any]) -> list[str]:
    lines = [
        "Measured by `make bench` (gpuforge/bench.py, stacks from gpuforge/bench_sites.py): the 100,000-GPU example",
        "resized to N DGX H100 hosts (31 in the first scalable unit, 32 in each after, four per rack, a fabric that",
        "passes the per-tier checks at that size), planned in fresh processes against the SDK floor of the same",
        "resources (every site resource is a component: the floor registers each with its recorded inputs).",
        "Minimum of 2 x 3 runs after a warm-up; the 12,500-host row one run after its warm-up.",
        "",
        "| hosts | resources | plan (s) | ms per host | SDK floor (s) | ratio | plan peak RSS (MiB) |"
        " floor peak RSS (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['hosts']:,} | {r['resources']:,} | {r['plan_s']:.2f} | {r['ms_per_host']:.2f} | "
            f"{r['floor_s']:.2f} | {r['ratio']:.2f} | {r['plan_rss_mib']:.0f} | {r['floor_rss_mib']:.0f} |"
        )
    worst = max(r["ms_per_host"] for r in rows)
    met = "met" if worst <= SITE_AIM_MS_PER_HOST else "missed"
    example_met = (
        "met" if example["wall_s"] <= SITE_AIM_EXAMPLE_S and example["rss_mib"] <= SITE_AIM_EXAMPLE_MIB else "missed"
    )
    lines += [
        "",
        f"Aim of at most {SITE_AIM_MS_PER_HOST:.0f} ms per host: {met} (worst {worst:.2f} ms).",
        "",
        f"`gpuforge plan {SITE_EXAMPLE}` (12,511 hosts, 100,088 GPUs), end to end in a fresh process: "
        f"{example['wall_s']:.1f} s, peak RSS {example['rss_mib']:.0f} MiB (aim: under {SITE_AIM_EXAMPLE_S:.0f} s "
        f"and {SITE_AIM_EXAMPLE_MIB / 1024:.0f} GiB: {example_met}).",
        "",
    ]
    return lines


def measure_sites() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for hosts in SITE_CASES:
            row = measure_site(hosts, Path(tmp))
            print(f"site of {hosts:>6} hosts: plan {row['plan_s']:.2f}s ({row['ms_per_host']:.2f} ms/host), "
                  f"floor {row['floor_s']:.2f}s, ratio {row['ratio']:.2f}", file=sys.stderr)  # fmt: skip
            rows.append(row)
    example = example_plan()
    print(f"site example: {example['wall_s']:.1f}s, {example['rss_mib']:.0f} MiB", file=sys.stderr)
    return sites_report(rows, example)


def rebake_report(rebake: dict[str, Any] | str) -> list[str]:
    if isinstance(rebake, str):
        return [f"Not measured here: {rebake}.", ""]
    met = "target met" if rebake["ratio"] <= REBAKE_TARGET else f"target of {REBAKE_TARGET:.2f} missed"
    return [
        "`bake-image.yml` twice into a fresh Debian 12 root file system through the chroot connection (EFA",
        "p5.48xlarge profile, every package source pointed at the stand-ins of tests/standins, as the",
        "playbook tests do). The second run is the re-bake of an unchanged image: it must change nothing,",
        f"and its time against the first is the figure to watch (target: at most {REBAKE_TARGET:.2f}).",
        "",
        f"Measured {rebake['started']} to {rebake['finished']}, load average (1 min) {rebake['load'][0]:.1f} at "
        f"the start, {rebake['load'][1]:.1f} at the end.",
        "",
        "| run | wall time (s) | changed |",
        "|---|---:|---:|",
        f"| first (installs) | {rebake['first_s']:.1f} | {rebake['first_changed']} |",
        f"| second (idempotent) | {rebake['second_s']:.1f} | {rebake['second_changed']} |",
        "",
        f"Ratio second/first: **{rebake['ratio']:.2f}** ({met}).",
        "",
        "Slowest tasks of the second run (wall time from task start to the next task's start):",
        "",
        "| task | s |",
        "|---|---:|",
        *(f"| {name} | {seconds:.1f} |" for name, seconds in rebake["slowest"]),
        "",
    ]


def plan_report(rows: list[dict[str, Any]], prod_s: float) -> list[str]:
    lines = [
        "Measured by `make bench` (gpuforge/bench.py). Each row plans a prod-shaped stack of p5.48xlarge EFA",
        "groups in fresh processes, and registers the same resources, each through its own SDK class",
        "(pulumi_aws.ec2.LaunchTemplate, ...) with its recorded inputs, straight through Pulumi's mock",
        "monitor with no component logic: the SDK floor. Plan and floor processes are interleaved, each",
        f"warmed up first; times are the minimum of 2 x {REPEAT} runs. The ratio is the figure to watch:",
        "both sides ran in the same session on the same machine, which is shared and noisy.",
        "",
        "| node groups | nodes (with spares) | resources | plan (s) | SDK floor (s) | ratio | plan peak RSS (MiB) |"
        " floor peak RSS (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['groups']} | {r['nodes']} | {r['resources']} | {r['plan_s']:.3f} | {r['floor_s']:.3f} | "
            f"{r['ratio']:.2f} | {r['plan_rss_mib']:.0f} | {r['floor_rss_mib']:.0f} |"
        )
    lines += [
        "",
        f"`gpuforge plan prod`, end to end in a fresh process (imports included): {prod_s:.2f} s.",
        "",
        "Plan time follows the number of node groups (resources), not the number of nodes: one group",
        "is one launch template and one Auto Scaling group whatever its size.",
        "",
    ]
    return lines


def _markers(section: str) -> tuple[str, str]:
    return f"<!-- make bench: {section} -->", f"<!-- make bench: end {section} -->"


def merge(document: str | None, sections: dict[str, list[str]]) -> str:
    """*document* with the text between each measured section's markers replaced, everything else kept;
    None: a new document holding the sections in order."""
    if document is None:
        parts = ["# Benchmarks", ""]
        for section, lines in sections.items():
            start, end = _markers(section)
            parts += [*_HEADINGS[section], start, *lines, end, ""]
        return "\n".join(parts)
    for section, lines in sections.items():
        start, end = _markers(section)
        before, found, rest = document.partition(start + "\n")
        _, found_end, after = rest.partition(end)
        if not (found and found_end):
            raise ValueError(
                f"the {section} section has no markers in the output file: put {start} and {end} on lines of "
                "their own around the text make bench may replace (the text outside them is kept)"
            )
        document = before + start + "\n" + "\n".join(lines) + "\n" + end + after
    return document


def main(argv: list[str] | None = None) -> None:
    try:
        _main(argv)
    except (MeasuredCommandFailed, RuntimeError) as error:  # RuntimeError: the re-bake's playbook failed
        raise SystemExit(f"make bench: {error}") from None


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help="Write the Markdown table here (default: stdout).")
    parser.add_argument("--rebake-only", action="store_true", help="Measure only the re-bake and print it.")
    parser.add_argument(
        "--sites-only", action="store_true", help="Measure only the on-premises site plans (and the example)."
    )
    args = parser.parse_args(argv)
    if args.worker:
        kind, file = args.worker
        workers = {"plan": worker_plan, "floor": worker_floor, "example": lambda _: worker_example()}
        result = workers[kind](Path(file))
        sys.stdout.write(json.dumps(result))
        return
    existing = args.output.read_text() if args.output and args.output.is_file() else None
    if args.sites_only:
        sites = measure_sites()
        _write(args.output, existing, {"onprem": sites}, "\n".join(["## On-premises sites", "", *sites]))
        return
    rebake: dict[str, Any] | str = rebake_unavailable() or measure_rebake()
    if isinstance(rebake, str):
        print(f"re-bake: not measured ({rebake}); the output's re-bake section is kept", file=sys.stderr)
    else:
        print(f"re-bake: first {rebake['first_s']:.1f}s, second {rebake['second_s']:.1f}s, "
              f"ratio {rebake['ratio']:.2f}", file=sys.stderr)  # fmt: skip
    measured = {} if isinstance(rebake, str) and existing is not None else {"rebake": rebake_report(rebake)}
    if args.rebake_only:
        _write(args.output, existing, measured, "\n".join(["## Re-bake", "", *rebake_report(rebake)]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for groups, per_group in CASES:
            row = measure(groups, per_group, Path(tmp))
            print(
                f"{groups:>3} groups x {per_group:>4} nodes: plan {row['plan_s']:.3f}s, "
                f"floor {row['floor_s']:.3f}s, ratio {row['ratio']:.2f}",
                file=sys.stderr,
            )
            rows.append(row)
    plan = plan_report(rows, prod_plan_seconds())
    sites = measure_sites()
    whole = ["# Benchmarks", "", *plan, "## On-premises sites", "", *sites, "## Re-bake", "", *rebake_report(rebake)]
    _write(args.output, existing, {"plan": plan, "onprem": sites, **measured}, "\n".join(whole))


def _write(output: Path | None, existing: str | None, sections: dict[str, list[str]], text: str) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(merge(existing, sections))
    except ValueError as error:
        raise SystemExit(f"make bench: {output}: {error}") from None


if __name__ == "__main__":
    main()
