"""The Pulumi program of this project (the cluster itself lives in components/program.py)."""

from components.program import main

main()
