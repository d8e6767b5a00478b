"""`scheduler.directory`: the site's existing LDAP directory, whose users and groups every Slurm node
resolves through SSSD (the sssd role, docs/slurm.md "Users from the site's directory").

Secure by default: the directory is always reached over TLS and its certificate always verified
(SSSD's ldap_tls_reqcert = demand): `ldaps://`, or `ldap://` upgraded with StartTLS, which SSSD then
requires. The bind password is never written here: it lives in the site's secret store (an Ansible
vault variable, like the MUNGE key's), named by `bind_password_secret`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import SpecModel
from .keys import CaCertificates
from .limits import port_problem

# One RDN per comma: attribute=value (escaped commas inside values are not supported).
DN = r"^[A-Za-z][A-Za-z0-9-]*=[^,=]+(\s*,\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+)*$"
DEFAULT_BIND_PASSWORD_SECRET = "vault_ldap_bind_password"


class LdapDirectory(SpecModel):
    kind: Literal["ldap"] = Field(description="The site's LDAP directory, through SSSD on every Slurm node.")
    uri: str = Field(
        pattern=r"^ldaps?://[A-Za-z0-9.-]+(:\d+)?$",
        description="The directory server: ldaps://host[:port] (TLS from the first byte) or ldap://host[:port], "
        "which SSSD upgrades with StartTLS and refuses to use without it. Either way the server's certificate "
        "must be signed by ca_certificate and name the host.",
    )
    search_base: str = Field(
        pattern=DN,
        description="Base DN of users and groups (RFC 2307 posixAccount/posixGroup), e.g. dc=lab,dc=example.",
    )
    ca_certificate: CaCertificates | None = Field(
        default=None,
        description="The CA that signed the directory's certificate, in PEM (a site's private CA): the only CA "
        "SSSD trusts for it. Default: the node's system trust store (a directory certified by a public CA).",
    )
    bind_dn: str | None = Field(
        default=None,
        pattern=DN,
        description="DN SSSD binds as to read users and groups, e.g. cn=sssd,ou=services,dc=lab,dc=example. "
        "Default: anonymous reads.",
    )
    bind_password_secret: str = Field(
        default=DEFAULT_BIND_PASSWORD_SECRET,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="With bind_dn: the Ansible vault variable (the site's secret store, beside "
        "vault_slurm_munge_key) holding bind_dn's password; the sssd role reads it on the node, never logged.",
    )

    @field_validator("uri")
    @classmethod
    def _port(cls, value: str) -> str:
        port = value.rsplit(":", 1)[1] if value.count(":") == 2 else None
        problem = port_problem(int(port) if port else None, "directory URI")
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _password_needs_a_bind_dn(self) -> LdapDirectory:
        if self.bind_dn is None and "bind_password_secret" in self.model_fields_set:
            raise ValueError(
                "bind_password_secret without bind_dn: SSSD binds anonymously and would never read the password; "
                "add the bind_dn it belongs to, or remove bind_password_secret"
            )
        return self

    @property
    def start_tls(self) -> bool:
        """ldap:// reaches the directory in clear text until StartTLS: SSSD must require it."""
        return self.uri.startswith("ldap://")

