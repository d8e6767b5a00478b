"""Users from the site's LDAP directory on the booted Slurm cluster, through the sssd role.

What stands in, and why: slapd (Debian's OpenLDAP) on the controller machine plays the site's directory
server, on ldaps:// at the controller's address (the machines share the host's network), with a CA and a
server certificate made for this session, a read-only service account SSSD binds as (anonymous reads are
refused, so the bind password must reach SSSD), a user and a group. The directory's settings go through
gpuforge's own spec and renderer (scheduler.directory -> slurm_config), then playbooks/slurm.yml converges
the running cluster again, so the sssd role configures every node: controller, login and computes.

Then the directory's user, who exists in no node's local files, resolves through SSSD on every node and
runs a two-node job from the login machine that slurmctld accepts and accounts under the user's account.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import resolve
from tests.support import private_ca_tls

from .cluster import ACCOUNT, SlurmCluster, wait_for

pytestmark = pytest.mark.slow

BASE = "dc=lab,dc=example"
BIND_DN = f"cn=sssd,ou=services,{BASE}"
USER, UID, GROUP, GID = "carol", 3101, "vision", 4101
SLAPD_DIR = "/etc/gpuforge-test-slapd"
SLAPD_DATA = "/var/lib/gpuforge-test-slapd"
SLAPD_UNIT = "gpuforge-test-slapd"
NODE_SSSD_CONF = "/etc/sssd/sssd.conf"


@dataclass
class Directory:
    cluster: SlurmCluster
    converge: PlaybookResult
    bind_password: str


def _ssha(password: str) -> str:
    """userPassword as slappasswd writes it: {SSHA} base64(SHA-1(password + salt) + salt)."""
    salt = secrets.token_bytes(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


def _slapd_conf() -> str:
    return f"""\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile /run/{SLAPD_UNIT}.pid
TLSCACertificateFile {SLAPD_DIR}/ca.pem
TLSCertificateFile {SLAPD_DIR}/server.pem
TLSCertificateKeyFile {SLAPD_DIR}/server.key
# Only the service account reads the directory: an anonymous SSSD would resolve no one.
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{BIND_DN}" read by * none
database mdb
suffix "{BASE}"
directory {SLAPD_DATA}
"""


def _entries(bind_password: str) -> str:
    return f"""\
dn: {BASE}
objectClass: dcObject
objectClass: organization
dc: lab
o: gpuforge test lab

dn: ou=services,{BASE}
objectClass: organizationalUnit
ou: services

