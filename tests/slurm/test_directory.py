"""scheduler.directory: the site's LDAP directory as the spec declares it, what the sssd role receives, and
the sssd.conf it renders (TLS always on and verified; the bind password from the secret store). The booted
proof (SSSD resolving a directory user on every node, a job run as that user) is test_slurm_directory.py."""

from __future__ import annotations

import configparser
import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.bake import run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import SpecError, resolve
from tests.crypto_material import ssh_public_key
from tests.support import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "gpuforge" / "assets" / "playbooks" / "roles" / "sssd"


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack("onprem-lab").cluster)


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: issue.message for issue in err.value.issues}


def test_the_lab_directory_reaches_the_nodes_without_its_password() -> None:
    config = slurm_config(resolve(_lab(), "onprem-lab"))
    directory = config["directory"]
    assert directory["uri"] == "ldaps://ldap.lab-east.example.internal" and directory["start_tls"] is False
    assert directory["search_base"] == "dc=lab-east,dc=example,dc=internal"
    assert directory["bind_dn"] == "cn=sssd,ou=services,dc=lab-east,dc=example,dc=internal"
    assert directory["ca_certificate"].startswith("-----BEGIN CERTIFICATE-----")
    # The bind password is a reference into the site's secret store, like the MUNGE key's.
    assert config["secrets"]["ldap_bind_password"] == {"store": "ansible_vault", "id": "vault_ldap_bind_password"}
    assert "password" not in json.dumps(directory)


def test_a_directory_without_a_bind_dn_reads_anonymously_and_names_no_secret() -> None:
    data = _lab()
    directory = data["scheduler"]["directory"]
    del directory["bind_dn"], directory["ca_certificate"]
    directory["uri"] = "ldap://ldap.lab-east.example.internal:389"
    config = slurm_config(resolve(data, "onprem-lab"))
    assert config["directory"]["start_tls"] is True and config["directory"]["bind_dn"] == ""
    assert "ldap_bind_password" not in config["secrets"]


def test_bad_directories_are_rejected_all_at_once_with_field_paths() -> None:
    data = _lab()
    directory = data["scheduler"]["directory"]
    directory["uri"] = "http://ldap.lab-east.example.internal"
    directory["search_base"] = "lab-east.example.internal"
    directory["ca_certificate"] = "not a PEM"
    problems = _problems(data)
    path = "cluster.scheduler.directory"
    assert problems[f"{path}.uri"].startswith("got 'http://ldap.lab-east.example.internal'; expected the directory")
    assert problems[f"{path}.search_base"].startswith("got 'lab-east.example.internal'; expected base DN")
    assert problems[f"{path}.ca_certificate"].startswith("holds no PEM certificate")
    assert "not a PEM" not in problems[f"{path}.ca_certificate"]  # the value is never quoted: it may be a key


def test_a_bind_password_without_a_bind_dn_is_rejected() -> None:
    data = _lab()
    directory = data["scheduler"]["directory"]
    del directory["bind_dn"]
    directory["bind_password_secret"] = "vault_lab_ldap"
    problems = _problems(data)
    assert "bind_password_secret without bind_dn" in problems["cluster.scheduler.directory"]


def test_directory_users_carry_no_keys_and_a_directory_is_a_site_s() -> None:
    lab = _lab()
    lab["scheduler"]["users"]["carol"]["ssh_public_keys"] = [ssh_public_key("carol")]
    assert "never be installed" in _problems(lab)["cluster.scheduler.users[carol].ssh_public_keys"]
    dev = copy.deepcopy(load_stack("dev").cluster)
    dev["scheduler"]["directory"] = _lab()["scheduler"]["directory"]
    assert "this is an AWS cluster" in _problems(dev)["cluster.scheduler.directory"]


def _directory(uri: str, *, ca: str = "", bind_dn: str = "") -> dict[str, Any]:
    return {"kind": "ldap", "uri": uri, "start_tls": uri.startswith("ldap://"),
            "search_base": "dc=lab,dc=example", "ca_certificate": ca, "bind_dn": bind_dn}


@pytest.fixture(scope="module")
def sssd_confs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, configparser.ConfigParser]:
    """sssd.conf as Ansible renders it from the role: ldaps with the site's CA and a bind DN, and StartTLS
    with anonymous reads against a publicly certified directory."""
    out = tmp_path_factory.mktemp("sssd")
    ca = resolve(_lab(), "onprem-lab").spec.scheduler.directory.ca_certificate  # type: ignore[union-attr]
    variants = {
        "ldaps": {"directory": _directory("ldaps://ldap.lab.example", ca=ca or "",
                                          bind_dn="cn=sssd,ou=services,dc=lab,dc=example"),
                  "password": "not-the-real-one"},
        "starttls": {"directory": _directory("ldap://ldap.lab.example:389"), "password": ""},
    }
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": os.sys.executable}}}}
    result = run_playbook(Path(__file__).with_name("render_sssd.yml"), inventory,
                          extravars={"sssd_variants": variants, "sssd_role_dir": str(ROLE), "sssd_out_dir": str(out)})
    if not result.ok:
        skip_or_fail(f"ansible-playbook failed: {[f'{f.task}: {f.message}' for f in result.failures]}")
    assert "not-the-real-one" not in result.stdout  # the template task of the role is no_log; this one lists labels
    confs = {}
    for name in variants:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string((out / f"{name}.conf").read_text())
        confs[name] = parser
    return confs


def test_ldaps_with_the_site_ca_and_a_bind_dn(sssd_confs: dict[str, configparser.ConfigParser]) -> None:
    conf = sssd_confs["ldaps"]
    assert conf["sssd"]["domains"] == "directory" and conf["sssd"]["services"] == "nss, pam"
    domain = conf["domain/directory"]
    assert domain["id_provider"] == "ldap" and domain["ldap_uri"] == "ldaps://ldap.lab.example"
    assert domain["ldap_search_base"] == "dc=lab,dc=example"
    assert domain["ldap_tls_reqcert"] == "demand"
    assert domain["ldap_tls_cacert"] == "/etc/sssd/gpuforge-directory-ca.pem"
    assert domain["ldap_id_use_start_tls"] == "false"  # ldaps: TLS from the first byte
    assert domain["ldap_default_bind_dn"] == "cn=sssd,ou=services,dc=lab,dc=example"
    assert domain["ldap_default_authtok_type"] == "password"
    assert domain["ldap_default_authtok"] == "not-the-real-one"


def test_starttls_is_required_and_anonymous_reads_bind_as_no_one(
    sssd_confs: dict[str, configparser.ConfigParser],
) -> None:
    domain = sssd_confs["starttls"]["domain/directory"]
    assert domain["ldap_uri"] == "ldap://ldap.lab.example:389"
    assert domain["ldap_id_use_start_tls"] == "true" and domain["ldap_tls_reqcert"] == "demand"
    assert domain["ldap_tls_cacert"] == "/etc/ssl/certs/ca-certificates.crt"  # a publicly certified directory
    assert "ldap_default_bind_dn" not in domain and "ldap_default_authtok" not in domain
