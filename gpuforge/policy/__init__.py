"""Policy packs: rules as plain functions (gpuforge/policy/rules), adapted for the Pulumi engine per pack."""
