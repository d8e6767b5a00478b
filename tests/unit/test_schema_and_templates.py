"""Committed artefacts stay in step with their sources."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from gpuforge.plan.model import Plan
from gpuforge.plan.schema import render_schema
from gpuforge.spec.loader import parse_yaml
from tests.support import REPO as PROJECT_ROOT
from tests.support import planned

GOLDEN = Path(__file__).parent.parent / "golden"


def test_committed_schema_is_current() -> None:
    committed = (PROJECT_ROOT / "schemas" / "cluster.schema.json").read_text()
    assert committed == render_schema(), "schemas/cluster.schema.json is stale: run `make schema`"


def test_every_stack_points_at_the_schema_and_validates() -> None:
    import jsonschema

    schema = json.loads(render_schema())
    stacks = sorted((PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert stacks
    for stack in stacks:
        text = stack.read_text()
        assert text.startswith("# yaml-language-server: $schema=../schemas/cluster.schema.json"), stack.name
        # Read as Pulumi and editors read it (YAML 1.2: a timestamp such as a Capacity Block's end is text).
        jsonschema.validate(parse_yaml(text, stack.name), schema)


def test_node_user_data_matches_golden(dev_plan: Plan) -> None:
    (lt,) = [r for r in dev_plan.resources if r.name == "forge-dev-train-lt"]
    rendered = base64.b64decode(lt.inputs["userData"]).decode()
    golden = GOLDEN / "cloud-init" / "dev-train.yaml"
    assert rendered == golden.read_text(), f"user data changed; review and update {golden}"
    document = yaml.safe_load(rendered)
    node = json.loads(document["write_files"][0]["content"])
    assert (node["instanceType"], node["efaInterfacesPerNode"]) == ("g5.12xlarge", 1)
    # dev's file system is not EFA-enabled: the FSx guide's options, no LNet unit required.
    (fstab,) = [f for f in document["write_files"] if f["path"] == "/etc/fstab"]
    assert fstab["append"] is True
    # The controller's name as slurm.conf gives it, which VPC DNS does not know (issue 23).
    (hosts,) = [f for f in document["write_files"] if f["path"] == "/etc/hosts"]
    assert (hosts["append"], hosts["content"]) == (True, "10.20.128.10 forge-dev-ctl-0\n")
    source, path, fstype, options, *_ = fstab["content"].split()
    assert (source, path, fstype) == ("forge-dev-lustre-fs.fsx.mock.amazonaws.com@tcp:/mockmnt", "/fsx", "lustre")
    assert "gpuforge-lnet.service" not in options
    assert "mounts" not in document  # cloud-init's mounts module would `mount -a` past the unit ordering


def test_efa_file_system_user_data_requires_the_lnet_unit() -> None:
    """prod's file system is EFA-enabled: every launch template's fstab entry requires gpuforge-lnet.service
    (the same line the lustre_client role writes), and the mount goes through systemd's automount."""
    plan = planned("prod")
    golden = GOLDEN / "cloud-init" / "prod-train.yaml"
    (train,) = [r for r in plan.resources if r.name == "forge-prod-train-lt"]
    rendered = base64.b64decode(train.inputs["userData"]).decode()
    assert rendered == golden.read_text(), f"user data changed; review and update {golden}"
    groups = [
        r for r in plan.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate" and "-slurm-" not in r.name
    ]
    assert len(groups) == 3
    for lt in groups:
        document = yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())
        (fstab,) = [f for f in document["write_files"] if f["path"] == "/etc/fstab"]
        options = fstab["content"].split()[3].split(",")
        assert "x-systemd.requires=gpuforge-lnet.service" in options, lt.name
        assert ["systemctl", "start", "fsx.automount"] in document["runcmd"], lt.name
