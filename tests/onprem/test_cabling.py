"""The site's cabling plan (issue 28, item 5): one cable per host HCA to its rail leaf, in NetBox's cable import
columns, read from NetBox's own form (tests/fixtures/netbox, verbatim)."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.render.cabling import CABLE_COLUMNS, cabling_csv, cabling_rows
from gpuforge.spec import resolve
from tests.onprem.test_site_model import lab_spec

NETBOX_FORMS = Path(__file__).resolve().parent.parent / "fixtures" / "netbox" / "bulk_import-v4.6.8.py.txt"


def form_fields(path: Path, form: str) -> list[str]:
    """A NetBox import form's Meta.fields list, read as text (NetBox needs Python 3.12 f-strings elsewhere in the
    file): the form's Meta block, its `fields = [...]` list evaluated as a literal."""
    text = path.read_text()
    body = text[text.index(f"class {form}(") :]
    meta = body[body.index("    class Meta") :]
    start = meta.index("fields = [") + len("fields = ")
    fields: list[str] = ast.literal_eval(meta[start : meta.index("]", start) + 1])
    return fields


def test_every_column_is_a_field_of_netboxs_cable_import() -> None:
    fields = form_fields(NETBOX_FORMS, "CableImportForm")
    assert "side_a_device" in fields and "side_b_name" in fields  # the file is the form we think it is
    assert set(CABLE_COLUMNS) <= set(fields), set(CABLE_COLUMNS) - set(fields)


def test_each_hca_is_cabled_once_to_its_rail_leaf_on_a_port_of_its_own() -> None:
    resolved = resolve(lab_spec())
    assert resolved.site is not None and resolved.site.spec.fabric is not None
    rows = [r for r in cabling_rows(resolved.site) if r["side_a_device"] in resolved.site.hosts]
    hosts = [h for h in resolved.site.hosts.values() if h.spec.hcas]
    rails = resolved.site.spec.fabric.rails
    assert len(rows) == len(hosts) * rails
    assert len({(r["side_b_device"], r["side_b_name"]) for r in rows}) == len(rows)  # no leaf port twice
    assert len({(r["side_a_device"], r["side_a_name"]) for r in rows}) == len(rows)  # no HCA twice
    for row in rows:
        host = resolved.site.hosts[row["side_a_device"]]
        rail = host.spec.hcas[row["side_a_name"]]
        assert row["side_b_device"] == f"{host.scalable_unit}-rail{rail}"
        assert row["status"] == "planned" and row["side_a_type"] == row["side_b_type"] == "dcim.interface"
    # The first host of the SU on port 1 of every rail leaf, the next on port 2.
    first = sorted(h.name for h in hosts)[0]
    assert {r["side_b_name"] for r in rows if r["side_a_device"] == first} == {"port1"}


def test_the_command_writes_the_csv_and_refuses_a_stack_without_a_site() -> None:
    resolved = resolve(lab_spec())
    assert resolved.site is not None
    result = CliRunner().invoke(app, ["render", "cabling", "onprem-lab"])
    assert result.exit_code == 0, result.output
    assert result.stdout == cabling_csv(resolved.site)
    header = next(csv.reader(io.StringIO(result.stdout)))
    assert tuple(header) == CABLE_COLUMNS
    refused = CliRunner().invoke(app, ["render", "cabling", "dev"])
    assert refused.exit_code == 2 and "no site fabric to cable" in refused.output


def test_every_leaf_reaches_every_spine_evenly_and_no_port_is_used_twice() -> None:
    """The lab: one SU, 8 rail leaves of 64 ports (32 up), 4 spines of 64 ports: 256 uplinks fill the spines."""
    resolved = resolve(lab_spec())
    assert resolved.site is not None and resolved.site.spec.fabric is not None
    fabric = resolved.site.spec.fabric
    rows = cabling_rows(resolved.site)
    uplinks = [r for r in rows if r["side_b_device"].startswith("spine")]
    assert len(uplinks) == fabric.rails * fabric.uplinks == fabric.spines * fabric.spine_ports
    ends = [(r[f"side_{s}_device"], r[f"side_{s}_name"]) for r in rows for s in "ab"]
    assert len(ends) == len(set(ends))  # one cable per port, hosts, leaves and spines alike
    per_pair: dict[tuple[str, str], int] = {}
    for row in uplinks:
        key = (row["side_a_device"], row["side_b_device"])
        per_pair[key] = per_pair.get(key, 0) + 1
        assert int(row["side_a_name"].removeprefix("port")) > fabric.downlinks  # uplinks on the leaf's upper ports
        assert int(row["side_b_name"].removeprefix("port")) <= fabric.spine_ports
    assert set(per_pair.values()) == {fabric.uplinks // fabric.spines}
    assert len(per_pair) == fabric.rails * fabric.spines
