"""The node lifecycle in the booted Slurm cluster (tests/slurm/cluster.py), against moto's real Auto Scaling
API: the slurm_scaler role installs gpuforge-lifecycle on the controller, and each step runs its systemd
service (one cycle) the way the role's timer does.

What stands in, and why:
- AWS: moto_server on 127.0.0.1 (the machines share the host's network), started and stopped here by
  its pid; the service reaches it through the lifecycle configuration's endpoint_url.
- AWS credentials: the controller's scaler gets them as a hybrid site's does, through IAM Roles Anywhere
  (the role's tasks/roles_anywhere.yml: the AWS profile whose credential_process runs aws_signing_helper
  with the controller's certificate and key). The helper is a stand-in (tests/standins/signing_helper.py)
  that prints the credential-process JSON instead of asking rolesanywhere.amazonaws.com, served on
  127.0.0.1 with its own sha256; the certificate and key are files the test puts where the site's PKI
  would. On AWS the controller's instance profile answers instead and none of this is installed.
- A new instance joining: moto launches instances that boot nothing, so the cluster's cloud machine
  plays each new instance in turn: the stand-in instance metadata (tests/standins/imds.py) answers the
  new instance's id and slurmd restarts, so its unit names the node ``cloud-<instance id>`` exactly as
  at an EC2 boot (gpuforge/nodes/instance_name.py); slurmd stops when the instance is terminated.
- nccl-tests: /opt/nccl-tests/build/all_reduce_perf on the computes is a stand-in that prints nccl-tests'
  output format with the bus bandwidth this test writes (STANDIN_DIR/busbw) on every compute: the
  figure is the fabric's, whichever node holds rank 0. Only rank 0 prints, as nccl-tests with MPI does.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest

from gpuforge.nodes.bake import run_playbook
from gpuforge.nodes.lifecycle import GATE_FAILED, GATE_PENDING, node_name
from gpuforge.plan.stacks import load_stack
from gpuforge.render.lifecycle import gate_floors
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import resolve
from tests.standins.moto_server import boto3_args, moto_server
from tests.standins.signing_helper import ARNS, calls, served_signing_helper

from .cluster import CLOUD_GROUP, CLUSTER, GPUS, NVIDIA_SMI_CSV, STANDIN_DIR, SlurmCluster, wait_for

pytestmark = pytest.mark.slow

REGION = "us-east-1"
GROUP = CLOUD_GROUP
INSTANCE_TYPE = "g5.12xlarge"  # the dev stack's GPU type (A10G); its floors come from the catalog
OLD_IMAGE, NEW_IMAGE = "ami-0a1b2c3d4e5f60001", "ami-0a1b2c3d4e5f60002"
FLOORS = gate_floors(INSTANCE_TYPE)
assert FLOORS.two_node_gbps is not None
GOOD_BUSBW, POOR_BUSBW = round(FLOORS.two_node_gbps / 0.9 * 0.98, 2), round(FLOORS.two_node_gbps / 2, 2)

# nccl-tests' all_reduce_perf output (header, one data row at the size asked with -b, summary), with the
# bus bandwidth the test controls. The column layout is nccl-tests' (see the recorded fixture
# tests/fixtures/healthcheck/all_reduce_perf-h100-2node.txt).
ALL_REDUCE_PERF_STANDIN = f"""#!/bin/sh
# gpuforge test stand-in for nccl-tests all_reduce_perf: no GPU here. Prints nccl-tests' output format
# with the bus bandwidth the test wrote to {STANDIN_DIR}/busbw. Only rank 0 prints, as with MPI.
[ "${{SLURM_PROCID:-0}}" = 0 ] || exit 0
size=8589934592
while [ $# -gt 0 ]; do [ "$1" = -b ] && size=$2; shift; done
busbw=$(cat {STANDIN_DIR}/busbw)
echo "# nThread 1 nGpus 1 minBytes $size maxBytes $size step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \\
validation: 1 graph: 0"
echo "#"
echo "#                                                              out-of-place                       in-place"
printf "#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s\\n" size count type redop root \\
  time algbw busbw "#wrong" time algbw busbw "#wrong"
echo "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"
printf "%12s  %12s     float     sum      -1  %7s  %6s  %6s      0  %7s  %6s  %6s      0\\n" \\
  "$size" "$((size / 4))" 99999.0 "$busbw" "$busbw" 99999.0 "$busbw" "$busbw"
echo "# Out of bounds values : 0 OK"
echo "# Avg bus bandwidth    : $busbw"
echo "#"
"""


@dataclass
class Lifecycle:
    cluster: SlurmCluster
    autoscaling: Any
    ec2: Any
    asg: str
    template_id: str

    def cycle(self) -> str:
        """One lifecycle cycle: the role's service, as its timer starts it; what it logged."""
        ctl = self.cluster.controller
        since = ctl.run("date +%s", root=True).stdout.strip()
        started = ctl.run("systemctl start gpuforge-lifecycle.service", root=True, check=False, timeout=600)
        log = ctl.run(f"journalctl -u gpuforge-lifecycle --no-pager -o cat --since @{since}", root=True).stdout
        assert started.returncode == 0, f"the lifecycle cycle failed: {started.stderr}\n{log}"
        return log

    def group(self) -> dict[str, Any]:
        (group,) = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[self.asg])["AutoScalingGroups"]
        return dict(group)

    def instances(self) -> list[str]:
        return sorted(i["InstanceId"] for i in self.group()["Instances"])

    def fabric(self, busbw: float) -> None:
        """What nccl-tests measures from now on, on every compute (the stand-in prints it)."""
        for machine in (*self.cluster.computes, self.cluster.cloud):
            (machine.root / STANDIN_DIR.lstrip("/") / "busbw").write_text(f"{busbw}\n")

    def join(self, instance_id: str, busbw: float) -> str:
        """The cloud machine boots as *instance_id*: its metadata says so, slurmd's unit names the node."""
        self.fabric(busbw)
        self.cluster.imds.instance_id = instance_id
        self.cluster.cloud.run("systemctl restart slurmd", root=True)
        name = node_name(GROUP, instance_id)
        assert name == self.cluster.cloud_node
        wait_for(f"{name} to register", lambda: name in self.nodes())
        return name

    def leave(self) -> None:
        """The instance the cloud machine played is terminated: its slurmd stops."""
        self.cluster.cloud.run("systemctl stop slurmd", root=True)

    def nodes(self) -> str:
        return self.cluster.controller.run("sinfo -N --noheader -o %N", root=True).stdout

    def idle(self, name: str) -> bool:
        """No jobs, none completing: what the cycle needs to see before it terminates a node."""
        state = self.node(name).get("State", "")
        return state.startswith("IDLE") and "COMPLETING" not in state

    def node(self, name: str) -> dict[str, str]:
        text = self.cluster.controller.run(f"scontrol --oneliner show node {name}", root=True, check=False).stdout
        fields = dict(token.split("=", 1) for token in text.split() if "=" in token)
        if "Reason=" in text:
            fields["Reason"] = text.split("Reason=", 1)[1].rsplit(" [", 1)[0]
        return fields


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


