/**
 * The tool gateway (docs/tools.md): the tools this key may call and calls of them
 * (`client.tools`), the tenant's upstream MCP servers (`client.tools.servers`) and tool policies
 * (`client.tools.policies`), and the daemon's MCP endpoint itself (`client.mcp`).
 *
 * A refused call rejects with an AirlockError whose `code` says why: `tool_not_allowed` (403,
 * `rule` names the policy), `invalid_arguments` (400, `field` is the argument's JSON pointer and
 * `rule` the schema keyword) or `rate_limited` (429, `retryAfter` in seconds). A tool that ran and
 * failed resolves to a result with `isError: true`.
 * @module
 */

import type { Tool, ToolDefinitionInput, ToolPolicy, ToolPolicyInput, ToolResult, ToolServerInfo, ToolServerInput } from "./gen/openapi.js";
import { readEvents } from "./sse.js";
import { pathOf, readText, type CallOptions, type Transport } from "./transport.js";

/** Options of tools.list. */
export interface ToolListOptions extends CallOptions {
  /** List what the key may call when acting for this agent. */
  agentId?: string;
}

/** Options of tools.call. */
export interface ToolCallOptions extends CallOptions {
  /** Run a built-in or exec tool in this sandbox of yours instead of the tool's own. */
  sandboxId?: string;
  /** The agent the call is made for (policies may be scoped to it). */
  agentId?: string;
}

/** Options naming the tenant of a policy request: an admin key's choice (default: the key's own tenant). */
export interface PolicyOptions extends CallOptions {
  tenant?: string;
}

