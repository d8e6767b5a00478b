"""The offline engine: stack files, the mock-monitor evaluation, the plan's data model, its
summary and the policy run."""
