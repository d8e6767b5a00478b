"""`gpuforge metal ...`: the site's hosts through their BMCs (Redfish): inventory, check, power, boot
(gpuforge/nodes/metal.py does the talking). Credentials are Pulumi secrets (site.bmc); no value of them is
printed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.markup import escape

from gpuforge.console import err, out
from gpuforge.spec import SpecError

app = typer.Typer(
    help="The site's hosts through their BMCs (Redfish): inventory, check, power, boot; and hosts from NetBox."
)

StackArg = Annotated[str, typer.Argument(help="A stack name in stacks/ or a path to a stack file.")]
HostsOpt = Annotated[list[str] | None, typer.Option("--host", help="Only this host (repeatable); default: all.")]


def _site(stack: str) -> tuple[Any, Any, Any]:
    """(resolved site, credentials, site spec), or exit 2 with the spec's problems / 1 with the metal error."""
    from gpuforge.nodes.metal import MetalError, bmc_credentials
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack

    try:
        stack_file = load_stack(stack)
        resolved = check_stack(stack_file).resolved
    except SpecError as error:
        err.print(escape(error.report()))
        raise typer.Exit(2) from None
    if resolved.site is None:
        err.print(f"[red]{escape(stack)} has no site[/]: gpuforge metal drives the site's hosts' BMCs")
        raise typer.Exit(2)
    try:
        credentials = bmc_credentials(stack_file.name, resolved.site.spec)
    except MetalError as error:
        _fail(error)
    return resolved.site, credentials, resolved.site.spec


def _fail(error: Exception) -> typer.Exit:
    err.print(f"[red]error[/]: {escape(str(error))}", highlight=False)
    raise typer.Exit(1)


def _on_each_host(stack: str, hosts: list[str] | None, act: Callable[[Any, Any, Any], str]) -> None:
    """act(site spec, host, credentials) on each chosen host, printing `host: <what it returns>`."""
    from gpuforge.nodes.metal import MetalError, site_hosts

    site, credentials, spec = _site(stack)
    try:
        for h in site_hosts(site, hosts or []):
            out.print(f"{escape(h.name)}: {escape(act(spec, h, credentials))}", highlight=False)
    except MetalError as error:
        _fail(error)


@app.command()
def inventory(stack: StackArg, host: HostsOpt = None) -> None:
    """Each host as its BMC reports it: power state, system model and serial, BIOS and BMC firmware, GPUs, NICs."""
    from gpuforge.nodes.metal import MetalError, read_inventory, site_hosts

    site, credentials, spec = _site(stack)
    try:
        for h in site_hosts(site, host or []):
            inv = read_inventory(spec, h, credentials)
            out.print(
                f"{escape(inv.host)}: power {escape(inv.power_state)}; {escape(inv.manufacturer)} "
                f"{escape(inv.model)} serial {escape(inv.serial_number or '-')}; BIOS {escape(inv.bios_version or '-')}"
                f"; BMC firmware {escape(', '.join(inv.bmc_firmware) or '-')}; {len(inv.gpus)} GPUs "
                f"({escape(', '.join(sorted(set(inv.gpus))) or '-')}); NICs {escape(', '.join(inv.nics) or '-')}",
                highlight=False,
            )
    except MetalError as error:
        _fail(error)


@app.command()
def check(stack: StackArg, host: HostsOpt = None) -> None:
    """Hold each host's inventory against the site model and the catalog (GPUs present, of the model).
    Exit 0 when every host matches, 1 otherwise."""
    from gpuforge.nodes.metal import MetalError, check_inventory, read_inventory, site_hosts

    site, credentials, spec = _site(stack)
    problems = 0
    try:
        for h in site_hosts(site, host or []):
            mismatches = check_inventory(h, read_inventory(spec, h, credentials))
            for mismatch in mismatches:
                out.print(f"[red]mismatch[/] {escape(str(mismatch))}", highlight=False)
            if not mismatches:
                out.print(f"[green]ok[/] {escape(h.name)}: {h.server.gpu_count} x {escape(h.server.gpu_model)}")
            problems += len(mismatches)
    except MetalError as error:
        _fail(error)
    if problems:
        raise typer.Exit(1)


