"""`gpuforge render ...`: what nodes and services receive, rendered from a stack's spec and the catalog.

A Typer sub-app registered on the main app as `render`; one command per thing rendered.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpuforge.cli.common import fail, write_output
from gpuforge.console import err, out
from gpuforge.spec import SpecError

app = typer.Typer(
    help="Print what a stack's nodes and services receive (rendered from spec and catalog).", no_args_is_help=True
)

StackArg = Annotated[
    str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...) or a stack file.", show_default=False)
]


@app.command()
def monitoring(
    stack: StackArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the files under this directory instead of printing.")
    ] = None,
) -> None:
    """The Prometheus configuration, rules (or PrometheusRule objects) and Alertmanager routes a stack gets.
    Receiver secrets show as the files Alertmanager reads and the Pulumi config keys that fill them; alerts
    whose series the stack's hardware, exporters or scheduler do not produce are listed as left out, with why."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack
    from gpuforge.render.monitoring import render_monitoring

    try:
        stack_file = load_stack(stack)
        resolved = check_stack(stack_file).resolved
    except SpecError as error:
        fail(error)
    if resolved.spec.monitoring is None:
        err.print(f"[bold red]error[/]: {escape(stack)} declares no monitoring section (see docs/monitoring.md)")
        raise typer.Exit(2)
    bundle = render_monitoring(resolved)
    left_out = "".join(f"# {alert}: {why}\n" for alert, why in bundle.left_out.items())
    if output is not None:
        for name, text in bundle.files.items():
            write_output(output / name.lstrip("/"), text)
        if left_out:
            write_output(output / "left-out.txt", left_out)  # alerts this stack does not get, and why
        return
    grafana = [name for name in bundle.files if "grafana" in name or name.endswith("dashboards.yaml")]
    for name, text in bundle.files.items():
        if name not in grafana:
            sys.stdout.write(f"# --- {name}\n{text}")
    sys.stdout.write("# --- Grafana dashboards and provisioning (written with --output)\n")
    sys.stdout.writelines(f"# {name}\n" for name in grafana)
    if left_out:
        sys.stdout.write("# --- alerts left out: the series they read do not exist on this stack\n" + left_out)
    if bundle.secret_keys:
        sys.stdout.write("# --- secrets (the alertmanager role's files or a Kubernetes Secret's keys; never values)\n")
        for path, key in bundle.secret_keys.items():
            sys.stdout.write(f"# {path} <- pulumi config gpuforge:{key}\n")


