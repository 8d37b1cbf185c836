"""The tool gateway (docs/tools.md): the tools this key may call and calls of them
(``client.tools``), the tenant's upstream MCP servers (``client.tools.servers``) and tool
policies (``client.tools.policies``), and the daemon's MCP endpoint at the wire level
(``client.mcp``).

A refused call raises an AirlockError whose ``code`` says why: ``tool_not_allowed``
(ForbiddenError; ``rule`` names the policy), ``invalid_arguments`` (InvalidArgumentError;
``field`` is the argument's JSON pointer, ``rule`` the schema keyword) or ``rate_limited``
(QuotaExceededError; ``retry_after``). A tool that ran and failed is a result with
``is_error``."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._call import NO_TIMEOUT, Call, envelope, escape, present, query
from ._follow import Follow
from ._model import wire_object
from ._models import (
    Tool,
    ToolDefinitionInput,
    ToolPolicy,
    ToolPolicyInput,
    ToolResult,
    ToolServerInfo,
    ToolServerInput,
)
from ._ops import Mode, Resource, operation, stream
from ._sse import SSEParser


class ToolServers(Resource[Mode]):
    """``client.tools.servers``: the upstream MCP servers the tenant may use; its own run as a
    command in a sandbox of the tenant (a server the daemon dials by URL is the operator's)."""

    _name = "tools.servers"

    @operation("get-api-v1-tool-servers")
    def list(self) -> Call[List[ToolServerInfo]]:
        """The servers the tenant may use, by name."""
        return Call("GET", "/api/v1/tool-servers", envelope([ToolServerInfo]))

    @operation("get-api-v1-tool-servers-by-name")
    def get(self, name: str) -> Call[ToolServerInfo]:
        """One server."""
        return Call("GET", f"/api/v1/tool-servers/{escape(name)}", envelope(ToolServerInfo))

    @operation("put-api-v1-tool-servers-by-name")
    def put(
        self,
        name: str,
        server: Optional[Mapping[str, Any]] = None,
        *,
        command: Any = None,
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        sandbox: Optional[Mapping[str, Any]] = None,
        tools: Optional[Sequence[str]] = None,
        rate_limit: Optional[str] = None,
        description: Optional[str] = None,
    ) -> Call[ToolServerInfo]:
        """Makes or replaces one of the tenant's servers: ``command`` (argv or a shell line)
        run in ``sandbox`` (one per tenant by default); a running one is stopped."""
        fields = dict(command=command, env=env, workdir=workdir, sandbox=sandbox, tools=tools,
                      rate_limit=rate_limit, description=description)
        body = wire_object(ToolServerInput, server, fields)
        body["name"] = name
        return Call("PUT", f"/api/v1/tool-servers/{escape(name)}", envelope(ToolServerInfo), json=body)

    @operation("delete-api-v1-tool-servers-by-name")
    def delete(self, name: str) -> Call[ToolServerInfo]:
        """Removes one of the tenant's servers, stopping it; returns it as it was."""
        return Call("DELETE", f"/api/v1/tool-servers/{escape(name)}", envelope(ToolServerInfo))


class ToolPolicies(Resource[Mode]):
    """``client.tools.policies``: which tools the tenant's keys may call, and how often. A tenant
    key makes its tenant's, and never one that binds itself whatever the call (no ``agent_id``
    or ``sandbox_id``): that is a ForbiddenError, as is a change of one an admin key made."""

    _name = "tools.policies"

    @operation("get-api-v1-tool-policies")
    def list(self, *, tenant: Optional[str] = None) -> Call[List[ToolPolicy]]:
        """The policies that may bind the tenant (an admin key without ``tenant``: every
        tenant's)."""
        return Call("GET", "/api/v1/tool-policies", envelope([ToolPolicy]), params=query(tenant=tenant))

    @operation("get-api-v1-tool-policies-by-name")
    def get(self, name: str, *, tenant: Optional[str] = None) -> Call[ToolPolicy]:
        """One policy (``tenant``: an admin key's choice)."""
        return Call("GET", f"/api/v1/tool-policies/{escape(name)}", envelope(ToolPolicy), params=query(tenant=tenant))

    @operation("put-api-v1-tool-policies-by-name")
    def put(
        self,
        name: str,
        policy: Optional[Mapping[str, Any]] = None,
        *,
        tenant: Optional[str] = None,
        key_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        allow: Optional[Sequence[str]] = None,
        deny: Optional[Sequence[str]] = None,
        rate_limits: Optional[Sequence[Mapping[str, Any]]] = None,
        tools_only: Optional[bool] = None,
    ) -> Call[ToolPolicy]:
        """Makes or replaces policy ``name``: the calls it binds (``key_id``, ``agent_id``,
        ``sandbox_id``), the tool patterns it ``allow``\\ s and ``deny``\\ s, its
        ``rate_limits`` ([{"tools": "send_*", "limit": "10/60s"}]), ``tools_only``."""
        fields = dict(tenant=tenant, key_id=key_id, agent_id=agent_id, sandbox_id=sandbox_id, allow=allow, deny=deny,
                      rate_limits=rate_limits, tools_only=tools_only)
        body = wire_object(ToolPolicyInput, policy, fields)
        body["name"] = name
        return Call("PUT", f"/api/v1/tool-policies/{escape(name)}", envelope(ToolPolicy), json=body)

    @operation("delete-api-v1-tool-policies-by-name")
    def delete(self, name: str, *, tenant: Optional[str] = None) -> Call[ToolPolicy]:
        """Removes a policy; returns it as it was."""
        return Call("DELETE", f"/api/v1/tool-policies/{escape(name)}", envelope(ToolPolicy), params=query(tenant=tenant))


class Tools(Resource[Mode]):
    """``client.tools``: the tools this key may call — built-in (run_code, read_file,
    write_file, list_files, http_fetch), the operator's, the tenant's own, and its upstream
    servers' as ``SERVER__TOOL`` — calls of them, and the tenant's own definitions."""

    _name = "tools"

    servers: ToolServers[Mode]
    policies: ToolPolicies[Mode]

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.servers = ToolServers(client)
        self.policies = ToolPolicies(client)

    @operation("get-api-v1-tools")
    def list(self, *, agent_id: Optional[str] = None) -> Call[List[Tool]]:
        """The tools this key may call (when acting for ``agent_id``), by name."""
        return Call("GET", "/api/v1/tools", envelope([Tool]), params=query(agentId=agent_id))

    @operation("get-api-v1-tools-by-name")
    def get(self, name: str) -> Call[Tool]:
        """One tool this key may call (NotFoundError for any other name)."""
        return Call("GET", f"/api/v1/tools/{escape(name)}", envelope(Tool))

    @operation("put-api-v1-tools-by-name")
    def put(
        self,
        name: str,
        definition: Optional[Mapping[str, Any]] = None,
        *,
        description: Optional[str] = None,
        input_schema: Optional[Mapping[str, Any]] = None,
        exec: Optional[Mapping[str, Any]] = None,
        http: Optional[Mapping[str, Any]] = None,
        sandbox: Optional[Mapping[str, Any]] = None,
        rate_limit: Optional[str] = None,
        timeout_seconds: Optional[float] = None,
    ) -> Call[Tool]:
        """Makes or replaces one of the tenant's tools: its JSON Schema (``input_schema``, sent as
        it is) and one backend, ``exec`` ({"command": [...]}) or ``http`` ({"url": ...})."""
        fields = dict(description=description, exec=exec, http=http, sandbox=sandbox, rate_limit=rate_limit,
                      timeout_seconds=timeout_seconds)
        body = wire_object(ToolDefinitionInput, definition, fields)
        if input_schema is not None:
            body["inputSchema"] = dict(input_schema)  # a JSON Schema's own keywords, not snake_case
        body["name"] = name
        return Call("PUT", f"/api/v1/tools/{escape(name)}", envelope(Tool), json=body)

    @operation("delete-api-v1-tools-by-name")
    def delete(self, name: str) -> Call[Tool]:
        """Removes one of the tenant's tools; returns it as it was."""
        return Call("DELETE", f"/api/v1/tools/{escape(name)}", envelope(Tool))

    @operation("post-api-v1-tools-by-name-call")
    def call(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        sandbox_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> Call[ToolResult]:
        """Calls tool ``name`` with ``arguments`` (a dict, sent as it is); ``sandbox_id`` runs a
        built-in or exec tool in that sandbox of yours."""
        body = present(arguments=dict(arguments or {}), sandboxId=sandbox_id, agentId=agent_id)
        return Call("POST", f"/api/v1/tools/{escape(name)}/call", envelope(ToolResult), json=body, timeout=NO_TIMEOUT)


def _messages(status: int, headers: Mapping[str, str], body: bytes) -> Dict[str, Any]:
    """An MCP POST's answer: ``{"session_id": ..., "messages": [...]}`` from a JSON body or each
    event of a stream."""
    out: Dict[str, Any] = {"session_id": headers.get("mcp-session-id"), "messages": []}
    if headers.get("content-type", "").startswith("text/event-stream"):
        for ev in SSEParser().feed(body + b"\n\n"):
            if ev.data:
                out["messages"].append(json.loads(ev.data))
    elif body.strip():
        out["messages"].append(json.loads(body))
    return out


class _Message:
    """A server message of an MCP stream, as it came (a dict)."""

    @staticmethod
    def from_dict(d: Any) -> Any:
        return d


class _McpStream(Follow[Dict[str, Any]]):
    """The session's stream of server messages: a followed stream with the session's header."""

    def __init__(self, session_id: str, protocol_version: Optional[str]) -> None:
        super().__init__(path="/mcp", params=lambda _: [], event="message", model=_Message, resume_header=True,
                         what="the MCP session's stream")
        self._headers = {"Mcp-Session-Id": session_id}
        if protocol_version:
            self._headers["MCP-Protocol-Version"] = protocol_version

    def call(self) -> Call[bytes]:
        c = super().call()
        c.headers = {**(c.headers or {}), **self._headers}
        c.timeout = NO_TIMEOUT
        return c


class Mcp(Resource[Mode]):
    """``client.mcp``: the daemon's MCP endpoint (streamable HTTP at ``/mcp``) at the wire
    level, JSON-RPC messages in and out. An MCP client library is the usual way to use it: give it
    :attr:`url` and this client's key as ``Authorization: Bearer KEY``."""

    _name = "mcp"

    @property
    def url(self) -> str:
        """The endpoint's URL."""
        return self._client.base_url + "/mcp"

    @staticmethod
    def _headers(session_id: Optional[str], protocol_version: Optional[str]) -> Optional[Dict[str, str]]:
        h = {}
        if session_id:
            h["Mcp-Session-Id"] = session_id
        if protocol_version:
            h["MCP-Protocol-Version"] = protocol_version
        return h or None

    @operation("post-mcp")
    def post(self, message: Any, *, session_id: Optional[str] = None, protocol_version: Optional[str] = None) -> Call[Dict[str, Any]]:
        """Sends one JSON-RPC message (or a batch); returns ``{"session_id", "messages"}``: the
        session an initialize opened (and later ones keep), and the answer's messages."""
        return Call("POST", "/mcp", _messages, json=message, accept="application/json, text/event-stream",
                    headers=self._headers(session_id, protocol_version), timeout=NO_TIMEOUT)

    @stream("get-mcp")
    def listen(self, session_id: str, *, protocol_version: Optional[str] = None) -> Follow[Dict[str, Any]]:
        """The session's stream of server messages (dicts), until it ends."""
        return _McpStream(session_id, protocol_version)

    @operation("delete-mcp")
    def end(self, session_id: str, *, protocol_version: Optional[str] = None) -> Call[None]:
        """Ends the session."""
        return Call("DELETE", "/mcp", lambda s, h, b: None, accept="*/*", headers=self._headers(session_id, protocol_version))
