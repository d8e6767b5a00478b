"""A Slurm cluster on booted machines, configured only by gpuforge's roles (gpuforge/assets/playbooks/slurm.yml) and the
rendered slurm_config: slurm1 controller (munge, slurmctld, slurmdbd, MariaDB), slurm2 login, slurm3 and
slurm4 static computes, slurm5 a cloud compute that registers itself (slurmd -Z).

What stands in, and why:
- The packages come from Debian 12 (slurm-wlm 22.05.8, munge, mariadb-server), installed once in a
  cached image layer; the roles' apt tasks then find them installed. Services are disabled in the image
  and its packaged MUNGE key removed, so every daemon runs because a role enabled and configured it.
- GPUs: two character devices per compute (/dev/nvidia0-1, NVIDIA's major 195) listed in gres.conf, and
  stand-in nvidia-smi and dcgmi printing recorded outputs, which a test edits to break a node.
- The machines share the host's network namespace (tests/machines): each static slurmd gets its own
  port in slurm.conf (NodeName ... Port=), the cloud node keeps Slurm's default 6818.
- The cloud node's instance metadata: a stand-in IMDSv2 on 127.0.0.1 (tests/standins/imds.py) answers
  the instance id, so slurmd's unit names the node cloud-<instance id> as on EC2 (the role's
  slurm_compute_imds_endpoint points there).
- systemd-nspawn mounts the cgroup v1 controllers read-only; a machine remounts them writable before the
  roles run (a real host's slurmd owns its cgroups), so proctrack/task cgroup confinement runs for real.
- The shared /home: this kernel has no NFS client and there is no file server, so slurm_config.home is a
  site's NFS export at a mount point nothing accesses (HOME_STAND_IN): every machine gets its fstab entry
  and automount unit, and the users' homes are made on each machine's own /home (in production the primary
  controller makes them once, on the shared /home).
- The user's SSH key pair is generated here, up front: its public half is the user's ssh_public_keys in
  slurm_config (slurm_users authorizes it on every machine, where homes are made); a test gives the
  private half to the user on the login machine, as a user brings their own key.
- The MUNGE key and the database password are generated here and delivered as Ansible vault variables,
  the on-premises path of the secret_store role.
- Containers for jobs: enroot, pyxis and NVIDIA's container toolkit come from the stand-in sources of
  tests/standins/containers.py (production names and versions; a pyxis compiled against this Slurm that
  records the image instead of starting a container), installed by the enroot and pyxis roles in the
  same converge.
"""

from __future__ import annotations

import base64
import copy
import errno
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.nodes.instance_name import node_name
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.render.slurm_contract import SlurmConfig
from gpuforge.render.slurm_sharing import NodeShape, partition_sharing, preemption
from gpuforge.spec import resolve
from gpuforge.spec.preemption import Preemption
from tests.machines import SSH_IMAGE, Machine, Machines
from tests.standins.containers import ContainerSources
from tests.standins.imds import StandInImds

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