def _lifecycle_config(endpoint: str) -> dict[str, Any]:
    """The dev stack's rendered slurm_config.lifecycle (its elastic GPU group, the gate's floors from the
    catalog), fitted to these machines where they differ from dev's."""
    rendered = slurm_config(resolve(load_stack("dev").cluster, "dev"))["lifecycle"]
    (train,) = [group for group in rendered["groups"].values() if group["gate"]]
    assert train["instance_type"] == INSTANCE_TYPE and train["elastic"] and (train["min"], train["max"]) == (0, 2)
    assert train["gate"]["two_node_floor_gbps"] == FLOORS.two_node_gbps
    return {
        **rendered,
        "cluster": CLUSTER,
        "endpoint_url": endpoint,  # moto_server
        "groups": {
            GROUP: {
                **train,
                "partitions": [GROUP],  # these machines' cloud partition
                # Scale-down after 0 minutes idle: the step that proves it need not wait.
                "scaledown_idle_minutes": 0,
                # One task per GPU: the stand-in machines have GPUS, not the A10G's 4 (and as few CPUs).
                "gate": {**train["gate"], "gpus": GPUS},
            },
            # The static computes: no Auto Scaling group (on premises), the gate's healthy neighbours.
            "gpu": {"partitions": ["gpu"], "instance_type": INSTANCE_TYPE},
        },
    }


# Where the stand-in signing helper records its calls on the controller; the site PKI's files (the role's
# default paths).
HELPER_LOG = "/var/log/gpuforge-standin-signing-helper.jsonl"
CERTIFICATE, PRIVATE_KEY = "/etc/gpuforge/pki/scaler.crt", "/etc/gpuforge/pki/scaler.key"


