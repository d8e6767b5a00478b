"""The mount points are defined once (gpuforge/catalog/mounts.py). Python reads the constants; the
roles and playbooks, which cannot import them, keep a default that must be the same path, and no
other file may spell the path itself."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.mounts import LUSTRE_MOUNT_POINT

PACKAGE = Path(__file__).resolve().parents[2] / "gpuforge"
LUSTRE_ROLE = PLAYBOOKS_DIR / "roles" / "lustre_client"
# Where the Lustre mount point may be written out: the role's default and argument spec, and the two
# playbooks that pass it to the textfile collector before the role's defaults are loaded.
SPELLED_OUT = {
    LUSTRE_ROLE / "defaults" / "main.yml",
    LUSTRE_ROLE / "meta" / "argument_specs.yml",
    PLAYBOOKS_DIR / "site.yml",
    PLAYBOOKS_DIR / "bake-image.yml",
    PACKAGE / "catalog" / "mounts.py",
}


def test_the_lustre_role_mounts_where_the_catalog_says() -> None:
    defaults = yaml.safe_load((LUSTRE_ROLE / "defaults" / "main.yml").read_text())
    spec = yaml.safe_load((LUSTRE_ROLE / "meta" / "argument_specs.yml").read_text())
    option = spec["argument_specs"]["main"]["options"]["lustre_client_mount_point"]
    assert defaults["lustre_client_mount_point"] == option["default"] == LUSTRE_MOUNT_POINT
    for playbook in ("site.yml", "bake-image.yml"):
        assert f"lustre_client_mount_point | default('{LUSTRE_MOUNT_POINT}')" in (PLAYBOOKS_DIR / playbook).read_text()


def test_no_other_file_spells_the_lustre_mount_point() -> None:
    path = re.compile(rf"(?<![\w.-]){re.escape(LUSTRE_MOUNT_POINT)}(?![\w-])")
    monitoring_tests = PACKAGE / "assets" / "monitoring" / "tests"  # promtool fixtures: series as nodes report them
    found = {
        file
        for file in PACKAGE.rglob("*")
        if file.is_file() and file.suffix in {".py", ".yml", ".yaml", ".j2", ".lua", ".md", ""}
        and monitoring_tests not in file.parents and path.search(file.read_text(errors="replace"))
    }
    assert found <= SPELLED_OUT, sorted(str(f.relative_to(PACKAGE)) for f in found - SPELLED_OUT)
