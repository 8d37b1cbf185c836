/**
 * `@airlock/sdk`: the TypeScript SDK of airlock, sandboxes for code that AI agents write.
 *
 * ```ts
 * import { AirlockClient } from "@airlock/sdk";
 * const client = new AirlockClient(); // AIRLOCK_TOKEN, AIRLOCK_HOST
 * await using sb = await client.sandboxes.create({ resources: { memoryMb: 512 } });
 * const res = await client.sandboxes.exec(sb.id, { command: ["python3", "-c", "print(6*7)"] });
 * ```
 * @module
 */

export { AirlockClient, type ClientOptions } from "./client.js";
export { AirlockConnectionError, AirlockError, type AirlockErrorInit, type ErrorCode } from "./errors.js";
export { Sandboxes, SandboxNetwork, type AgentStdinOptions, type CreateOptions, type ListOptions, type LogsOptions, type SandboxHandle, type SandboxStatus } from "./sandboxes.js";
export { ExecSession, type ExecStreamOptions, type OutputChunk, type SignalName, type StdinData } from "./exec-stream.js";
export { Files, type FileData, type MkdirOptions, type RemoveOptions, type WriteOptions } from "./files.js";
export { Snapshots } from "./snapshots.js";
export { Events, type EventFilter, type TenantEventFilter } from "./events.js";
export { Pools } from "./pools.js";
export { Images } from "./images.js";
export { Webhooks, WebhookVerificationError, verifyWebhook, type DeliveriesOptions, type VerifyWebhookOptions, type WebhookPayload } from "./webhooks.js";
export { Listing, type Templates, type Tenants, type Volumes } from "./tenancy.js";
export { Compat } from "./compat.js";
export { Mcp, ToolPolicies, ToolServers, Tools, type McpAnswer, type McpOptions, type PolicyOptions, type ToolCallOptions, type ToolListOptions } from "./tools.js";
export { DEFAULT_HOST, type CallOptions } from "./transport.js";
export { operationMethods, type OperationMethod } from "./operations.js";
/** Every schema of the API's OpenAPI document, as a type (generated). */
export type * from "./gen/openapi.js";
export { operations, schemaTypes } from "./gen/openapi.js";
