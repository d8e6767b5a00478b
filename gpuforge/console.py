"""The consoles every command prints to.

Piped into a file or a CI log, rich would assume 80 columns and fold the plan's tables into
unreadable slivers; such output gets 120 columns. A terminal keeps its own width.
"""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 120

out = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else PIPED_WIDTH)
