"""Offline plan: run the real Pulumi program under Pulumi's mock monitor.

No CLI, no credentials, no provider plugins: the SDK's MockMonitor stands in for the
engine, and a recording subclass keeps what a reviewer needs from every registration
(type, name, parent, inputs, protect). The spec is resolved first, so a bad spec raises
SpecError before any resource is declared.
"""

from __future__ import annotations

import hashlib
import json
import runpy
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.runtime import mocks, rpc, settings
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from gpuforge.assets import ASSETS_DIR
from gpuforge.plan.cost import estimate_cost
from gpuforge.plan.model import COMPUTED, SECRET, Plan, PlanResource
from gpuforge.plan.policy_check import check_plan
from gpuforge.plan.secrets import stack_secrets
from gpuforge.plan.stacks import Project, StackFile, load_stack, project_of
from gpuforge.plan.summary import summarize
from gpuforge.plan.validation import check_stack
from gpuforge.spec.config_keys import NAMESPACE, SECRET_KEYS
from gpuforge.spec.errors import SpecError
from gpuforge.spec.monitoring import declared_secrets

PROJECT = "gpuforge"
MOCK_ACCOUNT = "123456789012"
# Resource type -> (output holding the secret, the mock value's prefix). tests/slurm checks that these
# values appear nowhere in a plan, its Markdown, the stack outputs or user data.
MOCK_SECRET_PREFIX = "gpuforge-mock-secret"
MOCK_SECRETS = {
    "random:index/randomPassword:RandomPassword": ("result", MOCK_SECRET_PREFIX),
    "random:index/randomBytes:RandomBytes": ("base64", MOCK_SECRET_PREFIX),
}


class _Mocks(mocks.Mocks):
    """Ids and the few computed attributes that downstream inputs and outputs read."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        service = args.typ.split(":")[1].split("/")[0] if args.typ.count(":") == 2 else "index"
        state.setdefault("arn", f"arn:aws:{service}:mock:{MOCK_ACCOUNT}:{args.name}")
        state.setdefault("name", args.name)
        if args.typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", args.name)
        elif args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(dnsName=f"{args.name}.fsx.mock.amazonaws.com", mountName="mockmnt")
        elif args.typ == "aws:efs/fileSystem:FileSystem":
            # An id of EFS's form (fs- and 17 hex digits), which the EFS mount helper a node's user data calls
            # insists on, and EFS's documented name, <file-system-id>.efs.<region>.amazonaws.com.
            file_system_id = "fs-" + hashlib.sha256(args.name.encode()).hexdigest()[:17]
            state.update(dnsName=f"{file_system_id}.efs.mock.amazonaws.com")
            return file_system_id, state
        elif args.typ in MOCK_SECRETS:
            # Generated secrets get a recognisable value, so a test can prove none reaches any output.
            field, value = MOCK_SECRETS[args.typ]
            state[field] = f"{value}-{args.name}"
        elif args.typ == "aws:kms/key:Key":
            state.setdefault("keyId", f"{args.name}-key-id")
        elif args.typ == "aws:eks/cluster:Cluster":
            # What the kubeconfig, the OIDC provider and the node groups read off a cluster.
            state.update(
                endpoint=f"https://{args.name}.eks.mock.amazonaws.com",
                certificateAuthority={"data": "bW9jaw=="},
                identities=[{"oidcs": [{"issuer": f"https://oidc.eks.mock.amazonaws.com/id/{args.name}"}]}],
                vpcConfig={**dict(state.get("vpcConfig") or {}), "clusterSecurityGroupId": f"{args.name}-cluster-sg"},
            )
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # An empty failure list, not None: the SDK's mock monitor iterates it.
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": MOCK_ACCOUNT, "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/mock", "userId": "mock"}, []
        if args.token == "aws:iam/getSessionContext:getSessionContext":
            # The deployer's IAM identity behind its session (an assumed role's role ARN).
            return {"arn": args.args.get("arn"), "issuerArn": f"arn:aws:iam::{MOCK_ACCOUNT}:role/mock-deployer"}, []
        return {}, []


class _RecordingMonitor(mocks.MockMonitor):
    def __init__(self) -> None:
        super().__init__(_Mocks())
        self.recorded: dict[str, PlanResource] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.recorded[response.urn] = PlanResource(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                inputs=_plain(rpc.deserialize_properties(request.object)),
                protect=bool(request.protect),
                custom=bool(request.custom),
                retain_on_delete=bool(request.retainOnDelete),
                dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                depends_on=sorted(request.dependencies),
                # A provider reference is "<urn>::<id>".
                provider=request.provider.rsplit("::", 1)[0] if request.provider else None,
                aliases=[a.spec.name for a in request.aliases if a.HasField("spec") and a.spec.name],
                ignore_changes=list(request.ignoreChanges),
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if request.urn in self.recorded:
            self.recorded[request.urn].outputs = _plain(rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)


def _plain(value: Any) -> Any:
    """JSON-ready values. The wire format carries every number as a double, so integral
    floats become ints again (count 64, not 64.0). A secret is never written out: its value never
    reaches the plan (JSON, Markdown, console, policy messages)."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Unknown):
        return COMPUTED
    if isinstance(value, pulumi.asset.AssetArchive):
        return {"assetArchive": {str(k): _plain(v) for k, v in sorted(value.assets.items())}}
    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        return {type(value).__name__[0].lower() + type(value).__name__[1:]: _project_path(value.path)}
    return str(value)


