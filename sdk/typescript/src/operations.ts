/**
 * The SDK method that calls each operation of the API, by operationId. The table's type makes the
 * build fail when the OpenAPI document (src/gen/openapi.ts) has an operation it lacks, and the
 * coverage test checks each method against the daemon's live document.
 * @module
 */

import type { OperationId } from "./gen/openapi.js";

/** The SDK method of an operation, and where it reshapes the operation's request or answer. */
export interface OperationMethod {
  /** The method's path from the client, e.g. "sandboxes.create". */
  method: string;
  /** Query parameters the method takes as positional arguments or sets itself, not as options. */
  implicit?: readonly string[];
  /** What the method takes instead of the operation's request body. */
  takes?: string;
  /** What the method answers instead of the operation's answer. */
  answers?: string;
}

/** The SDK method of every operation of the API. */
export const operationMethods: Record<OperationId, OperationMethod> = {
  "post-api-v1-sandboxes": { method: "sandboxes.create" },
  "get-api-v1-sandboxes": { method: "sandboxes.list" },
  "get-api-v1-sandboxes-by-id": { method: "sandboxes.get" },
  "delete-api-v1-sandboxes-by-id": { method: "sandboxes.terminate" },
  // The same as DELETE /api/v1/sandboxes/{id}, which terminate sends.
  "post-api-v1-sandboxes-by-id-terminate": { method: "sandboxes.terminate" },
  "post-api-v1-sandboxes-by-id-pause": { method: "sandboxes.pause" },
  "post-api-v1-sandboxes-by-id-resume": { method: "sandboxes.resume" },
  "post-api-v1-sandboxes-by-id-start": { method: "sandboxes.start" },
  "post-api-v1-sandboxes-by-id-agent-stdin": { method: "sandboxes.agentStdin", takes: "the bytes as an argument" },
  "post-api-v1-sandboxes-by-id-exec": { method: "sandboxes.exec" },
  "get-api-v1-sandboxes-by-id-exec": { method: "sandboxes.execStream", takes: "ExecStreamOptions (the start frame)", answers: "an ExecSession over the WebSocket of Frames" },
  "get-api-v1-sandboxes-by-id-execs": { method: "sandboxes.execs" },
  "get-api-v1-sandboxes-by-id-execs-by-execId": { method: "sandboxes.execution" },
  "get-api-v1-sandboxes-by-id-logs": { method: "sandboxes.logs", answers: "an async iterable of LogEntry" },
  "get-api-v1-sandboxes-by-id-metrics": { method: "sandboxes.metrics" },
  "get-api-v1-sandboxes-by-id-replay": { method: "sandboxes.replay" },
  // follow=true: sandboxes.followEvents.
  "get-api-v1-sandboxes-by-id-events": { method: "sandboxes.events", implicit: ["follow"] },
  "put-api-v1-sandboxes-by-id-network": { method: "sandboxes.network.update" },
  "get-api-v1-sandboxes-by-id-files": { method: "sandboxes.files.read", implicit: ["path"], answers: "the bytes (readText, readStream too)" },
  "put-api-v1-sandboxes-by-id-files": { method: "sandboxes.files.write", implicit: ["path"], takes: "the content as an argument" },
  "delete-api-v1-sandboxes-by-id-files": { method: "sandboxes.files.remove", implicit: ["path"] },
  "get-api-v1-sandboxes-by-id-files-list": { method: "sandboxes.files.list", implicit: ["path"] },
  "get-api-v1-sandboxes-by-id-files-stat": { method: "sandboxes.files.stat", implicit: ["path"] },
  "post-api-v1-sandboxes-by-id-files-mkdir": { method: "sandboxes.files.mkdir", implicit: ["path"] },
  "post-api-v1-sandboxes-by-id-snapshots": { method: "snapshots.create" },
  "get-api-v1-sandboxes-by-id-snapshots": { method: "snapshots.list" },
  "post-api-v1-sandboxes-by-id-restore": { method: "snapshots.restore", takes: "the snapshotId as an argument" },
  "post-api-v1-sandboxes-by-id-fork": { method: "snapshots.fork" },
  "get-api-v1-snapshots": { method: "snapshots.list" },
  "get-api-v1-snapshots-by-snapshotId": { method: "snapshots.get" },
  "delete-api-v1-snapshots-by-snapshotId": { method: "snapshots.delete" },
  // follow=true: events.follow.
  "get-api-v1-events": { method: "events.list", implicit: ["follow"] },
  "get-api-v1-audit-verify": { method: "events.verify" },
  "get-api-v1-images": { method: "images.list" },
  "get-api-v1-images-by-ref": { method: "images.get" },
  "post-api-v1-images": { method: "images.pull", takes: "the ref as an argument" },
  "delete-api-v1-images-by-ref": { method: "images.remove" },
  "post-api-v1-images-prune": { method: "images.prune" },
  "get-api-v1-pools": { method: "pools.list" },
  "get-api-v1-pools-by-name": { method: "pools.get" },
  "put-api-v1-pools-by-name": { method: "pools.put" },
  "delete-api-v1-pools-by-name": { method: "pools.delete" },
  "post-api-v1-webhooks": { method: "webhooks.create" },
  "get-api-v1-webhooks": { method: "webhooks.list" },
  "get-api-v1-webhooks-by-webhookId": { method: "webhooks.get" },
  "delete-api-v1-webhooks-by-webhookId": { method: "webhooks.delete" },
  "get-api-v1-webhooks-by-webhookId-deliveries": { method: "webhooks.deliveries" },
  "post-api-v1-webhooks-by-webhookId-test": { method: "webhooks.test" },
  "get-api-v1-volumes": { method: "volumes.list" },
  "get-api-v1-templates": { method: "templates.list" },
  "get-api-v1-tenants": { method: "tenants.list" },
  "get-api-v1-capabilities": { method: "capabilities" },
  "get-healthz": { method: "health" },
  "get-api-v1-openapi-json": { method: "openapi" },
  "get-metrics": { method: "prometheusMetrics" },
  "post-api-sandbox-create": { method: "compat.create" },
  "get-api-sandbox-by-id": { method: "compat.get" },
  "delete-api-sandbox-by-id": { method: "compat.delete" },
  "post-api-sandbox-by-id-run": { method: "compat.run" },
  "get-api-sandbox-by-id-run-by-runId": { method: "compat.getRun" },
  "get-api-v1-tools": { method: "tools.list" },
  "get-api-v1-tools-by-name": { method: "tools.get" },
  "put-api-v1-tools-by-name": { method: "tools.put" },
  "delete-api-v1-tools-by-name": { method: "tools.delete" },
  "post-api-v1-tools-by-name-call": { method: "tools.call", takes: "the arguments and { sandboxId, agentId }" },
  "get-api-v1-tool-servers": { method: "tools.servers.list" },
  "get-api-v1-tool-servers-by-name": { method: "tools.servers.get" },
  "put-api-v1-tool-servers-by-name": { method: "tools.servers.put" },
  "delete-api-v1-tool-servers-by-name": { method: "tools.servers.delete" },
  "get-api-v1-tool-policies": { method: "tools.policies.list" },
  "get-api-v1-tool-policies-by-name": { method: "tools.policies.get" },
  "put-api-v1-tool-policies-by-name": { method: "tools.policies.put" },
  "delete-api-v1-tool-policies-by-name": { method: "tools.policies.delete" },
  "post-mcp": { method: "mcp.post", takes: "a JSON-RPC message", answers: "McpAnswer: the session and the answer's messages" },
  "get-mcp": { method: "mcp.listen", answers: "an async iterable of the session's JSON-RPC messages" },
  "delete-mcp": { method: "mcp.end" },
};
