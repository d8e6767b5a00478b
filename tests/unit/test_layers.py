"""The house rules of the one package: its layers only point down (import-linter, the contracts in
pyproject.toml, which `make test` also runs as `lint-imports`), the wheel holds one top-level package, and a
first-party import inside a function says why it is there."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "gpuforge"
# Commands import their engines lazily so `gpuforge --help` answers without the SDKs (gpuforge/cli/__init__.py).
LAZY_BY_DESIGN = PACKAGE / "cli"


def test_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout and "KEPT" in proc.stdout


def _function_imports(path: Path) -> list[int]:
    """Lines of first-party imports inside a function that carry no comment on their line or the line above."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    unexplained = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom):
                first_party = bool(node.level) or (node.module or "").startswith("gpuforge")
            elif isinstance(node, ast.Import):
                first_party = any(a.name.startswith("gpuforge") for a in node.names)
            else:
                continue
            if first_party:
                here, above = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
                if "#" not in here and not above.lstrip().startswith("#"):
                    unexplained.append(node.lineno)
    return unexplained


def test_function_local_first_party_imports_say_why() -> None:
    found = {
        f"{path.relative_to(REPO)}:{line}"
        for path in PACKAGE.rglob("*.py")
        if LAZY_BY_DESIGN not in path.parents and "assets" not in path.relative_to(PACKAGE).parts
        for line in _function_imports(path)
    }
    assert not found, f"function-local imports without a comment saying why: {sorted(found)}"


def test_one_top_level_package() -> None:
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages == {"gpuforge"}, packages
