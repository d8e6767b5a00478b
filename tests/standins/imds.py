"""A stand-in for the EC2 instance metadata service, IMDSv2 only (the launch templates set
``http_tokens=required``), on 127.0.0.1: what a cloud node asks at boot for its instance id.

    PUT /latest/api/token                 header X-aws-ec2-metadata-token-ttl-seconds: 1-21600 -> a token
                                          (400 without the header or out of range)
    GET /latest/meta-data/instance-id     header X-aws-ec2-metadata-token: a token it issued -> the id
                                          (401 without a token or with another one, as IMDSv2 answers)
    GET /latest/meta-data/iam/security-credentials/        (token) -> the instance profile's role name
    GET /latest/meta-data/iam/security-credentials/<role>  (token) -> its temporary credentials (JSON), what
                                          the AWS SDKs' default chain reads on an instance (``role``: set by
                                          the test; None: no instance profile, 404)

The instance id is the test's to set (``instance_id``): the booted cluster's cloud machine plays one
instance after another. ``busy`` answers that many requests with 503 first (a service not ready yet);
``tokens_expire`` makes every token stale (401); ``requests`` records what was asked, for tests of the
client. EC2's behaviour is from the EC2 User Guide, "Use the Instance Metadata Service to access
instance metadata" (IMDSv2).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/"


class StandInImds(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, instance_id: str, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.instance_id = instance_id
        self.role: str | None = None  # the instance profile's role; its credentials are the test's own (moto's)
        self.credentials = {"AccessKeyId": "testing", "SecretAccessKey": "testing", "Token": "testing"}
        self.busy = 0
        self.tokens_expire = False  # every token it issued has expired: 401 to the id request
        self.tokens: set[str] = set()
        self.requests: list[tuple[str, str, bool]] = []  # (method, path, carried a token it issued)
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: StandInImds

    def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows failures, not traffic
        return

    def _answer(self, status: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _busy(self) -> bool:
        with self.server._lock:
            if self.server.busy > 0:
                self.server.busy -= 1
                return True
        return False

    def do_PUT(self) -> None:
        self.server.requests.append(("PUT", self.path, False))
        if self._busy():
            return self._answer(503)
        ttl = self.headers.get(TTL_HEADER, "")
        if self.path != "/latest/api/token":
            return self._answer(404)
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self._answer(400)
        token = secrets.token_urlsafe(32)
        self.server.tokens.add(token)
        return self._answer(200, token)

    def do_GET(self) -> None:
        valid = self.headers.get(TOKEN_HEADER, "") in self.server.tokens and not self.server.tokens_expire
        self.server.requests.append(("GET", self.path, valid))
        if self._busy():
            return self._answer(503)
        if not valid:
            return self._answer(401)
        if self.path == "/latest/meta-data/instance-id":
            return self._answer(200, self.server.instance_id)
        role = self.server.role
        if role is not None and self.path == CREDENTIALS_PATH:
            return self._answer(200, role)
        if role is not None and self.path == CREDENTIALS_PATH + role:
            now = datetime.now(UTC)
            document = {
                "Code": "Success",
                "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Type": "AWS-HMAC",
                **self.server.credentials,
                "Expiration": (now + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            return self._answer(200, json.dumps(document))
        return self._answer(404)


@contextmanager
def stand_in_imds(instance_id: str, host: str = "127.0.0.1") -> Iterator[StandInImds]:
    """The stand-in, serving on *host* from a thread of this process until the block ends."""
    server = StandInImds(instance_id, host)
    thread = threading.Thread(target=server.serve_forever, name="stand-in-imds", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
