"""`gpuforge metal` against real BMC emulators (sushy-tools, from PyPI) on loopback addresses, over HTTPS with the
site CA's certificate verified, as production reaches a BMC:

- dgx-01 at 127.0.0.2: sushy-emulator's fake driver behind HTTP basic authentication (its htpasswd file): power
  and one-time boot (PXE, and virtual media it fetches from a local HTTP server) change its state for real; its
  fake systems list no processors, so the check finds no GPUs;
- dgx-02 at 127.0.0.3 and dgx-03 at 127.0.0.4: sushy-static serving Redfish mockups of a DGX H100 written here
  after the Redfish schema (ComputerSystem, Processor with ProcessorType GPU, EthernetInterface, Manager), one
  with its eight GPUs and one with seven: no recorded DGX BMC output is public to copy.

Every emulator runs under `timeout`, is stopped by its process id, and the credentials (set as the environment's
stand-in for the Pulumi secrets) never appear in any output."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from tests.support import private_ca_tls, skip_unless_ci

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
EMULATOR = shutil.which("sushy-emulator") or str(VENV_BIN / "sushy-emulator")
STATIC = shutil.which("sushy-static") or str(VENV_BIN / "sushy-static")
USER, PASSWORD = "gpuforge-admin", "s3cret-bmc-Passw0rd"
FAKE_UUID = "9d5e3c3a-7a1e-4c31-9c8a-1b0f4e1d2a01"
pytestmark = skip_unless_ci(not Path(EMULATOR).exists(), "sushy-tools is not installed (pip install sushy-tools)")


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _certificates(directory: Path, addresses: list[str]) -> tuple[Path, Path, str]:
    """The site CA and the BMCs' certificate: (certificate file, key file, the CA's PEM)."""
    ca, cert, key = private_ca_tls("test site BMC CA", addresses)
    cert_path, key_path = directory / "bmc.pem", directory / "bmc.key"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    return cert_path, key_path, ca.decode()


def _mockup(directory: Path, gpus: int) -> Path:
    """A DGX H100 as a Redfish service describes it: one ComputerSystem with its Processors (2 CPUs, the GPUs),
    an EthernetInterface and the BMC's Manager."""
    base = "/redfish/v1"

    def put(path: str, body: dict[str, Any]) -> None:
        target = directory / path.removeprefix(base).lstrip("/") / "index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"@odata.id": path.rstrip("/") or base, **body}))

    system = f"{base}/Systems/DGX"
    put(base, {"@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Id": "RootService", "Name": "Root Service",
               "RedfishVersion": "1.11.0", "Systems": {"@odata.id": f"{base}/Systems"},
               "Managers": {"@odata.id": f"{base}/Managers"}})  # fmt: skip
    put(f"{base}/Systems", {"@odata.type": "#ComputerSystemCollection.ComputerSystemCollection", "Name": "Systems",
                            "Members": [{"@odata.id": system}], "Members@odata.count": 1})  # fmt: skip
    put(system, {"@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem", "Id": "DGX", "Name": "DGX",
                 "Manufacturer": "NVIDIA", "Model": "DGXH100", "SerialNumber": "1660123456789",
                 "BiosVersion": "01.01.03", "PowerState": "On",
                 "Boot": {"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
                          "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Cd", "Hdd"]},
                 "Processors": {"@odata.id": f"{system}/Processors"},
                 "EthernetInterfaces": {"@odata.id": f"{system}/EthernetInterfaces"},
                 "Links": {"ManagedBy": [{"@odata.id": f"{base}/Managers/BMC"}]}})  # fmt: skip
    processors = [f"CPU_{i}" for i in range(2)] + [f"GPU_SXM_{i + 1}" for i in range(gpus)]
    put(f"{system}/Processors", {"@odata.type": "#ProcessorCollection.ProcessorCollection", "Name": "Processors",
                                 "Members": [{"@odata.id": f"{system}/Processors/{p}"} for p in processors],
                                 "Members@odata.count": len(processors)})  # fmt: skip
    for p in processors:
        gpu = p.startswith("GPU")
        put(f"{system}/Processors/{p}", {"@odata.type": "#Processor.v1_11_0.Processor", "Id": p, "Name": p,
                                         "ProcessorType": "GPU" if gpu else "CPU",
                                         "Model": "NVIDIA H100 80GB HBM3" if gpu else "Intel Xeon Platinum 8480C",
                                         "Manufacturer": "NVIDIA" if gpu else "Intel(R) Corporation"})  # fmt: skip
    put(f"{system}/EthernetInterfaces", {"@odata.type": "#EthernetInterfaceCollection.EthernetInterfaceCollection",
                                         "Name": "Ethernet Interfaces", "Members@odata.count": 1,
                                         "Members": [{"@odata.id": f"{system}/EthernetInterfaces/eno3"}]})  # fmt: skip
    put(f"{system}/EthernetInterfaces/eno3", {"@odata.type": "#EthernetInterface.v1_6_0.EthernetInterface",
                                              "Id": "eno3", "Name": "eno3",
                                              "MACAddress": "5c:ff:35:00:00:01"})  # fmt: skip
    put(f"{base}/Managers", {"@odata.type": "#ManagerCollection.ManagerCollection", "Name": "Managers",
                             "Members": [{"@odata.id": f"{base}/Managers/BMC"}], "Members@odata.count": 1})  # fmt: skip
    put(f"{base}/Managers/BMC", {"@odata.type": "#Manager.v1_10_0.Manager", "Id": "BMC", "Name": "BMC",
                                 "ManagerType": "BMC", "FirmwareVersion": "24.09.17"})  # fmt: skip
    return directory


