"""Where nodes mount the cluster's shared file systems: gpuforge's choices, one definition each. The
components, renderers and checks import them; the roles get them through the rendered variables (the
Slurm contract's `home.mount_point`, the user data's mount entries), and tests/unit/test_mounts.py holds
the roles' own defaults to them."""

from __future__ import annotations

# FSx for Lustre on AWS nodes (the user data's fstab entry, the lustre_client role, the Lustre alerts).
LUSTRE_MOUNT_POINT = "/fsx"
# The users' shared home directories: the cluster's EFS on AWS, the site's export mounted here on premises.
HOME_MOUNT_POINT = "/home"