def _project_path(path: str) -> str:
    """Paths of gpuforge's own assets relative to where they live (gpuforge/assets/playbooks/...,
    gpuforge/assets/templates/...), so
    plans compare across checkouts and installs."""
    try:
        return Path(path).resolve().relative_to(ASSETS_DIR.resolve()).as_posix()
    except ValueError:
        return path


def _offline_runtime(monitor: _RecordingMonitor, stack: str) -> None:
    """Point the SDK at the recording mock monitor, with a fresh root stack per plan."""
    settings.ROOT.set(None)
    mocks.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor)
    # Every registration walks the whole Python stack and reads source lines to tell the
    # engine where a resource was declared; the mock monitor throws that away, so offline
    # there is nothing to collect. (Private SDK hook: skipped if a release renames it.)
    if hasattr(sdk_resource, "_get_stack_trace"):
        sdk_resource._get_stack_trace = _no_stack_trace


def offline_config(config: dict[str, Any], declared: Iterable[str] = ()) -> tuple[dict[str, str], list[str]]:
    """The stack's config as the SDK takes it, and which keys are secret. Offline there is no key to
    decrypt a `{secure: ...}` value, and a plan must not hold one anyway: every secret in the file,
    every secret gpuforge reads and every secret the spec declares is the SECRET placeholder, marked
    secret (a plain string the file gives for a declared secret is kept, still marked secret)."""
    plain = {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in config.items()}
    secure = {k for k, v in config.items() if isinstance(v, dict) and set(v) == {"secure"}}
    wanted = {f"{NAMESPACE}:{k}" for k in (*SECRET_KEYS, *declared)}
    secret_keys = sorted(secure | wanted)
    for key in secret_keys:
        if not isinstance(config.get(key), str):
            plain[key] = SECRET
    return plain, secret_keys


async def _redacted(value: Any) -> Any:
    """Stack outputs resolved, with every secret Output replaced by SECRET (resolving an Output
    drops its secretness, so ask first). Values the mocks leave computed stay Unknown."""
    if isinstance(value, pulumi.Output):
        if await value.is_secret():
            return SECRET
        if not await value.is_known():
            return Unknown()
        return await _redacted(await value.future(with_unknowns=True))
    if isinstance(value, dict):
        return {k: await _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [await _redacted(v) for v in value]
    return value


def _no_stack_trace() -> Any:
    return source_pb2.StackTrace()


def run_program(stack_file: StackFile, program: Path) -> tuple[list[PlanResource], dict[str, Any]]:
    """Evaluate the Pulumi program for one stack under the mock monitor."""
    monitor = _RecordingMonitor()
    _offline_runtime(monitor, stack_file.name)
    # Secrets cannot be decrypted offline, and are often not set on a developer's checkout: the
    # program reads a placeholder, marked secret like the real value.
    config, secret_keys = offline_config(stack_file.config, declared_secrets(stack_file.cluster))
    pulumi.runtime.set_all_config(config, secret_keys=secret_keys)
    exported: dict[str, Any] = {}

    async def evaluate() -> None:
        runpy.run_path(str(program), run_name="__main__")
        root = settings.get_root_resource()
        outputs = getattr(root, "outputs", {})
        exported.update(await _redacted(dict(outputs)))

    try:
        _sync_await(run_pulumi_func(evaluate))
    except pulumi.RunError as error:
        # The program reports a spec problem only the deploy reveals (gpuforge/infra/program.py) as a
        # RunError for the Pulumi CLI; offline, hand back the SpecError it came from (every issue, exit 2).
        if isinstance(error.__context__, SpecError):
            raise error.__context__ from None
        raise
    # Registrations complete in whatever order the RPCs finish: sort so the same stack always
    # gives the same plan (stable JSON, reviewable diffs, golden files).
    return sorted(monitor.recorded.values(), key=lambda r: r.urn), _plain(exported)


def plan_stack(stack: str | Path, project: Project | None = None) -> Plan:
    """Check the stack's spec and policy settings (raises SpecError listing every problem of both),
    then evaluate the project's program offline."""

    stack_file = load_stack(stack, project)
    resolved = check_stack(stack_file).resolved
    resources, outputs = run_program(stack_file, (project or project_of(stack_file)).program)
    prices = resolved.catalog.prices
    cost = estimate_cost(resources, prices) if prices else None
    return Plan(
        stack=stack_file.name,
        placement=resolved.spec.placement.kind,
        resources=resources,
        outputs=outputs,
        summary=replace(summarize(resources), monthly_cost_usd=cost.total if cost else None),
        resolved=resolved,
        cost=cost,
        policy=check_plan(resources, stack_file.config, str(stack_file.path)),
        secrets=stack_secrets(resolved, stack_file.config),
    )
