"""The node lifecycle's decisions against moto's Auto Scaling and EC2 APIs (in process) and a Slurm that
answers from recorded state: scale up on pending jobs (bounded by max), scale down idle nodes (never
below min, desired capacity decremented), replace health-drained nodes (desired unchanged), roll an
image or launch template change a batch at a time, gate new nodes (with a serving neighbour, or in pairs
when none serves); and never terminate a node with jobs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest
from moto import mock_aws

from gpuforge.nodes.lifecycle import (
    GATE_FAILED,
    GATE_PENDING,
    GATE_RETEST,
    GATE_WAITING,
    AutoScalingGroup,
    Drain,
    Instance,
    LifecycleConfig,
    PendingJob,
    SlurmNode,
    cycle,
    decide,
    judge_nccl,
    node_name,
    parse_scontrol_nodes,
    parse_squeue_pending,
    read_groups,
)

REGION = "us-east-1"
_CLUSTERS = itertools.count()
NOW = datetime(2026, 11, 23, 3, 0, 0)


def _row(size: int, busbw: float) -> str:
    """One all_reduce_perf data row (nccl-tests' column layout)."""
    return (
        f"{size:>12} {size // 4:>13}     float     sum      -1    9999.0  {busbw:6.2f}  {busbw:6.2f}      0"
        f"    9999.0  {busbw:6.2f}  {busbw:6.2f}      0\n"
    )


class FakeSlurm:
    """Slurm's state as scontrol/squeue would report it, changed by the same calls the cycle makes."""

    def __init__(self, nodes: dict[str, SlurmNode], pending: Sequence[PendingJob] = (), busbw: float = 12.0) -> None:
        self._nodes = nodes
        self._pending = list(pending)
        self.busbw = busbw
        self.calls: list[tuple[str, ...]] = []

    def nodes(self) -> dict[str, SlurmNode]:
        return dict(self._nodes)

    def pending(self) -> list[PendingJob]:
        return list(self._pending)

    def drain(self, node: str, reason: str) -> None:
        self.calls.append(("drain", node, reason))
        self._nodes[node] = replace(self._nodes[node], flags=self._nodes[node].flags | {"DRAIN"}, reason=reason)

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))
        self._nodes[node] = replace(self._nodes[node], flags=self._nodes[node].flags - {"DRAIN"}, reason="")

    def delete(self, node: str) -> None:
        self.calls.append(("delete", node))
        del self._nodes[node]

    def reserve(self, name: str, nodes: Sequence[str]) -> None:
        self.calls.append(("reserve", name, *nodes))

    def unreserve(self, name: str) -> None:
        self.calls.append(("unreserve", name))

    def srun(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        self.calls.append(("srun", *argv))
        return 0, "# nccl-tests stand-in\n" + _row(8589934592, self.busbw) + "# Out of bounds values : 0 OK\n"


@pytest.fixture(scope="module")
def moto_clients() -> Iterator[tuple[Any, Any]]:
    # One moto backend for the module (building EC2's takes seconds); each test has its own cluster tag.
    with mock_aws():
        yield boto3.client("autoscaling", region_name=REGION), boto3.client("ec2", region_name=REGION)


@dataclass(frozen=True)
class Aws:
    autoscaling: Any
    ec2: Any
    cluster: str  # the gpuforge:cluster tag of this test's groups


@pytest.fixture
def aws(moto_clients: tuple[Any, Any]) -> Aws:
    return Aws(*moto_clients, cluster=f"forge-{next(_CLUSTERS)}")


def _images(ec2: Any) -> tuple[str, str]:
    """Two AMI ids (moto launches instances from a launch template's image without looking it up)."""
    return "ami-0a1b2c3d4e5f60001", "ami-0a1b2c3d4e5f60002"


def _group(
    aws: Aws, name: str, *, min_size: int, max_size: int, desired: int, instance_type: str = "g5.12xlarge"
) -> str:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    image, _ = _images(ec2)
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{aws.cluster}-{name}", LaunchTemplateData={"ImageId": image, "InstanceType": instance_type}
    )["LaunchTemplate"]
    asg = f"{aws.cluster}-{name}"
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=asg,
        LaunchTemplate={"LaunchTemplateId": template["LaunchTemplateId"], "Version": "1"},
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{REGION}a"],
        Tags=[
            {"Key": "gpuforge:cluster", "Value": aws.cluster, "PropagateAtLaunch": True},
            {"Key": "gpuforge:node-group", "Value": name, "PropagateAtLaunch": True},
        ],
    )
    return asg