SLURM_IMAGE = SSH_IMAGE.derive(
    "debian12-slurm",
    packages=(
        "munge", "slurmctld", "slurmd", "slurmdbd", "slurm-client", "libpam-slurm-adopt", "mariadb-server",
        # pam_systemd in common-session, as on an Ubuntu server: the slurm_compute role must take it out of
        # sshd's session stack, or an adopted ssh session leaves its job's cgroup (test_slurm_cluster.py).
        "libpam-systemd",
        # The sssd role's packages, and slapd with ldap-utils for the stand-in directory (test_slurm_directory.py).
        "sssd-ldap", "libnss-sss", "libpam-sss", "slapd", "ldap-utils",
        # site_mounts' NFS client, for the shared /home every Slurm host mounts.
        "nfs-common",
        # node_exporter on the controllers (slurm.yml): the failover group's own network reaches no mirror, so
        # the role's install finds the package here, at the version it pins.
        "prometheus-node-exporter",
        # scheduler.rest_api on the controller: slurmrestd and auth/jwt; curl, as a pipeline calls it.
        "slurmrestd", "slurm-wlm-jwt-plugin", "curl",
        # The slurm_pmix role's packages on Debian 12 (catalog slurm.distributions.debian-12.pmix), and Debian's
        # Open MPI with mpi4py: the bench's MPI job (test_slurm_bench.py) runs with srun --mpi=pmix.
        "slurm-wlm-basic-plugins", "libpmix-dev", "python3-mpi4py",
    ),
    setup=(
        # Nothing runs or is keyed until a role says so.
        "systemctl disable munge slurmctld slurmd slurmdbd mariadb mariadb.socket sssd slapd prometheus-node-exporter "
        "slurmrestd",
        "rm -f /etc/munge/munge.key",
        # nfs-common's rpcbind (NFSv3 only; /home is NFSv4) would bind port 111 on the shared host network in
        # all five machines: no role asks for it.
        "systemctl disable rpcbind.socket rpcbind.service",
        # libnss-sss's install put sss into nsswitch.conf: take it out, so NSS asks SSSD because the role said so.
        "sed -i -E 's/[[:space:]]+sss\\b//' /etc/nsswitch.conf",
    ),
)
CONTROLLER, LOGIN, STATIC, CLOUD = 0, 1, (2, 3), 4
GPUS = 2
GPU_TYPE = "a10g"
STATIC_PORTS = {2: 6821, 3: 6822}
# slurmrestd (scheduler.rest_api; catalog flows.yaml ports.slurmrestd), reached from the machines' addresses.
REST_PORT, REST_CLIENTS = 6820, "127.0.1.0/24"
USER, ACCOUNT, UID = "alice", "research", 2001
# A second account of the user's, capped at one GPU (GrpTRES) and not allowed in the debug partition.
CAPPED_ACCOUNT, CAPPED_GPUS = "capped", 1
ORGANISATION = "labs"
# The research team's own QOS (scheduler.qos): one GPU per user at a time.
TEAM_QOS = {"name": "team", "description": "Research's own QOS", "priority": 10, "max_gpus": None,
            "max_gpus_per_user": 1, "max_jobs_per_user": None, "max_wall": ""}
# Every port a Slurm daemon of this cluster binds on all addresses of the shared host network: slurmctld,
# the cloud node's slurmd (Slurm's default), slurmdbd, the static slurmds.
SLURM_PORTS = (6817, 6818, 6819, *STATIC_PORTS.values(), REST_PORT)
CLUSTER = "forge-dev"
CLOUD_GROUP = "cloud"
CLOUD_INSTANCE = "i-0c10d0000000000a1"  # the instance the cloud machine is when the cluster is built
# Preemption as a cluster opts in to it (scheduler.preemption.kind qos), with a grace time a test can wait out;
# a debug partition at a higher tier over the same nodes, as the stacks have it.
PREEMPTION = Preemption(kind="qos", grace_time_s=30)
DEBUG_PARTITION, DEBUG_TIER = "debug", 10
# The /home mount every Slurm host gets (slurm_config.home, a site's NFS export), at a stand-in mount point.
HOME_STAND_IN = {"name": "home", "kind": "nfs", "server": "10.64.8.20", "export": "/export/home", "version": "4.2",
                 "mount_point": "/shared/home", "source": "10.64.8.20:/export/home"}
HOME_FSTAB = ("10.64.8.20:/export/home /shared/home nfs "
              "vers=4.2,_netdev,x-systemd.automount,noatime,hard,timeo=600,retrans=2")
HOME_AUTOMOUNT = "shared-home.automount"

# nvidia-smi --query-gpu=index,name,uuid,driver_version,pci.bus_id --format=csv of a healthy node.
NVIDIA_SMI_CSV = "index, name, uuid, driver_version, pci.bus_id\n" + "".join(
    f"{i}, NVIDIA A10G, GPU-00000000-0000-0000-0000-00000000000{i}, 580.65.06, 00000000:00:1{i}.0\n"
    for i in range(GPUS)
)
STANDIN_DIR = "/var/lib/gpuforge-standin"
STANDIN_TOOLS = {
    "nvidia-smi": f"#!/bin/sh\ncat {STANDIN_DIR}/nvidia-smi.csv\n",
    "dcgmi": f"#!/bin/sh\ncat {STANDIN_DIR}/dcgmi-diag.txt\n",
}
# What a host's slurmd finds: writable cgroup v1 controllers. systemd-nspawn mounts them read-only (and
# memory from a sub-path of the host's hierarchy); each is mounted afresh, writable, in the machine's
# mount namespace. Slurm then keeps its jobs under /sys/fs/cgroup/<controller>/slurm_<node>.
CGROUP_CONTROLLERS = ("freezer", "cpuset", "devices", "cpu", "cpuacct", "pids", "blkio", "memory")
CGROUPS_WRITABLE = "set -e; " + "; ".join(
    f"umount -l /sys/fs/cgroup/{c}; mount -t cgroup -o rw,nosuid,nodev,noexec,{c} cgroup /sys/fs/cgroup/{c}"
    for c in CGROUP_CONTROLLERS
)


