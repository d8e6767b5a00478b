"""`python -m gpuforge`: the same command line as the `gpuforge` script."""

from gpuforge.cli import app

app(prog_name="gpuforge")
