"""`gpuforge preflight STACK`: what would make `pulumi up` fail, asked of AWS before it runs (issue 12).

With the deployer's AWS credentials, for every node group of the stack:

- its capacity reservation or Capacity Block (EC2 DescribeCapacityReservations): found, of the
  group's instance type, in its availability zone, active (a block may still be scheduled), and
  holding count + spares; a block's window as AWS has it against the spec's, and not over;
- the On-Demand vCPU quota of its instance family (Service Quotas, service ec2, codes in
  data/aws_wiring.yaml on_demand_quotas) against the vCPUs the plan launches plus those running
  outside the stack's node groups (after a deploy the plan's own instances run: counted once, as planned);
- its image: a fixed AMI id or the AMI an SSM parameter names exists in the region (EC2
  DescribeImages, SSM GetParameter);

and, for the account, EC2 Auto Scaling's service-linked role, which the cluster key's policy names: present when
`placement.autoscaling_service_linked_role` is `existing`, absent (or this stack's) when it is `create` (IAM GetRole).

Every finding names the spec's field path and the fix. An API the credentials may not call, or a
stand-in does not implement, is reported as unchecked, never as passed.

moto (the tests' stand-in, moto 5.2.5) does not implement DescribeCapacityReservations,
GetAWSDefaultServiceQuota nor any EC2 quota in GetServiceQuota (only service code vpc), and holds
no public SSM parameters such as the Deep Learning AMI's: each check says "unchecked" with the
reason when its API is missing or refuses, so a partial stand-in never reads as a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from botocore.exceptions import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
    BotoCoreError,
    ClientError,
)

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.nodes.inventory import CLUSTER_TAG, NODE_GROUP_TAG
from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.spec import ResolvedNodeGroup, ResolvedSpec
from gpuforge.spec.paths import NODE_GROUPS

Kind = Literal["problem", "unchecked"]
# What an AWS call may answer instead of data: a refusal (ClientError), no credentials or endpoint
# (BotoCoreError), or an action a stand-in lacks (moto raises NotImplementedError).
AWS_REFUSALS = (ClientError, BotoCoreError, NotImplementedError)
# Reservation states AWS reports (EC2 API CapacityReservation.State). A block is "scheduled" or
# "payment-pending" before its start; expired, cancelled and failed ones launch nothing.
USABLE_STATES = {"active"}
UPCOMING_BLOCK_STATES = {"scheduled", "payment-pending", "pending", "assessing"}


@dataclass(frozen=True)
class Finding:
    path: str
    message: str
    fix: str
    kind: Kind = "problem"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


@dataclass
class PreflightReport:
    stack: str
    region: str
    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # what was asked of AWS and answered
    identity: str = ""  # the caller's ARN (STS GetCallerIdentity), "" when there are no usable credentials

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "problem"]

    @property
    def unchecked(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "unchecked"]

    @property
    def nothing_checked(self) -> str | None:
        """Why no check was answered, said once (None when one was): no usable credentials, or AWS refused
        every call the credentials made. A preflight that checked nothing is not a pass."""
        if self.checked or not self.unchecked:
            return None
        if not self.identity:
            return f"no usable AWS credentials ({self.unchecked[0].message})"
        return (
            f"AWS answered none of the {len(self.unchecked)} checks for {self.identity}: it lacks the permissions "
            "each line names"
        )

    @property
    def ok(self) -> bool:
        return not self.problems and self.nothing_checked is None

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "region": self.region,
            "ok": self.ok,
            "nothing_checked": self.nothing_checked,
            "identity": self.identity,
            "problems": [asdict(f) for f in self.problems],
            "unchecked": [asdict(f) for f in self.unchecked],
            "checked": self.checked,
        }


@dataclass(frozen=True)
class AwsClients:
    """boto3 clients of the stack's region (a session's, or moto's in tests)."""

    ec2: Any
    service_quotas: Any
    ssm: Any
    iam: Any = None  # global: the account's service-linked roles
    sts: Any = None  # who the credentials are; None: not asked (a client built for one API)

    @classmethod
    def for_region(cls, region: str, session: Any = None) -> AwsClients:
        import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]

        session = session or boto3.session.Session()
        return cls(
            session.client("ec2", region_name=region),
            session.client("service-quotas", region_name=region),
            session.client("ssm", region_name=region),
            iam=session.client("iam", region_name=region),
            sts=session.client("sts", region_name=region),
        )


