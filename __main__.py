"""The Pulumi program of this project (the cluster itself is gpuforge.infra.program)."""

from gpuforge.infra.program import main

main()