def _wait_for(process: subprocess.Popen[bytes], address: str, port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the emulator on {address}:{port} exited with {process.returncode}")
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the emulator on {address}:{port} did not listen within 60 s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def bmcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import bcrypt

    work = tmp_path_factory.mktemp("bmc")
    addresses = {"dgx-01": "127.0.0.2", "dgx-02": "127.0.0.3", "dgx-03": "127.0.0.4"}
    port = _free_port("127.0.0.2")
    cert, key, ca_pem = _certificates(work, list(addresses.values()))
    htpasswd = work / "htpasswd"
    htpasswd.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    (work / "state").mkdir()
    config = work / "emulator.conf"
    config.write_text(
        f"SUSHY_EMULATOR_LISTEN_IP = {addresses['dgx-01']!r}\nSUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        f"SUSHY_EMULATOR_SSL_CERT = {str(cert)!r}\nSUSHY_EMULATOR_SSL_KEY = {str(key)!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\nSUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_STATE_DIR = {str(work / 'state')!r}\n"
        "SUSHY_EMULATOR_FAKE_SYSTEMS = [{'uuid': %r, 'name': 'dgx-01', 'power_state': 'Off',"
        " 'nics': [{'mac': '5c:ff:35:00:00:11', 'ip': '10.72.1.11'}]}]\n" % FAKE_UUID
    )
    # The ISO a virtual-media boot makes the BMC fetch: served on loopback over plain HTTP, as a provisioner does.
    (work / "iso").mkdir()
    (work / "iso" / "installer.iso").write_bytes(b"\0" * 2048)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(work / "iso"))
    images = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    # Unbuffered: sushy-static's request log (read by a test) reaches its file as each request is served.
    env = {**os.environ, "SUSHY_EMULATOR_CONFIG": str(config), "PYTHONUNBUFFERED": "1"}
    logs = {name: (work / f"{name}.log").open("wb") for name in addresses}
    processes = [
        subprocess.Popen(["timeout", "600", EMULATOR, "--config", str(config)], env=env, stdout=logs["dgx-01"],
                         stderr=subprocess.STDOUT),
        subprocess.Popen(["timeout", "600", STATIC, "-i", addresses["dgx-02"], "-p", str(port), "-m",
                          str(_mockup(work / "dgx8", 8)), "-c", str(cert), "-k", str(key)],
                         env=env, stdout=logs["dgx-02"], stderr=subprocess.STDOUT),
        subprocess.Popen(["timeout", "600", STATIC, "-i", addresses["dgx-03"], "-p", str(port), "-m",
                          str(_mockup(work / "dgx7", 7)), "-c", str(cert), "-k", str(key)],
                         env=env, stdout=logs["dgx-03"], stderr=subprocess.STDOUT),
    ]  # fmt: skip
    try:
        for process, address in zip(processes, addresses.values(), strict=True):
            _wait_for(process, address, port)
        yield {"port": port, "ca": ca_pem, "addresses": addresses, "work": work,
               "iso": f"http://127.0.0.1:{images.server_address[1]}/installer.iso"}  # fmt: skip
    finally:
        for process in processes:
            _stop(process)
        images.shutdown()
        for log in logs.values():
            log.close()


def _stack(bmcs: dict[str, Any], tmp_path: Path, extra_config: dict[str, Any] | None = None) -> Path:
    """The on-prem lab stack with three of its hosts at the emulators' addresses and the site CA."""
    repo = Path(__file__).resolve().parents[2]
    document = yaml.safe_load((repo / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    site = document["config"]["gpuforge:cluster"]["site"]
    for name, (host, address) in zip(sorted(site["hosts"]), bmcs["addresses"].items(), strict=False):
        site["hosts"][host] = site["hosts"].pop(name) if host not in site["hosts"] else site["hosts"][host]
        site["hosts"][host]["bmc_address"] = address
    site["bmc"] = {"port": bmcs["port"], "ca_certificate": bmcs["ca"]}
    document["config"].update(extra_config or {})
    path = tmp_path / "Pulumi.metal-lab.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _run(stack: Path, *args: str, password: str = PASSWORD) -> Any:
    env = {"GPUFORGE_BMC_USERNAME": USER, "GPUFORGE_BMC_PASSWORD": password}
    result = CliRunner().invoke(app, ["metal", args[0], str(stack), *args[1:]], env=env)
    assert password not in result.output and USER not in result.output
    return result


def test_inventory_reads_power_firmware_gpus_and_nics(bmcs: dict[str, Any], tmp_path: Path) -> None:
    result = _run(_stack(bmcs, tmp_path), "inventory", "--host", "dgx-02", "--host", "dgx-01")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    assert ("dgx-02: power On; NVIDIA DGXH100 serial 1660123456789; BIOS 01.01.03; BMC firmware 24.09.17; 8 GPUs "
            "(NVIDIA H100 80GB HBM3); NICs 5c:ff:35:00:00:01") in text  # fmt: skip
    assert "dgx-01: power Off;" in text and "0 GPUs (-); NICs 5c:ff:35:00:00:11" in text


def test_check_holds_each_host_against_the_site_model(bmcs: dict[str, Any], tmp_path: Path) -> None:
    stack = _stack(bmcs, tmp_path)
    ok = _run(stack, "check", "--host", "dgx-02")
    assert ok.exit_code == 0 and "ok dgx-02: 8 x H100" in ok.output, ok.output
    short = _run(stack, "check", "--host", "dgx-03", "--host", "dgx-01")
    assert short.exit_code == 1
    assert ("mismatch cluster.site.hosts[dgx-03].model: found 7 GPUs; expected 8 x H100 (catalog "
            "servers.dgx-h100); fix: reseat or replace") in " ".join(short.output.split())  # fmt: skip
    assert "cluster.site.hosts[dgx-01].model: found 0 GPUs" in " ".join(short.output.split())


def test_power_and_one_time_boot_change_the_bmcs_state(bmcs: dict[str, Any], tmp_path: Path) -> None:
    import sushy
    from sushy import auth

    stack = _stack(bmcs, tmp_path)
    on = _run(stack, "power", "on", "--host", "dgx-01")
    assert on.exit_code == 0 and "dgx-01: on requested; power On" in on.output, on.output
    # The fake driver keeps the target but always reports Continuous (sushy-tools: "we are ignoring the
    # BootSourceOverrideEnabled element"); what gpuforge asks for is read from sushy-static's request log below.
    pxe = _run(stack, "boot", "pxe", "--host", "dgx-01")
    assert pxe.exit_code == 0 and "dgx-01: next boot from Pxe" in pxe.output, pxe.output
    media = _run(stack, "boot", "virtual-media", "--host", "dgx-01", "--image", bmcs["iso"])
    assert media.exit_code == 0 and "dgx-01: next boot from Cd" in media.output, media.output
    off = _run(stack, "power", "off", "--host", "dgx-01")
    assert off.exit_code == 0 and "power Off" in off.output, off.output

    ca = bmcs["work"] / "ca.pem"
    ca.write_text(bmcs["ca"])
    root = sushy.Sushy(f"https://127.0.0.2:{bmcs['port']}/redfish/v1", auth=auth.BasicAuth(USER, PASSWORD),
                       verify=str(ca))  # fmt: skip
    system = root.get_system(f"/redfish/v1/Systems/{FAKE_UUID}")
    assert system.power_state == sushy.PowerState.OFF
    assert system.boot.target == sushy.BootSource.CD
    drives = [d for m in system.managers for d in m.virtual_media.get_members()]
    cds = [d for d in drives if sushy.VirtualMediaType.CD in d.media_types]
    assert [(d.image, d.inserted) for d in cds] == [(bmcs["iso"], True)]


def test_the_boot_override_asked_for_is_once(bmcs: dict[str, Any], tmp_path: Path) -> None:
    """The PATCH gpuforge sends, as sushy-static records it: the next boot only (Once), from PXE."""
    result = _run(_stack(bmcs, tmp_path), "boot", "pxe", "--host", "dgx-02")
    assert result.exit_code == 0, result.output
    log = (bmcs["work"] / "dgx-02.log").read_text()
    patch = json.loads(log.rsplit("Data: b'", 1)[1].split("'\n", 1)[0])
    assert patch == {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}


def test_bmc_errors_are_clear_and_never_show_a_credential(bmcs: dict[str, Any], tmp_path: Path) -> None:
    stack = _stack(bmcs, tmp_path)
    wrong = _run(stack, "power", "on", "--host", "dgx-01", password="not-the-password")
    assert wrong.exit_code == 1
    text = " ".join(wrong.output.split())
    assert "dgx-01: the BMC at https://127.0.0.2" in text and "refused the credentials (HTTP 401)" in text
    assert "gpuforge:bmcPassword" in text
    unknown = _run(stack, "boot", "usb", "--host", "dgx-01")
    assert unknown.exit_code == 2 and "use pxe or virtual-media" in unknown.output
    missing = _run(stack, "power", "on", "--host", "dgx-99")
    assert missing.exit_code == 1 and "no host dgx-99 in site.hosts" in missing.output


def test_bmc_certificates_are_verified(bmcs: dict[str, Any], tmp_path: Path) -> None:
    """Without the site CA the emulator's certificate is not trusted: refused, with the fix."""
    stack = _stack(bmcs, tmp_path)
    document = yaml.safe_load(stack.read_text())
    del document["config"]["gpuforge:cluster"]["site"]["bmc"]["ca_certificate"]
    stack.write_text(yaml.safe_dump(document, sort_keys=False))
    result = _run(stack, "inventory", "--host", "dgx-02")
    assert result.exit_code == 1 and "certificate is not trusted" in result.output
    assert "site.bmc.ca_certificate" in " ".join(result.output.split())


def test_plain_text_credentials_in_the_stack_file_are_refused(bmcs: dict[str, Any], tmp_path: Path) -> None:
    """The stack's validation refuses a BMC password in clear text before any BMC is asked."""
    stack = _stack(bmcs, tmp_path, {"gpuforge:bmcPassword": PASSWORD, "gpuforge:bmcUsername": USER})
    result = CliRunner().invoke(app, ["metal", "inventory", str(stack)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and PASSWORD not in result.output and USER not in result.output
    for key in ("bmcPassword", "bmcUsername"):
        assert f"config.gpuforge:{key}: a credential in clear text in the stack file" in text
        assert f"pulumi config set --secret gpuforge:{key}" in text