def _config(
    aws: Aws,
    *,
    elastic: bool = True,
    min_nodes: int = 0,
    max_nodes: int = 3,
    gate: bool = False,
    static_neighbours: bool = False,
) -> LifecycleConfig:
    gate_policy = {
        "single_node_floor_gbps": None, "two_node_floor_gbps": 11.25, "message_bytes": 8589934592,
        "nccl_tests": "/opt/nccl-tests/build/all_reduce_perf", "gpus": 4,
    }  # fmt: skip
    groups: dict[str, Any] = {
        "cloud": {
            "partitions": ["cloud"],
            "instance_type": "g5.12xlarge",
            "elastic": elastic,
            "min": min_nodes,
            "max": max_nodes,
            "scaledown_idle_minutes": 10,
            "gate": gate_policy if gate else None,
        }
    }
    if static_neighbours:  # on-premises nodes of the same type, no Auto Scaling group (the booted test's)
        groups["gpu"] = {"partitions": ["gpu"], "instance_type": "g5.12xlarge"}
    return LifecycleConfig.from_dict({"cluster": aws.cluster, "region": REGION, "groups": groups})


def _instances(autoscaling: Any, asg: str) -> list[str]:
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])["AutoScalingGroups"]
    return sorted(i["InstanceId"] for i in group["Instances"])


def _desired(autoscaling: Any, asg: str) -> int:
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])["AutoScalingGroups"]
    return int(group["DesiredCapacity"])


def _idle(name: str, minutes: float = 0, **changes: Any) -> SlurmNode:
    node = SlurmNode(
        name, "IDLE", frozenset({"DYNAMIC_NORM"}), "", NOW - timedelta(minutes=minutes), frozenset({"group_cloud"})
    )
    return replace(node, **changes)