def preflight(
    resolved: ResolvedSpec, clients: AwsClients, stack: str = "", now: datetime | None = None
) -> PreflightReport:
    """Every finding for the stack's AWS node groups; the report lists what was checked."""
    now = now or datetime.now(UTC)
    report = PreflightReport(stack, resolved.spec.region or "")
    groups = resolved.node_groups
    for name, group in groups.items():
        report.findings += check_block_start(name, group, now)
    if clients.sts is not None:
        # GetCallerIdentity needs no permission: when it fails the credentials are missing or invalid, and
        # that is said once instead of as a missing permission on every check.
        answer, failure = call_aws(clients.sts.get_caller_identity)
        if failure is not None:
            report.findings.append(Finding("aws", failure, CREDENTIALS_FIX, "unchecked"))
            return report
        report.identity = str(answer.get("Arn", ""))
    report.findings += check_reservations(groups, clients.ec2, now, report.checked)
    for name, group in groups.items():
        report.findings += check_image(name, group, clients, report.checked)
    report.findings += check_quotas(groups, clients, report.checked, resolved.spec.name)
    if clients.iam is not None:
        report.findings += check_autoscaling_role(resolved, clients.iam, report.checked)
    return report


# --- the key policy's principals ---------------------------------------------------------------------------


def check_autoscaling_role(resolved: ResolvedSpec, iam: Any, checked: list[str]) -> list[Finding]:
    """The cluster key's policy names EC2 Auto Scaling's service-linked role, which KMS requires to exist
    (MalformedPolicyDocumentException otherwise): with `existing` it must be there; with `create` it must not be
    there already, unless this stack made it (its gpuforge:cluster tag), or CreateServiceLinkedRole fails."""
    path = "cluster.placement.autoscaling_service_linked_role"
    mode = getattr(resolved.spec.placement, "autoscaling_service_linked_role", "create")
    role_path = load_aws_wiring().service_linked_roles["autoscaling"].path
    role_name = role_path.rsplit("/", 1)[-1]
    answer, failure = call_aws(lambda: iam.get_role(RoleName=role_name))
    if failure is not None and not failure.startswith("NoSuchEntity"):
        return [Finding(path, f"could not read the role {role_name}: {failure}",
                        "allow iam:GetRole to the deployer, or check the role in the IAM console", "unchecked")]
    checked.append(f"IAM role {role_name}")
    exists = answer is not None
    if mode == "existing" and not exists:
        return [Finding(path, f"existing: this account has no {role_name}, which the cluster key's policy names "
                        "(KMS refuses the key: MalformedPolicyDocumentException)",
                        "set autoscaling_service_linked_role: create, or run `aws iam create-service-linked-role "
                        "--aws-service-name autoscaling.amazonaws.com` once for the account")]
    if mode == "create" and exists:
        tags = {t["Key"]: t["Value"] for t in (answer.get("Role", {}).get("Tags") or [])}
        if tags.get(CLUSTER_TAG) != resolved.spec.name:
            owner = tags.get(CLUSTER_TAG)
            return [Finding(path, f"create: {role_name} exists already in this account"
                            + (f" (created by the stack of cluster {owner})" if owner else "")
                            + "; CreateServiceLinkedRole would fail",
                            "set autoscaling_service_linked_role: existing (the key's policy names the role as it "
                            "is), or adopt it with `pulumi import aws:iam/serviceLinkedRole:ServiceLinkedRole "
                            f"<cluster>-autoscaling-role arn:aws:iam::<account>:role/{role_path}`")]
    return []


CREDENTIALS_FIX = (
    "sign in first (aws configure, aws sso login, or AWS_PROFILE / AWS_ACCESS_KEY_ID for the account that "
    "deploys), then rerun"
)

# --- reservations and blocks -------------------------------------------------------------------------------


def check_reservations(
    groups: dict[str, ResolvedNodeGroup], ec2: Any, now: datetime, checked: list[str]
) -> list[Finding]:
    """Each reservation or Capacity Block once, against every group that launches into it: its type, AZ,
    state and window per group, and the groups' count + spares together against its size."""
    sharing: dict[str, dict[str, ResolvedNodeGroup]] = {}
    for name, group in groups.items():
        if group.spec.reservation is not None:
            sharing.setdefault(group.spec.reservation.reservation_id, {})[name] = group
    findings: list[Finding] = []
    for rid, members in sharing.items():
        findings += _check_reservation(rid, members, ec2, now, checked)
    return findings


