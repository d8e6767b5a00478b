"""`gpuforge drift STACK`: nodes whose software differs from the stack's pins. The series are what the
software-versions collector writes (run here on recorded node trees), as Prometheus' HTTP API returns them
(GET /api/v1/query: the labels the scrape adds, instance and node_group, beside the collector's), served over
HTTP for --prometheus. The pins are the stack's inventory (prod: train is a p5 EFA group, driver branch 580,
NCCL 2.27.7 for CUDA 12.9, EFA installer 1.43.1; login and services have no GPUs)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.nodes.drift import SeriesFormatError, find_drift, parse_query_result, pins_from_inventory
from gpuforge.nodes.inventory import build_inventory
from tests.monitoring.test_collectors import dpkg_status, run_collector

KERNEL = "6.1.0-28-cloud-amd64"
PINNED = {"module": "580.82.07", "libnccl2": "2.27.7-1+cuda12.9", "efa": "1.43.1", "kernel": KERNEL}


def node_tree(root: Path, *, module: str | None, libnccl2: str | None, efa: str | None, kernel: str) -> Path:
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(kernel + "\n")
    (root / "var/lib/dpkg").mkdir(parents=True)
    packages = {"cuda-drivers-580": "580.82.07-1", "cuda-cudart-12-9": "12.9.79-1", "rdma-core": "44.0-2"}
    if libnccl2 is not None:
        packages["libnccl2"] = libnccl2
    (root / "var/lib/dpkg/status").write_text(dpkg_status(packages, held=("cuda-drivers-580", "libnccl2")))
    if module is not None:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(module + "\n")
    if efa is not None:
        (root / "opt/amazon").mkdir(parents=True)
        (root / "opt/amazon/efa_installed_packages").write_text(
            f"# EFA installer version: {efa}\nlibfabric1-aws 2.1.0amzn5.0\n"
        )
    return root


def as_prometheus_answers(nodes: dict[tuple[str, str], str]) -> dict[str, Any]:
    """The API's answer to gpuforge_node_software_info: each collector line's labels plus the scrape's
    (job, instance, node_group), value [time, "1"]."""
    result = []
    for (instance, group), text in nodes.items():
        for line in text.splitlines():
            if not line.startswith("gpuforge_node_software_info{"):
                continue
            body = line[line.index("{") + 1 : line.rindex("}")]
            labels = dict(pair.split("=", 1) for pair in body.split('",'))
            metric = {k: v.strip('"') for k, v in labels.items()}
            metric |= {
                "__name__": "gpuforge_node_software_info",
                "job": "node",
                "instance": instance,
                "node_group": group,
            }
            result.append({"metric": metric, "value": [1795132800.123, "1"]})
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture(scope="module")
def prod_answer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("drift")
    trees: dict[tuple[str, str], dict[str, Any]] = {
        ("gpu-a01", "train"): dict(PINNED),
        # changed behind the plan's back: a newer NCCL installed by hand, and the previous kernel booted
        ("gpu-a02", "train"): PINNED | {"libnccl2": "2.28.3-1+cuda12.9", "kernel": "6.1.0-26-cloud-amd64"},
        ("gpu-a03", "train"): PINNED | {"module": "570.172.08", "efa": None},  # another driver branch, no EFA
        ("gpu-a04", "train"): dict(PINNED),
        ("login-1", "login"): {"module": None, "libnccl2": None, "efa": None, "kernel": KERNEL},
        ("slurm-01", "slurm-controller"): {"module": None, "libnccl2": None, "efa": None, "kernel": KERNEL},
    }
    texts = {}
    for (instance, group), node in trees.items():
        root = node_tree(where / instance, **node)
        texts[(instance, group)] = run_collector("software-versions", where / f"{instance}-out", "--root", str(root))
    return as_prometheus_answers(texts)


def test_the_nodes_that_differ_from_the_pins_are_named(prod_answer: dict[str, Any]) -> None:
    report = find_drift(parse_query_result(prod_answer), pins_from_inventory(build_inventory("prod", source="plan")))
    found = {(d.instance, d.component): (d.found, d.expected) for d in report.differences}
    assert found == {
        ("gpu-a02", "nccl"): ("2.28.3-1+cuda12.9", "2.27.7-1+cuda12.9"),
        ("gpu-a02", "kernel"): ("6.1.0-26-cloud-amd64", f"{KERNEL} (most of train's nodes)"),
        ("gpu-a03", "nvidia_driver"): ("570.172.08", "branch 580 (580.x)"),
        ("gpu-a03", "efa_installer"): (None, "1.43.1"),
    }
    assert report.to_json()["drifted"] == ["gpu-a02", "gpu-a03"]
    assert report.not_compared == ("slurm-01",)  # the controller's node_group is no node group of the stack's
    assert len(report.nodes) == 6


def test_a_stack_override_is_the_version_expected(prod_answer: dict[str, Any]) -> None:
    """onprem-lab's train group has no EFA: a node without the installer is no drift there."""
    pins = pins_from_inventory(build_inventory("onprem-lab", source="plan"))
    assert pins["train"].efa_installer is None and pins["train"].driver_branch == "580"
    report = find_drift(parse_query_result(prod_answer), pins)
    assert {(d.instance, d.component) for d in report.differences} == {
        ("gpu-a02", "nccl"),
        ("gpu-a02", "kernel"),
        ("gpu-a03", "nvidia_driver"),
    }


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "resultType vector"),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"__name__": "up"}}]}},
            "missing",
        ),
    ],
)
def test_an_answer_of_another_shape_is_refused(document: dict[str, Any], said: str) -> None:
    with pytest.raises(SeriesFormatError, match=said):
        parse_query_result(document)


class _Prometheus(BaseHTTPRequestHandler):
    answer: ClassVar[dict[str, Any]] = {}
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        body = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus(prod_answer: dict[str, Any]) -> Iterator[str]:
    _Prometheus.answer, _Prometheus.asked = prod_answer, []
    server = HTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_command_asks_prometheus_and_exits_1_naming_the_drifted_nodes(prometheus: str) -> None:
    result = CliRunner().invoke(app, ["drift", "prod", "--prometheus", prometheus, "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["drifted"] == ["gpu-a02", "gpu-a03"] and document["stack"] == "prod"
    assert _Prometheus.asked == ["/api/v1/query?query=gpuforge_node_software_info"]
    table = CliRunner().invoke(app, ["drift", "prod", "--prometheus", prometheus], env={"COLUMNS": "200"})
    text = " ".join(table.output.split())
    assert "2 of 6 node(s) drifted" in text and "(not reported)" in text and "not compared" in text, text


def test_a_saved_answer_without_drift_is_exit_0(prod_answer: dict[str, Any], tmp_path: Path) -> None:
    clean = dict(prod_answer, data=dict(prod_answer["data"]))
    clean["data"]["result"] = [s for s in prod_answer["data"]["result"] if s["metric"]["instance"] == "gpu-a01"]
    saved = tmp_path / "software.json"
    saved.write_text(json.dumps(clean))
    result = CliRunner().invoke(app, ["drift", "prod", "--series", str(saved)])
    assert result.exit_code == 0, result.output
    assert "1 node(s) run what the stack pins" in result.output


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ([], 2, "give one of --prometheus URL or --series FILE"),
        (["--prometheus", "localhost:9090"], 2, "expected an http(s):// URL"),
        (["--series", "/nonexistent/software.json"], 2, "No such file"),
        (["--prometheus", "http://127.0.0.1:1"], 1, "no answer"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], code: int, said: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["drift", "prod", *args], env={"COLUMNS": "250"})
    assert result.exit_code == code, result.output
    assert said in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
