"""The Slurm control plane on AWS: controller instance(s), accounting database, shared /home, secrets.

- Controllers: EC2 instances at the fixed management-tier addresses the rendered slurm.conf names
  (gpuforge/spec/scheduler_checks.py), so configless nodes always find them, named by their user data as
  slurm.conf names them; IMDSv2, encrypted root; a security group of their own.
- Accounting: Amazon RDS for MariaDB (encrypted with the cluster key, automated backups, Multi-AZ and
  deletion protection in prod), in a security group open to the controllers only.
- Security group rules: one per flow of gpuforge/catalog/data/flows.yaml between the roles the stack has.
- /home: Amazon EFS (encrypted, AWS Backup policy on), mount targets in every AZ's storage subnet,
  NFS from the compute and management tiers, TLS in transit required by the file system's policy (nodes
  mount it with the EFS mount helper, `-o tls`). With a backup controller, a second EFS holds the
  controllers' shared StateSaveLocation (same settings, protected in prod).
- Secrets: the munge key and the database password are generated here (pulumi_random, secret
  outputs) and stored in AWS Secrets Manager; node roles may read them. They never reach user data,
  outputs or the plan: only the secrets' names do. With scheduler.rest_api, the JWT signing key too, which
  only the controllers' role reads; and one ingress rule per allowed range on slurmrestd's port (flows.yaml
  external_flows), recorded on the component (clientRanges) for wiring-flows-security-groups.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.models import SlurmPorts
from gpuforge.catalog.tokens import SLURM_CONTROL_PLANE, SLURM_ROLE_TAG
from gpuforge.render.slurm_rest_api import jwt_secret_name
from gpuforge.render.templates import render
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.models import UBUNTU_2404_SSM, Tier
from gpuforge.spec.monitoring import NodeGroupServer
from gpuforge.spec.resolved_scheduler import ResolvedScheduler
from gpuforge.spec.scheduler_checks import CONTROLLER_NODE_GROUP, secret_names

from .iam import assume_role_policy, lifecycle_policy, secret_read_policy
from .instance import hardened_instance
from .node_group import NODE_GROUP_TAG
from .storage import stateful

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
MARIADB_VERSION = "10.11"
# What an NFS client of an EFS file system may do (EFS's default file system policy grants these to every client).
EFS_CLIENT_ACTIONS = (
    "elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"
)


def transit_encrypted_policy(file_system_arn: str) -> str:
    """An EFS file system policy that refuses every request not made over TLS (`aws:SecureTransport` false:
    a mount without the mount helper's `tls`), so a client that forgets it is refused at the server (EFS User
    Guide, "Enforcing encryption in transit"). An explicit policy replaces EFS's default one, which lets any
    client that reaches a mount target mount, write and act as root: the Allow statement keeps exactly that
    (condition elasticfilesystem:AccessedViaMountTarget, as terraform-aws-modules/terraform-aws-efs main.tf's
    deny_nonsecure_transport does), so nodes mount as they did, with no IAM (`iam` mount option) and no grant
    in their roles. The controller creates users' homes as root: ClientRootAccess stays."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ClientsThroughMountTargets",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": list(EFS_CLIENT_ACTIONS),
                "Resource": file_system_arn,
                "Condition": {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            },
            {
                "Sid": "DenyWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "*",
                "Resource": file_system_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }, sort_keys=True)


@dataclass
class SlurmControlPlaneArgs:
    resolved: ResolvedSpec
    scheduler: ResolvedScheduler
    subnet_ids: dict[Tier, dict[str, pulumi.Output[str]]]  # tier -> AZ -> subnet id
    security_group_ids: dict[str, pulumi.Output[str]]
    kms_key_arn: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


def controller_user_data(hostname: str, controllers: dict[str, str]) -> str:
    """The controller's cloud-config (base64, as launch templates take it): the host name slurm.conf's
    SlurmctldHost, DbdHost and AccountingStorageHost call it by, and every controller's name in /etc/hosts."""
    text = render("cloud-init/controller.yaml.j2", hostname=hostname, controllers=controllers)
    return base64.b64encode(text.encode()).decode()


