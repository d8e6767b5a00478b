"""A cloud node's Slurm name, <group>-<instance id>, read at boot from the instance metadata (IMDSv2):
gpuforge/nodes/instance_name.py run as slurmd's unit runs it (python3 FILE ...), against a stand-in IMDS on
127.0.0.1 (tests/standins/imds.py) that answers only with a session token, as EC2 does with
http_tokens=required."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpuforge.nodes import instance_name, lifecycle
from tests.standins.imds import stand_in_imds

SCRIPT = Path(instance_name.__file__)
INSTANCE = "i-0123456789abcdef0"


def _run(endpoint: str, output: Path, *extra: str, group: str = "train") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--group", group, "--output", str(output), "--endpoint", endpoint, *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_node_takes_its_group_and_instance_id_with_an_imdsv2_token(tmp_path: Path) -> None:
    env = tmp_path / "run" / "gpuforge" / "slurmd-node-name"
    with stand_in_imds(INSTANCE) as imds:
        done = _run(imds.endpoint, env)
    assert done.returncode == 0, done.stderr
    assert env.read_text() == f"GPUFORGE_SLURMD_NODENAME=train-{INSTANCE}\n"
    assert f"registers as train-{INSTANCE}" in done.stdout
    # A token first (PUT), then the id asked with it: IMDSv2, the only version the launch templates allow.
    assert imds.requests == [("PUT", "/latest/api/token", False), ("GET", "/latest/meta-data/instance-id", True)]


def test_the_controller_maps_the_same_name_to_the_instance() -> None:
    assert lifecycle.node_name is instance_name.node_name
    assert lifecycle.node_name("train", INSTANCE) == f"train-{INSTANCE}"


def test_a_metadata_service_not_ready_yet_is_asked_again(tmp_path: Path) -> None:
    env = tmp_path / "slurmd-node-name"
    with stand_in_imds(INSTANCE) as imds:
        imds.busy = 2  # early boot: two 503s
        done = _run(imds.endpoint, env, "--wait", "30")
    assert done.returncode == 0, done.stderr
    assert env.read_text() == f"GPUFORGE_SLURMD_NODENAME=train-{INSTANCE}\n"


def test_a_refusal_fails_at_once_and_names_nothing(tmp_path: Path) -> None:
    env = tmp_path / "slurmd-node-name"
    with stand_in_imds(INSTANCE) as imds:
        imds.tokens_expire = True  # 401 to the id request: asking again would not help, no name is written
        done = _run(imds.endpoint, env, "--wait", "600")
    assert done.returncode == 1
    assert "refused: HTTP 401" in done.stderr and "slurmd is not started" in done.stderr
    assert not env.exists()


def test_no_metadata_service_fails_with_the_endpoint_named(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = tmp_path / "slurmd-node-name"
    done = _run(endpoint, env, "--wait", "1")
    assert done.returncode == 1
    assert f"no answer from the instance metadata service at {endpoint}" in done.stderr
    assert not env.exists()


@pytest.mark.parametrize("answer", ["", "ip-10-0-1-2", "i-XYZ", "<html>"])
def test_an_answer_that_is_no_instance_id_names_nothing(tmp_path: Path, answer: str) -> None:
    env = tmp_path / "slurmd-node-name"
    with stand_in_imds(answer) as imds:
        done = _run(imds.endpoint, env)
    assert done.returncode == 1 and "not an instance id" in done.stderr, done.stderr
    assert not env.exists()


def test_a_group_name_slurm_cannot_hold_is_refused(tmp_path: Path) -> None:
    with stand_in_imds(INSTANCE) as imds:
        done = _run(imds.endpoint, tmp_path / "env", group="Train,gpu")
    assert done.returncode == 2 and "not a node group name" in done.stderr
    assert imds.requests == []


PAM_TEMPLATE = (
    "account [success=1 default=ignore] pam_succeed_if.so quiet user ingroup sudo\n"
    "account required /lib/security/pam_slurm_adopt.so action_no_jobs=deny nodename=@SLURMD_NODENAME@\n"
)


def test_the_pam_lines_name_the_node_as_slurmd_registers_it(tmp_path: Path) -> None:
    """pam_slurm_adopt finds a user's job steps by the node's Slurm name: a cloud node's, <group>-<instance
    id>, goes into sshd's PAM file in the same step that names slurmd."""
    template, pam, env = tmp_path / "pam-slurm-adopt.in", tmp_path / "pam.d" / "gpuforge-slurm-adopt", tmp_path / "env"
    template.write_text(PAM_TEMPLATE)
    with stand_in_imds(INSTANCE) as imds:
        done = _run(imds.endpoint, env, "--pam-template", str(template), "--pam-output", str(pam))
    assert done.returncode == 0, done.stderr
    assert pam.read_text() == PAM_TEMPLATE.replace("@SLURMD_NODENAME@", f"train-{INSTANCE}")
    assert env.read_text() == f"GPUFORGE_SLURMD_NODENAME=train-{INSTANCE}\n"


def test_a_pam_template_without_the_placeholder_stops_slurmd(tmp_path: Path) -> None:
    """Lines that would name no node refuse every user even in their job: slurmd does not start, saying why."""
    template, pam, env = tmp_path / "pam-slurm-adopt.in", tmp_path / "gpuforge-slurm-adopt", tmp_path / "env"
    template.write_text("account required pam_slurm_adopt.so\n")
    with stand_in_imds(INSTANCE) as imds:
        done = _run(imds.endpoint, env, "--pam-template", str(template), "--pam-output", str(pam))
    assert done.returncode == 1
    assert "has no @SLURMD_NODENAME@" in done.stderr
    assert not pam.exists() and not env.exists()


def test_the_pam_options_go_together(tmp_path: Path) -> None:
    with stand_in_imds(INSTANCE) as imds:
        done = _run(imds.endpoint, tmp_path / "env", "--pam-output", str(tmp_path / "pam"))
    assert done.returncode == 2 and "go together" in done.stderr
