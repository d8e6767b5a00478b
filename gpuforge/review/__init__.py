"""Pull-request review: the GPU-aware diff, the cost estimate, Markdown and console reports."""
