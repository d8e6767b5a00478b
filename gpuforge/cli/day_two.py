"""`gpuforge status STACK` and `gpuforge ssh STACK [NODE]`: the commands an operator reaches for after
`up` (gpuforge/status.py does the asking)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from gpuforge.cli.common import fail
from gpuforge.console import err, out
from gpuforge.spec import SpecError

if TYPE_CHECKING:
    from gpuforge.spec import ResolvedSpec
    from gpuforge.status import StatusReport

StackArg = Annotated[str, typer.Argument(help="A stack name in stacks/ or a path to a stack file.", show_default=False)]


def _resolved(stack: str) -> ResolvedSpec:
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack

    try:
        return check_stack(load_stack(stack)).resolved
    except SpecError as error:
        fail(error)


def _client(service: str, region: str) -> Any:
    import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]

    return boto3.session.Session().client(service, region_name=region)


def status(
    stack: StackArg,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    slurm: Annotated[
        bool,
        typer.Option(
            help="Ask the running controller for Slurm's node states (sinfo) and pending jobs (squeue) through "
            "Systems Manager Run Command (needs ssm:SendCommand)."
        ),
    ] = True,
) -> None:
    """The deployed cluster as AWS has it: per node group, nodes by EC2 state against count + spares (or an
    elastic group's min-max) and by Slurm state, spares in hand, the image each node booted against the
    pinned one; the controllers and the pending jobs; each reservation's use. Needs AWS credentials (on
    premises: the spec's hosts and their addresses). Exit 0 when everything is as planned, 1 on a finding
    or what AWS did not answer, 2 for a spec error."""
    from gpuforge.status import cluster_status

    resolved = _resolved(stack)
    region = resolved.spec.region
    if region is None:
        _site_status(resolved, json_out)
        return
    ssm = _client("ssm", region) if slurm else None
    report = cluster_status(resolved, _client("ec2", region), stack, ssm)
    if json_out:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        _print_status(report)
    if not report.healthy:
        raise typer.Exit(1)


def _print_status(report: StatusReport) -> None:
    out.print(f"[bold]status {escape(report.stack)}[/] ({escape(report.region)})", highlight=False)
    for g in report.groups:
        states = ", ".join(f"{n} {state}" for state, n in sorted(g.by_state.items())) or "no instances"
        images = ", ".join(f"{image} x{n}" for image, n in sorted(g.images.items())) or "-"
        pinned = f" (pinned {g.pinned_image})" if g.pinned_image else " (not pinned)"
        slurm = ", ".join(f"{n} {state}" for state, n in sorted(g.slurm_states.items()))
        out.print(f"  {escape(g.name):<12} planned {g.planned:<7} {escape(states)}"
                  + (f"; Slurm: {escape(slurm)}" if slurm else "") + f"; images: {escape(images)}{pinned}",
                  highlight=False)
        for finding in g.findings:
            out.print(f"    [yellow]{escape(finding)}[/]", highlight=False)
    for node in report.controllers:
        out.print(f"  controller   {escape(node.name)} {node.state} {node.private_ip} ({node.instance_id})",
                  highlight=False)
    for use in report.reservations:
        groups = ", ".join(use.groups)
        if use.unchecked:
            out.print(f"  reservation  {use.reservation_id} ({groups}): [yellow]unchecked[/] {escape(use.unchecked)}",
                      highlight=False)
        else:
            used = (use.total or 0) - (use.available or 0)
            out.print(f"  reservation  {use.reservation_id} ({groups}): {used} of {use.total} in use, {use.state}",
                      highlight=False)
    for line in report.unchecked:
        out.print(f"  [yellow]unchecked[/] {escape(line)}", highlight=False, soft_wrap=True)
    if report.pending_jobs is not None:
        out.print(f"  queue        {report.pending_jobs} pending job(s)", highlight=False)


def _site_status(resolved: ResolvedSpec, json_out: bool) -> None:
    site = resolved.site
    hosts = {name: h.spec.management_ip for name, h in site.hosts.items()} if site is not None else {}
    if json_out:
        sys.stdout.write(json.dumps({"placement": "onprem", "hosts": hosts, "asked": False}) + "\n")
        return
    out.print(f"on premises: {len(hosts)} site hosts; no cloud API to ask their state "
              "(`gpuforge check STACK` runs the health checks on them)", highlight=False)
    for name, address in sorted(hosts.items()):
        out.print(f"  {escape(name):<12} {address}", highlight=False)


def ssh(
    stack: StackArg,
    node: Annotated[
        str | None,
        typer.Argument(
            help="Instance id, Slurm node name (<group>-<instance id>), private address, a node group or "
            "`controller` (its first running node); on premises a site host or its address. Default: a login "
            "node, else the controller.",
            show_default=False,
        ),
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="On premises: the SSH user.")] = None,
    ssh_options: Annotated[
        list[str] | None,
        typer.Option(
            "--ssh-option",
            "-o",
            help="On premises: an ssh_config option for this connection, as `ssh -o` takes it "
            "(IdentityFile=~/.ssh/site, ProxyJump=bastion); repeatable.",
        ),
    ] = None,
    print_only: Annotated[bool, typer.Option("--print", help="Print the command instead of running it.")] = False,
) -> None:
    """A shell on a node: on AWS a Session Manager session (`aws ssm start-session`: no open port, the
    session runs as your SSMSessionRunAs user and is logged, per the cluster's Session Manager
    preferences; needs the AWS CLI and its Session Manager plugin), on premises SSH to the management
    address the spec gives the host. Exit 2 when the node is not found, or for --ssh-option on AWS."""
    from gpuforge.status import NoSuchNode, cluster_instances, pick_node, session_command, site_address

    resolved = _resolved(stack)
    region = resolved.spec.region
    try:
        on_site = resolved.site is not None and (region is None or node is None or node in resolved.site.hosts)
        if on_site:
            _, address = site_address(resolved, node)
            options = [word for option in ssh_options or [] for word in ("-o", option)]
            command = ["ssh", *options, f"{user}@{address}" if user else address]
        else:
            assert region is not None
            if ssh_options:
                err.print("[bold red]ssh[/]: --ssh-option is for SSH on premises; a Session Manager session on AWS "
                          "takes no SSH options (set them in the account's Session Manager preferences)",
                          highlight=False, soft_wrap=True)
                raise typer.Exit(2)
            nodes, failure = cluster_instances(_client("ec2", region), resolved.spec.name)
            if failure is not None:
                err.print(f"[bold red]ssh[/]: could not list the stack's instances: {escape(failure)}", highlight=False)
                raise typer.Exit(2)
            logins = [n for n, g in resolved.node_groups.items() if g.spec.role == "login"]
            command = session_command(pick_node(nodes, node, logins), region)
    except NoSuchNode as error:
        err.print(f"[bold red]ssh[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    text = shlex.join(command)
    if print_only:
        sys.stdout.write(text + "\n")
        return
    if shutil.which(command[0]) is None:
        need = "the AWS CLI with the Session Manager plugin" if command[0] == "aws" else "an SSH client"
        err.print(f"[bold red]ssh[/]: {command[0]} is not installed ({need}); the command: {escape(text)}",
                  highlight=False)
        raise typer.Exit(2)
    os.execvp(command[0], command)


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(ssh)
