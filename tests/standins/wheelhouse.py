"""A stand-in Python package index on 127.0.0.1 for the jupyterhub role (scheduler.notebooks).

The booted machines reach no index, so the catalog's resolved set (gpuforge/catalog/data/notebooks.yaml
constraints, every package at its pinned version) is downloaded once from the host's index into
.cache/wheelhouse/<key>/ with `pip download` (wheels only, for Debian 12's CPython 3.11 on x86_64), laid out as a
PEP 503 simple index (simple/<name>/index.html linking each wheel) and served by `python -m http.server`. The
role's production install (pip install --index-url ... --constraint ...) then runs unchanged against it.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuforge.catalog.notebooks import load_notebooks

from .repo import serve_tree, stop_server

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "wheelhouse"
# Debian 12's python3 (3.11) on x86_64: the platforms its pip accepts wheels for.
PLATFORM_ARGS = ["--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:",
                 "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                 "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any"]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _download(target: Path) -> None:
    """The pinned set's wheels into *target*/wheels, then its simple index; atomically (a half download is
    never mistaken for the cache)."""
    catalog = load_notebooks()
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    wheels = partial / "wheels"
    constraints = partial / "constraints.txt"
    wheels.mkdir(parents=True)
    constraints.write_text("\n".join(catalog.constraint_lines()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                    "--dest", str(wheels), "--constraint", str(constraints), *PLATFORM_ARGS,
                    *catalog.requirements()], check=True, capture_output=True, timeout=600)
    for wheel in sorted(wheels.glob("*.whl")):
        project = partial / "simple" / _normalized(wheel.name.split("-")[0])
        project.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        link = f'<a href="../../wheels/{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a>\n'
        with (project / "index.html").open("a") as index:
            index.write(link)
    partial.rename(target)


def wheelhouse_dir() -> Path:
    """The cached wheelhouse of the catalog's current set, downloaded on first use."""
    key = hashlib.sha256("\n".join(load_notebooks().constraint_lines()).encode()).hexdigest()[:16]
    target = CACHE / key
    if not target.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        _download(target)
    return target


@contextmanager
def wheelhouse() -> Iterator[str]:
    """Serve the wheelhouse; yield its simple index's URL (the role's jupyterhub_pip_index_url)."""
    root = wheelhouse_dir()
    process, url = serve_tree(root, "simple/jupyterhub/index.html", "the stand-in package index")
    try:
        yield f"{url}/simple"
    finally:
        stop_server(process)