@dataclass
class SlurmCluster:
    machines: Machines
    config: dict[str, Any]
    secrets: dict[str, str]
    first: PlaybookResult
    second: PlaybookResult
    inventory: dict[str, Any]
    imds: StandInImds  # the cloud machine's instance metadata
    user_key: tuple[str, str]  # the cluster user's SSH key pair (private, public OpenSSH lines)

    @property
    def cloud_node(self) -> str:
        """The cloud machine's Slurm name: <group>-<instance id> of the instance it is now."""
        return node_name(CLOUD_GROUP, self.imds.instance_id)

    @property
    def controller(self) -> Machine:
        return self.machines[CONTROLLER]

    @property
    def login(self) -> Machine:
        return self.machines[LOGIN]

    @property
    def computes(self) -> list[Machine]:
        return [self.machines[i] for i in STATIC]

    @property
    def cloud(self) -> Machine:
        return self.machines[CLOUD]

    def as_user(self, command: str, timeout: float = 60) -> str:
        """Run *command* as the cluster user on the login machine; its stdout."""
        return run_as_user(self.login, command, timeout)

    def scontrol(self, *args: str) -> str:
        return self.controller.run("scontrol " + " ".join(args), root=True).stdout

    def diagnostics(self, lines: int = 60) -> str:
        """What a failed test needs to be diagnosed after the machines are gone: the tail of each daemon's
        log (read through the host's view of the machine), the job outputs, and what the controller and
        each node say now. Never raises; secrets are not in these files."""
        sections = []
        for machine in self.machines:
            sections += log_tails(machine, (*DAEMON_LOGS, *sorted(_job_outputs(machine))), lines)
        probes = [(self.controller, command) for command in CONTROLLER_PROBES]
        probes += [(machine, command) for machine in (*self.computes, self.cloud) for command in NODE_PROBES]
        return "\n".join(sections + probe_sections(probes, timeout=20))


def probe_sections(probes: Iterable[tuple[Machine, str]], timeout: float = 30) -> list[str]:
    """Each (machine, command)'s output, as root, as a diagnostics section; never raises."""
    sections = []
    for machine, command in probes:
        try:
            result = machine.run(command, root=True, check=False, timeout=timeout)
            out = (result.stdout + result.stderr).rstrip()
        except (OSError, subprocess.SubprocessError) as exc:
            out = f"({type(exc).__name__}: {exc})"
        sections.append(f"--- {machine.name}$ {command}\n{out}")
    return sections


# Where the daemons log (slurm.conf's SlurmctldLogFile/SlurmdLogFile, slurmdbd.conf's LogFile).
DAEMON_LOGS = ("/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmdbd.log", "/var/log/slurm/slurmd.log")
CONTROLLER_PROBES = ("sinfo -N -l", "sinfo -R", "squeue -a -l", "scontrol show jobs")
# The job container's mounts (job_container/tmpfs) and slurmd's own view of the node.
NODE_PROBES = ("journalctl -u slurmd --no-pager -n 30", "findmnt -o TARGET,SOURCE,FSTYPE,PROPAGATION -R /")


def _job_outputs(machine: Machine) -> list[str]:
    """Batch outputs (slurm-<job>.out) in the user's home on *machine*: where sbatch ran the script."""
    home = machine.root / "home" / USER
    return [f"/home/{USER}/{p.name}" for p in home.glob("slurm-*.out")] if home.is_dir() else []


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def run_as_user(machine: Machine, command: str, timeout: float = 60) -> str:
    """Run *command* as the cluster user on *machine*; its stdout."""
    return machine.run(f"sudo -n -u {USER} -i sh -c {_quote(command)}", timeout=timeout).stdout


