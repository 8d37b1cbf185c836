"""What Client and AsyncClient share: configuration and the resources."""

from __future__ import annotations

import os
import ssl
from typing import Any, ClassVar, Optional

from ._admin import DaemonOperations, Images, Pools, Templates, Tenants, Volumes, Webhooks
from ._call import Call, Plan
from ._compat import Compat
from ._exec import ExecCall
from ._files import Files
from ._follow import Follow
from ._http11 import Endpoint
from ._ops import Mode
from ._sandboxes import NetworkPolicies, Sandboxes
from ._snapshots import Events, Snapshots
from ._tools import Mcp, Tools

#: The seconds one network read or write may wait, unless an operation needs longer (an exec
#: waits for its command, a create for the sandbox).
DEFAULT_TIMEOUT = 60.0


class ClientBase(DaemonOperations[Mode]):
    """The surface of both clients; see :class:`airlock.Client`."""

    #: whether methods return awaitables.
    is_async: ClassVar[bool] = False
    #: the transport's connection pool class, made with (Endpoint, timeout).
    _connections: ClassVar[Any]

    sandboxes: Sandboxes[Mode]
    files: Files[Mode]
    snapshots: Snapshots[Mode]
    network: NetworkPolicies[Mode]
    events: Events[Mode]
    pools: Pools[Mode]
    images: Images[Mode]
    webhooks: Webhooks[Mode]
    volumes: Volumes[Mode]
    templates: Templates[Mode]
    tenants: Tenants[Mode]
    compat: Compat[Mode]
    tools: Tools[Mode]
    mcp: Mcp[Mode]

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        super().__init__(self)
        key = api_key if api_key is not None else os.environ.get("AIRLOCK_TOKEN", "")
        if not key:
            raise ValueError("airlock: no API key: pass api_key=... or set AIRLOCK_TOKEN "
                             "(make one with `airlock keys create --tenant NAME`)")
        self._endpoint = Endpoint(base_url if base_url is not None else os.environ.get("AIRLOCK_HOST", ""),
                                  key, ssl_context)
        self._timeout = timeout
        self._http = self._connections(self._endpoint, timeout)
        self.sandboxes = Sandboxes(self)
        self.files = Files(self)
        self.snapshots = Snapshots(self)
        self.network = NetworkPolicies(self)
        self.events = Events(self)
        self.pools = Pools(self)
        self.images = Images(self)
        self.webhooks = Webhooks(self)
        self.volumes = Volumes(self)
        self.templates = Templates(self)
        self.tenants = Tenants(self)
        self.compat = Compat(self)
        self.tools = Tools(self)
        self.mcp = Mcp(self)

    def _run(self, op: Any) -> Any:
        """Executes what a resource method described (see _ops)."""
        if isinstance(op, Call):
            return self._call(op)
        if isinstance(op, Follow):
            return self._follow(op)
        if isinstance(op, ExecCall):
            return self._session(op)
        if isinstance(op, Plan):
            return self._plan(op)
        raise TypeError(f"not an operation: {op!r}")

    # Each transport's way to execute a call, a followed stream, an interactive exec, a plan.
    def _call(self, call: Call[Any]) -> Any:
        raise NotImplementedError

    def _follow(self, f: Follow[Any]) -> Any:
        raise NotImplementedError

    def _session(self, call: ExecCall) -> Any:
        raise NotImplementedError

    def _plan(self, plan: Plan[Any]) -> Any:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """The daemon's address as the client uses it."""
        return self._endpoint.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"
