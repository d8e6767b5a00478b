"""Prometheus' HTTP API, the one call gpuforge makes: an instant query (GET /api/v1/query), as `gpuforge drift` and
`gpuforge usage --prometheus` ask the stack's Prometheus."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

QUERY_TIMEOUT_S = 30


def instant_query(url: str, query: str, at: datetime | None = None) -> Any:
    """GET <url>/api/v1/query?query=...[&time=...] and its JSON (the API's error document too,
    where Prometheus refuses the query); OSError (urllib's errors) when there is no answer.
    *at*: the evaluation time (an aware datetime, sent as epoch seconds); None: the server's now."""
    parameters: dict[str, str] = {"query": query}
    if at is not None:
        parameters["time"] = f"{at.timestamp():.3f}"
    address = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode(parameters)
    try:
        with urllib.request.urlopen(address, timeout=QUERY_TIMEOUT_S) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        # A query Prometheus refuses (400 bad_data, 422 execution) still answers {"status": "error", "error": ...}:
        # hand that on, so the caller can say why; a body that is not the API's JSON is the HTTP error itself.
        try:
            return json.load(error)
        except ValueError:
            raise error from None
