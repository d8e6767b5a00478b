"""gpuforge test stand-in for perftest's ib_write_bw: there is no RDMA device here. It keeps perftest's
shape where the fabric_acceptance role depends on it: the server (no host argument) listens on -p's TCP port
and serves one client; the client (host argument) connects to that port (perftest exchanges its queue pairs
there) and fails when nothing listens. A connected client prints the recorded output of a real run (the
file $IB_WRITE_BW_OUTPUTS names as JSON: RDMA device -> recorded output); the server prints nothing, as the
role judges only the clients.

Run by the interpreter of the test session (the test writes a shebang to it)."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """-d DEV -p PORT -D SECONDS and the flags -F --report_gbits; the rest is the server's host."""
    options: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("-d", "-p", "-D"):
            options[arg] = next(args)
        elif arg.startswith("-"):
            continue
        else:
            rest.append(arg)
    return options, rest


def main(argv: list[str]) -> int:
    options, hosts = _options(argv)
    port = int(options.get("-p", "18515"))
    if not hosts:
        with socket.create_server(("127.0.0.1", port), reuse_port=False) as server:
            server.settimeout(300)
            connection, _ = server.accept()
            with connection:
                connection.recv(16)
        return 0
    try:
        with socket.create_connection((hosts[0], port), timeout=10) as connection:
            connection.sendall(b"qp")
    except OSError as error:
        print(f"Couldn't connect to {hosts[0]}:{port} ({error})", file=sys.stderr)
        return 1
    outputs = json.loads(Path(os.environ["IB_WRITE_BW_OUTPUTS"]).read_text())
    sys.stdout.write(Path(outputs[options["-d"]]).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
