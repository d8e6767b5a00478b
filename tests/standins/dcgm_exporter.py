"""A stand-in for dcgm-exporter's /metrics: every field of the counters file it is given, per GPU, with the
labels dcgm-exporter 4.x puts on them, so Prometheus scrapes what the real exporter, configured by the role,
would serve (there is no GPU here). The counters file is read as dcgm-exporter reads it (encoding/csv with
'#' comments, three fields a line, spaces trimmed: internal/pkg/counters ReadCSVFile and ExtractCounters)."""

from __future__ import annotations

import csv


def counter_records(text: str) -> list[tuple[str, str, str]]:
    """(field, Prometheus type, help) per line of a counters file; ValueError where dcgm-exporter stops."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    records = []
    for record in csv.reader(lines):
        fields = [f.strip(" ") for f in record]
        if len(fields) != 3:
            raise ValueError(f"dcgm-exporter stops at {record}: expected 3 fields")
        records.append((fields[0], fields[1], fields[2]))
    return records


# dcgm-exporter's XID window (--xid-count-window-size default, 5 minutes), a label of the XID count.
XID_WINDOW_MS = 300000


def gpu_labels(gpu: int, hostname: str) -> str:
    """The labels dcgm-exporter 4.x puts on each GPU's series."""
    return (
        f'gpu="{gpu}",UUID="GPU-standin-{gpu}",pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="NVIDIA H100 80GB HBM3",Hostname="{hostname}"'
    )


# DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION where the stand-in's counters start: far from zero, as after a day's uptime.
ENERGY_START_MJ = 61_000_000_000


def energy_exposition(gpus: dict[int, tuple[str, float]], seconds: float, hostname: str) -> str:
    """DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since the driver loaded: go-dcgm const_fields.go) *seconds* after the
    stand-in started, each GPU of *gpus* (index -> (Slurm job ID or "" for idle, watts)) drawing its watts; a GPU
    with a job carries hpc_job as dcgm-exporter's HPC job mapping adds it."""
    lines = [
        "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).",
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
    ]
    for gpu, (job, watts) in sorted(gpus.items()):
        labels = gpu_labels(gpu, hostname) + (f',hpc_job="{job}"' if job else "")
        millijoules = ENERGY_START_MJ + round(watts * seconds * 1000)
        lines.append(f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {millijoules}")
    return "\n".join(lines) + "\n"


def exposition(counters: str, gpus: int, hostname: str, xids: dict[int, int] | None = None) -> str:
    """/metrics for *gpus* GPUs: each counter 0, temperatures 40; DCGM_EXP_XID_ERRORS_COUNT with an xid label
    for the GPUs in *xids* (GPU index -> XID, counted once in the window), without one (value 0) for the rest."""
    xids = xids or {}
    lines = []
    for name, kind, help_text in counter_records(counters):
        if kind == "label":
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu in range(gpus):
            labels = gpu_labels(gpu, hostname)
            value = 40 if name == "DCGM_FI_DEV_GPU_TEMP" else 0
            if name == "DCGM_EXP_XID_ERRORS_COUNT":
                labels += f',window_size_in_ms="{XID_WINDOW_MS}"'
                if gpu in xids:
                    labels, value = labels + f',xid="{xids[gpu]}"', 1
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"
