"""gpuforge wiring pack for the Pulumi engine. PolicyPack() serves until the engine stops it:
keep it here, never in an importable module (tests build the policies through policies.engine)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for policies/ and components/

from pulumi_policy import PolicyPack

from policies.engine import pack_kwargs

PolicyPack(**pack_kwargs("wiring"))
