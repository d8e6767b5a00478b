"""Parsers for node health outputs and the judgement of one node against its expectations.

The gpu_healthcheck role collects raw outputs (nvidia-smi CSV, ``dcgmi diag``, ``nvidia-smi nvlink
--status``, the kernel log's XID lines, ``fi_info -p efa`` or ``ibstat``, nccl-tests
``all_reduce_perf``); ``gpuforge check`` parses them here and compares the bus bandwidth with a floor
from the catalog: a configurable fraction of the instance type's reference figure.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_FLOOR_FRACTION = 0.8

# mpirun --tag-output prefixes every line with [job,rank]<stdout>:
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")


def _strip_tags(text: str) -> list[str]:
    return [_MPI_TAG.sub("", line) for line in text.splitlines()]


def _float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


# --- nccl-tests ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NcclTestsRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    out_of_place_busbw_gbps: float | None
    in_place_busbw_gbps: float | None
    wrong: int | None


@dataclass(frozen=True)
class NcclTestsResult:
    rows: tuple[NcclTestsRow, ...]
    avg_busbw_gbps: float | None
    out_of_bounds_ok: bool | None

    @property
    def largest(self) -> NcclTestsRow | None:
        return max(self.rows, key=lambda row: row.size_bytes) if self.rows else None

    @property
    def busbw_at_largest_gbps(self) -> float | None:
        """Bus bandwidth at the largest message size (out-of-place; in-place when that is missing).

        This, not the average over all sizes, is what a fabric delivers: the average of a run from
        8 bytes is dominated by latency-bound small messages.
        """
        row = self.largest
        if row is None:
            return None
        return row.out_of_place_busbw_gbps if row.out_of_place_busbw_gbps is not None else row.in_place_busbw_gbps


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Parse the stdout of an nccl-tests binary (``all_reduce_perf`` and friends)."""
    rows: list[NcclTestsRow] = []
    avg: float | None = None
    oob: bool | None = None
    for raw in _strip_tags(text):
        line = raw.strip()
        if line.startswith("#"):
            if "Avg bus bandwidth" in line:
                avg = _float(line.split(":", 1)[1].split()[0]) if line.split(":", 1)[1].split() else None
            elif "Out of bounds values" in line:
                oob = line.rstrip().endswith("OK")
            continue
        tokens = line.split()
        # size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
        if len(tokens) not in (12, 13) or not (tokens[0].isdigit() and tokens[1].isdigit()):
            continue
        wrong = tokens[-5]
        rows.append(
            NcclTestsRow(
                size_bytes=int(tokens[0]),
                count=int(tokens[1]),
                dtype=tokens[2],
                redop=tokens[3],
                out_of_place_busbw_gbps=_float(tokens[-6]),
                in_place_busbw_gbps=_float(tokens[-2]),
                wrong=int(wrong) if wrong.isdigit() else None,
            )
        )
    return NcclTestsResult(rows=tuple(rows), avg_busbw_gbps=avg, out_of_bounds_ok=oob)


# --- dcgmi diag ----------------------------------------------------------------------------------


@dataclass
class DcgmTest:
    category: str
    name: str
    result: str
    details: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """pass, fail, warn, skip (from 'Pass - All', 'Fail - GPU: 0', 'GPU3: Fail', ...)."""
        text = self.result.lower()
        for status in ("fail", "warn", "skip", "pass"):
            if re.search(rf"\b{status}", text):
                return status
        return "unknown"


@dataclass
class DcgmDiagResult:
    metadata: dict[str, str]
    tests: list[DcgmTest]

    @property
    def failed(self) -> list[DcgmTest]:
        return [test for test in self.tests if test.status == "fail"]

    @property
    def passed(self) -> bool:
        return bool(self.tests) and not self.failed


_CATEGORY = re.compile(r"^[|+]-{2,}\s+(?P<name>[A-Za-z ]+?)\s+-+\+")


