"""Site hosts from a DCIM's NetBox export (issue 28, item 5): devices and their addresses as NetBox's own CSV
bulk-import format has them, read into `site.hosts` entries.

Format (netbox-community/netbox at v4.6.8): devices with `DeviceImportForm` fields (netbox/dcim/forms/
bulk_import.py): `name`, `device_type` (the device type's model, e.g. "DGX H100"), `rack` (its name), `position`
(lowest U), and optionally `status`, `role`, `site`, ...; addresses with `IPAddressImportForm` fields
(netbox/ipam/forms/bulk_import.py): `address` (with its prefix length, 10.64.1.11/24), `device`, `is_primary`
(the management address) and `is_oob` (the BMC). What gpuforge needs and NetBox does not say (the catalog model of
a device type) is given as a map: `{"DGX H100": "dgx-h100"}`. Rows of device types outside the map (switches,
PDUs) are not hosts and are skipped; a device with status `offline` or `decommissioning` is skipped too.

Every problem of the files is reported at once, by file and line, with what was expected.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from .errors import SpecIssue

DEVICE_COLUMNS = ("name", "device_type", "rack", "position")  # required columns of the devices file
ADDRESS_COLUMNS = ("address", "device", "is_primary", "is_oob")
SKIPPED_STATUSES = ("offline", "decommissioning")  # NetBox DeviceStatusChoices a host is not built from
TRUE = ("true", "1", "yes")  # how NetBox's CSV reads a boolean (forms.BooleanField)


@dataclass
class NetboxImport:
    hosts: dict[str, dict[str, object]] = field(default_factory=dict)  # site.hosts entries, by host name
    skipped: dict[str, str] = field(default_factory=dict)  # device name -> why it is not a host
    problems: list[SpecIssue] = field(default_factory=list)


def hosts_from_netbox(
    devices_csv: str, addresses_csv: str, models: dict[str, str], devices_name: str = "devices.csv",
    addresses_name: str = "addresses.csv",
) -> NetboxImport:
    """site.hosts entries (rack, u_position, model, management_ip, bmc_address) from NetBox's device and IP
    address CSVs; `models` maps NetBox device types to catalog server models."""
    result = NetboxImport()
    devices = _rows(devices_csv, devices_name, DEVICE_COLUMNS, result)
    addresses = _rows(addresses_csv, addresses_name, ADDRESS_COLUMNS, result)
    primary: dict[str, str] = {}
    oob: dict[str, str] = {}
    for line, row in addresses:
        address = row["address"].split("/")[0]
        for flag, into in (("is_primary", primary), ("is_oob", oob)):
            if row[flag].strip().lower() in TRUE:
                if row["device"] in into:
                    result.problems.append(
                        SpecIssue(
                            f"{addresses_name}:{line}",
                            f"{row['device']} has a second {flag} address ({address}; first {into[row['device']]})",
                            f"keep one {flag} address per device",
                        )
                    )
                into[row["device"]] = address
    for line, row in devices:
        name = row["name"]
        if row.get("status", "").strip().lower() in SKIPPED_STATUSES:
            result.skipped[name] = f"status {row['status']}"
            continue
        model = models.get(row["device_type"])
        if model is None:
            result.skipped[name] = f"device type {row['device_type']} is not mapped to a catalog model"
            continue
        where = f"{devices_name}:{line}"
        problems = []
        if not row["rack"]:
            problems.append(("rack", "no rack", "place the device in a rack in NetBox"))
        if not row["position"].strip().split(".")[0].isdigit():
            problems.append(("position", f"position {row['position']!r} is not a rack unit", "give its lowest U"))
        if name not in primary:
            problems.append(("is_primary", "no primary address", "mark its management address is_primary"))
        if name not in oob:
            problems.append(("is_oob", "no out-of-band address", "mark its BMC address is_oob"))
        for column, message, fix in problems:
            result.problems.append(SpecIssue(f"{where}.{column}", f"{name}: {message}", fix))
        if problems:
            continue
        result.hosts[name] = {
            "rack": row["rack"],
            "u_position": int(row["position"].split(".")[0]),  # NetBox writes positions as decimals (7.0)
            "model": model,
            "management_ip": primary[name],
            "bmc_address": oob[name],
        }
    return result


def _rows(
    text: str, name: str, required: tuple[str, ...], result: NetboxImport
) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        result.problems.append(
            SpecIssue(
                name,
                f"missing column(s) {', '.join(missing)} (has: {', '.join(reader.fieldnames or []) or 'nothing'})",
                "export with NetBox's bulk-import field names (netbox/dcim/forms/bulk_import.py DeviceImportForm, "
                "netbox/ipam/forms/bulk_import.py IPAddressImportForm)",
            )
        )
        return []
    return [(line, {k: (v or "").strip() for k, v in row.items() if k}) for line, row in enumerate(reader, start=2)]
