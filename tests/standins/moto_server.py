"""moto's AWS APIs as a server on 127.0.0.1, for what reaches AWS from another process than the test's
(a daemon on a booted machine, an Ansible inventory plugin): started and stopped by its process id."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# moto accepts any credentials; these are the ones its documentation uses.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def boto3_args(endpoint: str, region: str = "us-east-1") -> dict[str, str]:
    """Keyword arguments of ``boto3.client`` for the server at *endpoint*."""
    return {
        "region_name": region,
        "endpoint_url": endpoint,
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def moto_server(log_dir: Path, timeout_s: float = 60) -> Iterator[str]:
    """``moto_server`` on a free port of 127.0.0.1 until the block ends; yields its endpoint URL."""
    port = _free_port()
    binary = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or "moto_server"
    with (log_dir / "moto_server.log").open("w") as log:
        server = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while not _listening(port):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port}; see {log.name}")
                time.sleep(0.2)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