def log_tails(machine: Machine, logs: Iterable[str], lines: int) -> list[str]:
    """The last *lines* of each of *logs* on *machine* that exists, read through the host's view of it."""
    sections = []
    for log in logs:
        path = machine.root / log.lstrip("/")
        if path.is_file():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            sections.append(f"--- {machine.name}:{log} (last {len(text)} lines)\n" + "\n".join(text))
    return sections


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = 120, every_s: float = 2) -> Any:
    """Poll *probe* until it returns something truthy; fail naming *what* after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


def cluster_config(machines: Machines, cpus: int, real_memory: int, user_public_key: str) -> dict[str, Any]:
    """slurm_config for the booted machines: the dev stack's rendering (accounts, partitions' settings,
    versions) with the cluster's shape replaced by these machines: a controller with MariaDB on it, a
    static group of two computes (their real CPU count) and a cloud group that registers itself."""
    ctl = machines[CONTROLLER]
    config = booted_rendering(ctl.name, CLUSTER, user_public_key)
    names = [machines[i].name for i in STATIC]
    config["controllers"] = [{"name": ctl.name, "address": ctl.address}]
    gres = f"gpu:{GPU_TYPE}:{GPUS}"
    config["nodes"] = [
        {**static_node(machines[i], cpus, real_memory), "port": STATIC_PORTS[i]} for i in STATIC
    ]
    cloud_conf = f"RealMemory={real_memory} Gres={gres} Feature=group_cloud,{GPU_TYPE}"
    config["dynamic_groups"] = [{"name": "cloud", "conf": cloud_conf, "features": ["group_cloud", GPU_TYPE]}]
    config["nodesets"] = [
        {"name": "ns_gpu", "feature": "", "nodes": ",".join(names)},
        {"name": "ns_cloud", "feature": "group_cloud", "nodes": ""},
    ]
    config["groups"] = {
        "gpu": {"nodeset": "ns_gpu", "dynamic": False, "conf": "", "local_nvme": False, "gpus": GPUS},
        "cloud": {"nodeset": "ns_cloud", "dynamic": True, "conf": cloud_conf, "local_nvme": False, "gpus": GPUS},
    }
    config["max_node_count"] = len(STATIC) + 1
    base = {p["name"]: p for p in config["partitions"]}["gpu"]
    shared = {**base, **machine_sharing(cpus, real_memory)}
    config["partitions"] = [
        {**shared, "name": "gpu", "nodesets": ["ns_gpu"], "default": True},
        {**shared, "name": "cloud", "nodesets": ["ns_cloud"], "default": False},
        {**shared, "name": DEBUG_PARTITION, "nodesets": ["ns_gpu"], "default": False, "priority_tier": DEBUG_TIER,
         "allow_accounts": [ACCOUNT]},
    ]
    config["preemption"] = preemption(PREEMPTION)
    config["accounts"][CAPPED_ACCOUNT] = {"description": "A team at its GPU limit", "fairshare": 1,
                                          "max_gpus": CAPPED_GPUS}
    config["users"][USER]["further_accounts"] = [CAPPED_ACCOUNT]
    config["qos"] = [dict(TEAM_QOS)]
    config["accounts"][ACCOUNT]["qos"] = [TEAM_QOS["name"]]
    # An organisation over the research team (accounts.<a>.parent), listed first as the renderer lists parents.
    config["accounts"][ACCOUNT]["parent"] = ORGANISATION
    config["accounts"] = {ORGANISATION: {"description": "The labs organisation", "fairshare": 1},
                          **config["accounts"]}
    config["login_groups"] = ["login"]
    config["rest_api"] = rest_api_rendering(ctl)
    config["secrets"]["jwt_key"] = {"store": "ansible_vault", "id": "vault_slurm_jwt_key"}
    # enroot's settings per node group of these machines (none has local NVMe: the root disk's paths, which
    # the dev stack's login group has), and the toolkit for enroot's GPU hook on both compute groups.
    enroot = config["containers"]["enroot"]
    enroot["settings"] = {group: enroot["settings"]["login"] for group in ("gpu", "cloud", "login")}
    config["containers"]["gpu_groups"] = ["cloud", "gpu"]
    return config


def booted_rendering(controller: str, cluster_name: str, user_public_key: str) -> dict[str, Any]:
    """The dev stack's rendering (accounts, partitions' settings, versions) as every booted cluster here
    starts from: accounting on the controller named *controller* with MariaDB on it, secrets in Ansible vault
    variables, the cluster user, the stand-in /home and GPUs, no lifecycle program and no topology. The
    cluster's shape (controllers, nodes, partitions) is the caller's."""
    config = slurm_config(resolve(load_stack("dev").cluster, "dev"), stand_in_gpus=True)
    # No Auto Scaling group behind these machines: no lifecycle program (test_slurm_lifecycle.py adds its own).
    config.pop("lifecycle", None)
    config["accounting"]["host"] = controller
    config["accounting"]["database"].update(kind="controller", host="localhost")
    config["secrets"] = {
        "munge_key": {"store": "ansible_vault", "id": "vault_slurm_munge_key"},
        "db_password": {"store": "ansible_vault", "id": "vault_slurm_db_password"},
    }
    # These machines are no EC2 instances: no instance topology to ask for (the controller's EC2
    # topology timer is tested against EC2's API model in test_ec2_topology.py), and no fabric.
    config["topology"] = {"kind": "none", "source": "none", "switches": []}
    config["gres"]["files"] = [{"nodes": "", "type": GPU_TYPE, "file": "/dev/nvidia[0-1]"}]
    config["accounts"] = {ACCOUNT: {"description": "Research engineers", "fairshare": 1}}
    config["users"] = {USER: {"uid": UID, "account": ACCOUNT, "ssh_public_keys": [user_public_key]}}
    config["cluster_name"] = cluster_name
    # The shared /home at a stand-in mount point (the module's docstring says why), as test_bake_ssh.py does.
    config["home"] = dict(HOME_STAND_IN)
    return config


def rest_api_rendering(controller: Machine) -> dict[str, Any]:
    """slurm_config.rest_api as the dev stack renders it with scheduler.rest_api turned on for the machines'
    addresses, slurmrestd's filter letting in this controller (the stack's controller address is AWS's)."""
    cluster = copy.deepcopy(load_stack("dev").cluster)
    cluster["scheduler"]["rest_api"] = {"enabled": True, "allowed_cidrs": [REST_CLIENTS]}
    rendered = slurm_config(resolve(cluster, "dev"), stand_in_gpus=True)["rest_api"]
    assert rendered["port"] == REST_PORT, rendered
    return {**rendered, "controller_addresses": [controller.address]}


