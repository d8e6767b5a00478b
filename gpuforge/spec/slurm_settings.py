"""slurm.conf settings a stack passes through: `scheduler.extra_settings` (keys of slurm.conf) and
`scheduler.partitions.<name>.extra_options` (options of a PartitionName line) gpuforge does not model.

The value types are all the spec holds; `slurm_settings_checks.py` judges each key and value against the
catalog (data/slurm_settings.yaml: the form slurm.conf(5) documents, the release that documents it, and the
keys gpuforge renders itself).
"""

from __future__ import annotations

from pydantic import StrictInt, StrictStr

# A value as slurm.conf writes it: a word (YES, jobcomp/filetxt, bf_continue,bf_window=4320) or a number.
SlurmValue = StrictStr | StrictInt