@pytest.fixture(scope="module")
def lifecycle(
    slurm_cluster: SlurmCluster, moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lifecycle]:
    start = time.monotonic()
    clients = boto3_args(moto_endpoint, REGION)
    autoscaling, ec2 = boto3.client("autoscaling", **clients), boto3.client("ec2", **clients)
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{CLUSTER}-{GROUP}",
        LaunchTemplateData={"ImageId": OLD_IMAGE, "InstanceType": INSTANCE_TYPE},
    )["LaunchTemplate"]["LaunchTemplateId"]
    asg = f"{CLUSTER}-{GROUP}"
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=asg,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "1"},
        MinSize=0,
        MaxSize=2,
        DesiredCapacity=0,
        AvailabilityZones=[f"{REGION}a"],
        Tags=[
            {"Key": "gpuforge:cluster", "Value": CLUSTER, "PropagateAtLaunch": True},
            {"Key": "gpuforge:node-group", "Value": GROUP, "PropagateAtLaunch": True},
        ],
    )
    cluster = slurm_cluster
    for machine in (*cluster.computes, cluster.cloud):
        standin = machine.root / "opt/nccl-tests/build/all_reduce_perf"  # the rendered gate's nccl_tests
        standin.parent.mkdir(parents=True, exist_ok=True)
        standin.write_text(ALL_REDUCE_PERF_STANDIN)
        standin.chmod(0o755)
        (machine.root / STANDIN_DIR.lstrip("/") / "busbw").write_text(f"{GOOD_BUSBW}\n")
    inventory = copy.deepcopy(cluster.inventory)
    all_vars = inventory["all"]["vars"]
    config = all_vars["slurm_config"]
    # The gate partition spans every node set (render/slurm.py), so a new node finds a healthy neighbour.
    gate_nodesets = [group["nodeset"] for group in config["groups"].values()]
    # The test drives each cycle.
    all_vars["slurm_scaler_timer_enabled"] = False
    # The site PKI's certificate and key for the controller (stand-ins: the helper only reads them).
    pki = cluster.controller.root / CERTIFICATE.lstrip("/")
    pki.parent.mkdir(parents=True, exist_ok=True)
    pki.write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
    (cluster.controller.root / PRIVATE_KEY.lstrip("/")).write_text("-----BEGIN PRIVATE KEY-----\nstand-in\n")
    original_slurmd = (cluster.cloud.root / "etc/default/slurmd").read_text()
    original_instance = cluster.imds.instance_id
    served = tmp_path_factory.mktemp("signing-helper")
    with served_signing_helper(served, "/usr/bin/python3", HELPER_LOG) as helper:
        all_vars["slurm_config"] = {
            **config,
            "lifecycle": {
                **_lifecycle_config(moto_endpoint),
                "gate_nodesets": gate_nodesets,
                # As a hybrid stack renders it (gpuforge/render/slurm.py) with the deployed stack's ARNs.
                "aws_credentials": {"kind": "roles_anywhere", "signing_helper": helper.signing_helper(), **ARNS},
            },
        }
        # The controller gets the role and the gate partition; the cloud group's nodes now register drained.
        result = run_playbook("slurm.yml", inventory, limit=f"{cluster.controller.name},{cluster.cloud.name}")
    assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
    default_slurmd = (cluster.cloud.root / "etc/default/slurmd").read_text()
    assert "--conf 'State=DRAIN " in default_slurmd, default_slurmd
    # The cloud group starts empty: the machine's own registration goes (scale from zero).
    cluster.cloud.run("systemctl stop slurmd", root=True)
    cluster.scontrol("delete", f"nodename={cluster.cloud_node}")
    print(f"\nlifecycle setup (moto groups, slurm_scaler role): {time.monotonic() - start:.1f}s")
    life = Lifecycle(cluster, autoscaling, ec2, asg, template)
    yield life
    # Leave the cloud machine as the cluster fixture made it: registered as its first instance, ungated.
    life.leave()
    for name in life.nodes().split():
        if name.startswith(f"{GROUP}-i-"):
            cluster.controller.run(f"scancel -w {name}; scontrol delete nodename={name}", root=True, check=False)
    (cluster.cloud.root / "etc/default/slurmd").write_text(original_slurmd)
    cluster.imds.instance_id = original_instance
    cluster.cloud.run("systemctl start slurmd", root=True)


def _submit(cluster: SlurmCluster, args: str, script: str) -> str:
    return cluster.as_user(f"sbatch --parsable {args} --wrap {json.dumps(script)}").strip().split(";")[0]


