"""The bench that is the stack: the machines a plan declares, on the networks and behind the security groups
it declares (``plan_network``), booted by tests/machines (``MachinePool.vpc``)."""