def _check_reservation(
    rid: str, members: dict[str, ResolvedNodeGroup], ec2: Any, now: datetime, checked: list[str]
) -> list[Finding]:
    path = NODE_GROUPS.key(next(iter(members))).field("capacity", "reservation_id")
    answer, failure = call_aws(lambda: ec2.describe_capacity_reservations(CapacityReservationIds=[rid]))
    if failure is not None:
        if failure.startswith("InvalidCapacityReservationId"):
            return [
                Finding(
                    path,
                    f"{rid} does not exist in {_region(ec2)} ({failure})",
                    "name a reservation of this account and region (aws ec2 describe-capacity-reservations)",
                )
            ]
        return [Finding(path, f"could not read {rid}: {failure}",
                        "grant ec2:DescribeCapacityReservations to the deployer, then rerun", "unchecked")]
    found = (answer or {}).get("CapacityReservations") or []
    if not found:
        return [Finding(path, f"{rid} was not returned by AWS", "name a reservation of this account and region")]
    checked.append(f"reservation {rid} ({', '.join(members)})")
    findings: list[Finding] = []
    for name, group in members.items():
        findings += _reservation_findings(NODE_GROUPS.key(name), group, found[0], now)
    return findings + _reservation_size(rid, members, found[0])


def _reservation_size(rid: str, members: dict[str, ResolvedNodeGroup], cr: dict[str, Any]) -> list[Finding]:
    total = int(cr.get("TotalInstanceCount") or 0)
    last = NODE_GROUPS.key(list(members)[-1])
    findings: list[Finding] = []
    stated: set[int] = {
        count for g in members.values() if (count := getattr(g.spec.capacity, "instance_count", None)) is not None
    }
    if total and stated and stated != {total}:
        findings.append(Finding(
            f"{last}.capacity.instance_count",
            f"the spec says {rid} holds {', '.join(map(str, sorted(stated)))} instances, AWS says {total}",
            f"set capacity.instance_count: {total}",
        ))
    planned = sum(g.spec.total_nodes for g in members.values())
    if not total or planned <= total:
        return findings
    if len(members) == 1:
        spec = next(iter(members.values())).spec
        what = f"count + spares ({spec.count} + {spec.spares} = {planned})"
    else:
        parts = " + ".join(f"{n} {g.spec.count}+{g.spec.spares}" for n, g in members.items())
        what = f"count + spares of the groups on it ({parts} = {planned})"
    return [*findings, Finding(
        f"{last}.count",
        f"{what} exceed {rid}'s {total} instances",
        f"lower count + spares to {total}, or grow the reservation (aws ec2 modify-capacity-reservation "
        f"--capacity-reservation-id {rid} --instance-count {planned})",
    )]


def _reservation_findings(path: str, group: ResolvedNodeGroup, cr: dict[str, Any], now: datetime) -> list[Finding]:
    spec = group.spec
    capacity = spec.capacity
    rid = getattr(capacity, "reservation_id", "")
    block = capacity.type == "capacity_block"
    findings: list[Finding] = []
    kind = cr.get("InstanceType")
    if kind and kind != spec.instance_type:
        findings.append(Finding(
            f"{path}.instance_type",
            f"{rid} holds {kind}, the group launches {spec.instance_type}: launches outside its type are refused",
            f"set instance_type: {kind}, or name a reservation of {spec.instance_type}",
        ))
    az = cr.get("AvailabilityZone")
    if az and spec.availability_zone and az != spec.availability_zone:
        findings.append(Finding(
            f"{path}.availability_zone",
            f"{rid} is in {az}, the group is pinned to {spec.availability_zone}",
            f"set availability_zone: {az}",
        ))
    state = str(cr.get("State") or "")
    usable = USABLE_STATES | (UPCOMING_BLOCK_STATES if block else set())
    if state and state not in usable:
        findings.append(Finding(
            f"{path}.capacity.reservation_id",
            f"{rid} is {state}: nothing launches into it",
            "buy a new block and name it" if block else "name an active reservation, or use capacity: on_demand",
        ))
    if block:
        findings += _block_window(path, capacity, cr, now)
    return findings


def check_block_start(name: str, group: ResolvedNodeGroup, now: datetime) -> list[Finding]:
    """A Capacity Block that has started, at deploy: the group's block-start scheduled action lies in the
    past, and "if you try to schedule your action in the past, Amazon EC2 Auto Scaling returns an error
    message" (EC2 Auto Scaling API Reference, PutScheduledUpdateGroupAction). From the spec alone, so it
    holds where DescribeCapacityReservations cannot be asked; an ended block is _block_window's finding."""
    block = group.spec.capacity
    if block.type != "capacity_block" or not block.start <= now < block.end:
        return []
    return [
        Finding(
            NODE_GROUPS.key(name).field("capacity", "start"),
            f"the block started {block.start.isoformat()}: a deploy that creates the group's block-start "
            "scheduled action (gpuforge-block-start) fails, AWS refuses a scheduled action in the past",
            f"deploy the group before its block starts (by {block.start.isoformat()}); a redeploy that "
            "leaves the group and its scheduled actions as they are does not create the action and is not affected",
        )
    ]