dn: {BIND_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: sssd
userPassword: {_ssha(bind_password)}

dn: ou=people,{BASE}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{BASE}
objectClass: organizationalUnit
ou: groups

dn: uid={USER},ou=people,{BASE}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {USER}
cn: Carol
sn: Carol
uidNumber: {UID}
gidNumber: {UID}
homeDirectory: /home/{USER}
loginShell: /bin/bash

dn: cn={USER},ou=groups,{BASE}
objectClass: posixGroup
cn: {USER}
gidNumber: {UID}

dn: cn={GROUP},ou=groups,{BASE}
objectClass: posixGroup
cn: {GROUP}
gidNumber: {GID}
memberUid: {USER}
"""


def _start_directory(cluster: SlurmCluster, bind_password: str) -> bytes:
    """slapd on the controller machine, loaded and answering ldaps with its CA; returns the CA (PEM)."""
    ctl = cluster.controller
    ca, cert, key = private_ca_tls("gpuforge test directory CA", [ctl.address])
    conf_dir = ctl.root / SLAPD_DIR.lstrip("/")
    conf_dir.mkdir(parents=True, exist_ok=True)
    conf_dir.chmod(0o700)
    for name, content in {"ca.pem": ca, "server.pem": cert, "server.key": key,
                          "slapd.conf": _slapd_conf().encode(), "entries.ldif": _entries(bind_password).encode(),
                          "bind.pw": bind_password.encode()}.items():  # fmt: skip
        path = conf_dir / name
        path.write_bytes(content)
        path.chmod(0o600)
    ctl.run(
        f"mkdir -p {SLAPD_DATA} && slapadd -q -f {SLAPD_DIR}/slapd.conf -l {SLAPD_DIR}/entries.ldif && "
        f"systemd-run --unit={SLAPD_UNIT} /usr/sbin/slapd -d 0 -f {SLAPD_DIR}/slapd.conf "
        f"-h ldaps://{ctl.address}:636/",
        root=True,
    )
    search = (
        f"LDAPTLS_CACERT={SLAPD_DIR}/ca.pem ldapsearch -LLL -H ldaps://{ctl.address} -x -D {BIND_DN} "
        f"-y {SLAPD_DIR}/bind.pw -b {BASE} uid={USER} uidNumber"
    )
    wait_for("slapd to answer ldaps", lambda: f"uidNumber: {UID}" in ctl.run(search, root=True, check=False).stdout)
    return ca


def _directory_config(cluster: SlurmCluster, ca: bytes) -> dict[str, Any]:
    """slurm_config of the booted cluster with the directory as gpuforge renders it from a site spec (the
    lab's scheduler.directory pointed at this slapd), and the directory's user with the cluster's account."""
    lab = load_stack("onprem-lab").cluster
    lab["scheduler"]["directory"] = {
        "kind": "ldap",
        "uri": f"ldaps://{cluster.controller.address}",
        "search_base": BASE,
        "bind_dn": BIND_DN,
        "bind_password_secret": "vault_test_ldap_bind_password",
        "ca_certificate": ca.decode(),
    }
    rendered = slurm_config(resolve(lab, "onprem-lab"))
    config = copy.deepcopy(cluster.config)
    config["directory"] = rendered["directory"]
    config["secrets"] = {**config["secrets"], "ldap_bind_password": rendered["secrets"]["ldap_bind_password"]}
    config["users"] = {**config["users"], USER: {"uid": UID, "account": ACCOUNT, "ssh_public_keys": []}}
    return config


@pytest.fixture(scope="module")
def directory(slurm_cluster: SlurmCluster) -> Iterator[Directory]:
    bind_password = secrets.token_urlsafe(18)
    ca = _start_directory(slurm_cluster, bind_password)
    inventory = copy.deepcopy(slurm_cluster.inventory)
    inventory["all"]["vars"]["slurm_config"] = _directory_config(slurm_cluster, ca)
    inventory["all"]["vars"]["vault_test_ldap_bind_password"] = bind_password
    result = run_playbook("slurm.yml", inventory)
    assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
    try:
        yield Directory(slurm_cluster, result, bind_password)
    finally:
        slurm_cluster.controller.run(f"systemctl stop {SLAPD_UNIT}", root=True, check=False)


def test_sssd_is_configured_on_every_node_without_logging_its_password(directory: Directory) -> None:
    assert directory.bind_password not in directory.converge.stdout
    for machine in directory.cluster.machines:
        assert machine.run(f"stat -c '%U %a' {NODE_SSSD_CONF}", root=True).stdout.split() == ["root", "600"]
        assert machine.run("systemctl is-active sssd", root=True).stdout.strip() == "active", machine.name
        # Only root reads the bind password on the node; the admin user (like any user) cannot.
        assert machine.run(f"cat {NODE_SSSD_CONF}", check=False).returncode != 0


def test_the_directory_user_resolves_through_sss_on_every_node(directory: Directory) -> None:
    for machine in directory.cluster.machines:
        assert machine.run(f"grep -c '^{USER}:' /etc/passwd", check=False).stdout.strip() == "0", machine.name
        entry = machine.run(f"getent -s sss passwd {USER}").stdout.strip()
        assert entry.split(":")[2:4] == [str(UID), str(UID)], (machine.name, entry)
        ident = machine.run(f"id {USER}").stdout
        assert f"uid={UID}({USER})" in ident and f"{GID}({GROUP})" in ident, (machine.name, ident)


def test_the_directory_user_runs_a_job_on_both_computes_and_is_accounted(directory: Directory) -> None:
    cluster = directory.cluster
    # From the login machine as the directory's user: slurmctld maps the uid to the user and its
    # association, each compute's slurmd starts the step as that user with the directory's groups.
    out = cluster.login.run(
        f"cd /tmp && sudo -n -u {USER} srun -N2 -p gpu --chdir=/tmp sh -c 'echo $(hostname) $(id)'", timeout=180
    ).stdout
    lines = sorted(line for line in out.splitlines() if line.strip())
    assert [line.split()[0] for line in lines] == sorted(m.name for m in cluster.computes), out
    for line in lines:
        assert f"uid={UID}({USER})" in line and f"{GID}({GROUP})" in line, line
    row = wait_for(
        f"{USER}'s job in sacct",
        lambda: cluster.controller.run(f"sacct -n -P -X -u {USER} -o user,account,state", root=True).stdout.split(),
        60,
    )
    assert row[-1] == f"{USER}|{ACCOUNT}|COMPLETED", row