@app.command()
def power(
    stack: StackArg,
    action: Annotated[str, typer.Argument(help="on, off (forced), cycle, restart (forced) or shutdown (graceful).")],
    host: HostsOpt = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the power state the action leads to.")] = 60.0,
) -> None:
    """Power hosts on, off or through a cycle through their BMCs, and wait for the state it leads to."""
    from gpuforge.nodes.metal import RESET_TYPES, PowerAction, set_power

    if action not in RESET_TYPES:
        err.print(f"[red]error[/]: unknown action {escape(action)!r}; use one of {', '.join(RESET_TYPES)}")
        raise typer.Exit(2)
    checked = cast(PowerAction, action)
    _on_each_host(stack, host, lambda spec, h, c: f"{action} requested; power {set_power(spec, h, c, checked, wait)}")


@app.command()
def boot(
    stack: StackArg,
    target: Annotated[str, typer.Argument(help="pxe, or virtual-media (a CD image the BMC fetches: --image).")],
    host: HostsOpt = None,
    image: Annotated[str | None, typer.Option(help="URL of the ISO for virtual-media.")] = None,
) -> None:
    """Set the next boot only (Redfish BootSourceOverrideEnabled Once) from PXE or virtual media; the boot after
    it is the host's usual one. Power-cycle the host to boot it now (gpuforge metal power STACK cycle)."""
    from gpuforge.nodes.metal import BootTarget, set_boot_once

    if target not in ("pxe", "virtual-media"):
        err.print(f"[red]error[/]: unknown boot target {escape(target)!r}; use pxe or virtual-media")
        raise typer.Exit(2)
    checked = cast(BootTarget, target)
    _on_each_host(stack, host, lambda spec, h, c: f"next boot from {set_boot_once(spec, h, c, checked, image)}")


@app.command("import-netbox")
def import_netbox(
    devices: Annotated[Path, typer.Argument(help="NetBox devices CSV (bulk-import fields: name, device_type, ...).")],
    addresses: Annotated[Path, typer.Argument(help="NetBox IP addresses CSV (address, device, is_primary, is_oob).")],
    model: Annotated[
        list[str],
        typer.Option("--model", help='A NetBox device type and its catalog server model: "DGX H100=dgx-h100".'),
    ],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the YAML here.")] = None,
) -> None:
    """Site hosts from a NetBox export: prints the `hosts:` entries (rack, u_position, model, management_ip,
    bmc_address) to put under the stack's site (docs/onprem-hybrid.md, "Importing hosts from NetBox")."""
    import yaml

    # Imported here, as every command's engine is: `gpuforge --help` answers without loading them.
    from gpuforge.catalog import load_catalog
    from gpuforge.cli.common import write_output
    from gpuforge.spec.site_netbox import hosts_from_netbox

    models: dict[str, str] = {}
    known = load_catalog().data.servers
    for pair in model:
        device_type, _, server = pair.rpartition("=")
        if not device_type or server not in known:
            err.print(
                f"[red]error[/]: --model {escape(pair)}: expected \"<NetBox device type>=<catalog server>\", the "
                f"server one of {escape(', '.join(sorted(known)))}",
                highlight=False,
            )
            raise typer.Exit(2)
        models[device_type] = server
    try:
        devices_text, addresses_text = devices.read_text(), addresses.read_text()
    except (OSError, UnicodeDecodeError) as error:
        _fail(error)
    result = hosts_from_netbox(devices_text, addresses_text, models, devices.name, addresses.name)
    if result.problems:
        for issue in result.problems:
            line = f"[red]{escape(issue.path)}[/]: {escape(issue.message)}; fix: {escape(issue.fix)}"
            err.print(line, highlight=False)
        raise typer.Exit(2)
    text = yaml.safe_dump({"hosts": result.hosts}, sort_keys=False)
    skipped = "".join(f"# skipped {name}: {why}\n" for name, why in sorted(result.skipped.items()))
    if output is not None:
        write_output(output, skipped + text)
        return
    sys.stdout.write(skipped + text)
