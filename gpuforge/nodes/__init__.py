"""Node operations: Ansible inventory, bake through ansible-runner, health and fabric checks."""