def parse_dcgmi_diag(text: str) -> DcgmDiagResult:
    """Parse the table ``dcgmi diag -r N`` prints (DCGM 2.x to 4.x)."""
    metadata: dict[str, str] = {}
    tests: list[DcgmTest] = []
    category = ""
    for raw in text.splitlines():
        line = raw.strip()
        match = _CATEGORY.match(line)
        if match:
            category = match.group("name").strip()
            continue
        if not line.startswith("|") or line.startswith("|="):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != 2 or cells == ["Diagnostic", "Result"]:
            continue
        name, result = cells
        if category == "Metadata":
            metadata[name] = result
        elif name and name not in ("Error", "Warning", "Info"):
            tests.append(DcgmTest(category=category, name=name, result=result))
        elif tests and result:
            test = tests[-1]
            if name in ("Error", "Warning", "Info") or not re.match(r"^GPU\s?\d+:", result):
                test.details.append(f"{name}: {result}" if name else result)
            else:  # DCGM 4: one row per GPU under the test
                test.result = f"{test.result}; {result}"
    return DcgmDiagResult(metadata=metadata, tests=tests)


# --- ibstat, nvidia-smi, fi_info, NVLink, XID -------------------------------------------------------


@dataclass(frozen=True)
class IbPort:
    ca: str
    port: int
    state: str
    physical_state: str
    rate: str
    link_layer: str

    @property
    def active(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"


def parse_ibstat(text: str) -> list[IbPort]:
    """Ports of every HCA in ``ibstat`` output."""
    ports: list[IbPort] = []
    ca = ""
    current: dict[str, str] | None = None

    def flush() -> None:
        if current is not None:
            ports.append(
                IbPort(
                    ca=ca,
                    port=int(current.get("port", "0")),
                    state=current.get("State", ""),
                    physical_state=current.get("Physical state", ""),
                    rate=current.get("Rate", ""),
                    link_layer=current.get("Link layer", ""),
                )
            )

    for raw in text.splitlines():
        line = raw.strip()
        ca_match = re.match(r"^CA '([^']+)'", line)
        port_match = re.match(r"^Port (\d+):$", line)
        if ca_match:
            flush()
            current, ca = None, ca_match.group(1)
        elif port_match:
            flush()
            current = {"port": port_match.group(1)}
        elif current is not None and ":" in line:
            key, _, value = line.partition(":")
            current[key.strip()] = value.strip()
    flush()
    return ports


def parse_nvidia_smi_csv(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=... --format=csv``; keys without units (memory.total)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    reader = csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)
    header = [re.sub(r"\s*\[.*\]$", "", name.strip()) for name in next(reader)]
    return [dict(zip(header, (cell.strip() for cell in row), strict=False)) for row in reader if row]


def parse_fi_info_domains(text: str) -> list[str]:
    """EFA devices (libfabric domains) listed by ``fi_info -p efa -t FI_EP_RDM``."""
    domains: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "domain" and value.strip() and value.strip() not in domains:
            domains.append(value.strip())
    return domains


def count_active_nvlinks(text: str) -> int:
    """Active links in ``nvidia-smi nvlink --status`` (a link with a speed is up)."""
    return len(re.findall(r"Link \d+: [0-9.]+ GB/s", text))


def xid_errors(text: str) -> list[str]:
    """Kernel log lines reporting an NVIDIA XID error."""
    return [line.strip() for line in text.splitlines() if "NVRM: Xid" in line]


# --- floors and the verdict ----------------------------------------------------------------------


def busbw_floor_gbps(instance_type: str, fraction: float = DEFAULT_FLOOR_FRACTION, catalog: Any = None) -> float | None:
    """The bus bandwidth a node of *instance_type* must reach: fraction x the catalog's reference.

    None when the catalog has no reference figure for the type (the comparison is then skipped).
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"floor fraction must be in (0, 1], not {fraction}")
    if catalog is None:
        # Here, not at the top: this file also runs on nodes as a script (gpuforge-healthcheck), without gpuforge.
        from gpuforge.catalog import load_catalog

        catalog = load_catalog()
    reference = catalog.instance_type(instance_type).nccl_busbw_reference_gbps
    return None if reference is None else round(float(reference) * fraction, 3)


@dataclass(frozen=True)
class NodeExpectations:
    """What a healthy node of a node group shows (from the inventory's group variables)."""

    gpus: int
    driver_branch: str | None = None
    fabric: str = "none"
    efa_devices: int = 0
    ib_hcas: tuple[str, ...] = ()
    nvlinks_per_gpu: int = 0
    busbw_floor_gbps: float | None = None


@dataclass
class NodeHealth:
    host: str
    problems: list[str]
    busbw_gbps: float | None = None
    gpus_found: int | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems


def evaluate_node(host: str, outputs: Mapping[str, str], expect: NodeExpectations) -> NodeHealth:
    """Judge one node from the raw outputs the gpu_healthcheck role collected (file name -> text)."""
    problems: list[str] = []
    health = NodeHealth(host=host, problems=problems)
    if "nvidia-smi.csv" in outputs:
        gpus = parse_nvidia_smi_csv(outputs["nvidia-smi.csv"])
        valid = [gpu for gpu in gpus if gpu.get("index", "").isdigit()]
        health.gpus_found = len(valid)
        if len(valid) != expect.gpus:
            problems.append(f"found {len(valid)} GPUs, expected {expect.gpus}")
        drivers = sorted({gpu.get("driver_version", "") for gpu in valid})
        if expect.driver_branch and any(not d.startswith(f"{expect.driver_branch}.") for d in drivers):
            problems.append(f"driver {','.join(drivers)} is not branch {expect.driver_branch}")
    if "dcgmi-diag.txt" in outputs:
        diag = parse_dcgmi_diag(outputs["dcgmi-diag.txt"])
        if not diag.tests:
            problems.append("dcgmi diag produced no results")
        for test in diag.failed:
            problems.append(
                f"dcgmi diag {test.name}: {test.result}" + (f" ({test.details[0]})" if test.details else "")
            )
    if "nvlink-status.txt" in outputs and expect.nvlinks_per_gpu:
        up, want = count_active_nvlinks(outputs["nvlink-status.txt"]), expect.nvlinks_per_gpu * expect.gpus
        if up != want:
            problems.append(f"NVLinks up {up}, expected {want}")
    if "xid.log" in outputs:
        xids = xid_errors(outputs["xid.log"])
        if xids:
            problems.append(f"{len(xids)} XID errors, last: {xids[-1]}")
    if expect.fabric == "efa" and "fi_info-efa.txt" in outputs:
        domains = parse_fi_info_domains(outputs["fi_info-efa.txt"])
        if len(domains) != expect.efa_devices:
            problems.append(f"EFA devices {len(domains)}, expected {expect.efa_devices}")
    if expect.fabric in ("infiniband", "roce") and "ibstat.txt" in outputs:
        ports = parse_ibstat(outputs["ibstat.txt"])
        wanted = set(expect.ib_hcas) or {port.ca for port in ports}
        down = sorted(f"{p.ca}/{p.port} {p.state}/{p.physical_state}" for p in ports if p.ca in wanted and not p.active)
        missing = sorted(wanted - {port.ca for port in ports})
        if down or missing or not ports:
            problems.append(
                "InfiniBand ports not active: " + ", ".join(down + [f"{m} missing" for m in missing] or ["none found"])
            )
    if "all_reduce_perf.txt" in outputs:
        result = parse_nccl_tests(outputs["all_reduce_perf.txt"])
        health.busbw_gbps = result.busbw_at_largest_gbps
        if health.busbw_gbps is None:
            problems.append("all_reduce_perf reported no bus bandwidth")
        elif expect.busbw_floor_gbps is not None and health.busbw_gbps < expect.busbw_floor_gbps:
            size = result.largest.size_bytes if result.largest else 0
            problems.append(
                f"all_reduce_perf busbw {health.busbw_gbps:g} GB/s at {size} B "
                f"is below the floor {expect.busbw_floor_gbps:g} GB/s"
            )
        if result.out_of_bounds_ok is False or any(row.wrong for row in result.rows):
            problems.append("all_reduce_perf found wrong results (data corruption)")
    return health
