"""`gpuforge render ...`: what nodes and services receive, rendered from a stack's spec and the catalog.

A Typer sub-app registered on the main app as `render`; one command per thing rendered.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpuforge.console import err, out
from gpuforge.spec import SpecError

app = typer.Typer(
    help="Print what a stack's nodes and services receive (rendered from spec and catalog).", no_args_is_help=True
)

StackArg = Annotated[
    str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...) or a stack file.", show_default=False)
]


def _invalid(error: SpecError) -> typer.Exit:
    err.print("[bold red]invalid spec[/]: " + escape(error.report()), highlight=False, soft_wrap=True)
    return typer.Exit(2)


@app.command()
def monitoring(
    stack: StackArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the files under this directory instead of printing.")
    ] = None,
) -> None:
    """The Prometheus configuration, rules (or PrometheusRule objects) and Alertmanager routes a stack gets.
    Receiver secrets show as the files Alertmanager reads and the Pulumi config keys that fill them."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.monitoring import render_monitoring
    from gpuforge.spec import resolve

    try:
        stack_file = load_stack(stack)
        resolved = resolve(stack_file.cluster, str(stack_file.path))
    except SpecError as error:
        raise _invalid(error) from None
    if resolved.spec.monitoring is None:
        err.print(f"[bold red]error[/]: {escape(stack)} declares no monitoring section (see docs/monitoring.md)")
        raise typer.Exit(2)
    bundle = render_monitoring(resolved)
    if output is not None:
        for name, text in bundle.files.items():
            target = output / name.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            out.print(f"wrote {target}")
        return
    grafana = [name for name in bundle.files if "grafana" in name or name.endswith("dashboards.yaml")]
    for name, text in bundle.files.items():
        if name not in grafana:
            sys.stdout.write(f"# --- {name}\n{text}")
    sys.stdout.write("# --- Grafana dashboards and provisioning (written with --output)\n")
    sys.stdout.writelines(f"# {name}\n" for name in grafana)
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
    from gpuforge.render.slurm import SlurmRenderError, render_slurm, slurm_config
    from gpuforge.spec import resolve

    try:
        stack_file = load_stack(stack)
        resolved = resolve(stack_file.cluster, str(stack_file.path))
        files = render_slurm(slurm_config(resolved, stand_in_gpus=stand_in_gpus))
    except SpecError as error:
        raise _invalid(error) from None
    except SlurmRenderError as error:
        err.print(f"[bold red]error[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    unknown = sorted(set(file or ()) - set(files))
    if unknown:
        err.print(f"[bold red]error[/]: no file {', '.join(unknown)}; rendered: {', '.join(files)}", highlight=False)
        raise typer.Exit(2)
    chosen = {name: text for name, text in files.items() if not file or name in file}
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        for name, text in chosen.items():
            (output / name).write_text(text)
        out.print(f"wrote {len(chosen)} files to {output}")
        return
    for name, text in chosen.items():
        sys.stdout.write(f"# ==> {name} <==\n{text}")
        if not text.endswith("\n"):
            sys.stdout.write("\n")
