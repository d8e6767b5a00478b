"""The shipped example stacks (stacks/Pulumi.*.yaml, examples/Pulumi.*.yaml) and which tests may read them.

The examples are what a user copies: editing one must break only the examples' own tests (tests/examples/:
the example validates, plans, its goldens, its secrets stay out of the plan) and the booted tests (marked
slow) that boot what an example plans. Every other test builds its own small input (tests/specs.py), so it
states what it depends on. tests/shipped_stacks_plugin.py enforces this as the tests run.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout
SHIPPED_DIRS = (REPO / "stacks", REPO / "examples")
EXAMPLES_TESTS = REPO / "tests" / "examples"

# Test files that read a shipped stack as a convenient input and have not yet been given their own
# (issue 29, item 7). The list only shrinks: a file leaves it once its tests build their inputs with
# tests/specs.py or move to tests/examples/; nothing is added to it (seven files written on branches beside the
# one that made this list came in with their merge: test_host_os, test_prometheus_discovery, test_notebooks,
# test_slurm_head_node, test_slurm_home_choices, test_slurm_shared_directories, test_tracking; and three the run
# found reading one through gpuforge: test_usage_cli's hybrid refusal, test_site_plan_at_scale through
# gpuforge/bench_sites.py, test_notebooks_parity through test_notebooks' dev config).
NOT_YET_APART = frozenset(
    {
        "tests/cli/test_bake_progress.py",
        "tests/cli/test_capacity_cli.py",
        "tests/cli/test_cli_foundation.py",
        "tests/cli/test_cli_nodes.py",
        "tests/cli/test_cost_and_compute_loss.py",
        "tests/cli/test_day_two.py",
        "tests/cli/test_image_os.py",
        "tests/cli/test_preflight_verdict.py",
        "tests/cli/test_usage_cli.py",
        "tests/cli/test_user_paths.py",
        "tests/cli/test_user_repository.py",
        "tests/diff/test_diff_cli.py",
        "tests/diff/test_workflow_lint.py",
        "tests/k8s/test_k8s_addons.py",
        "tests/k8s/test_k8s_eks.py",
        "tests/k8s/test_k8s_elasticity.py",
        "tests/k8s/test_k8s_irsa.py",
        "tests/k8s/test_k8s_monitoring_stack.py",
        "tests/k8s/test_k8s_platform.py",
        "tests/k8s/test_k8s_schemas.py",
        "tests/k8s/test_k8s_training_job.py",
        "tests/monitoring/test_attribution.py",
        "tests/monitoring/test_dashboards.py",
        "tests/monitoring/test_k8s_alerting.py",
        "tests/monitoring/test_metric_truth.py",
        "tests/monitoring/test_render_cli.py",
        "tests/monitoring/test_replicas.py",
        "tests/monitoring/test_rules.py",
        "tests/monitoring/test_secrets.py",
        "tests/onprem/test_cabling.py",
        "tests/onprem/test_driver_source.py",
        "tests/onprem/test_host_network.py",
        "tests/onprem/test_host_os.py",
        "tests/onprem/test_hybrid_plan.py",
        "tests/onprem/test_hybrid_slurm.py",
        "tests/onprem/test_ib_partitions.py",
        "tests/onprem/test_inventory_nccl_power.py",
        "tests/onprem/test_metal.py",
        "tests/onprem/test_onprem_plan.py",
        "tests/onprem/test_prometheus_discovery.py",
        "tests/onprem/test_site_model.py",
        "tests/onprem/test_site_plan_at_scale.py",
        "tests/playbooks/test_inventory.py",
        "tests/playbooks/test_notebooks_parity.py",
        "tests/policies/test_policy_cli.py",
        "tests/policies/test_policy_power.py",
        "tests/policies/test_policy_slurm_burst.py",
        "tests/slurm/test_check_drain_cli.py",
        "tests/slurm/test_containers_render.py",
        "tests/slurm/test_directory.py",
        "tests/slurm/test_ec2_topology.py",
        "tests/slurm/test_het_job_guard.py",
        "tests/slurm/test_lifecycle_decisions.py",
        "tests/slurm/test_notebooks.py",
        "tests/slurm/test_reservations.py",
        "tests/slurm/test_rest_api.py",
        "tests/slurm/test_scaler_roles_anywhere.py",
        "tests/slurm/test_scheduler_spec.py",
        "tests/slurm/test_slurm_aws.py",
        "tests/slurm/test_slurm_cli.py",
        "tests/slurm/test_slurm_contract.py",
        "tests/slurm/test_slurm_head_node.py",
        "tests/slurm/test_slurm_home.py",
        "tests/slurm/test_slurm_home_choices.py",
        "tests/slurm/test_slurm_mpi.py",
        "tests/slurm/test_slurm_os.py",
        "tests/slurm/test_slurm_render.py",
        "tests/slurm/test_slurm_settings.py",
        "tests/slurm/test_slurm_shared_directories.py",
        "tests/slurm/test_slurm_sharing.py",
        "tests/slurm/test_slurm_site.py",
        "tests/slurm/test_ssm_sessions.py",
        "tests/slurm/test_tenancy.py",
        "tests/unit/test_capacity_spec.py",
        "tests/unit/test_flows.py",
        "tests/unit/test_image_slurm_vars.py",
        "tests/unit/test_node_file_modes.py",
        "tests/unit/test_preflight.py",
        "tests/unit/test_spec_fuzz.py",
        "tests/unit/test_tracking.py",
        "tests/unit/test_validation_round2.py",
        "tests/unit/test_wiring_aws.py",
    }
)


def is_shipped_stack(path: str | Path) -> bool:
    """Whether a path names one of the shipped example stack files."""
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError):
        return False
    return resolved.name.startswith("Pulumi.") and resolved.parent in SHIPPED_DIRS


# id() of each plan tests.support.planned made of a shipped stack: it is cached, so a later use opens nothing
# and the guard knows the plan by its identity (a cached plan lives, so its id is not reused).
SHIPPED_PLANS: dict[int, str] = {}


def note_shipped_plan(plan: object, stack_path: Path) -> None:
    if is_shipped_stack(stack_path):
        SHIPPED_PLANS[id(plan)] = stack_path.name


def may_read_examples(test_file: Path) -> bool:
    """Whether tests in this file may read the shipped stacks: the examples' own tests, or a file not yet
    given its own inputs."""
    resolved = test_file.resolve()
    if resolved.is_relative_to(EXAMPLES_TESTS):
        return True
    return resolved.is_relative_to(REPO) and resolved.relative_to(REPO).as_posix() in NOT_YET_APART


def what_to_do(test_file: str, stacks: list[str]) -> str:
    return (
        f"{test_file} reads the shipped example stack(s) {', '.join(stacks)}: a unit test builds its own small "
        "input (tests/specs.py: minimal_aws_cluster(...), planned_cluster(...)) so that editing an example "
        "breaks only the examples' tests; a test of the example itself (it validates, plans, its golden) "
        "belongs in tests/examples/"
    )
