"""The Python SDK of airlock, the sandbox daemon for code that AI agents write.

    import airlock

    with airlock.Client() as client:                      # AIRLOCK_TOKEN, AIRLOCK_HOST
        with client.sandboxes.create(name="demo") as sb:  # terminated when the block leaves
            result = client.sandboxes.exec(sb.id, "python3 -c 'print(6*7)'")
            print(result.stdout)                          # 42

:class:`Client` blocks; :class:`AsyncClient` has the same surface for asyncio. Both use the
standard library only. Every refusal of the daemon is an :class:`AirlockError` (a subclass per
family: NotFoundError, ConflictError, ...); failures of the connection are OSErrors.
"""

from ._async import AsyncClient, AsyncExecSession
from ._call import Pending
from ._errors import (
    AirlockError,
    ConflictError,
    ForbiddenError,
    InsufficientStorageError,
    InternalError,
    InvalidArgumentError,
    IsolationUnavailableError,
    NotServedError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaExceededError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from . import _models
from ._models import *  # noqa: F401,F403 (the wire types)
from ._models import SCHEMAS
from ._ops import OPERATIONS
from ._sync import Client, ExecSession

__version__ = "0.1.0"

__all__ = [
    "AirlockError",
    "AsyncClient",
    "AsyncExecSession",
    "Client",
    "ConflictError",
    "ExecSession",
    "ForbiddenError",
    "InsufficientStorageError",
    "InternalError",
    "InvalidArgumentError",
    "IsolationUnavailableError",
    "NotServedError",
    "NotFoundError",
    "OPERATIONS",
    "PayloadTooLargeError",
    "Pending",
    "QuotaExceededError",
    "SCHEMAS",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
__all__ += _models.__all__
