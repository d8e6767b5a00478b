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
            labels = (
                f'gpu="{gpu}",UUID="GPU-standin-{gpu}",pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{hostname}"'
            )
            value = 40 if name == "DCGM_FI_DEV_GPU_TEMP" else 0
            if name == "DCGM_EXP_XID_ERRORS_COUNT":
                labels += f',window_size_in_ms="{XID_WINDOW_MS}"'
                if gpu in xids:
                    labels, value = labels + f',xid="{xids[gpu]}"', 1
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"
