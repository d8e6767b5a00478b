"""The Pulumi config keys gpuforge reads: its namespace, the cluster and policy keys, and the keys
holding credentials (set with `pulumi config set --secret`)."""

from __future__ import annotations

NAMESPACE = "gpuforge"
CLUSTER_KEY = f"{NAMESPACE}:cluster"
POLICY_KEY = f"{NAMESPACE}:policy"
# Credentials of the site's S3-compatible store, for DataSync (gpuforge/infra/hybrid/object_sync.py).
SITE_S3_ACCESS_KEY = "siteS3AccessKey"
SITE_S3_SECRET_KEY = "siteS3SecretKey"
# The site's BMC user and password, for `gpuforge metal` (site.bmc's defaults; gpuforge/nodes/metal.py).
BMC_USERNAME = "bmcUsername"
BMC_PASSWORD = "bmcPassword"
SECRET_KEYS = (SITE_S3_ACCESS_KEY, SITE_S3_SECRET_KEY, BMC_USERNAME, BMC_PASSWORD)
