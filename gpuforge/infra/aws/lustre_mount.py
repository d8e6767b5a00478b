"""The FSx for Lustre fstab entry a launched node gets, from the template the lustre_client role renders too
(gpuforge/assets/playbooks/templates/lustre/fsx-mount.yaml.j2): one line, whether the node was configured by
`gpuforge bake` or launched from an image with only its user data. For an EFA-enabled file system the entry requires
gpuforge-lnet.service, which the image carries (playbooks/bake-image.yml; the Image Builder pipeline bakes
it in, gpuforge/infra/aws/image_pipeline.py)."""

from __future__ import annotations

from typing import Any

import yaml

from gpuforge.render.templates import render

# The lustre_client role's defaults (gpuforge/assets/playbooks/roles/lustre_client/defaults/main.yml): the management
# service's LNet network for FSx (EFA-enabled file systems too), and no options of the user's own.
FSX_LNET = "tcp"


def fsx_mount_entry(dns_name: str, mount_name: str, mount_point: str, efa: bool) -> dict[str, Any]:
    """{src, path, fstype, opts, automount_unit} of the file system's fstab entry."""
    entry: dict[str, Any] = yaml.safe_load(
        render(
            "lustre/fsx-mount.yaml.j2",
            filesystem={"dnsName": dns_name, "mountName": mount_name, "efa": efa},
            lnet=FSX_LNET,
            mount_point=mount_point,
            options=None,
            efa_lnet=efa,
        )
    )
    entry["automount_unit"] = systemd_path_unit(mount_point, "automount")
    return entry


def systemd_path_unit(path: str, suffix: str) -> str:
    """The unit systemd-fstab-generator makes for a mount point (`systemd-escape --path --suffix=...`,
    systemd.unit(5) "String Escaping for Inclusion in Unit Names")."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return f"-.{suffix}"
    out = []
    for i, ch in enumerate(trimmed):
        if ch == "/":
            out.append("-")
        elif ch.isascii() and (ch.isalnum() or ch in ":_" or (ch == "." and i > 0)):
            out.append(ch)
        else:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode()))
    return f"{''.join(out)}.{suffix}"