def contract_vars(config: dict[str, Any]) -> dict[str, Any]:
    """A test's variation of slurm_config as the roles get it: checked against the contract (their argument
    specs would refuse it otherwise), its `files` derived again from what the test changed."""
    return SlurmConfig.model_validate({key: value for key, value in config.items() if key != "files"}).to_vars()


def machine_sharing(cpus: int, real_memory: int) -> dict[str, Any]:
    """A partition's defaults per GPU and billing weights over these machines (the stand-in GPUs), as the
    renderer derives them from the catalog for real nodes."""
    return partition_sharing([NodeShape(cpus, real_memory, GPUS)])


def static_node(machine: Machine, cpus: int, real_memory: int) -> dict[str, Any]:
    """A static compute of the gpu group: the machine's real CPU count and memory, the stand-in GPUs."""
    return {
        "names": machine.name,
        "addresses": machine.address,
        "cpus": cpus,
        "sockets": 1,
        "cores_per_socket": cpus,
        "threads_per_core": 1,
        "real_memory": real_memory,
        "gres": f"gpu:{GPU_TYPE}:{GPUS}",
        "features": ["group_gpu", GPU_TYPE],
    }


def prepare_machine(machine: Machine, gpus: bool) -> None:
    """The host-level facts a real node has before Ansible: writable cgroups, GPU devices and tools."""
    _in_namespaces(machine, CGROUPS_WRITABLE)
    if gpus:
        stand_in_gpus(machine)


def stand_in_gpus(machine: Machine) -> None:
    """The GPU devices (NVIDIA's major 195) and the stand-in nvidia-smi and dcgmi, written over SSH (a
    virtual machine's disk is not the host's to write)."""
    files = {
        f"{STANDIN_DIR}/nvidia-smi.csv": NVIDIA_SMI_CSV,
        f"{STANDIN_DIR}/dcgmi-diag.txt": (FIXTURES / "healthcheck" / "dcgmi-diag-r3-pass.txt").read_text(),
        **{f"/usr/local/bin/{tool}": script for tool, script in STANDIN_TOOLS.items()},
    }
    commands = [f"mknod -m 0666 /dev/nvidia{i} c 195 {i}" for i in range(GPUS)] + [f"mkdir -p {STANDIN_DIR}"]
    commands += [f"printf %s {_quote(text)} > {path}" for path, text in files.items()]
    commands += [f"chmod 0755 /usr/local/bin/{tool}" for tool in STANDIN_TOOLS]
    machine.run(" && ".join(commands), root=True)


def _in_namespaces(machine: Machine, script: str) -> None:
    """Run *script* in the machine's mount and process namespaces, from the host (what its boot would do)."""
    assert machine.pid is not None, f"{machine.name} is not running"
    init = Path(f"/proc/{machine.pid}/task/{machine.pid}/children").read_text().split()[0]
    subprocess.run(["nsenter", "-t", init, "-m", "-p", "sh", "-c", script], check=True, capture_output=True, timeout=60)


