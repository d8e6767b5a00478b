"""The Slurm control plane on AWS: controller instance(s), accounting database, shared /home, secrets.

- Controllers: EC2 instances at the fixed management-tier addresses the rendered slurm.conf names
  (components/spec/scheduler_checks.py), so configless nodes always find them; IMDSv2, encrypted root.
- Accounting: Amazon RDS for MariaDB (encrypted with the cluster key, automated backups, Multi-AZ and
  deletion protection in prod), reachable from the management tier only.
- /home: Amazon EFS (encrypted, AWS Backup policy on), mount targets in every AZ's storage subnet,
  NFS from the compute and management tiers; the backup controller's state directory lives on it too.
- Secrets: the munge key and the database password are generated here (pulumi_random, secret
  outputs) and stored in AWS Secrets Manager; node roles may read them. They never reach user data,
  outputs or the plan: only the secrets' names do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from components.catalog.models import SlurmPorts
from components.spec import ResolvedSpec
from components.spec.models import UBUNTU_2404_SSM, Tier
from components.spec.scheduler_checks import ResolvedScheduler, secret_names

from .iam import assume_role_policy, lifecycle_policy, secret_read_policy
from .instance import hardened_instance
from .storage import stateful

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
MARIADB_VERSION = "10.11"
MARIADB_PORT, NFS_PORT = 3306, 2049


@dataclass
class SlurmControlPlaneArgs:
    resolved: ResolvedSpec
    scheduler: ResolvedScheduler
    subnet_ids: dict[Tier, dict[str, pulumi.Output[str]]]  # tier -> AZ -> subnet id
    security_group_ids: dict[str, pulumi.Output[str]]
    kms_key_arn: pulumi.Input[str]
    node_role_names: dict[str, pulumi.Input[str]] = field(default_factory=dict)  # node group -> its role
    tags: dict[str, str] = field(default_factory=dict)


class SlurmControlPlane(pulumi.ComponentResource):
    database_endpoint: pulumi.Output[str]
    home_file_system_id: pulumi.Output[str]
    secret_arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: SlurmControlPlaneArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec, sched = args.resolved.spec, args.scheduler
        super().__init__("gpuforge:aws:SlurmControlPlane", name, {"controllers": len(sched.controllers)}, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = stateful(child, spec.protected)
        sg = args.security_group_ids

        self._rules(name, sg, args.resolved.catalog.slurm.ports, child)
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
            db_name="slurm_acct_db",
            username="slurm",
            password=self._password.result,
            db_subnet_group_name=db_subnets.name,
            vpc_security_group_ids=[sg["management"]],
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

        # /home (and the shared controller state) on EFS, a mount target in every AZ.
        home = aws.efs.FileSystem(
            f"{name}-home",
            encrypted=True,
            kms_key_id=args.kms_key_arn,
            performance_mode="generalPurpose",
            throughput_mode="elastic",
            tags={"Name": f"{spec.name}-home"},
            opts=keep,
        )
        aws.efs.BackupPolicy(
            f"{name}-home-backup",
            file_system_id=home.id,
            backup_policy=aws.efs.BackupPolicyBackupPolicyArgs(status="ENABLED"),
            opts=child,
        )
        for az, subnet in sorted(args.subnet_ids["storage"].items()):
            aws.efs.MountTarget(
                f"{name}-home-{az}", file_system_id=home.id, subnet_id=subnet, security_groups=[sg["storage"]],
                opts=child,
            )
        self.home_file_system_id = home.id

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
                vpc_security_group_ids=[sg["management"]],
                associate_public_ip_address=False,
                disable_api_termination=spec.protected,
                tags={**args.tags, "Name": controller.name, "gpuforge:slurm-role": "controller"},
                opts=keep,
            )
        self.register_outputs(
            {
                "databaseEndpoint": self.database_endpoint,
                "homeFileSystem": self.home_file_system_id,
                "secretArns": self.secret_arns,
            }
        )

    def _secrets(
        self, name: str, cluster: str, args: SlurmControlPlaneArgs, keep: pulumi.ResourceOptions
    ) -> dict[str, aws.secretsmanager.Secret]:
        """The munge key (1024 random bytes, base64) and the database password, generated here as secret
        outputs and kept in Secrets Manager under the names the rendered configuration points nodes to."""
        child = pulumi.ResourceOptions(parent=self)
        munge = random.RandomBytes(f"{name}-munge-key", length=1024, opts=child)
        self._password = random.RandomPassword(f"{name}-db-password", length=32, special=False, opts=child)
        values = {"munge_key": munge.base64, "db_password": self._password.result}
        secrets = {}
        for key, secret_name in secret_names(cluster).items():
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

    @staticmethod
    def _rules(name: str, sg: dict[str, pulumi.Output[str]], ports: SlurmPorts, child: pulumi.ResourceOptions) -> None:
        """Slurm's ports (the catalog's, which slurm.conf names too): nodes and clients reach slurmctld, the
        controller reaches slurmd, slurmdbd and the database stay in the management tier, compute nodes call
        srun back on login nodes (SrunPortRange), NFS to EFS."""
        slurmctld, slurmd, srun = (ports.slurmctld, ports.slurmctld), (ports.slurmd, ports.slurmd), ports.srun

        def allow(rule: str, group: str, source: str, ports: tuple[int, int], why: str) -> None:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{group}-in-{rule}",
                security_group_id=sg[group],
                referenced_security_group_id=sg[source],
                ip_protocol="tcp",
                from_port=ports[0],
                to_port=ports[1],
                description=why,
                opts=child,
            )

        allow("slurmctld-compute", "management", "compute", slurmctld, "slurmd to slurmctld")
        allow("slurm-management", "management", "management", (ports.slurmctld, ports.slurmdbd),
              "clients, backup controller and slurmdbd")
        allow("mariadb", "management", "management", (MARIADB_PORT, MARIADB_PORT), "slurmdbd to its database")
        allow("srun", "management", "compute", srun, "compute nodes to srun on login nodes")
        allow("slurmd", "compute", "management", slurmd, "slurmctld and srun to slurmd")
        allow("srun-steps", "compute", "management", srun, "srun I/O from login nodes to job steps")
        for client in ("compute", "management"):
            allow(f"nfs-{client}", "storage", client, (NFS_PORT, NFS_PORT), f"/home (EFS) from the {client} tier")

    def _secret_readers(self, name: str, args: SlurmControlPlaneArgs, child: pulumi.ResourceOptions) -> aws.iam.Role:
        """The controller's role reads both secrets; node roles read the munge key only."""
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
        munge_only = policy([self.secret_arns["munge_key"]])
        for group, reader in sorted(args.node_role_names.items()):
            # A renamed group (renamed_from) keeps its policy: the old name becomes an alias.
            old = args.resolved.spec.node_groups[group].renamed_from
            aliases = [pulumi.Alias(name=f"{name}-{old}-munge")] if old else None
            aws.iam.RolePolicy(f"{name}-{group}-munge", role=reader, policy=munge_only,
                               opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=aliases)))
        return role