@app.command()
def slurm(
    stack: StackArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write each file into this directory instead of printing.")
    ] = None,
    file: Annotated[
        list[str] | None, typer.Option("--file", "-f", help="Only these files (slurm.conf, gres.conf, ...).")
    ] = None,
    stand_in_gpus: Annotated[
        bool, typer.Option(help="gres.conf lists GPU device files instead of AutoDetect=nvml (test machines).")
    ] = False,
) -> None:
    """The Slurm configuration the cluster's nodes receive: slurm.conf, gres.conf, cgroup.conf,
    job_container.conf, topology.conf, cli_filter.lua (hybrid), and /etc/default/slurmd per node group
    (docs/slurm.md)."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack
    from gpuforge.render.slurm import SlurmRenderError, render_slurm, slurm_config

    try:
        stack_file = load_stack(stack)
        resolved = check_stack(stack_file).resolved
        files = render_slurm(slurm_config(resolved, stand_in_gpus=stand_in_gpus))
    except SpecError as error:
        fail(error)
    except SlurmRenderError as error:
        err.print(f"[bold red]error[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    unknown = sorted(set(file or ()) - set(files))
    if unknown:
        err.print(f"[bold red]error[/]: no file {', '.join(unknown)}; rendered: {', '.join(files)}", highlight=False)
        raise typer.Exit(2)
    chosen = {name: text for name, text in files.items() if not file or name in file}
    if output is not None:
        for name, text in chosen.items():
            write_output(output / name, text, announce=False)
        out.print(f"wrote {len(chosen)} files to {output}")
        return
    for name, text in chosen.items():
        sys.stdout.write(f"# ==> {name} <==\n{text}")
        if not text.endswith("\n"):
            sys.stdout.write("\n")


@app.command()
def fabric(
    stack: StackArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write each file into this directory instead of printing.")
    ] = None,
) -> None:
    """The InfiniBand partitions a site's subnet managers receive (site.fabric.partitioning): OpenSM's
    partitions.conf and each subnet manager's opensm.conf settings (sm_priority), or the UFM REST API's PKey
    calls (ufm-pkeys.json) where UFM manages the fabric (docs/onprem-hybrid.md)."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack
    from gpuforge.render.ib_partitions import render_fabric

    try:
        stack_file = load_stack(stack)
        resolved = check_stack(stack_file).resolved
    except SpecError as error:
        fail(error)
    files = render_fabric(resolved)
    if not files:
        err.print(
            f"[bold red]error[/]: {escape(stack)} declares no site.fabric.partitioning (see docs/onprem-hybrid.md)",
            highlight=False,
        )
        raise typer.Exit(2)
    if output is not None:
        for name, text in files.items():
            write_output(output / name, text, announce=False)
        out.print(f"wrote {len(files)} files to {output}")
        return
    for name, text in files.items():
        sys.stdout.write(f"# ==> {name} <==\n{text}")


@app.command()
def job(
    stack: StackArg,
    team: Annotated[str, typer.Option("--team", "-t", help="The team (kubernetes.platform.teams) the job is for.")],
    name: Annotated[str | None, typer.Option(help="The JobSet's name (default: train-TEAM).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the manifest to this file.")] = None,
) -> None:
    """A multi-node training job for a team as a JobSet (docs/kubernetes.md, "Training jobs"): one pod per GPU
    node with every GPU, fabric device and huge page of its node, /dev/shm, the team's queue label, service
    account and data claim. Planned offline, then checked against the plan: Kueue admits it (every request
    covered by a flavor of the team's ClusterQueue, within quota) and the nodes take it (labels, taints,
    room per node). Exit 1 with the reasons when it would not run, 2 when the spec is invalid."""
    import yaml

    from gpuforge.plan.engine import plan_stack
    from gpuforge.plan.policy_check import to_rule_resources
    from gpuforge.policy.rules import Stack
    from gpuforge.policy.training_job import TrainingJobError, job_problems, team_job_inputs
    from gpuforge.render.training_job import training_jobset

    try:
        plan = plan_stack(stack)
    except SpecError as error:
        fail(error)
    planned = Stack(to_rule_resources(plan.resources))
    try:
        manifest = training_jobset(team_job_inputs(planned, team), name)
        problems = job_problems(planned, manifest)
    except TrainingJobError as error:
        err.print(f"[bold red]error[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    text = yaml.safe_dump(manifest, sort_keys=False)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
    for problem in problems:
        err.print(f"[bold red]would not run[/]: {escape(problem)}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


@app.command()
def cabling(
    stack: StackArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the CSV here instead of printing.")
    ] = None,
) -> None:
    """A site's compute-fabric cabling plan as CSV, one row per host-to-leaf cable, in NetBox's cable import
    columns (docs/onprem-hybrid.md, "Cabling plan")."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack
    from gpuforge.render.cabling import cabling_csv

    try:
        resolved = check_stack(load_stack(stack)).resolved
    except SpecError as error:
        fail(error)
    if resolved.site is None or resolved.site.spec.fabric is None:
        err.print(f"[bold red]error[/]: {escape(stack)} has no site fabric to cable (placement onprem or hybrid)")
        raise typer.Exit(2)
    text = cabling_csv(resolved.site)
    if output is not None:
        write_output(output, text)
        return
    sys.stdout.write(text)