def inventory(
    machines: Machines,
    config: dict[str, Any],
    secret_values: dict[str, str],
    extra_vars: dict[str, Any],
    imds_endpoint: str,
) -> dict[str, Any]:
    def hosts(indexes: tuple[int, ...], **extra: Any) -> dict[str, Any]:
        return {machines[i].name: {**machines[i].ansible_vars(), **extra} for i in indexes}

    return {
        "all": {
            "vars": {
                "slurm_config": contract_vars(config),
                # On premises the secrets are Ansible vault variables (here: generated for this session).
                "vault_slurm_munge_key": secret_values["munge_key"],
                "vault_slurm_db_password": secret_values["db_password"],
                "vault_slurm_jwt_key": secret_values["jwt_key"],
                # MariaDB on the controller's own address: the machines share one network namespace.
                "slurm_dbd_mariadb_bind_address": machines[CONTROLLER].address,
                # No shared file system behind /home here (HOME_STAND_IN): each machine makes the users' homes,
                # which in production the primary controller makes once on the shared /home.
                "slurm_users_create_home": True,
                **extra_vars,
            },
            "children": {
                "slurm_controller": {"hosts": hosts((CONTROLLER,))},
                "slurm_login": {"hosts": hosts((LOGIN,), gpuforge_node_group="login")},
                "slurm_compute": {
                    "hosts": {
                        **hosts(STATIC, gpuforge_node_group="gpu"),
                        **hosts((CLOUD,), gpuforge_node_group=CLOUD_GROUP, slurm_compute_imds_endpoint=imds_endpoint),
                    }
                },
            },
        }
    }


def generated_secrets() -> dict[str, str]:
    return {
        # 1024 random bytes, base64: the form the Pulumi program stores in the secret store.
        "munge_key": base64.b64encode(secrets.token_bytes(1024)).decode(),
        "db_password": secrets.token_urlsafe(24),
        # 64 random bytes, base64, as the Pulumi program stores the JWT signing key (scheduler.rest_api).
        "jwt_key": base64.b64encode(secrets.token_bytes(64)).decode(),
    }


def generated_ssh_key() -> tuple[str, str]:
    """A fresh ed25519 key pair, (private, public) in OpenSSH's formats, without a passphrase."""
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{USER}@{CLUSTER}", "-f", str(key)],
                       check=True, capture_output=True, timeout=30)
        return key.read_text(), key.with_suffix(".pub").read_text().strip()


def node_facts(machine: Machine) -> tuple[int, int]:
    """(CPUs, RealMemory MiB) to declare for a machine: its CPU count and 90 % of the memory slurmd sees."""
    line = machine.run("slurmd -C", root=True).stdout.splitlines()[0]
    fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
    return int(fields["CPUs"]), int(int(fields["RealMemory"]) * 0.9)


def ports_taken() -> list[int]:
    """Slurm ports something on this host already listens on (machines share the host's network, so a
    leftover cluster's daemons would answer in place of this one's: slurmctld could not bind, and
    `scontrol ping` would reach a controller with another MUNGE key)."""
    taken = []
    for port in SLURM_PORTS:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As the daemons do: a port the previous run's cluster left in TIME_WAIT is free; a listener is not.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("0.0.0.0", port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    taken.append(port)
    return taken


def build_cluster(machines: Machines, containers: ContainerSources, imds: StandInImds) -> SlurmCluster:
    for index, machine in enumerate(machines):
        prepare_machine(machine, gpus=index in (*STATIC, CLOUD))
    cpus, memory = node_facts(machines[STATIC[0]])
    user_key = generated_ssh_key()
    config = cluster_config(machines, cpus, memory, user_key[1])
    containers.slurm_config(config)
    config = contract_vars(config)  # what the roles get, and what the tests compare the nodes with
    secret_values = generated_secrets()
    inv = inventory(machines, config, secret_values, containers.variables(), imds.endpoint)
    start = time.monotonic()
    first = run_playbook("slurm.yml", inv)
    mid = time.monotonic()
    second = run_playbook("slurm.yml", inv) if first.ok else first
    print(f"\nslurm.yml: converge {mid - start:.1f}s, idempotence run {time.monotonic() - mid:.1f}s")
    return SlurmCluster(machines, config, secret_values, first, second, inv, imds, user_key)