def _job_state(cluster: SlurmCluster, job: str) -> str:
    return cluster.controller.run(f"squeue -h -j {job} -o %T", root=True, check=False).stdout.strip()


def _finished(cluster: SlurmCluster, job: str) -> str | None:
    out = cluster.as_user(f"sacct -j {job} -X --noheader --parsable2 --format=State,NodeList")
    state, _, nodes = (out.strip().splitlines() or ["||"])[0].partition("|")
    return f"{state} {nodes}" if state and state not in ("PENDING", "RUNNING", "REQUEUED") else None


def test_the_scaler_calls_aws_with_roles_anywhere_credentials(lifecycle: Lifecycle) -> None:
    """The service's boto3 ran the profile's credential_process: the helper with the controller's certificate,
    key and the stack's ARNs; the unit names the profile and carries no key; the key is its user's only."""
    ctl = lifecycle.cluster.controller
    log = lifecycle.cycle()  # nothing pending, nothing to scale: the group is read, with those credentials
    made = calls(ctl.root / HELPER_LOG.lstrip("/"))
    assert made, log
    assert made[-1] == [
        "credential-process", "--certificate", CERTIFICATE, "--private-key", PRIVATE_KEY,
        "--trust-anchor-arn", ARNS["trust_anchor_arn"], "--profile-arn", ARNS["profile_arn"],
        "--role-arn", ARNS["role_arn"],
    ], made
    unit = ctl.run("systemctl cat gpuforge-lifecycle.service", root=True).stdout
    assert 'Environment="AWS_PROFILE=gpuforge-scaler"' in unit and "AWS_ACCESS_KEY_ID" not in unit, unit
    assert ctl.run(f"stat -c %a:%U {PRIVATE_KEY}", root=True).stdout.strip() == "600:root"
    assert lifecycle.group()["DesiredCapacity"] == 0


def test_pending_jobs_scale_up_and_the_new_node_serves_after_its_gate(lifecycle: Lifecycle) -> None:
    cluster = lifecycle.cluster
    job = _submit(cluster, f"-p {GROUP} -N1", "hostname")
    log = lifecycle.cycle()
    assert lifecycle.group()["DesiredCapacity"] == 1, log
    (instance,) = lifecycle.instances()
    name = lifecycle.join(instance, GOOD_BUSBW)
    node = lifecycle.node(name)
    assert "DRAIN" in node["State"], node  # registered drained: no job before the gate
    assert _job_state(cluster, job) == "PENDING"
    log = lifecycle.cycle()
    assert f"{name}: gate admitted" in log, log
    # The node the gate was judging already answered the pending job: no second instance for it.
    assert lifecycle.group()["DesiredCapacity"] == 1 and lifecycle.instances() == [instance], log
    done = wait_for(f"job {job} to finish", lambda: _finished(cluster, job), 180)
    assert done == f"COMPLETED {name}", done


def test_an_idle_node_is_terminated_with_the_desired_capacity_decremented(lifecycle: Lifecycle) -> None:
    (instance,) = lifecycle.instances()
    name = node_name(GROUP, instance)
    wait_for(f"{name} idle", lambda: lifecycle.idle(name))
    log = lifecycle.cycle()
    assert "desired capacity decremented" in log, log
    lifecycle.leave()
    assert lifecycle.group()["DesiredCapacity"] == 0 and lifecycle.instances() == []
    assert name not in lifecycle.nodes().split()


