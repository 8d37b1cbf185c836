"""Errors: what the daemon refused (AirlockError and one subclass per family) and what went
wrong on the wire (TransportError)."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type


class AirlockError(Exception):
    """A request the daemon refused or failed: its error answer (``{"ok": false, "error":
    {code, message, field, status}}``, or seed 002's bare ``{"error": {...}}``) and the HTTP
    status it came with. ``except AirlockError`` catches every subclass.

    Attributes:
        status: the HTTP status, e.g. 404 (0 for an error frame of a WebSocket).
        code: stable and machine-readable: ``not_found``, ``conflict``, ``invalid_argument``...
        message: for a person.
        field: the JSON path of the offending input (``resources.memoryMb``), when there is one.
        sandbox_status: on a 409, the sandbox's current status (``terminated``...).
        retry_after: on a 429, the seconds the daemon asks to wait (``Retry-After``), if given.
        rule: what refused a tool call beyond the field: the schema keyword an argument broke
            (``pattern``, ``format``, ``x-airlock-path-prefix``), the policy or the rate limit.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "internal",
        field: Optional[str] = None,
        sandbox_status: Optional[str] = None,
        retry_after: Optional[float] = None,
        rule: Optional[str] = None,
    ) -> None:
        self.message = message
        self.rule = rule
        self.status = status
        self.code = code
        self.field = field
        self.sandbox_status = sandbox_status
        self.retry_after = retry_after
        text = message or code
        if field and not text.startswith(field + ":"):
            text = f"{field}: {text}"
        super().__init__(f"{status} {code}: {text}" if status else f"{code}: {text}")


class InvalidArgumentError(AirlockError):
    """400: malformed or out-of-range input; ``field`` names it."""


class UnauthorizedError(AirlockError):
    """401: no key, or an unknown or revoked one."""


class ForbiddenError(AirlockError):
    """403: an admin route with a tenant key, or something the operator did not grant
    (``code`` says which: ``image_not_allowed``, ``volume_not_granted``...)."""


class NotFoundError(AirlockError):
    """404: no such sandbox, execution, snapshot, file... (or another tenant's)."""


class ConflictError(AirlockError):
    """409: the sandbox is in the wrong state; ``sandbox_status`` says which."""


class PayloadTooLargeError(AirlockError):
    """413: a body, upload or argument past its bound."""


class UnavailableError(AirlockError):
    """422 or 503: this host cannot provide it, or a part of the daemon is not working."""


class IsolationUnavailableError(UnavailableError):
    """422 ``isolation_unavailable``: this host lacks the isolation level asked for."""


class NotServedError(UnavailableError):
    """501 ``not_implemented``: a route this server does not serve (the cluster's front API
    serves no pools, webhooks or tools, for one)."""


class QuotaExceededError(AirlockError):
    """429: a tenant quota or its request rate; ``retry_after`` says when to try again."""


class InsufficientStorageError(AirlockError):
    """507: the sandbox's writable layer is full, or the daemon's store cannot be written."""


class InternalError(AirlockError):
    """5xx: the daemon failed (see its log)."""


class TransportError(OSError):
    """The daemon's answer broke the protocol (HTTP, WebSocket, server-sent events), or the
    connection ended in the middle of it. Socket errors (refused, reset, timed out, TLS) reach
    the caller as the OSError the standard library raised; this is one too, so ``except
    OSError`` catches every failure of the transport, and none of them is an AirlockError."""


_BY_CODE: Dict[str, Type[AirlockError]] = {
    "invalid_argument": InvalidArgumentError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "secret_not_granted": ForbiddenError,
    "volume_not_granted": ForbiddenError,
    "template_not_granted": ForbiddenError,
    "image_not_allowed": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "isolation_unavailable": IsolationUnavailableError,
    "gpu_unavailable": UnavailableError,
    "unavailable": UnavailableError,
    "quota_exceeded": QuotaExceededError,
    "insufficient_storage": InsufficientStorageError,
    "internal": InternalError,
    "tool_not_allowed": ForbiddenError,
    "invalid_arguments": InvalidArgumentError,
    "rate_limited": QuotaExceededError,
    "not_implemented": NotServedError,
}

_CODE_FOR_STATUS = {
    400: "invalid_argument",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "unavailable",
    429: "quota_exceeded",
    501: "not_implemented",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
    507: "insufficient_storage",
}


def code_for_status(status: int) -> str:
    """The error code an answer without an error body stands for."""
    return _CODE_FOR_STATUS.get(status, "internal")


_STATUS_FOR_CODE = {code: status for status, code in sorted(_CODE_FOR_STATUS.items(), reverse=True)}
_STATUS_FOR_CODE.update(internal=500, isolation_unavailable=422, gpu_unavailable=422, invalid_arguments=400, rate_limited=429)


def status_for_code(code: str) -> int:
    """The HTTP status an error code goes with (for errors that come without one, such as an
    interactive exec's error frame)."""
    return _STATUS_FOR_CODE.get(code, 403 if code.endswith(("_not_granted", "_not_allowed")) else 500)


def make_error(status: int, err: Mapping[str, Any], retry_after: Optional[float] = None) -> AirlockError:
    """The AirlockError of an error object ``{code, message, field, status}``."""
    code = str(err.get("code") or code_for_status(status))
    cls = _BY_CODE.get(code) or _BY_CODE.get(code_for_status(status), AirlockError)
    return cls(
        str(err.get("message") or ""),
        status=status,
        code=code,
        field=err.get("field") or None,
        sandbox_status=err.get("status") or None,
        retry_after=retry_after,
        rule=err.get("rule") or None,
    )


def error_from_answer(status: int, headers: Mapping[str, str], body: bytes) -> AirlockError:
    """The AirlockError of a non-2xx answer: from its error object when it has one, else from
    the status and the start of the body (a proxy's error page, say). ``headers`` has lowercase
    names."""
    retry_after = _retry_after(headers.get("retry-after"))
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return make_error(status, doc["error"], retry_after)
    text = body[:200].decode("utf-8", "replace").strip() or f"HTTP {status}"
    return make_error(status, {"message": text}, retry_after)


def _retry_after(value: Optional[str]) -> Optional[float]:
    try:
        return float(value) if value else None
    except ValueError:
        return None
