"""What `gpuforge bake --target rootfs:` gives a Slurm node group's image (bake.image_slurm_vars): a compute
group's image all it needs to join with no Ansible run on the instance (the key's store, id and region,
never a key); a login group's image only what enroot needs."""

from __future__ import annotations

import json

from gpuforge.nodes.bake import image_slurm_vars
from gpuforge.nodes.inventory import ENGINE_ONLY, build_inventory


def test_a_compute_groups_image_carries_the_cluster_config_and_where_the_key_is() -> None:
    inventory = build_inventory("dev")
    config = inventory["all"]["vars"]["slurm_config"]
    image = image_slurm_vars(inventory, "train")
    # All of it but what only the deployed stack knows and an image never reads: the database's endpoint and
    # the EFS names (a cloud node's user data mounts /home).
    assert {k: v for k, v in image["slurm_config"].items() if k not in ("accounting", "home")} == {
        k: v for k, v in config.items() if k not in ("accounting", "home")}
    assert image["slurm_config"]["accounting"]["database"]["host"] == ""
    assert image["slurm_config"]["home"] == {**config["home"], "server": "", "source": ""}
    assert image["munge_key_ref"] == {"store": "aws_secretsmanager", "id": "gpuforge/forge-dev/slurm/munge-key"}
    assert image["munge_key_aws_region"] == inventory["all"]["vars"]["gpuforge_region"] == "us-east-1"
    # The controllers' addresses are planned (known at bake time), nothing waits for the deployed stack.
    assert config["controllers"] and ENGINE_ONLY not in json.dumps(image)


def test_a_hybrid_clusters_cloud_group_image_reads_the_cloud_key_and_its_site_group_none() -> None:
    inventory = build_inventory("hybrid")
    cloud = image_slurm_vars(inventory, "cloud")
    assert cloud["munge_key_ref"]["store"] == "aws_secretsmanager"
    # The site's static group keeps its vault key: its image gets no key and no boot unit (slurm.yml keys it).
    assert image_slurm_vars(inventory, "train")["munge_key_ref"]["store"] == "ansible_vault"


def test_a_login_groups_image_carries_only_what_enroot_needs() -> None:
    image = image_slurm_vars(build_inventory("dev"), "login")
    assert set(image) == {"slurm_config"} and set(image["slurm_config"]) == {"containers", "job_container"}


def test_a_stack_without_a_scheduler_gives_an_image_nothing_of_slurm() -> None:
    assert image_slurm_vars({"all": {"vars": {}, "children": {}}}, "train") == {}
