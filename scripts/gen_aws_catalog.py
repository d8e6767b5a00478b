#!/usr/bin/env python3
"""Generate gpuforge/catalog/data/aws_instance_types.json from moto's EC2 snapshot, for the instance types
that gpuforge/catalog/data/aws_instance_selection.yaml lists.

moto ships EC2 DescribeInstanceTypes and DescribeInstanceTypeOfferings data as gzipped
JSON; the pinned moto version (pyproject) makes the output reproducible offline.

    python scripts/gen_aws_catalog.py          # write the catalog file
    python scripts/gen_aws_catalog.py --check  # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = REPO_ROOT / "gpuforge" / "catalog" / "data" / "aws_instance_types.json"
SCRIPT = "scripts/gen_aws_catalog.py"
TYPES_PATH = "moto/ec2/resources/instance_types.json.gz"
OFFERINGS_DIR = "moto/ec2/resources/instance_type_offerings/availability-zone"

# Which types the catalog holds: data beside the catalog, with why.
SELECTION = REPO_ROOT / "gpuforge" / "catalog" / "data" / "aws_instance_selection.yaml"


def _selection() -> tuple[frozenset[str], frozenset[str]]:
    """The curated instance types and the families of which every size is kept."""
    data = yaml.safe_load(SELECTION.read_text(encoding="utf-8"))
    return frozenset(data["types"]), frozenset(data["families"])


def _moto_dir() -> Path:
    import moto

    return Path(moto.__file__).resolve().parent


def _moto_version() -> str:
    import moto

    return str(moto.__version__)


def _selected(name: str, types: frozenset[str], families: frozenset[str]) -> bool:
    return name in types or name.split(".", 1)[0] in families


def _accelerator(raw: dict[str, Any]) -> dict[str, Any] | None:
    gpus = raw.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        if len(gpus) != 1:  # no curated type mixes GPU models; fail loudly if AWS ever does
            raise ValueError(f"{raw['InstanceType']}: {len(gpus)} GPU kinds, expected 1")
        g = gpus[0]
        return {
            "kind": "gpu",
            "manufacturer": g["Manufacturer"],
            "name": g["Name"],
            "count": g["Count"],
            "memory_mib": g["MemoryInfo"]["SizeInMiB"],
        }
    devices = raw.get("NeuronInfo", {}).get("NeuronDevices", [])
    if devices:
        if len(devices) != 1:
            raise ValueError(f"{raw['InstanceType']}: {len(devices)} Neuron kinds, expected 1")
        d = devices[0]
        # NeuronInfo has no manufacturer field; Trainium/Inferentia are AWS silicon.
        return {
            "kind": "neuron",
            "manufacturer": "AWS",
            "name": d["Name"],
            "count": d["Count"],
            "memory_mib": d["MemoryInfo"]["SizeInMiB"],
        }
    return None


def _row(raw: dict[str, Any], offerings: dict[str, list[str]]) -> dict[str, Any]:
    net = raw["NetworkInfo"]
    efa = bool(net.get("EfaSupported", False))
    return {
        "instance_type": raw["InstanceType"],
        "accelerator": _accelerator(raw),
        "vcpus": raw["VCpuInfo"]["DefaultVCpus"],
        "cores": raw["VCpuInfo"]["DefaultCores"],
        "threads_per_core": raw["VCpuInfo"]["DefaultThreadsPerCore"],
        "memory_mib": raw["MemoryInfo"]["SizeInMiB"],
        "architectures": sorted(raw["ProcessorInfo"]["SupportedArchitectures"]),
        "network_performance": net["NetworkPerformance"],
        "max_network_cards": net["MaximumNetworkCards"],
        "network_cards": [
            {
                "index": c["NetworkCardIndex"],
                "baseline_gbps": c["BaselineBandwidthInGbps"],
                "peak_gbps": c["PeakBandwidthInGbps"],
                "max_interfaces": c["MaximumNetworkInterfaces"],
            }
            for c in sorted(net["NetworkCards"], key=lambda c: c["NetworkCardIndex"])
        ],
        "efa_supported": efa,
        "max_efa_interfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0) if efa else 0,
        "ena_srd_supported": bool(net.get("EnaSrdSupported", False)),
        "nvme_gb": raw.get("InstanceStorageInfo", {}).get("TotalSizeInGB", 0),
        "placement_strategies": sorted(raw.get("PlacementGroupInfo", {}).get("SupportedStrategies", [])),
        "offerings": offerings,
    }


def build_catalog(moto_dir: Path | None = None) -> dict[str, Any]:
    """The catalog document the committed JSON must equal."""
    base = moto_dir or _moto_dir()
    resources = base / "ec2" / "resources"
    with gzip.open(resources / "instance_types.json.gz", "rt", encoding="utf-8") as f:
        types: dict[str, dict[str, Any]] = json.load(f)
    curated, families = _selection()
    names = sorted(n for n in types if _selected(n, curated, families))

    offerings: dict[str, dict[str, list[str]]] = {n: {} for n in names}
    for path in sorted((resources / "instance_type_offerings" / "availability-zone").glob("*.json.gz")):
        region = path.name.removesuffix(".json.gz")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for entry in json.load(f):
                if entry["InstanceType"] in offerings:
                    offerings[entry["InstanceType"]].setdefault(region, []).append(entry["Location"])

    return {
        "_source": {
            "data": (
                f"EC2 DescribeInstanceTypes / DescribeInstanceTypeOfferings as snapshotted by "
                f"moto {_moto_version()}"
            ),
            "paths": [TYPES_PATH, f"{OFFERINGS_DIR}/<region>.json.gz"],
            "generator": SCRIPT,
            "note": "do not edit by hand; run make catalog",
        },
        "instance_types": {
            n: _row(types[n], {r: sorted(set(azs)) for r, azs in sorted(offerings[n].items())}) for n in names
        },
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)

    doc = build_catalog()
    expected = render(doc)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current == expected:
            print(f"{args.output.name} is up to date")
            return 0
        diff = list(
            difflib.unified_diff(
                current.splitlines(), expected.splitlines(), "committed", "generated", lineterm="", n=1
            )
        )
        changed = sum(1 for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
        print(f"{args.output} is stale ({changed} lines differ); run make catalog", file=sys.stderr)
        print("\n".join(diff[:60]), file=sys.stderr)
        if len(diff) > 60:
            print(f"... {len(diff) - 60} more diff lines", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(expected, encoding="utf-8")
    print(f"wrote {args.output} ({len(doc['instance_types'])} instance types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
