"""Site hosts from a NetBox export (issue 28, item 5): the lab's hosts written as NetBox's device and IP address
CSVs (its bulk-import fields, read from NetBox's own forms in tests/fixtures/netbox) come back as the same hosts;
every problem of the files at once, by file and line."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.spec import resolve
from gpuforge.spec.site_netbox import ADDRESS_COLUMNS, DEVICE_COLUMNS, hosts_from_netbox
from tests.onprem.test_cabling import NETBOX_FORMS, form_fields
from tests.onprem.test_site_model import lab_spec

IPAM_FORMS = NETBOX_FORMS.parent / "ipam_bulk_import-v4.6.8.py.txt"
MODELS = {"DGX H100": "dgx-h100"}


def lab_as_netbox(spec: dict[str, Any]) -> tuple[str, str]:
    """The lab's hosts as a DCIM team would export them from NetBox, plus a leaf switch that is no host."""
    devices, addresses = io.StringIO(), io.StringIO()
    d = csv.DictWriter(devices, ["name", "role", "device_type", "site", "rack", "position", "face", "status"])
    a = csv.DictWriter(addresses, ["address", "status", "device", "interface", "is_primary", "is_oob"])
    d.writeheader()
    a.writeheader()
    for name, host in spec["site"]["hosts"].items():
        d.writerow({"name": name, "role": "gpu-server", "device_type": "DGX H100", "site": "lab-east",
                    "rack": host["rack"], "position": f"{host['u_position']}.0", "face": "front", "status": "active"})
        a.writerow({"address": f"{host['management_ip']}/24", "status": "active", "device": name,
                    "interface": "enp170s0f0", "is_primary": "true", "is_oob": "false"})
        a.writerow({"address": f"{host['bmc_address']}/24", "status": "active", "device": name,
                    "interface": "bmc", "is_primary": "false", "is_oob": "true"})
    d.writerow({"name": "su1-rail0", "role": "leaf", "device_type": "QM9700", "site": "lab-east", "rack": "r01",
                "position": "40.0", "face": "front", "status": "active"})
    return devices.getvalue(), addresses.getvalue()


def test_the_columns_read_are_netboxs_import_fields() -> None:
    assert set(DEVICE_COLUMNS) <= set(form_fields(NETBOX_FORMS, "DeviceImportForm"))
    assert set(ADDRESS_COLUMNS) <= set(form_fields(IPAM_FORMS, "IPAddressImportForm"))


def test_the_lab_exported_from_netbox_imports_as_the_same_hosts() -> None:
    spec = lab_spec()
    devices, addresses = lab_as_netbox(spec)
    result = hosts_from_netbox(devices, addresses, MODELS)
    assert result.problems == []
    assert result.skipped == {"su1-rail0": "device type QM9700 is not mapped to a catalog model"}
    keys = ("rack", "u_position", "model", "management_ip", "bmc_address")
    assert result.hosts == {n: {k: h[k] for k in keys} for n, h in spec["site"]["hosts"].items()}
    # Put in the site, they resolve as the hosts written by hand do.
    written = resolve(lab_spec())
    spec["site"]["hosts"] = {n: {**h, **result.hosts[n]} for n, h in spec["site"]["hosts"].items()}
    assert resolve(spec).site == written.site


def test_every_problem_of_the_files_is_reported_by_line() -> None:
    spec = lab_spec()
    devices, addresses = lab_as_netbox(spec)
    lines = devices.splitlines()
    lines[1] = lines[1].replace(",r01,3.0,", ",,3.0,")  # first host: no rack
    kept = [line for line in addresses.splitlines() if not (line.startswith("10.64.0.") and "dgx-a02" in line)]
    result = hosts_from_netbox("\n".join(lines) + "\n", "\n".join(kept) + "\n", MODELS)
    found = {i.path: i.message for i in result.problems}
    first, second = list(spec["site"]["hosts"])[:2]
    assert found["devices.csv:2.rack"] == f"{first}: no rack"
    assert found["devices.csv:3.is_oob"] == f"{second}: no out-of-band address"
    assert first not in result.hosts and second not in result.hosts
    missing = hosts_from_netbox("name,rack\nx,r01\n", addresses, MODELS)
    assert [i.path for i in missing.problems] == ["devices.csv"]
    assert "missing column(s) device_type, position" in missing.problems[0].message


def test_the_command_prints_hosts_yaml(tmp_path: Path) -> None:
    devices, addresses = lab_as_netbox(lab_spec())
    (tmp_path / "devices.csv").write_text(devices)
    (tmp_path / "addresses.csv").write_text(addresses)
    args = ["metal", "import-netbox", str(tmp_path / "devices.csv"), str(tmp_path / "addresses.csv")]
    result = CliRunner().invoke(app, [*args, "--model", "DGX H100=dgx-h100"])
    assert result.exit_code == 0, result.output
    assert "# skipped su1-rail0" in result.stdout
    hosts = yaml.safe_load(result.stdout)["hosts"]
    assert len(hosts) == len(lab_spec()["site"]["hosts"])
    refused = CliRunner().invoke(app, [*args, "--model", "DGX H100=dgx-h999"])
    assert refused.exit_code == 2 and "the server one of" in refused.output