def _block_window(path: str, block: Any, cr: dict[str, Any], now: datetime) -> list[Finding]:
    findings: list[Finding] = []
    for field_name, key in (("start", "StartDate"), ("end", "EndDate")):
        actual = cr.get(key)
        if isinstance(actual, datetime) and actual.astimezone(UTC) != getattr(block, field_name).astimezone(UTC):
            findings.append(Finding(
                f"{path}.capacity.{field_name}",
                f"the spec says {getattr(block, field_name).isoformat()}, AWS says {actual.isoformat()}",
                f"set {field_name}: {actual.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}",
            ))
    reported = cr.get("EndDate")
    end: datetime = reported if isinstance(reported, datetime) else block.end
    if end <= now:
        findings.append(Finding(
            f"{path}.capacity.end",
            f"the block ended {end.isoformat()}",
            "buy a new Capacity Block and name it, or move the group to another capacity source",
        ))
    return findings


# --- quotas ------------------------------------------------------------------------------------------------


def check_quotas(
    groups: dict[str, ResolvedNodeGroup], clients: AwsClients, checked: list[str], cluster: str
) -> list[Finding]:
    """On-Demand vCPUs per quota: what the plan launches at most + what already runs vs the quota.

    What runs already leaves out the stack's own node groups (instances tagged with *cluster* and one of
    its groups): the plan counts them at their most, so a redeploy does not count them twice.
    Reservations count against On-Demand quotas (their instances are On-Demand instances); spot and
    Capacity Block instances do not (they have their own limits)."""
    quotas = load_aws_wiring().on_demand_quotas
    needed: dict[str, tuple[int, list[str]]] = {}
    findings: list[Finding] = []
    for name, group in groups.items():
        if group.spec.capacity.type in ("spot", "capacity_block"):
            continue
        quota = quotas.for_type(group.spec.instance_type)
        if quota is None:
            findings.append(Finding(NODE_GROUPS.key(name).field("instance_type"),
                                    f"no On-Demand quota known for {group.spec.instance_type}",
                                    "add its family to data/aws_wiring.yaml on_demand_quotas", "unchecked"))
            continue
        vcpus, names = needed.get(quota.code, (0, []))
        needed[quota.code] = (vcpus + group.spec.total_nodes * group.instance.vcpus, [*names, name])
    by_code = {q.code: q for q in quotas.quotas}
    for code, (vcpus, names) in needed.items():
        quota = by_code[code]
        first = NODE_GROUPS.key(names[0]).field("instance_type")
        answer, failure = call_aws(partial(clients.service_quotas.get_service_quota, ServiceCode="ec2", QuotaCode=code))
        if failure is not None:
            findings.append(Finding(first, f"could not read the quota {quota.name} ({code}): {failure}",
                                    "grant servicequotas:GetServiceQuota to the deployer, then rerun", "unchecked"))
            continue
        limit = int(float(answer["Quota"]["Value"]))
        running, failure = _running_vcpus(clients.ec2, code, groups, cluster)
        if failure is not None:
            findings.append(Finding(first, f"could not count running instances: {failure}",
                                    "grant ec2:DescribeInstances to the deployer, then rerun", "unchecked"))
            continue
        checked.append(f"quota {code} ({quota.name}): {limit} vCPUs, {running} running, {vcpus} planned")
        if running + vcpus > limit:
            findings.append(Finding(
                first,
                f"{quota.name} ({code}) allows {limit} vCPUs in the region; {running} run already and the plan "
                f"launches up to {vcpus} ({', '.join(names)})",
                f"request {running + vcpus} vCPUs (aws service-quotas request-service-quota-increase "
                f"--service-code ec2 --quota-code {code} --desired-value {running + vcpus}), or plan fewer nodes",
            ))
    return findings


def _running_vcpus(
    ec2: Any, code: str, groups: dict[str, ResolvedNodeGroup], cluster: str
) -> tuple[int, str | None]:
    """vCPUs of pending or running instances counted against quota `code` in the region, other than the
    stack's own node groups' (from the instance's CpuOptions, else the catalog, else the instance type's
    EC2 description)."""
    quotas = load_aws_wiring().on_demand_quotas
    known = {g.spec.instance_type: g.instance.vcpus for g in groups.values()}
    total = 0
    try:
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )
        for page in pages:
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    kind = str(instance.get("InstanceType", ""))
                    quota = quotas.for_type(kind)
                    if quota is None or quota.code != code or instance.get("InstanceLifecycle") == "spot":
                        continue
                    tags = {t.get("Key"): t.get("Value") for t in instance.get("Tags", [])}
                    if tags.get(CLUSTER_TAG) == cluster and tags.get(NODE_GROUP_TAG) in groups:
                        continue  # the plan's own: counted in what it launches
                    total += _vcpus(instance, kind, known, ec2)
    except AWS_REFUSALS as exc:  # reported as unchecked, not raised
        return 0, _reason(exc)
    return total, None


