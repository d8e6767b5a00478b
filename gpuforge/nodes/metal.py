"""The site's metal through Redfish (sushy, OpenStack's Redfish client): read each host's inventory (GPUs, NICs,
firmware, power state) and hold it against the site model, power it on, off or through a cycle, and set a
one-time PXE or virtual-media boot.

Each host's BMC is reached at ``https://<bmc_address>:<site.bmc.port>/redfish/v1`` with its certificate verified
(the site's CA, ``site.bmc.ca_certificate``, or the system trust store). The credentials are Pulumi secrets
(``gpuforge:bmcUsername`` / ``gpuforge:bmcPassword`` by default, ``site.bmc``), read through the Pulumi CLI, or
from GPUFORGE_BMC_USERNAME / GPUFORGE_BMC_PASSWORD where no CLI decrypts (CI, the emulator); no value of
them is ever printed, logged or put in an error.

gpuforge stops at the BMC: it does not serve the PXE or virtual-media image, partition disks or install an OS.
That is a provisioner's job (MAAS, Ironic, Warewulf, NVIDIA Base Command Manager): docs/onprem-hybrid.md, "The
metal", says what each adds and where gpuforge hands over.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuforge.spec.resolved_site import ResolvedHost, ResolvedSite
from gpuforge.spec.site import Site

CONFIG_NAMESPACE = "gpuforge"
USERNAME_ENV = "GPUFORGE_BMC_USERNAME"
PASSWORD_ENV = "GPUFORGE_BMC_PASSWORD"
PowerAction = Literal["on", "off", "cycle", "restart", "shutdown"]
BootTarget = Literal["pxe", "virtual-media"]
# What each action asks of the BMC (Redfish ComputerSystem.Reset, ResetType).
RESET_TYPES: dict[str, str] = {
    "on": "On",
    "off": "ForceOff",
    "cycle": "PowerCycle",
    "restart": "ForceRestart",
    "shutdown": "GracefulShutdown",
}


class MetalError(Exception):
    """A BMC that cannot be reached or refuses: the host, what failed and the fix; never a credential."""


@dataclass(frozen=True)
class BmcCredentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class HostInventory:
    host: str
    power_state: str
    manufacturer: str
    model: str
    serial_number: str
    bios_version: str
    bmc_firmware: list[str]
    gpus: list[str]
    nics: list[str]


@dataclass(frozen=True)
class Mismatch:
    path: str
    found: str
    expected: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: found {self.found}; expected {self.expected}; fix: {self.fix}"


def bmc_credentials(stack: str, site: Site) -> BmcCredentials:
    """The BMC user and password: Pulumi secrets of the stack (decrypted by the Pulumi CLI), or the environment.
    (A credential in the stack file as plain text never gets here: the stack's validation refuses it.)"""
    keys = {"username": site.bmc.username_secret, "password": site.bmc.password_secret}
    found: dict[str, str] = {}
    for name, key in keys.items():
        env = USERNAME_ENV if name == "username" else PASSWORD_ENV
        value = os.environ.get(env) or _pulumi_secret(stack, key)
        if not value:
            raise MetalError(
                f"no BMC {name}: neither {env} nor the Pulumi secret {CONFIG_NAMESPACE}:{key} of stack {stack} is "
                f"set; fix: `pulumi config set --secret {CONFIG_NAMESPACE}:{key} --stack {stack}` (the Pulumi CLI "
                f"decrypts it), or export {env}"
            )
        found[name] = value
    return BmcCredentials(found["username"], found["password"])


def _pulumi_secret(stack: str, key: str) -> str | None:
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        return None
    result = subprocess.run(
        [pulumi, "config", "get", f"{CONFIG_NAMESPACE}:{key}", "--stack", stack],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.stdout.strip() or None if result.returncode == 0 else None


@contextmanager
def _verify(site: Site) -> Iterator[bool | str]:
    """requests' verify argument: the site CA's chain as a file, or True (the system's trust store)."""
    if site.bmc.ca_certificate is None:
        yield True
        return
    with tempfile.NamedTemporaryFile("w", suffix=".pem", prefix="gpuforge-bmc-ca-") as ca:
        ca.write(site.bmc.ca_certificate)
        ca.flush()
        yield ca.name


def bmc_url(site: Site, host: ResolvedHost) -> str:
    return f"https://{host.spec.bmc_address}:{site.bmc.port}/redfish/v1"


@contextmanager
def _system(site: Site, host: ResolvedHost, credentials: BmcCredentials) -> Iterator[Any]:
    """The host's ComputerSystem: the BMC's only one, or the one named after the host (a BMC serving several)."""
    import requests
    import sushy
    from sushy import auth as sushy_auth
    from sushy import exceptions

    url = bmc_url(site, host)
    with _verify(site) as verify:
        try:
            root = sushy.Sushy(
                url,
                auth=sushy_auth.BasicAuth(credentials.username, credentials.password),
                verify=verify,
                server_side_retries=0,
                connect_timeout=10,
                read_timeout=30,
            )
            systems = root.get_system_collection().get_members()
            chosen = [s for s in systems if s.name == host.name] or (systems if len(systems) == 1 else [])
            if not chosen:
                names = ", ".join(s.name or s.identity for s in systems) or "none"
                raise MetalError(
                    f"{host.name}: the BMC at {url} serves systems {names}, none named {host.name}; fix: check "
                    f"site.hosts[{host.name}].bmc_address"
                )
            yield chosen[0]
        except exceptions.AccessError as error:
            raise MetalError(
                f"{host.name}: the BMC at {url} refused the credentials (HTTP {error.status_code}); fix: set the right "
                f"ones as the Pulumi secrets {CONFIG_NAMESPACE}:{site.bmc.username_secret} and "
                f"{CONFIG_NAMESPACE}:{site.bmc.password_secret}"
            ) from None
        except exceptions.ConnectionError as error:
            cause = "its certificate is not trusted" if "CERTIFICATE" in str(error).upper() else "no answer"
            raise MetalError(
                f"{host.name}: cannot reach the BMC at {url} ({cause}); fix: check site.hosts[{host.name}]."
                "bmc_address, site.bmc.port and site.bmc.ca_certificate, and that this machine reaches the "
                "out-of-band network"
            ) from None
        except (exceptions.SushyError, requests.RequestException) as error:
            raise MetalError(f"{host.name}: the BMC at {url} failed: {type(error).__name__}") from None


def read_inventory(site: Site, host: ResolvedHost, credentials: BmcCredentials) -> HostInventory:
    from sushy import exceptions

    with _system(site, host, credentials) as system:

        def optional(read: Any) -> list[Any]:
            try:
                return list(read())
            except (exceptions.MissingAttributeError, exceptions.ResourceNotFoundError):
                return []  # the BMC does not offer the collection

        processors = optional(lambda: system.processors.get_members())
        gpus = [p.model or p.identity for p in processors if str(p.processor_type or "").upper().endswith("GPU")]
        nics = [n.mac_address or n.identity for n in optional(lambda: system.ethernet_interfaces.get_members())]
        firmware = [m.firmware_version or "unknown" for m in optional(lambda: system.managers)]
        return HostInventory(
            host=host.name,
            power_state=str(getattr(system.power_state, "value", system.power_state)),
            manufacturer=system.manufacturer or "",
            model=system.model or "",
            serial_number=system.serial_number or "",
            bios_version=system.bios_version or "",
            bmc_firmware=firmware,
            gpus=gpus,
            nics=nics,
        )


def check_inventory(host: ResolvedHost, inventory: HostInventory) -> list[Mismatch]:
    """The host as its BMC reports it against the site model and the catalog: every GPU there, of the model."""
    path = f"cluster.site.hosts[{host.name}]"
    expected, model = host.server.gpu_count, host.server.gpu_model
    out: list[Mismatch] = []
    if len(inventory.gpus) != expected:
        out.append(
            Mismatch(
                f"{path}.model",
                f"{len(inventory.gpus)} GPUs",
                f"{expected} x {model} (catalog servers.{host.spec.model})",
                "reseat or replace the missing GPUs (the BMC lists each as a Processor of type GPU), or correct "
                "the host's model",
            )
        )
    wrong = sorted({g for g in inventory.gpus if model.upper() not in g.upper()})
    if wrong:
        out.append(
            Mismatch(f"{path}.model", ", ".join(wrong), f"{model} GPUs ({host.spec.model})", "correct the host's model")
        )
    return out


def set_power(
    site: Site, host: ResolvedHost, credentials: BmcCredentials, action: PowerAction, wait_s: float = 60.0
) -> str:
    """Ask the BMC for the action and wait (up to wait_s) for the power state it leads to: a BMC applies a reset
    some seconds later, not at once. The power state it reports at the end."""
    import sushy

    with _system(site, host, credentials) as system:
        reset = sushy.ResetType(RESET_TYPES[action])
        allowed = system.get_allowed_reset_system_values()
        if allowed and reset not in allowed:
            names = ", ".join(k for k, v in RESET_TYPES.items() if sushy.ResetType(v) in allowed)
            raise MetalError(f"{host.name}: the BMC does not offer {action} ({reset.value}); it offers: {names}")
        system.reset_system(reset)
        wanted = sushy.PowerState.OFF if action in ("off", "shutdown") else sushy.PowerState.ON
        deadline = time.monotonic() + wait_s
        while True:
            system.refresh(force=True)
            if system.power_state == wanted or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        state = str(getattr(system.power_state, "value", system.power_state))
        if system.power_state != wanted:
            raise MetalError(
                f"{host.name}: {action} was accepted, but the BMC still reports power {state} after {wait_s:.0f} s; "
                f"fix: look at the host's console through the BMC, or run again with a longer --wait"
            )
        return state


def set_boot_once(
    site: Site, host: ResolvedHost, credentials: BmcCredentials, target: BootTarget, image: str | None = None
) -> str:
    """The next boot (only the next) from PXE, or from a virtual CD of `image` the BMC fetches itself."""
    import sushy

    with _system(site, host, credentials) as system:
        source = sushy.BootSource.PXE
        if target == "virtual-media":
            if not image:
                raise MetalError(f"{host.name}: a virtual-media boot needs the image's URL; fix: pass --image URL")
            _insert_cd(host, system, image)
            source = sushy.BootSource.CD
        system.set_system_boot_options(target=source, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.refresh()
        return f"{system.boot.target.value} ({system.boot.enabled.value})"


def _insert_cd(host: ResolvedHost, system: Any, image: str) -> None:
    import sushy
    from sushy import exceptions

    for manager in system.managers:
        try:
            devices = manager.virtual_media.get_members()
        except (exceptions.MissingAttributeError, exceptions.ResourceNotFoundError):
            continue
        for device in devices:
            if sushy.VirtualMediaType.CD in (device.media_types or []):
                device.insert_media(image, inserted=True, write_protected=True)
                return
    raise MetalError(f"{host.name}: the BMC offers no virtual CD drive; fix: boot over PXE instead")


def site_hosts(site: ResolvedSite, names: list[str]) -> list[ResolvedHost]:
    unknown = [n for n in names if n not in site.hosts]
    if unknown:
        raise MetalError(f"no host {', '.join(unknown)} in site.hosts; hosts: {', '.join(sorted(site.hosts))}")
    return [site.hosts[n] for n in (names or sorted(site.hosts))]
