"""What the Kubernetes API server says: its Status messages, an exec's exit status."""

from __future__ import annotations

import json
import re

import yaml
from kubernetes.client.exceptions import ApiException

from storbench.errors import TargetError

LOST = -2  # ExecResult.returncode when the stream ended with no exit status (pod gone?)


class KubeError(TargetError):
    """The cluster refused or failed a request; the message quotes the API server."""


def exit_code(status: str, argv: list[str], pod: str) -> int:
    """The exec's exit status from the API server's Status on the error channel."""
    if not status:  # the stream ended without the API server's verdict
        return LOST
    try:
        doc = yaml.safe_load(status)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        raise KubeError(f"running {argv[0]} in pod {pod}: unexpected status {status!r}")
    if doc.get("status") == "Success":
        return 0
    if doc.get("reason") == "NonZeroExitCode":
        for cause in (doc.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return int(cause.get("message", "1"))
    raise KubeError(f"running {argv[0]} in pod {pod} failed: {doc.get('message', status)}")


def handshake_message(exc: ApiException) -> str:
    """The API server's message from a refused websocket handshake (e.g. a 403)."""
    text = str(exc.reason or exc)
    m = re.search(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
    return json.loads(f'"{m.group(1)}"') if m else text


def api_message(exc: ApiException) -> str:
    """What the API server said: its Status message, else the HTTP reason."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if body:
        try:
            doc = json.loads(body)
            if isinstance(doc, dict) and doc.get("message"):
                return str(doc["message"])
        except ValueError:
            pass
    reason = str(exc.reason or "")
    if exc.status == 401:
        return f"Unauthorized (the kubeconfig's credentials were rejected) {reason}".strip()
    return f"{exc.status} {reason}".strip() if exc.status else reason