def test_pending_jobs_raise_desired_capacity_up_to_max(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=3, desired=0)
    slurm = FakeSlurm({}, [PendingJob("7", ("cloud",), 2, "Resources"), PendingJob("8", ("cloud",), 4, "Priority")])
    done = cycle(_config(aws), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _desired(autoscaling, asg) == 3, done  # 6 nodes wanted, max 3
    assert len(_instances(autoscaling, asg)) == 3


def test_jobs_that_more_nodes_cannot_help_do_not_scale(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=3, desired=0)
    pending = [PendingJob("7", ("cloud",), 1, "Dependency"), PendingJob("8", ("gpu",), 1, "Resources")]
    cycle(_config(aws), FakeSlurm({}, pending), autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _desired(autoscaling, asg) == 0


def test_booting_instances_count_against_pending_jobs(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=3, desired=1)  # launched, not yet registered
    cycle(_config(aws), FakeSlurm({}, [PendingJob("7", ("cloud",), 1, "Resources")]), autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _desired(autoscaling, asg) == 1


def test_idle_node_is_terminated_with_desired_decremented_never_below_min(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=1, max_size=3, desired=3)
    a, b, c = _instances(autoscaling, asg)
    nodes = {
        node_name("cloud", a): _idle(node_name("cloud", a), minutes=30),
        node_name("cloud", b): _idle(node_name("cloud", b), minutes=20),
        node_name("cloud", c): _idle(node_name("cloud", c), minutes=5),  # not idle long enough
    }
    slurm = FakeSlurm(nodes)
    cycle(_config(aws, min_nodes=1), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _desired(autoscaling, asg) == 1
    assert _instances(autoscaling, asg) == [c]
    assert set(slurm.nodes()) == {node_name("cloud", c)}
    drains = [call for call in slurm.calls if call[0] == "drain"]
    assert [call[1] for call in drains] == [node_name("cloud", a), node_name("cloud", b)]  # drained first


def test_a_node_with_jobs_is_never_terminated(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=2, desired=1)
    (a,) = _instances(autoscaling, asg)
    name = node_name("cloud", a)
    # Drained by the prolog, but a job still runs there (DRAINING): the cycle waits.
    busy = SlurmNode(name, "MIXED", frozenset({"DRAIN"}), "gpuforge prolog: found 1 GPUs, expected 2", NOW)
    slurm = FakeSlurm({name: busy})
    done = cycle(_config(aws), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _instances(autoscaling, asg) == [a] and name in slurm.nodes(), done


def test_health_drained_idle_node_is_replaced_keeping_desired(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=2, max_size=2, desired=2)
    a, b = _instances(autoscaling, asg)
    bad = SlurmNode(node_name("cloud", a), "IDLE", frozenset({"DRAIN"}), "gpuforge prolog: found 1 GPUs, expected 2")
    slurm = FakeSlurm({bad.name: bad, node_name("cloud", b): _idle(node_name("cloud", b))})
    cycle(_config(aws, elastic=False), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    after = _instances(autoscaling, asg)
    assert _desired(autoscaling, asg) == 2 and a not in after and b in after and len(after) == 2
    assert bad.name not in slurm.nodes()


def test_other_drains_are_left_alone(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=1, max_size=1, desired=1)
    (a,) = _instances(autoscaling, asg)
    admin = SlurmNode(node_name("cloud", a), "IDLE", frozenset({"DRAIN"}), "bios update by alice")
    cycle(_config(aws, elastic=False), FakeSlurm({admin.name: admin}), autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _instances(autoscaling, asg) == [a]


def test_rolling_update_drains_a_batch_then_replaces_idle_nodes(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=2, max_size=2, desired=2)
    a, b = _instances(autoscaling, asg)
    _, new_image = _images(ec2)
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])["AutoScalingGroups"]
    template = group["LaunchTemplate"]["LaunchTemplateId"]
    ec2.create_launch_template_version(
        LaunchTemplateId=template, SourceVersion="1", LaunchTemplateData={"ImageId": new_image}
    )
    # As the program's launch templates do (update_default_version); moto reports every instance on the
    # template's default version, so the default must follow as it does on AWS.
    ec2.modify_launch_template(LaunchTemplateId=template, DefaultVersion="2")
    autoscaling.update_auto_scaling_group(
        AutoScalingGroupName=asg, LaunchTemplate={"LaunchTemplateId": template, "Version": "2"}
    )
    busy = SlurmNode(node_name("cloud", a), "ALLOCATED", frozenset(), "", NOW)
    idle = _idle(node_name("cloud", b))
    slurm = FakeSlurm({busy.name: busy, idle.name: idle})
    config = _config(aws, elastic=False)

    def drained() -> list[str]:
        return sorted(n for n, node in slurm.nodes().items() if "DRAIN" in node.flags)

    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    # A batch of one, the idle node first: drained, nothing terminated yet.
    assert drained() == [idle.name] and _instances(autoscaling, asg) == sorted([a, b])
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    # Drained and idle: terminated, the group launches a replacement from the new image.
    after = _instances(autoscaling, asg)
    assert b not in after and a in after and len(after) == 2 and _desired(autoscaling, asg) == 2
    replacement = next(i for i in read_groups(config, autoscaling, ec2)["cloud"].instances if i.instance_id != a)
    assert replacement.image_id == new_image
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert drained() == [busy.name]  # next batch: the busy node drains (DRAINING), its job runs on
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert a in _instances(autoscaling, asg)  # never terminated while its job runs
    slurm._nodes[busy.name] = replace(slurm._nodes[busy.name], state="IDLE")  # the job ended
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert a not in _instances(autoscaling, asg) and _desired(autoscaling, asg) == 2
    groups = read_groups(config, autoscaling, ec2)["cloud"]
    assert {i.image_id for i in groups.instances} == {new_image}


@pytest.mark.parametrize(("busbw", "admitted"), [(12.0, True), (5.0, False)])
def test_gate_admits_above_the_floor_and_keeps_the_figure_below(aws: Aws, busbw: float, admitted: bool) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=2, desired=2)
    a, b = _instances(autoscaling, asg)
    new = SlurmNode(node_name("cloud", a), "IDLE", frozenset({"DRAIN"}), GATE_PENDING)
    slurm = FakeSlurm({new.name: new, node_name("cloud", b): _idle(node_name("cloud", b))}, busbw=busbw)
    cycle(_config(aws, gate=True, min_nodes=2), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    node = slurm.nodes()[new.name]
    sruns = [call for call in slurm.calls if call[0] == "srun"]
    assert len(sruns) == 2 and f"--nodelist={new.name},{node_name('cloud', b)}" in sruns[1]
    assert all("--reservation=gpuforge-gate-" + new.name in call for call in sruns)
    if admitted:
        assert "DRAIN" not in node.flags
    else:
        assert "DRAIN" in node.flags and node.reason.startswith(GATE_FAILED)
        assert "busbw 5 GB/s at 8589934592 B < floor 11.25 GB/s" in node.reason
    assert ("unreserve", f"gpuforge-gate-{new.name}") in slurm.calls


def test_judge_nccl_reads_the_figure_at_the_message_size() -> None:
    text = _row(1048576, 3.0) + _row(8589934592, 11.0)
    assert judge_nccl("pair", text, 0, 10.0, 8589934592) == (None, 11.0)
    problem, busbw = judge_nccl("pair", "srun: error: nodes busy\n", 1, 10.0, 8589934592)
    assert busbw is None and problem is not None and "no bus bandwidth (exit 1)" in problem


def test_parse_scontrol_and_squeue() -> None:
    text = (
        "NodeName=cloud-i-0abc Arch=x86_64 CoresPerSocket=4 CPUAlloc=0 State=IDLE+DRAIN+DYNAMIC_NORM "
        "Partitions=cloud AvailableFeatures=group_cloud,a10g LastBusyTime=2026-11-23T02:50:00 "
        "Reason=gpuforge prolog: found 1 GPUs, expected 2 "
        "[root@2026-11-23T02:51:00]\n"
        "NodeName=slurm3 State=MIXED Partitions=gpu LastBusyTime=Unknown Reason=(null)\n"
    )
    nodes = parse_scontrol_nodes(text)
    cloud = nodes["cloud-i-0abc"]
    assert cloud.drained and cloud.reason == "gpuforge prolog: found 1 GPUs, expected 2"
    assert cloud.last_busy == datetime(2026, 11, 23, 2, 50) and cloud.group == "cloud"
    assert nodes["slurm3"].has_jobs and nodes["slurm3"].reason == "" and nodes["slurm3"].last_busy is None
    jobs = parse_squeue_pending("12|cloud|2|Resources\n13|gpu,cloud|1|Priority\n")
    assert jobs == [PendingJob("12", ("cloud",), 2, "Resources"), PendingJob("13", ("gpu", "cloud"), 1, "Priority")]


def test_the_stacks_render_the_lifecycle_program_its_groups() -> None:
    """dev: an elastic GPU group from zero; prod: a fixed group (count + spares); both gated with the
    catalog's floors. The rendered dict is what the controller's program reads."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.lifecycle import gate_floors
    from gpuforge.render.slurm import slurm_config
    from gpuforge.spec import resolve

    dev = LifecycleConfig.from_dict(slurm_config(resolve(load_stack("dev").cluster, "dev"))["lifecycle"])
    (train,) = dev.groups.values()
    assert train.elastic and train.min_nodes == 0 and train.max_nodes >= 1
    assert train.gate is not None and train.gate.two_node_floor_gbps == gate_floors("g5.12xlarge").two_node_gbps
    assert gate_floors("g5.12xlarge").two_node_gbps == 4.5  # 0.9 x the derived EFA ceiling
    prod_spec = resolve(load_stack("prod").cluster, "prod")
    prod = LifecycleConfig.from_dict(slurm_config(prod_spec)["lifecycle"])
    fixed = prod.groups["train"]
    assert not fixed.elastic and fixed.min_nodes == fixed.max_nodes == prod_spec.spec.node_groups["train"].total_nodes
    assert fixed.gate is not None and fixed.gate.single_node_floor_gbps == 405.0  # 0.9 x 450 GB/s (p5.48xlarge)
    assert prod.cluster == "forge-prod" and prod.endpoint_url is None


def test_a_node_awaiting_its_gate_counts_against_pending_jobs(aws: Aws) -> None:
    """The scale-up's instance has registered drained and the job waits for it: the cycle that gates the
    node does not launch a second instance for the same job."""
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=2, desired=1)
    (a,) = _instances(autoscaling, asg)
    new = _idle(node_name("cloud", a), flags=frozenset({"DRAIN", "DYNAMIC_NORM"}), last_busy=None)
    neighbour = SlurmNode("gpu1", "IDLE", frozenset(), "", NOW, frozenset({"group_gpu"}))
    slurm = FakeSlurm({new.name: new, "gpu1": neighbour}, [PendingJob("7", ("cloud",), 1, "ReqNodeNotAvail")])
    done = cycle(_config(aws, gate=True, static_neighbours=True), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _desired(autoscaling, asg) == 1 and _instances(autoscaling, asg) == [a], done
    assert f"{new.name}: gate admitted" in " ".join(done)


# --- the gate with no node of its type serving (issue 12: first deploy, scaling from zero) ----------


def _stack_lifecycle(stack: str, aws: Aws) -> LifecycleConfig:
    """The lifecycle configuration the stack renders for its controller, on this test's cluster tag."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.slurm import slurm_config
    from gpuforge.spec import resolve

    rendered = slurm_config(resolve(load_stack(stack).cluster, stack))["lifecycle"]
    return LifecycleConfig.from_dict({**rendered, "cluster": aws.cluster})


def _register(slurm: FakeSlurm, group: str, instance_id: str) -> str:
    """An instance's slurmd registers its node drained (slurmd -Z --conf "State=DRAIN"): Slurm keeps no reason."""
    name = node_name(group, instance_id)
    slurm._nodes[name] = SlurmNode(
        name, "IDLE", frozenset({"DRAIN", "DYNAMIC_NORM"}), "", None, frozenset({f"group_{group}"})
    )
    return name


def _gated(config: LifecycleConfig) -> str:
    (name,) = [g.name for g in config.groups.values() if g.gate is not None]
    return name


def test_dev_scaling_from_zero_gates_the_first_node_with_a_partner_it_launches(aws: Aws) -> None:
    """dev's rendered configuration: an elastic g5.12xlarge group from zero, no node of its type anywhere.
    The first node passes alone and waits; the group launches a partner; the pair's two-node test admits
    both and the job can run. Before: 'two-node test not run' failed the node for good, twice."""
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    config = _stack_lifecycle("dev", aws)
    group = _gated(config)
    policy = config.groups[group]
    assert policy.elastic and policy.min_nodes == 0 and policy.max_nodes == 2
    asg = _group(aws, group, min_size=0, max_size=policy.max_nodes, desired=0)
    slurm = FakeSlurm({}, [PendingJob("7", (policy.partitions[0],), 1, "Resources")], busbw=12.0)
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    (a,) = _instances(autoscaling, asg)
    first = _register(slurm, group, a)
    done = cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    node = slurm.nodes()[first]
    assert "DRAIN" in node.flags and node.reason.startswith(GATE_WAITING), (node, done)
    # g5.12xlarge has no published single-node figure: the gate says so rather than passing silently.
    assert "the catalog has no floor for this type" in " ".join(done)
    assert _desired(autoscaling, asg) == 2, done  # a partner for the two-node test
    second = _register(slurm, group, next(i for i in _instances(autoscaling, asg) if i != a))
    done = cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert all("DRAIN" not in slurm.nodes()[n].flags for n in (first, second)), done
    both = f"--nodelist={','.join(sorted([first, second]))}"
    pair = [call for call in slurm.calls if call[0] == "srun" and both in call]
    assert len(pair) == 1 and "-N2" in pair[0]
    assert _desired(autoscaling, asg) == 2  # no third instance


def test_prod_first_deploy_gates_its_nodes_in_pairs_and_the_odd_one_with_a_neighbour(aws: Aws) -> None:
    """prod's rendered configuration: a fixed p5.48xlarge group whose nodes all register drained at the
    first deploy. Pairs are tested together; the odd node passes alone, waits, and is tested with a
    serving node the next cycle."""
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    config = _stack_lifecycle("prod", aws)
    group = _gated(config)
    policy = config.groups[group]
    assert not policy.elastic and policy.gate is not None and policy.gate.single_node_floor_gbps is not None
    asg = _group(aws, group, min_size=3, max_size=3, desired=3, instance_type="p5.48xlarge")
    slurm = FakeSlurm({}, busbw=460.0)  # above both p5.48xlarge floors
    names = [_register(slurm, group, i) for i in _instances(autoscaling, asg)]
    done = cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    admitted = [n for n in names if "DRAIN" not in slurm.nodes()[n].flags]
    assert admitted == names[:2], done
    assert slurm.nodes()[names[2]].reason.startswith(GATE_WAITING)
    done = cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert "DRAIN" not in slurm.nodes()[names[2]].flags, done
    assert f"{names[2]}: gate admitted" in " ".join(done) and f"two-node with {names[0]}" in " ".join(done)
    assert _desired(autoscaling, asg) == 3 and len(_instances(autoscaling, asg)) == 3


def test_a_pair_that_fails_together_is_replaced_in_an_elastic_group(aws: Aws) -> None:
    """Two new nodes below the floor together: either may be bad, so neither is 'failed'; an elastic group
    terminates both (desired decremented) instead of paying for drained nodes."""
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=0, max_size=2, desired=2)
    slurm = FakeSlurm({}, busbw=5.0)
    a, b = (_register(slurm, "cloud", i) for i in _instances(autoscaling, asg))
    config = _config(aws, gate=True, max_nodes=2)
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert all(slurm.nodes()[n].reason.startswith(GATE_RETEST) for n in (a, b))
    assert "busbw 5 GB/s" in slurm.nodes()[a].reason
    done = cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert _instances(autoscaling, asg) == [] and _desired(autoscaling, asg) == 0, done


def test_a_retest_node_in_a_fixed_group_is_tested_again_once_a_neighbour_serves(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=2, max_size=2, desired=2)
    a, b = _instances(autoscaling, asg)
    retest = _idle(node_name("cloud", a), flags=frozenset({"DRAIN"}), reason=f"{GATE_RETEST} two-node pair x")
    serving = _idle(node_name("cloud", b))
    slurm = FakeSlurm({retest.name: retest, serving.name: serving})
    done = cycle(_config(aws, gate=True, elastic=False, min_nodes=2, max_nodes=2), slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert f"{retest.name}: gate admitted" in " ".join(done) and _instances(autoscaling, asg) == [a, b]


class PrologFailingSlurm(FakeSlurm):
    """The gate's job starts, the node's prolog finds a GPU missing and drains the node, srun fails."""

    def srun(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        self.calls.append(("srun", *argv))
        node = next(a for a in argv if a.startswith("--nodelist=")).removeprefix("--nodelist=").split(",")[0]
        self.drain(node, "gpuforge prolog: found 3 GPUs, expected 4")
        return 1, "srun: error: prolog failed\n"


def test_a_prolog_failure_during_the_gate_keeps_its_reason_and_the_node_is_replaced(aws: Aws) -> None:
    autoscaling, ec2 = aws.autoscaling, aws.ec2
    asg = _group(aws, "cloud", min_size=2, max_size=2, desired=2)
    a, b = _instances(autoscaling, asg)
    new = _idle(node_name("cloud", a), flags=frozenset({"DRAIN"}), reason=GATE_PENDING)
    slurm = PrologFailingSlurm({new.name: new, node_name("cloud", b): _idle(node_name("cloud", b))})
    config = _config(aws, gate=True, elastic=False, min_nodes=2, max_nodes=2)
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    assert slurm.nodes()[new.name].reason == "gpuforge prolog: found 3 GPUs, expected 4"
    cycle(config, slurm, autoscaling, ec2, NOW)  # type: ignore[arg-type]
    after = _instances(autoscaling, asg)
    assert a not in after and len(after) == 2 and _desired(autoscaling, asg) == 2  # replaced


# --- what the group launches: resolve:ssm images and launch template versions (Stubber) ------------


def test_a_resolve_ssm_template_and_a_user_data_change_roll_by_template_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A launch template whose image is resolve:ssm:... answers with the AMI only with ResolveAlias (else
    the parameter string, which no instance's ImageId equals: every node looked outdated). A new template
    version with the same AMI (user data changed) still rolls: the instance's launch template version
    differs from the group's. botocore's Stubber checks each request against the API model; moto reports
    every instance on the template's default version, so it cannot show an instance on an older one."""
    from botocore.stub import Stubber  # type: ignore[import-untyped,unused-ignore]

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, template = "ami-0a1b2c3d4e5f60001", "lt-0123456789abcdef0"
    old, new = "i-0000000000000000a", "i-0000000000000000b"

    def member(instance: str, version: str) -> dict[str, Any]:
        return {
            "InstanceId": instance, "AvailabilityZone": f"{REGION}a", "LifecycleState": "InService",
            "HealthStatus": "Healthy", "ProtectedFromScaleIn": False,
            "LaunchTemplate": {"LaunchTemplateId": template, "LaunchTemplateName": "forge-cloud", "Version": version},
        }  # fmt: skip

    with Stubber(autoscaling) as asg_stub, Stubber(ec2) as ec2_stub:
        asg_stub.add_response(
            "describe_auto_scaling_groups",
            {
                "AutoScalingGroups": [
                    {
                        "AutoScalingGroupName": "forge-cloud",
                        "MinSize": 2,
                        "MaxSize": 2,
                        "DesiredCapacity": 2,
                        "DefaultCooldown": 300,
                        "AvailabilityZones": [f"{REGION}a"],
                        "HealthCheckType": "EC2",
                        "CreatedTime": NOW,
                        "LaunchTemplate": {
                            "LaunchTemplateId": template,
                            "LaunchTemplateName": "forge-cloud",
                            "Version": "3",
                        },
                        "Instances": [member(old, "2"), member(new, "3")],
                        "Tags": [
                            {"Key": "gpuforge:cluster", "Value": "forge"},
                            {"Key": "gpuforge:node-group", "Value": "cloud"},
                        ],
                    }
                ]
            },
            {"Filters": [{"Name": "tag:gpuforge:cluster", "Values": ["forge"]}]},
        )
        ec2_stub.add_response(
            "describe_instances",
            {"Reservations": [{"Instances": [{"InstanceId": i, "ImageId": ami} for i in (old, new)]}]},
            {"InstanceIds": [old, new]},
        )
        ec2_stub.add_response(
            "describe_launch_template_versions",
            {
                "LaunchTemplateVersions": [
                    {
                        "LaunchTemplateId": template,
                        "VersionNumber": 3,
                        "LaunchTemplateData": {"ImageId": ami, "UserData": "bmV3"},
                    }
                ]
            },
            {"LaunchTemplateId": template, "Versions": ["3"], "ResolveAlias": True},
        )
        config = LifecycleConfig.from_dict(
            {
                "cluster": "forge",
                "region": REGION,
                "groups": {"cloud": {"partitions": ["cloud"], "instance_type": "g5.12xlarge"}},
            }
        )
        groups = read_groups(config, autoscaling, ec2)
    asg = groups["cloud"]
    assert asg.image_id == ami and asg.template_version == "3"
    nodes = {node_name("cloud", i): _idle(node_name("cloud", i)) for i in (old, new)}
    decision = decide(config, nodes, [], groups, NOW)
    assert decision.actions == [
        Drain(node_name("cloud", old), f"gpuforge rolling update: launch template {template} v2 -> {template} v3")
    ]


def test_without_version_numbers_the_ami_decides() -> None:
    """$Latest/$Default or no version in the answer: the AMI comparison still finds outdated instances."""
    asg = AutoScalingGroup("g", "cloud", 1, 1, 1, (), image_id="ami-new", template_id="lt-1", template_version=None)
    assert asg.outdated(Instance("i-1", "InService", "ami-old", "lt-1", "$Latest")) == "image ami-old -> ami-new"
    assert asg.outdated(Instance("i-2", "InService", "ami-new", "lt-1", "$Latest")) is None


def test_a_botocore_without_resolve_alias_still_reads_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian 12's python3-botocore (1.29, what the controller runs) predates ResolveAlias and refuses any
    call naming it (the booted test's first run with it: every cycle failed). The parameter is left out
    where the model lacks it; a resolve:ssm: image then reads as unknown and the version decides."""
    from botocore.exceptions import ParamValidationError  # type: ignore[import-untyped,unused-ignore]
    from botocore.stub import Stubber  # type: ignore[import-untyped,unused-ignore]

    from gpuforge.nodes.lifecycle import _template

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    ec2 = boto3.client("ec2", region_name=REGION)
    shape = ec2.meta.service_model.operation_model("DescribeLaunchTemplateVersions").input_shape
    monkeypatch.delitem(shape.members, "ResolveAlias")  # the older model, as Debian's botocore has it
    with pytest.raises(ParamValidationError):
        ec2.describe_launch_template_versions(LaunchTemplateId="lt-0123456789abcdef0", ResolveAlias=True)
    template = "lt-0123456789abcdef0"
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_launch_template_versions",
            {
                "LaunchTemplateVersions": [
                    {
                        "LaunchTemplateId": template,
                        "VersionNumber": 4,
                        "LaunchTemplateData": {"ImageId": "resolve:ssm:/x"},
                    }
                ]
            },
            {"LaunchTemplateId": template, "Versions": ["4"]},
        )
        assert _template(ec2, {"LaunchTemplateId": template, "Version": "4"}) == (None, "4")
