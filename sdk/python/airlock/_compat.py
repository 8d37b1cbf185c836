"""Seed 002's surface, ``/api/sandbox/...``: snake_case objects answered without the
envelope, for agents written against that API."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ._call import Call, bare, escape, present
from ._models import CompatRun, CompatSandbox
from ._ops import Mode, Resource, operation
from ._sandboxes import EXEC_MARGIN

#: A compat run's timeout when the request names none (seed 002: 30 s).
DEFAULT_RUN_TIMEOUT = 30


def _path(id: str, rest: str = "") -> str:
    return f"/api/sandbox/{escape(id)}{rest}"


class Compat(Resource[Mode]):
    """``client.compat``: the answers are seed 002's objects (``sandbox_id``, ``status``,
    ``mode``, ``created_at``, ``expires_at``; a run's ``run_id``, ``status``, ``result``), and
    its errors ``{"error": {...}}`` raise AirlockError like the rest of the API."""

    _name = "compat"

    @operation("post-api-sandbox-create")
    def create(
        self,
        *,
        agent_id: Optional[str] = None,
        mode: Optional[str] = None,
        config: Optional[Mapping[str, Any]] = None,
    ) -> Call[CompatSandbox]:
        """Creates a sandbox: ``mode`` is ``container`` (the default) or ``wasm``; ``config``
        is seed 002's ``{image, filesystem: {read_only, read_write, blocked}, network: {allow,
        block_outbound}, resources: {cpu: "0.5", memory: "512m", timeout}}``."""
        body = present(agent_id=agent_id, mode=mode, config=config)
        if hasattr(config, "to_dict"):
            body["config"] = config.to_dict()  # type: ignore[union-attr]
        return Call("POST", "/api/sandbox/create", bare(CompatSandbox), json=body, timeout=180.0)

    @operation("get-api-sandbox-by-id")
    def get(self, id: str) -> Call[CompatSandbox]:
        """The sandbox: ``status`` is provisioning, ready, running, destroyed or error."""
        return Call("GET", _path(id), bare(CompatSandbox))

    @operation("delete-api-sandbox-by-id")
    def delete(self, id: str) -> Call[None]:
        """Destroys the sandbox (204); its record is kept and ``get`` then says destroyed."""
        return Call("DELETE", _path(id), bare())

    @operation("post-api-sandbox-by-id-run")
    def run(self, id: str, code: str, *, timeout: Optional[int] = None, async_: bool = False) -> Call[CompatRun]:
        """Runs Python code (``python3 -c``): the run with its ``result`` (``exit_code``,
        ``stdout``, ...). With ``async_=True`` (the wire's ``async``) it answers at once with
        ``status: "running"``; poll :meth:`get_run` until it is ``done``."""
        body: Dict[str, Any] = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        if async_:
            body["async"] = True
        wait = None if async_ else (timeout or DEFAULT_RUN_TIMEOUT) + EXEC_MARGIN
        return Call("POST", _path(id, "/run"), bare(CompatRun), json=body, timeout=wait)

    @operation("get-api-sandbox-by-id-run-by-runId")
    def get_run(self, id: str, run_id: str) -> Call[CompatRun]:
        """A run, ``running`` or ``done`` (or ``failed`` with ``error``)."""
        return Call("GET", _path(id, f"/run/{escape(run_id)}"), bare(CompatRun))
