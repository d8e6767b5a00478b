"""What every command does alike with what the user gave it: report a stack that cannot be read, and
write a file where the user asked, never with a traceback (exit 2, the path and the reason)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape

from gpuforge.console import err, out
from gpuforge.plan.stacks import ProjectNotFound
from gpuforge.spec import SpecError

# Problems about where the stack is, not what it says: said without "invalid spec".
LOCATION_PATHS = {"project", "stack"}


def fail(error: SpecError) -> NoReturn:
    if isinstance(error, ProjectNotFound):
        header = "not in a project"
    elif error.issues and all(issue.path in LOCATION_PATHS for issue in error.issues):
        header = "no such stack"
    elif error.issues and all(issue.path.startswith("--") for issue in error.issues):
        header = "invalid options"
    else:
        header = "invalid spec"
    err.print(f"[bold red]{header}[/]: " + escape(error.report()), highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def write_output(path: Path, text: str, *, announce: bool = True) -> None:
    """Write *text* to *path*, creating its missing folders (like `pulumi stack output --json > f`
    into a fresh folder of a CI job); a path that cannot be written is exit 2 with the reason."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        cannot_write(path, exc)
    if announce:
        out.print(f"wrote {escape(str(path))}", highlight=False)


def cannot_write(path: Path, exc: OSError) -> NoReturn:
    if isinstance(exc, FileExistsError):
        reason = f"{exc.filename} is a file, not a folder"
    elif isinstance(exc, NotADirectoryError):
        reason = "a folder on the path is a file"
    else:
        reason = (exc.strerror or type(exc).__name__) + (
            f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        )
    err.print(f"[bold red]cannot write[/] {escape(str(path))}: {escape(reason)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)
