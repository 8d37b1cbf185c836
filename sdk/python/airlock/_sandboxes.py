"""Sandboxes and what runs in them: lifecycle, exec (whole and streamed), logs, metrics, the
agent's stdin, the network policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from ._call import NO_TIMEOUT, Call, envelope, escape, query, sandbox_path
from ._exec import ExecCall
from ._follow import Follow
from ._model import wire_object
from ._models import (
    AgentStdin,
    ExecRequest,
    ExecStart,
    Execution,
    ExecResult,
    LogEntry,
    Metrics,
    Network,
    Replay,
    Sandbox,
    SpecInput,
)
from ._ops import Mode, Resource, operation, session, stream

if TYPE_CHECKING:
    from ._files import Files

#: A command: a string run by ``/bin/sh -c``, or an argv list.
Command = Union[str, Sequence[str]]

#: How long a create may take to answer with wait=True: the daemon's setup deadline (60 s) and
#: some room for a pull.
CREATE_TIMEOUT = 180.0
#: Added to an exec's own timeout for the HTTP call that waits for it.
EXEC_MARGIN = 30.0


def exec_body(cls: Any, command: Command, extra: Mapping[str, Any]) -> Dict[str, Any]:
    """The wire object of an exec request (ExecRequest or ExecStart)."""
    cmd = command if isinstance(command, str) else list(command)
    return wire_object(cls, None, dict(extra, command=cmd))


def call_timeout(timeout: Optional[float]) -> float:
    """The HTTP call's timeout for a command that may run ``timeout`` seconds (0 or None: as
    long as the sandbox lives)."""
    return timeout + EXEC_MARGIN if timeout else NO_TIMEOUT


class Sandboxes(Resource[Mode]):
    """``client.sandboxes``: create, inspect and end sandboxes; run commands in them.

    Keyword arguments are the wire fields in snake_case (``agent_id`` → ``agentId``,
    ``memory_mb`` → ``memoryMb``, in nested dicts too); a dict may use the wire's camelCase
    names instead, and a model (``Resources(...)``) works as well.
    """

    _name = "sandboxes"

    @property
    def files(self) -> Files[Mode]:
        """The files API, ``client.files`` (also here, where the TypeScript SDK has it)."""
        return self._client.files

    @property
    def network(self) -> NetworkPolicies[Mode]:
        """Live network policy changes, ``client.network`` (also here, as in the TypeScript SDK)."""
        return self._client.network

    @operation("post-api-v1-sandboxes")
    def create(
        self,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        name: Optional[str] = None,
        isolation: Optional[str] = None,
        agent_id: Optional[str] = None,
        agent: Optional[Mapping[str, Any]] = None,
        start: Optional[bool] = None,
        template: Optional[str] = None,
        image: Optional[str] = None,
        runtime: Optional[str] = None,
        user: Optional[str] = None,
        workdir: Optional[str] = None,
        resources: Optional[Mapping[str, Any]] = None,
        network: Optional[Mapping[str, Any]] = None,
        filesystem: Optional[Mapping[str, Any]] = None,
        volumes: Optional[Sequence[Mapping[str, Any]]] = None,
        timeout: Optional[Mapping[str, Any]] = None,
        environment: Optional[Mapping[str, str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        from_snapshot: Optional[str] = None,
        wait: bool = True,
    ) -> Call[Sandbox]:
        """Creates a sandbox and, with ``wait`` (the default), waits until it is ``ready``
        (``running`` with ``start=True``): a provisioning failure is the error. ``wait=False``
        answers at once, ``provisioning`` (or ``ready`` from a warm pool); operations sent
        meanwhile wait for it.

        ``spec`` is a whole wire object (``{"agentId": ..., "resources": {"memoryMb": 512}}``);
        the keyword arguments are set over it. ``resources={"cpu": "2.0", "memory_mb": 4096}``,
        ``network={"egress_policy": "restricted", "allowed_domains": [...]}``,
        ``timeout={"max_duration_seconds": 600}``, ``from_snapshot="snap_..."`` starts from a
        snapshot. The result is a :class:`Sandbox`; ``with`` on it terminates it at the end.
        """
        fields = dict(name=name, isolation=isolation, agent_id=agent_id, agent=agent, start=start,
                      template=template, image=image, runtime=runtime, user=user, workdir=workdir,
                      resources=resources, network=network, filesystem=filesystem, volumes=volumes,
                      timeout=timeout, environment=environment, metadata=metadata, from_snapshot=from_snapshot)
        return Call("POST", "/api/v1/sandboxes", envelope(Sandbox), params=query(wait=True if wait else None),
                    json=wire_object(SpecInput, spec, fields), timeout=CREATE_TIMEOUT if wait else None)

    @operation("get-api-v1-sandboxes")
    def list(
        self,
        *,
        status: Union[str, Sequence[str], None] = None,
        agent_id: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Call[List[Sandbox]]:
        """The tenant's sandboxes, newest first (terminated ones included), in any of the
        statuses ``status`` names, of the agent ``agent_id``, carrying every ``metadata`` pair."""
        statuses = [status] if isinstance(status, str) else status
        pairs = [f"{k}={v}" for k, v in sorted((metadata or {}).items())]
        return Call("GET", "/api/v1/sandboxes", envelope([Sandbox]),
                    params=query(status=statuses, agentId=agent_id, metadata=pairs or None))

    @operation("get-api-v1-sandboxes-by-id")
    def get(self, id: str) -> Call[Sandbox]:
        """One sandbox, with its recorded transitions."""
        return Call("GET", sandbox_path(id), envelope(Sandbox))

    @operation("delete-api-v1-sandboxes-by-id", "post-api-v1-sandboxes-by-id-terminate")
    def terminate(self, id: str, *, missing_ok: bool = False) -> Call[Optional[Sandbox]]:
        """Ends a sandbox and releases its resources; its record is kept (``terminated``).
        With ``missing_ok`` a sandbox that is gone or has ended already (404, 409) is None
        instead of an error."""
        return Call("DELETE", sandbox_path(id), envelope(Sandbox), tolerate=(404, 409) if missing_ok else ())

    @operation("post-api-v1-sandboxes-by-id-start")
    def start(self, id: str) -> Call[Sandbox]:
        """Starts the sandbox's agent: ``running`` while it runs, then ``completed`` (exit 0)
        or ``failed``; its output is the sandbox's log. A ConflictError naming ``agent`` when
        the sandbox has none."""
        return Call("POST", sandbox_path(id, "/start"), envelope(Sandbox))

    @operation("post-api-v1-sandboxes-by-id-pause")
    def pause(self, id: str) -> Call[Sandbox]:
        """Freezes every process of the sandbox."""
        return Call("POST", sandbox_path(id, "/pause"), envelope(Sandbox))

    @operation("post-api-v1-sandboxes-by-id-resume")
    def resume(self, id: str) -> Call[Sandbox]:
        """Thaws a paused sandbox."""
        return Call("POST", sandbox_path(id, "/resume"), envelope(Sandbox))

    @operation("post-api-v1-sandboxes-by-id-exec")
    def exec(
        self,
        id: str,
        command: Command,
        *,
        stdin: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        timeout: Optional[int] = None,
        capture_output: Optional[bool] = None,
    ) -> Call[ExecResult]:
        """Runs a command to its end and returns its result (exit code, output, usage). A
        command that fails, times out (``timed_out``, exit 124) or is killed for memory
        (``oom_killed``) is not an error. ``timeout`` is in seconds (None or 0: the sandbox's
        lifetime); the call waits that long."""
        body = exec_body(ExecRequest, command, dict(stdin=stdin, env=env, workdir=workdir,
                                                         timeout=timeout, capture_output=capture_output))
        return Call("POST", sandbox_path(id, "/exec"), envelope(ExecResult), json=body, timeout=call_timeout(timeout))

    @session("get-api-v1-sandboxes-by-id-exec")
    def exec_stream(
        self,
        id: str,
        command: Command,
        *,
        tty: bool = False,
        rows: Optional[int] = None,
        cols: Optional[int] = None,
        stdin: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        timeout: Optional[int] = None,
    ) -> ExecCall:
        """Runs a command interactively over a WebSocket: iterate the session for its output
        chunks ``(stream, bytes)``, ``write`` its stdin, ``close_stdin``, ``signal``, ``resize``
        a terminal (``tty=True`` gives it a pseudo-terminal of ``rows`` × ``cols``), and
        ``wait`` for its ExecResult. Use it as a context manager; leaving it early ends the
        command."""
        start = exec_body(ExecStart, command, dict(tty=tty or None, rows=rows, cols=cols, stdin=stdin,
                                                   env=env, workdir=workdir, timeout=timeout))
        return ExecCall(sandbox_path(id, "/exec"), start)

    @stream("get-api-v1-sandboxes-by-id-logs")
    def logs(self, id: str, *, follow: bool = False, since: int = 0) -> Follow[LogEntry]:
        """The sandbox's log entries (its agent's and execs' output chunks, and its events),
        oldest first, each with ``timestamp`` and ``message``; after the entry ``since`` (a
        ``seq``) when given. With ``follow`` new entries keep coming until the sandbox ends; a
        dropped connection is resumed after the last entry delivered, none twice."""

        def params(last: int) -> Any:
            return query(since=last or None, follow=True if follow else None)

        return Follow(path=sandbox_path(id, "/logs"), params=params, event="log", model=LogEntry, last=since,
                      what=f"the logs of {id}")

    @operation("get-api-v1-sandboxes-by-id-metrics")
    def metrics(self, id: str) -> Call[Metrics]:
        """Current and recent (1 s samples, the last 5 minutes) CPU, memory, pids, disk and
        network readings."""
        return Call("GET", sandbox_path(id, "/metrics"), envelope(Metrics))

    @operation("get-api-v1-sandboxes-by-id-execs")
    def execs(self, id: str) -> Call[List[Execution]]:
        """The sandbox's executions, running and finished."""
        return Call("GET", sandbox_path(id, "/execs"), envelope([Execution]))

    @operation("get-api-v1-sandboxes-by-id-execs-by-execId")
    def execution(self, id: str, execution_id: str) -> Call[Execution]:
        """One execution; its ``result`` is set once it has ended."""
        return Call("GET", sandbox_path(id, f"/execs/{escape(execution_id)}"), envelope(Execution))

    @operation("get-api-v1-sandboxes-by-id-replay")
    def replay(self, id: str) -> Call[Replay]:
        """The sandbox's whole recorded history, ordered for display."""
        return Call("GET", sandbox_path(id, "/replay"), envelope(Replay))

    @operation("post-api-v1-sandboxes-by-id-agent-stdin")
    def agent_stdin(self, id: str, data: Union[bytes, str], *, eof: bool = False) -> Call[AgentStdin]:
        """Appends ``data`` to the stdin of the sandbox's running agent; ``eof`` closes it
        after. The daemon holds at most 1 MiB unread (QuotaExceededError past it: retry)."""
        body = data.encode() if isinstance(data, str) else bytes(data)
        return Call("POST", sandbox_path(id, "/agent/stdin"), envelope(AgentStdin), params=query(eof=eof or None),
                    body=body, content_type="application/octet-stream")

    @operation("put-api-v1-sandboxes-by-id-network")
    def update_network(
        self,
        id: str,
        network: Optional[Mapping[str, Any]] = None,
        *,
        egress_policy: Optional[str] = None,
        allowed_domains: Optional[Sequence[str]] = None,
        block_local_network: Optional[bool] = None,
        credentials: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> Call[Sandbox]:
        """Changes a live sandbox's network policy; in force when it answers. ``network`` is a
        whole wire object; the keyword arguments are set over it. Credentials sent without a
        value or secret keep the value they had."""
        fields = dict(egress_policy=egress_policy, allowed_domains=allowed_domains,
                      block_local_network=block_local_network, credentials=credentials)
        return Call("PUT", sandbox_path(id, "/network"), envelope(Sandbox), json=wire_object(Network, network, fields))


class NetworkPolicies(Resource[Mode]):
    """``client.network``: ``client.network.update(id, ...)`` is
    ``client.sandboxes.update_network(id, ...)``."""

    _name = "network"

    update = operation(*Sandboxes.update_network.ids)(Sandboxes.update_network.fn)