/** The tools this key may call, and the tenant's own. */
export class Tools {
  readonly #t: Transport;
  /** The tenant's upstream MCP servers, whose tools are listed here as SERVER__TOOL. */
  readonly servers: ToolServers;
  /** The tool policies that may bind the tenant's keys. */
  readonly policies: ToolPolicies;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
    this.servers = new ToolServers(t);
    this.policies = new ToolPolicies(t);
  }

  /** list returns the tools this key may call (its policies applied), by name. */
  list(opts: ToolListOptions = {}): Promise<Tool[]> {
    const { agentId, signal } = opts;
    return this.#t.call({ method: "GET", path: "/api/v1/tools", query: { agentId }, signal });
  }

  /** get returns one tool this key may call; any other name is an AirlockError 404. */
  get(name: string, opts?: CallOptions): Promise<Tool> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/tools/${name}`, ...opts });
  }

  /**
   * put makes or replaces one of the tenant's tools: `{ description, inputSchema, exec | http,
   * sandbox, rateLimit, timeoutSeconds }` (its name is the argument's).
   */
  put(name: string, def: ToolDefinitionInput, opts?: CallOptions): Promise<Tool> {
    return this.#t.call({ method: "PUT", path: pathOf`/api/v1/tools/${name}`, json: { ...def, name }, ...opts });
  }

  /** delete removes one of the tenant's tools; resolves to it as it was. */
  delete(name: string, opts?: CallOptions): Promise<Tool> {
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/tools/${name}`, ...opts });
  }

  /** call calls a tool with its arguments and resolves to its result (`isError` when the tool failed). */
  call(name: string, args: Record<string, unknown> = {}, opts: ToolCallOptions = {}): Promise<ToolResult> {
    const { sandboxId, agentId, signal } = opts;
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/tools/${name}/call`, json: { arguments: args, sandboxId, agentId }, signal });
  }
}

/** The tenant's upstream MCP servers (a command run in a sandbox of the tenant). */
export class ToolServers {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** list returns the servers the tenant may use (the operator's granted to it, and its own). */
  list(opts?: CallOptions): Promise<ToolServerInfo[]> {
    return this.#t.call({ method: "GET", path: "/api/v1/tool-servers", ...opts });
  }

  /** get returns one server. */
  get(name: string, opts?: CallOptions): Promise<ToolServerInfo> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/tool-servers/${name}`, ...opts });
  }

  /** put makes or replaces one of the tenant's servers: `{ command, env, workdir, sandbox, tools, rateLimit }`. */
  put(name: string, def: ToolServerInput, opts?: CallOptions): Promise<ToolServerInfo> {
    return this.#t.call({ method: "PUT", path: pathOf`/api/v1/tool-servers/${name}`, json: { ...def, name }, ...opts });
  }

  /** delete removes one of the tenant's servers, stopping it. */
  delete(name: string, opts?: CallOptions): Promise<ToolServerInfo> {
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/tool-servers/${name}`, ...opts });
  }
}

/**
 * Tool policies. A tenant key makes its tenant's, and never one that binds itself whatever the
 * call (no agentId or sandboxId): that is a 403, as is a change of one an admin key made.
 */
export class ToolPolicies {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** list returns the policies that may bind the tenant (an admin key without a tenant: every tenant's). */
  list(opts: PolicyOptions = {}): Promise<ToolPolicy[]> {
    const { tenant, signal } = opts;
    return this.#t.call({ method: "GET", path: "/api/v1/tool-policies", query: { tenant }, signal });
  }

  /** get returns one policy. */
  get(name: string, opts: PolicyOptions = {}): Promise<ToolPolicy> {
    const { tenant, signal } = opts;
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/tool-policies/${name}`, query: { tenant }, signal });
  }

  /** put makes or replaces a policy: `{ tenant, keyId, agentId, sandboxId, allow, deny, rateLimits, toolsOnly }`. */
  put(name: string, policy: ToolPolicyInput, opts?: CallOptions): Promise<ToolPolicy> {
    return this.#t.call({ method: "PUT", path: pathOf`/api/v1/tool-policies/${name}`, json: { ...policy, name }, ...opts });
  }

  /** delete removes a policy; resolves to it as it was. */
  delete(name: string, opts: PolicyOptions = {}): Promise<ToolPolicy> {
    const { tenant, signal } = opts;
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/tool-policies/${name}`, query: { tenant }, signal });
  }
}

/** Options of the MCP endpoint's methods. */
export interface McpOptions extends CallOptions {
  /** The session (Mcp-Session-Id) the daemon gave the initialize. */
  sessionId?: string;
  /** The protocol version the session agreed on (MCP-Protocol-Version). */
  protocolVersion?: string;
}

/** What a POST to the MCP endpoint answered. */
export interface McpAnswer {
  /** The session's ID, from the answer to an initialize (and every later answer). */
  sessionId?: string;
  /** The JSON-RPC messages of the answer: a JSON body's, or each event of a stream's. */
  messages: unknown[];
}

/**
 * The daemon's MCP endpoint (streamable HTTP at /mcp) at the wire level: JSON-RPC messages in,
 * messages out. An MCP client library (the official `@modelcontextprotocol/sdk`) is the usual
 * way to use it: give it `url` and this client's key as `Authorization: Bearer KEY`.
 */
export class Mcp {
  readonly #t: Transport;
  /** The endpoint's URL. */
  readonly url: string;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
    this.url = t.url("/mcp");
  }

  #headers(opts: McpOptions): Record<string, string> {
    const h: Record<string, string> = {};
    if (opts.sessionId) h["Mcp-Session-Id"] = opts.sessionId;
    if (opts.protocolVersion) h["MCP-Protocol-Version"] = opts.protocolVersion;
    return h;
  }

  /** post sends one JSON-RPC message (or a batch) and resolves to the answer's messages. */
  async post(message: unknown, opts: McpOptions = {}): Promise<McpAnswer> {
    const ans = await this.#t.send({ method: "POST", path: "/mcp", json: message, accept: "application/json, text/event-stream",
      headers: this.#headers(opts), signal: opts.signal });
    const sessionId = ans.header("Mcp-Session-Id") ?? opts.sessionId;
    const messages: unknown[] = [];
    if ((ans.header("Content-Type") ?? "").startsWith("text/event-stream")) {
      for await (const ev of readEvents(ans.chunks())) if (ev.data) messages.push(JSON.parse(ev.data));
    } else {
      const text = await readText(ans, opts.signal);
      if (text.trim()) messages.push(JSON.parse(text));
    }
    return sessionId ? { sessionId, messages } : { messages };
  }

  /** listen opens the session's stream of server messages (GET); leaving the loop closes it. */
  async *listen(opts: McpOptions & { sessionId: string }): AsyncGenerator<unknown> {
    const ans = await this.#t.send({ method: "GET", path: "/mcp", accept: "text/event-stream", headers: this.#headers(opts), signal: opts.signal });
    for await (const ev of readEvents(ans.chunks())) if (ev.data) yield JSON.parse(ev.data);
  }

  /** end ends the session (DELETE). */
  async end(opts: McpOptions & { sessionId: string }): Promise<void> {
    const ans = await this.#t.send({ method: "DELETE", path: "/mcp", accept: "*/*", headers: this.#headers(opts), signal: opts.signal });
    await readText(ans, opts.signal);
  }
}
