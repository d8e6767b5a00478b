"""gpuforge wiring pack for the Pulumi engine. PolicyPack() serves until the engine stops it:
keep it here, never in an importable module (tests build the policies through gpuforge.policy.engine)."""

from pulumi_policy import PolicyPack

from gpuforge.policy.engine import pack_kwargs

PolicyPack(**pack_kwargs("wiring"))
