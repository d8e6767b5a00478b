"""gpuforge's typed Pulumi component library."""
