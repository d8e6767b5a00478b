"""What nodes receive, rendered from the spec and the catalog (NCCL environment, ...)."""
