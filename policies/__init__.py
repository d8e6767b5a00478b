"""Policy packs: rules as plain functions (policies/rules), adapted for the Pulumi engine per pack."""