def test_a_node_failing_its_health_check_is_drained_then_replaced(lifecycle: Lifecycle) -> None:
    cluster = lifecycle.cluster
    lifecycle.autoscaling.update_auto_scaling_group(AutoScalingGroupName=lifecycle.asg, MinSize=1, DesiredCapacity=1)
    (first,) = lifecycle.instances()
    name = lifecycle.join(first, GOOD_BUSBW)
    assert f"{name}: gate admitted" in lifecycle.cycle()
    # A GPU falls off the bus while the node is idle; slurmd's periodic health check (the live slurm.conf's
    # HealthCheckProgram, the prolog's script under its periodic name) drains it. Run here as slurmd runs
    # it, as root without a job's environment, rather than waiting out HealthCheckInterval.
    shown = cluster.controller.run("scontrol show config", root=True).stdout
    live = dict(line.split("=", 1) for line in shown.splitlines() if " = " in line)
    live = {key.strip(): value.strip() for key, value in live.items()}
    program = live["HealthCheckProgram"]
    assert live["HealthCheckNodeState"] == "IDLE" and live["HealthCheckInterval"].startswith("300"), live
    csv = cluster.cloud.root / STANDIN_DIR.lstrip("/") / "nvidia-smi.csv"
    csv.write_text("".join(NVIDIA_SMI_CSV.splitlines(keepends=True)[:2]))
    try:
        check = cluster.cloud.run(f"env -i {program}", root=True, check=False)
        assert check.returncode == 1, check.stderr
        node = lifecycle.node(name)
        assert "DRAIN" in node["State"] and node["Reason"].startswith("gpuforge health: found 1 GPUs, expected 2"), node
        log = lifecycle.cycle()
        assert f"{name}: terminated {first}, the group replaces it" in log, log
        lifecycle.leave()
    finally:
        csv.write_text(NVIDIA_SMI_CSV)
    group = lifecycle.group()
    assert group["DesiredCapacity"] == 1 and len(group["Instances"]) == 1 and first not in lifecycle.instances()
    assert name not in lifecycle.nodes().split()


def test_a_rolling_update_drains_before_it_replaces(lifecycle: Lifecycle) -> None:
    cluster = lifecycle.cluster
    (instance,) = lifecycle.instances()
    name = lifecycle.join(instance, GOOD_BUSBW)
    assert f"{name}: gate admitted" in lifecycle.cycle()
    job = _submit(cluster, f"-p {GROUP} -N1", "sleep 600")
    wait_for(f"job {job} running", lambda: _job_state(cluster, job) == "RUNNING")
    # A new image: the launch template gets a version with another AMI, the group launches that version.
    lifecycle.ec2.create_launch_template_version(
        LaunchTemplateId=lifecycle.template_id, SourceVersion="1", LaunchTemplateData={"ImageId": NEW_IMAGE}
    )
    # The program's launch templates make each new version the default (update_default_version); moto
    # reports every instance on the default version, so it must follow as on AWS.
    lifecycle.ec2.modify_launch_template(LaunchTemplateId=lifecycle.template_id, DefaultVersion="2")
    lifecycle.autoscaling.update_auto_scaling_group(
        AutoScalingGroupName=lifecycle.asg, LaunchTemplate={"LaunchTemplateId": lifecycle.template_id, "Version": "2"}
    )
    log = lifecycle.cycle()
    assert f"{name}: drained (gpuforge rolling update: image {OLD_IMAGE} -> {NEW_IMAGE})" in log, log
    assert "DRAIN" in lifecycle.node(name)["State"] and _job_state(cluster, job) == "RUNNING"
    lifecycle.cycle()
    assert lifecycle.instances() == [instance] and _job_state(cluster, job) == "RUNNING"  # its job runs on
    cluster.as_user(f"scancel {job}")
    wait_for(f"{name} without jobs", lambda: lifecycle.idle(name))
    log = lifecycle.cycle()
    assert f"{name}: terminated {instance}, the group replaces it" in log, log
    lifecycle.leave()
    (replacement,) = lifecycle.instances()
    image = lifecycle.ec2.describe_instances(InstanceIds=[replacement])["Reservations"][0]["Instances"][0]["ImageId"]
    assert replacement != instance and image == NEW_IMAGE and lifecycle.group()["DesiredCapacity"] == 1


def test_the_gate_keeps_a_slow_node_drained_with_its_figure_and_admits_it_when_fast(lifecycle: Lifecycle) -> None:
    cluster = lifecycle.cluster
    (instance,) = lifecycle.instances()
    name = lifecycle.join(instance, POOR_BUSBW)
    log = lifecycle.cycle()
    node = lifecycle.node(name)
    assert "DRAIN" in node["State"] and node["Reason"].startswith(GATE_FAILED), (node, log)
    assert (
        f"busbw {POOR_BUSBW:g} GB/s at {FLOORS.message_bytes} B < floor {FLOORS.two_node_gbps:g} GB/s" in node["Reason"]
    )
    assert name in cluster.as_user("sinfo -R --noheader -o '%N %E'")
    # The fabric is fixed; the operator asks for acceptance again.
    lifecycle.fabric(GOOD_BUSBW)
    cluster.scontrol("update", f"nodename={name}", "state=drain", f"reason='{GATE_PENDING}'")
    assert f"{name}: gate admitted" in lifecycle.cycle()
    assert "DRAIN" not in lifecycle.node(name)["State"]
