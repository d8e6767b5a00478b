"""The examples' own tests: the shipped stacks (stacks/Pulumi.*.yaml, examples/Pulumi.*.yaml) validate and
plan, their goldens and diff goldens hold, their secrets stay out of the plan. These are the tests an edit of
an example may break; every other test builds its own input (tests/specs.py), which
tests/shipped_stacks_plugin.py enforces. The booted tests (marked slow) that boot what an example plans are
the examples' tests too, where they are."""
