"""`gpuforge usage --prometheus`: GPU kWh by account, team, user and partition from a real Prometheus (Debian's
binary, on 127.0.0.1) that evaluates gpuforge's rendered recording rules over what it scrapes: a stand-in
dcgm-exporter serving DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION as dcgm-exporter names and labels it (hpc_job from its
HPC job mapping), and the real Slurm textfile collector's series (run over recorded squeue output). Scrape and
evaluation every second, so the test takes about half a minute."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from gpuforge.nodes.prometheus_api import instant_query
from gpuforge.nodes.usage import EnergyBasis, aggregate, parse_sacct
from gpuforge.nodes.usage_energy import EnergyAnswerError, MeasuredEnergy, measured_energy
from gpuforge.render.monitoring import rule_file
from tests.monitoring.test_collectors import fake_slurm, run_collector
from tests.monitoring.test_metric_truth import _free_port
from tests.monitoring.test_rules import tool, unit_params
from tests.standins.dcgm_exporter import energy_exposition

# The recorded squeue's running jobs (tests/fixtures/monitoring/slurm/squeue.txt): 4240 llm/alice/train and
# 4241 vision/bob/train. llm belongs to team research; vision to no team.
GPUS = {0: ("4240", 700.0), 1: ("4240", 700.0), 2: ("4241", 350.0), 3: ("", 60.0)}
TEAMS = {"llm": "research"}
RUN_S = 20
# What the rules leave out (recording.yaml): each job's first interval per GPU, and an evaluation that does not line
# up with a scrape; three seconds of each job's power is more than that.
SLACK_S = 3


class StandIns:
    def __init__(self, slurm_prom: str) -> None:
        self.started = time.monotonic()
        self.slurm_prom = slurm_prom

    def page(self, path: str) -> str | None:
        if path == "/metrics":  # dcgm-exporter
            return energy_exposition(GPUS, time.monotonic() - self.started, "gpu-a01")
        if path == "/textfile":  # node_exporter's textfile collector on the controller
            return self.slurm_prom
        return None


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, datetime, datetime]]:
    """A Prometheus URL that scraped the stand-ins for RUN_S seconds, and the window it covered."""
    binary = shutil.which("prometheus") or tool("prometheus")
    tmp = tmp_path_factory.mktemp("usage-energy")
    slurm_prom = run_collector("slurm-textfile-collector", tmp / "textfile", env=fake_slurm(tmp / "bin"))
    stand_ins = StandIns(slurm_prom)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = stand_ins.page(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write((body or "").encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    params = dataclasses.replace(unit_params(), evaluation_interval_s=1, slurm_account_teams=TEAMS)
    (tmp / "rules.yml").write_text(yaml.safe_dump(rule_file(params), sort_keys=False))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": [
            {"job_name": "dcgm", "static_configs": [{"targets": [target]}]},
            {"job_name": "node", "metrics_path": "/textfile", "static_configs": [{"targets": [target]}]},
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    command = [binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(url, "slurm_job:gpu_energy_watts:irate"):  # started, scraped twice, rules evaluated
            assert time.monotonic() < deadline and process.poll() is None, "Prometheus never recorded a job's watts"
            time.sleep(0.5)
        since = datetime.now(UTC)
        time.sleep(RUN_S)
        until = datetime.now(UTC) - timedelta(seconds=1)  # the last evaluation is in
        yield url, since, until
    finally:
        process.terminate()
        process.wait(timeout=30)
        server.shutdown()


def _answers(url: str, query: str) -> bool:
    try:
        return bool(instant_query(url, query)["data"]["result"])
    except OSError:
        return False


def _measured(prometheus: tuple[str, datetime, datetime]) -> MeasuredEnergy:
    url, since, until = prometheus
    return measured_energy(lambda q, at: instant_query(url, q, at), url, since, until, interval_s=1)


def _kwh(watts: float, seconds: float) -> float:
    return watts * seconds / 3_600_000


def test_usage_adds_up_the_gpu_energy_prometheus_measured_by_account_user_and_team(
    prometheus: tuple[str, datetime, datetime],
) -> None:
    energy = _measured(prometheus)
    _, since, until = prometheus
    window = (until - since).total_seconds()
    llm, vision = energy.rows[("llm", "alice", "train")], energy.rows[("vision", "bob", "train")]
    assert set(energy.rows) == {("llm", "alice", "train"), ("vision", "bob", "train")}, "the idle GPU is no one's"
    # Two 700 W GPUs for the window, less what the rules leave out; never more than the counters rose.
    assert _kwh(1400, window - SLACK_S) <= llm <= _kwh(1400, window + 1)
    assert _kwh(350, window - SLACK_S) <= vision <= _kwh(350, window + 1)
    assert llm / vision == pytest.approx(4, rel=0.02), "both sampled alike: 1400 W against 350 W"
    assert energy.accounts == {"llm": llm, "vision": vision}
    assert energy.users == {"alice": llm, "bob": vision}
    assert energy.teams == {"research": pytest.approx(llm)}, "vision is in no team"
    assert energy.total == pytest.approx(llm + vision)


def test_the_report_carries_the_measured_energy_beside_sacct(prometheus: tuple[str, datetime, datetime]) -> None:
    energy = _measured(prometheus)
    _, since, until = prometheus
    start = int(since.timestamp())
    sacct = f"4240|alice|llm|train|RUNNING|{start}|Unknown|{RUN_S}|billing=2,cpu=2,gres/gpu=2,node=1|\n"
    report = aggregate(parse_sacct(sacct), since, until, EnergyBasis("acct_gather_energy/none", 1.5, "test"), TEAMS)
    report.measured = energy
    document = report.to_json()["gpu_energy"]
    research = document["teams"]["research"]
    assert research["gpu_kwh"] == round(energy.teams["research"], 4) > 0
    assert research["facility_kwh"] == round(energy.teams["research"] * 1.5, 4)
    assert document["rows"][0]["account"] == "llm" and document["interval_s"] == 1


def test_an_answer_that_is_not_a_vector_is_refused_by_name(prometheus: tuple[str, datetime, datetime]) -> None:
    url, since, until = prometheus
    with pytest.raises(EnergyAnswerError, match="expected a vector result"):
        measured_energy(lambda q, at: instant_query(url, "1", at), url, since, until, interval_s=1)  # a scalar
    with pytest.raises(EnergyAnswerError, match="Prometheus answered"):
        measured_energy(lambda q, at: instant_query(url, "sum(", at), url, since, until, interval_s=1)
