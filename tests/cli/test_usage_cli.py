"""`gpuforge usage STACK`: a bad window is exit 2 naming the option, a controller that cannot be reached or an
inventory without one is exit 1 with the reason (the SSH step runs for real through ansible-runner, against a
closed port), and the table shows kWh columns only where energy is recorded. The booted proof (sacct on a
running slurmdbd) is tests/slurm/test_slurm_cluster.py::test_gpuforge_usage_reports_the_gpu_hours_a_job_used."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.cli.usage import print_report
from gpuforge.console import out
from gpuforge.nodes.usage import EnergyBasis, aggregate, parse_sacct
from gpuforge.nodes.usage_query import UsageUnavailable, collect_usage

SINCE = datetime(2026, 11, 20, tzinfo=UTC)
UNTIL = datetime(2026, 11, 27, tzinfo=UTC)
ONE_JOB = "101|alice|research|gpu|COMPLETED|1795136400|1795143600|7200|billing=8,cpu=8,gres/gpu=8,mem=64000M,node=1|"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "yesterday"], "'yesterday': expected an ISO 8601 date or time"),
        (["--since", "2026-11-27", "--until", "2026-11-20"], "is not before --until"),
        (["--inventory", "/nonexistent/inventory.yml"], "/nonexistent/inventory.yml: no such file"),
    ],
)
def test_a_bad_option_is_exit_2_naming_it(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["usage", "dev", *args])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_an_unreachable_controller_is_exit_1_with_the_reason(tmp_path: Path) -> None:
    # The dev stack's controller, reached at a closed port instead of its planned address.
    override = tmp_path / "reach.yml"
    override.write_text(yaml.safe_dump({"all": {"hosts": {"forge-dev-ctl-0": {
        "ansible_host": "127.0.0.1", "ansible_port": _closed_port()}}}}))
    result = CliRunner().invoke(app, ["usage", "dev", "--since", "2026-11-20", "--inventory", str(override)])
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "no usage: no controller gave the job records: forge-dev-ctl-0 is unreachable" in text, text
    assert "Traceback" not in result.output


def test_an_inventory_without_a_controller_says_so() -> None:
    inventory = {"all": {"children": {"slurm_compute": {"hosts": {"node1": {"ansible_host": "127.0.0.1"}}}}}}
    with pytest.raises(UsageUnavailable, match="the inventory has no slurm_controller host"):
        collect_usage(inventory, SINCE, UNTIL, pue=1.14, pue_source="catalog")


def test_the_table_shows_kwh_only_where_energy_is_recorded() -> None:
    measured = ONE_JOB + "14400000"
    basis = EnergyBasis("acct_gather_energy/ipmi", 1.25, "site PUE")
    recorded = aggregate(parse_sacct(measured), SINCE, UNTIL, basis, {"research": "llm"})
    with out.capture() as shown:
        print_report("lab", recorded)
    text = shown.get()
    assert "kWh (facility)" in text and "5.00" in text and "PUE 1.25 (site PUE)" in text, text
    team_row = next(line for line in text.splitlines() if "team llm" in line)
    assert "16.00" in team_row and "4.00" in team_row and "5.00" in team_row, text  # GPU-hours, kWh, x 1.25
    none = aggregate(parse_sacct(ONE_JOB + "0"), SINCE, UNTIL, EnergyBasis("acct_gather_energy/none", 1.25, "x"))
    with out.capture() as shown:
        print_report("lab", none)
    text = " ".join(shown.get().split())
    assert "kWh" not in text.split("no energy recorded")[0] and "16.00" in text, text
    assert "no energy recorded: the controller's AcctGatherEnergyType is acct_gather_energy/none" in text
