"""Task coverage of the production playbooks in tests: which tasks ran, which were only skipped (and on
what condition), which were never reached. tasks.py computes it, callback/ records it, plugin.py wires it
into every pytest session and prints it; `python -m tests.taskcoverage LOG...` prints it from saved logs."""