def _vcpus(instance: dict[str, Any], kind: str, known: dict[str, int], ec2: Any) -> int:
    cpu = instance.get("CpuOptions") or {}
    if cpu.get("CoreCount") and cpu.get("ThreadsPerCore"):
        return int(cpu["CoreCount"]) * int(cpu["ThreadsPerCore"])
    if kind in known:
        return known[kind]
    described = ec2.describe_instance_types(InstanceTypes=[kind])["InstanceTypes"]
    return int(described[0]["VCpuInfo"]["DefaultVCpus"]) if described else 0


# --- images ------------------------------------------------------------------------------------------------


def check_image(name: str, group: ResolvedNodeGroup, clients: AwsClients, checked: list[str]) -> list[Finding]:
    """The group's AMI exists in the region. EKS managed groups use EKS's own AMI (ami_type)."""
    spec = group.spec
    if spec.orchestrator == "eks":
        return []
    path = NODE_GROUPS.key(name).field("image")
    image_id = group.image_id
    if image_id.startswith("resolve:ssm:"):
        parameter = image_id.removeprefix("resolve:ssm:")
        answer, failure = call_aws(lambda: clients.ssm.get_parameter(Name=parameter))
        if failure is not None:
            if failure.startswith("ParameterNotFound"):
                return [Finding(f"{path}.ssm_parameter" if not spec.image.pipeline else f"{path}.pipeline",
                                f"the SSM parameter {parameter} does not exist in the region",
                                "run the image pipeline once, or set image.ami_id")]
            return [Finding(path, f"could not read {parameter}: {failure}",
                            "grant ssm:GetParameter to the deployer, then rerun", "unchecked")]
        image_id = str(answer["Parameter"]["Value"])
        where = f"{path} ({parameter} -> {image_id})"
    else:
        where = f"{path}.ami_id"
    answer, failure = call_aws(lambda: clients.ec2.describe_images(ImageIds=[image_id]))
    if failure is not None and not failure.startswith("InvalidAMIID"):
        return [Finding(where, f"could not describe {image_id}: {failure}",
                        "grant ec2:DescribeImages to the deployer, then rerun", "unchecked")]
    images = (answer or {}).get("Images") or []
    if not images:
        return [Finding(where.split(" ", 1)[0] if " " in where else where,
                        f"{image_id} does not exist in {_region(clients.ec2)} (or is not shared with this account)",
                        "copy the AMI to the region (aws ec2 copy-image) or set image.ami_id to one that exists")]
    state = images[0].get("State")
    if state and state != "available":
        return [Finding(where, f"{image_id} is {state}", "wait for it to be available, or pin another AMI")]
    checked.append(f"image {image_id} ({name})")
    return []


# --- helpers -----------------------------------------------------------------------------------------------


def call_aws(request: Callable[[], Any]) -> tuple[Any, str | None]:
    """An AWS call's answer, or why there is none ("Code: message", or the stand-in's gap)."""
    try:
        return request(), None
    except AWS_REFUSALS as exc:  # refusals and unimplemented APIs become findings
        return None, _reason(exc)


def _reason(exc: Exception) -> str:
    error = getattr(exc, "response", {}).get("Error", {}) if hasattr(exc, "response") else {}
    if error:
        return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', '')}".rstrip(": ")
    if isinstance(exc, NotImplementedError):
        return f"not implemented by this endpoint ({exc})"
    return f"{type(exc).__name__}: {exc}"


def _region(client: Any) -> str:
    return str(getattr(getattr(client, "meta", None), "region_name", "") or "the region")


def preflight_stack(stack: str, clients: AwsClients | None = None, now: datetime | None = None) -> PreflightReport:
    """Load and validate a stack (SpecError on a bad spec), then run every check against AWS."""

    stack_file = load_stack(stack)
    resolved = check_stack(stack_file).resolved
    region = resolved.spec.region
    if region is None:  # onprem: no AWS side
        return PreflightReport(str(stack_file.path), "", checked=["no AWS placement: nothing to check"])
    return preflight(resolved, clients or AwsClients.for_region(region), str(stack_file.path), now)