def flow_roles(resolved: ResolvedSpec) -> set[str]:
    """The roles of gpuforge/catalog/data/flows.yaml this Slurm cluster on AWS has."""
    sched = resolved.scheduler
    assert sched is not None
    roles = {"controller", "home", "database" if sched.database == "managed" else "", "compute" if sched.groups else "",
             "login" if sched.login_groups else "", "lustre" if resolved.spec.storage.parallel_fs else ""}
    monitoring = resolved.spec.monitoring
    if monitoring is not None and isinstance(monitoring.server, NodeGroupServer):
        roles.add("monitoring")
    return roles - {""}


def client_ranges(sched: ResolvedScheduler) -> dict[str, list[str]]:
    """The address ranges each external flow of flows.yaml admits, by the flow's name; only flows turned on."""
    api = sched.spec.rest_api
    return {"rest_api": list(api.allowed_cidrs)} if api.enabled else {}


class SlurmControlPlane(pulumi.ComponentResource):
    database_endpoint: pulumi.Output[str]
    home_file_system_id: pulumi.Output[str]
    home_dns_name: pulumi.Output[str]
    secret_arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: SlurmControlPlaneArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec, sched = args.resolved.spec, args.scheduler
        ports = args.resolved.catalog.slurm.ports
        # The ports and roles the flow rules read (wiring-flows-security-groups), as the stack's catalog has them.
        props = {"controllers": len(sched.controllers), "roles": sorted(flow_roles(args.resolved)),
                 "ports": {"slurmctld": ports.slurmctld, "slurmd": ports.slurmd, "slurmdbd": ports.slurmdbd,
                           "srun": f"{ports.srun[0]}-{ports.srun[1]}"},
                 "clientRanges": client_ranges(sched)}
        super().__init__(SLURM_CONTROL_PLANE, name, props, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = stateful(child, spec.protected)
        self._name = name  # allow_munge_read names its policies after the component
        sg = self._security_groups(name, args, child)
        self._rules(name, sg, args.resolved.catalog.slurm.ports, flow_roles(args.resolved), child)
        self._client_rules(name, sg, client_ranges(sched), child)
        secrets = self._secrets(name, spec.name, args, keep)
        self.secret_arns = {k: s.arn for k, s in secrets.items()}
        controller_role = self._secret_readers(name, args, child)
        self.controller_role_name = controller_role.name  # an SSM-managed instance role (session preferences)

        # Accounting database: subnets of every AZ's management tier.
        db_subnets = aws.rds.SubnetGroup(
            f"{name}-db-subnets", subnet_ids=list(args.subnet_ids["management"].values()), opts=child
        )
        accounting = sched.spec.accounting
        database = aws.rds.Instance(
            f"{name}-db",
            engine="mariadb",
            engine_version=MARIADB_VERSION,
            instance_class=accounting.instance_class,
            allocated_storage=50,
            storage_type="gp3",
            storage_encrypted=True,
            kms_key_id=args.kms_key_arn,
            db_name=args.resolved.catalog.slurm.accounting_database.name,
            username=args.resolved.catalog.slurm.accounting_database.user,
            password=self._password.result,
            db_subnet_group_name=db_subnets.name,
            vpc_security_group_ids=[sg["database"]],
            multi_az=spec.protected,
            backup_retention_period=accounting.backup_retention_days,
            deletion_protection=spec.protected,
            skip_final_snapshot=not spec.protected,
            final_snapshot_identifier=f"{spec.name}-slurmdbd-final" if spec.protected else None,
            copy_tags_to_snapshot=True,
            publicly_accessible=False,
            auto_minor_version_upgrade=True,
            opts=keep,
        )
        self.database_endpoint = database.address

        # /home on EFS, a mount target in every AZ (nodes mount it with the EFS mount helper, over TLS).
        home = self._file_system(f"{name}-home", f"{spec.name}-home", args, keep)
        self.home_file_system_id, self.home_dns_name = home.id, home.dns_name
        # With a backup controller: StateSaveLocation on a file system of its own, mounted by both controllers
        # (slurm.yml; slurmctld requires the mount). Not a directory of /home: users never see slurmctld's
        # state, and its root is slurm's (no EFS access point: the role sets the root's owner once mounted).
        self.state_file_system_id: pulumi.Output[str] | None = None
        self.state_dns_name: pulumi.Output[str] | None = None
        if sched.state_shared:
            state = self._file_system(f"{name}-state", f"{spec.name}-slurmctld-state", args, keep)
            self.state_file_system_id, self.state_dns_name = state.id, state.dns_name

        profile = aws.iam.InstanceProfile(f"{name}-ctl-profile", role=controller_role.name, opts=child)
        for controller in sched.controllers:
            assert controller.availability_zone is not None
            hardened_instance(
                f"{name}-{controller.name}",
                template_name=f"{name}-{controller.name}-lt",
                volume_size=100,
                kms_key_arn=args.kms_key_arn,
                instance_profile_arn=profile.arn,
                # Ubuntu 24.04: its slurmctld (23.11) is one the configuration runs on; 22.04's 21.08 is not.
                image_parameter=UBUNTU_2404_SSM,
                template_opts=child,
                subnet_id=args.subnet_ids["management"][controller.availability_zone],
                private_ip=controller.address,
                instance_type=sched.spec.controller.instance_type,
                user_data=controller_user_data(controller.name, {c.name: c.address for c in sched.controllers}),
                vpc_security_group_ids=[sg["controller"]],
                associate_public_ip_address=False,
                disable_api_termination=spec.protected,
                # gpuforge:node-group: what Prometheus' ec2_sd filter selects (gpuforge/render/monitoring.py),
                # so node_exporter and the Slurm collector on the controllers are scraped.
                tags={**args.tags, "Name": controller.name, SLURM_ROLE_TAG: "controller",
                      NODE_GROUP_TAG: CONTROLLER_NODE_GROUP},
                opts=keep,
            )
        self.register_outputs(self.outputs)

    @property
    def outputs(self) -> dict[str, Any]:
        """The stack outputs of the control plane (the inventory reads them after `pulumi up`)."""
        state = {"stateFileSystem": self.state_file_system_id, "stateDnsName": self.state_dns_name}
        return {
            "databaseEndpoint": self.database_endpoint,
            "homeFileSystem": self.home_file_system_id,
            "homeDnsName": self.home_dns_name,
            **(state if self.state_dns_name is not None else {}),
            "secretArns": self.secret_arns,
        }

    def _file_system(
        self, name: str, tag: str, args: SlurmControlPlaneArgs, keep: pulumi.ResourceOptions
    ) -> aws.efs.FileSystem:
        """An EFS file system: encrypted with the cluster key, elastic throughput, AWS Backup on, protected in
        prod (keep), a mount target in every AZ's storage subnet (NFS from the compute and management tiers),
        and a file system policy that refuses any client not using TLS."""
        child = pulumi.ResourceOptions(parent=self)
        fs = aws.efs.FileSystem(
            name,
            encrypted=True,
            kms_key_id=args.kms_key_arn,
            performance_mode="generalPurpose",
            throughput_mode="elastic",
            tags={"Name": tag},
            opts=keep,
        )
        aws.efs.BackupPolicy(
            f"{name}-backup",
            file_system_id=fs.id,
            backup_policy=aws.efs.BackupPolicyBackupPolicyArgs(status="ENABLED"),
            opts=child,
        )
        aws.efs.FileSystemPolicy(
            f"{name}-policy", file_system_id=fs.id, policy=fs.arn.apply(transit_encrypted_policy), opts=child
        )
        for az, subnet in sorted(args.subnet_ids["storage"].items()):
            aws.efs.MountTarget(
                f"{name}-{az}", file_system_id=fs.id, subnet_id=subnet,
                security_groups=[args.security_group_ids["storage"]], opts=child,
            )
        return fs

    def _secrets(
        self, name: str, cluster: str, args: SlurmControlPlaneArgs, keep: pulumi.ResourceOptions
    ) -> dict[str, aws.secretsmanager.Secret]:
        """The munge key (1024 random bytes, base64) and the database password, generated here as secret
        outputs and kept in Secrets Manager under the names the rendered configuration points nodes to."""
        child = pulumi.ResourceOptions(parent=self)
        munge = random.RandomBytes(f"{name}-munge-key", length=1024, opts=child)
        self._password = random.RandomPassword(f"{name}-db-password", length=32, special=False, opts=child)
        values = {"munge_key": munge.base64, "db_password": self._password.result}
        names = secret_names(cluster)
        if args.scheduler.spec.rest_api.enabled:
            # HS256 signing key: 64 random bytes (RFC 7518 3.2 asks for at least the hash's 256 bits).
            values["jwt_key"] = random.RandomBytes(f"{name}-jwt-key", length=64, opts=child).base64
            names["jwt_key"] = jwt_secret_name(cluster)
        secrets = {}
        for key, secret_name in names.items():
            secret = aws.secretsmanager.Secret(
                f"{name}-{key.replace('_', '-')}",
                name=secret_name,
                kms_key_id=args.kms_key_arn,
                recovery_window_in_days=30 if args.resolved.spec.protected else 0,
                opts=keep,
            )
            aws.secretsmanager.SecretVersion(
                f"{name}-{key.replace('_', '-')}-value",
                secret_id=secret.id,
                secret_string=values[key],  # secret outputs of pulumi_random: never shown
                opts=child,
            )
            secrets[key] = secret
        return secrets

    def _security_groups(
        self, name: str, args: SlurmControlPlaneArgs, child: pulumi.ResourceOptions
    ) -> dict[str, pulumi.Output[str]]:
        """The network's tier groups, plus the two the control plane owns: the controllers' (a rule can then
        name the controllers alone, as a source or a target, apart from the login and monitoring nodes of the
        management tier) and the accounting database's, open to the controllers only (wiring-flows-security-
        groups holds both to the flow model). The controllers leave through NAT for AWS APIs and packages; the
        database needs no egress."""
        vpc_id = args.vpc_id
        controller = aws.ec2.SecurityGroup(
            f"{name}-ctl-sg", vpc_id=vpc_id, description="Slurm controllers: slurmctld and slurmdbd",
            tags={"Name": f"{name}-controllers"}, opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-controller-out-all", security_group_id=controller.id, cidr_ipv4="0.0.0.0/0", ip_protocol="-1",
            description="Egress through NAT and VPC endpoints", opts=child,
        )
        database = aws.ec2.SecurityGroup(
            f"{name}-db-sg", vpc_id=vpc_id, description="Slurm accounting database: MariaDB from the controllers",
            tags={"Name": f"{name}-accounting-db"}, opts=child,
        )
        return {**args.security_group_ids, "controller": controller.id, "database": database.id}

    @staticmethod
    def _rules(
        name: str, sg: dict[str, pulumi.Output[str]], ports: SlurmPorts, roles: set[str], child: pulumi.ResourceOptions
    ) -> None:
        """The ingress rules of every flow between the cluster's roles that the control plane declares
        (gpuforge/catalog/data/flows.yaml; the network declares the rest): on the target role's group, from the
        source role's, on the flow's ports (Slurm's from the stack's catalog, as slurm.conf names them). Flows
        whose two roles share groups share one rule; a role the stack lacks (no monitoring node group) opens
        nothing. wiring-flows-security-groups checks the plan against the same data."""
        model = load_flows()
        declared: dict[str, tuple[str, tuple[int, int]]] = {}
        for flow in model.flows:
            if flow.declared_by != "control_plane" or not {flow.source_role, flow.target_role} <= roles:
                continue
            assert flow.rule is not None  # FlowModel requires it for the control plane's flows
            source = model.roles[flow.source_role].security_group
            group = model.roles[flow.target_role].security_group
            low, high = model.port_range(flow, ports)
            rule_name = f"{name}-{group}-in-{flow.rule}"
            if rule_name in declared:
                if declared[rule_name] != (source, (low, high)):
                    raise ValueError(f"flows.yaml: rule {flow.rule} on {group} names two different openings")
                continue
            declared[rule_name] = (source, (low, high))
            aws.vpc.SecurityGroupIngressRule(
                rule_name,
                security_group_id=sg[group],
                referenced_security_group_id=sg[source],
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"{flow.source_role} to {flow.target_role}: {flow.why}"[:255],
                opts=child,
            )

    @staticmethod
    def _client_rules(
        name: str, sg: dict[str, pulumi.Output[str]], ranges: dict[str, list[str]], child: pulumi.ResourceOptions
    ) -> None:
        """One ingress rule per allowed range of each external flow turned on (slurmrestd from the pipelines'
        networks), on the target role's group, on the flow's port only."""
        model = load_flows()
        for flow_name, cidrs in sorted(ranges.items()):
            flow = model.external(flow_name)
            group = model.roles[flow.target_role].security_group
            low, high = model.ports[flow.ports].ports
            for cidr in cidrs:
                # Named by the range, so taking one out of the list removes its rule and no other.
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-{group}-in-{flow.rule}-{cidr.replace('.', '-').replace('/', '-')}",
                    security_group_id=sg[group],
                    cidr_ipv4=cidr,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"{cidr} to {flow.target_role}: {flow.why}"[:255],
                    opts=child,
                )

    def _secret_readers(self, name: str, args: SlurmControlPlaneArgs, child: pulumi.ResourceOptions) -> aws.iam.Role:
        """The controller's role reads both secrets (node roles: allow_munge_read)."""
        role = aws.iam.Role(f"{name}-ctl-role", assume_role_policy=assume_role_policy("ec2.amazonaws.com"), opts=child)
        aws.iam.RolePolicyAttachment(f"{name}-ctl-ssm", role=role.name, policy_arn=SSM_CORE_POLICY, opts=child)

        def policy(secret_arns: list[pulumi.Output[str]]) -> pulumi.Output[str]:
            return pulumi.Output.all(pulumi.Output.all(*secret_arns), args.kms_key_arn).apply(
                lambda v: json.dumps(secret_read_policy(v[0], v[1]))
            )

        aws.iam.RolePolicy(f"{name}-ctl-secrets", role=role.id, policy=policy(list(self.secret_arns.values())),
                           opts=child)
        # gpuforge-lifecycle (slurm_scaler role): scaling, replacement, rolling updates of this cluster's groups.
        aws.iam.RolePolicy(f"{name}-ctl-lifecycle", role=role.id,
                           policy=json.dumps(lifecycle_policy(args.resolved.spec.name)), opts=child)
        # gpuforge-slurm-topology (topology.conf from EC2 instance topology) reads instances and their
        # network nodes; neither Describe call supports resource-level permissions, hence "*".
        topology_read = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"], "Resource": "*"}]}
        aws.iam.RolePolicy(f"{name}-ctl-topology", role=role.id, policy=json.dumps(topology_read), opts=child)
        self._munge_only = policy([self.secret_arns["munge_key"]])
        return role

    def allow_munge_read(self, resolved: ResolvedSpec, node_role_names: dict[str, pulumi.Input[str]]) -> None:
        """Node roles read the munge key only. Called once the node groups exist: they are declared after
        the control plane, whose /home their user data mounts."""
        child = pulumi.ResourceOptions(parent=self)
        for group, reader in sorted(node_role_names.items()):
            # A renamed group (renamed_from) keeps its policy: the old name becomes an alias.
            old = resolved.spec.node_groups[group].renamed_from
            aliases = [pulumi.Alias(name=f"{self._name}-{old}-munge")] if old else None
            aws.iam.RolePolicy(f"{self._name}-{group}-munge", role=reader, policy=self._munge_only,
                               opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=aliases)))
