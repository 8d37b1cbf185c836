/**
 * The errors of the SDK. A request the daemon refused or failed is an {@link AirlockError}, with
 * the daemon's stable `code` and the HTTP `status`; a daemon that cannot be reached, or a
 * connection that breaks, is an {@link AirlockConnectionError}, never an AirlockError.
 * @module
 */

/** The stable, machine-readable error codes of the API (docs/api.md#errors). */
export type ErrorCode =
  | "invalid_argument"
  | "unauthorized"
  | "forbidden"
  | "secret_not_granted"
  | "volume_not_granted"
  | "template_not_granted"
  | "image_not_allowed"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "isolation_unavailable"
  | "gpu_unavailable"
  | "unavailable"
  | "quota_exceeded"
  | "internal"
  | "insufficient_storage"
  | "tool_not_allowed"
  | "invalid_arguments"
  | "rate_limited"
  | "not_implemented";

/** What an AirlockError is made of. */
export interface AirlockErrorInit {
  /** The HTTP status of the answer, e.g. 404. */
  status: number;
  /** The daemon's error code, e.g. "not_found". */
  code: string;
  /** For a person. */
  message: string;
  /** The JSON path of the input to blame, e.g. "resources.memoryMb". */
  field?: string;
  /** The sandbox's status on a 409, e.g. "paused". */
  sandboxStatus?: string;
  /** Seconds to wait before trying again, from the Retry-After header of a 429. */
  retryAfter?: number;
  /** What refused a tool call beyond the field: the schema keyword, the policy, the rate limit. */
  rule?: string;
}

/**
 * A request the daemon refused or failed: its error envelope
 * (`{"ok": false, "error": {code, message, field, status}}`, or the compatibility surface's
 * `{"error": {...}}`) and the HTTP status it came with. An answer without the envelope (a proxy's
 * error page) gets the code its status stands for.
 *
 * ```ts
 * try { await client.sandboxes.get(id); }
 * catch (e) { if (e instanceof AirlockError && e.code === "not_found") { ... } }
 * ```
 */
export class AirlockError extends Error {
  /** The HTTP status, e.g. 404. */
  readonly status: number;
  /** The daemon's stable error code, e.g. "not_found" (see {@link ErrorCode}). */
  readonly code: ErrorCode | (string & {});
  /** The JSON path of the offending input, e.g. "resources.memoryMb", when there is one. */
  readonly field?: string;
  /** The sandbox's status when a 409 says it is in the wrong state, e.g. "terminated". */
  readonly sandboxStatus?: string;
  /** Seconds to wait before retrying (a 429's Retry-After), when the daemon said. */
  readonly retryAfter?: number;
  /** What refused a tool call beyond the field: the schema keyword an argument broke, the policy or rate limit. */
  readonly rule?: string;

  constructor(init: AirlockErrorInit) {
    super(init.message || init.code);
    this.name = "AirlockError";
    this.status = init.status;
    this.code = init.code;
    if (init.field) this.field = init.field;
    if (init.sandboxStatus) this.sandboxStatus = init.sandboxStatus;
    if (init.retryAfter !== undefined) this.retryAfter = init.retryAfter;
    if (init.rule) this.rule = init.rule;
  }
}

/**
 * The daemon could not be reached, or a connection to it broke (a stream that could not be
 * resumed, a WebSocket closed before the command's exit). `cause` holds the platform's error.
 */
export class AirlockConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AirlockConnectionError";
  }
}

/** codeForStatus is the error code an answer without the envelope stands for. */
export function codeForStatus(status: number): ErrorCode {
  switch (status) {
    case 400:
      return "invalid_argument";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 409:
      return "conflict";
    case 413:
      return "payload_too_large";
    case 422:
    case 502:
    case 503:
    case 504:
      return "unavailable";
    case 429:
      return "quota_exceeded";
    case 507:
      return "insufficient_storage";
    case 501:
      return "not_implemented";
  }
  return "internal";
}

const statusOfCode: Record<ErrorCode, number> = {
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  secret_not_granted: 403,
  volume_not_granted: 403,
  template_not_granted: 403,
  image_not_allowed: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  isolation_unavailable: 422,
  gpu_unavailable: 422,
  unavailable: 422,
  quota_exceeded: 429,
  internal: 500,
  insufficient_storage: 507,
  tool_not_allowed: 403,
  invalid_arguments: 400,
  rate_limited: 429,
  not_implemented: 501,
};

/**
 * statusForCode is the HTTP status the daemon answers an error code with, for errors that come
 * without one (an interactive exec's error frame).
 */
export function statusForCode(code: string): number {
  return statusOfCode[code as ErrorCode] ?? 500;
}

/** The error object of the daemon's answers (schema Error). */
interface ErrorBody {
  code?: unknown;
  message?: unknown;
  field?: unknown;
  status?: unknown;
  rule?: unknown;
}

const maxMessage = 200;

/**
 * errorFromBody makes the AirlockError of a failed answer from its status, its body's text and
 * its Retry-After header.
 */
export function errorFromBody(status: number, text: string, retryAfter?: string | null): AirlockError {
  const retry = parseRetryAfter(retryAfter);
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    body = errorObject(parsed);
  } catch {
    // Not JSON: a proxy's page, or nothing.
  }
  if (body && typeof body.code === "string") {
    return new AirlockError({
      status,
      code: body.code,
      message: typeof body.message === "string" ? body.message : body.code,
      field: typeof body.field === "string" ? body.field : undefined,
      sandboxStatus: typeof body.status === "string" ? body.status : undefined,
      retryAfter: retry,
      rule: typeof body.rule === "string" ? body.rule : undefined,
    });
  }
  let message = text.trim();
  if (message.length > maxMessage) message = message.slice(0, maxMessage) + "…";
  return new AirlockError({ status, code: codeForStatus(status), message: message || `HTTP ${status}`, retryAfter: retry });
}

/** errorObject finds the error object of an envelope, or of a bare `{error: ...}`. */
export function errorObject(v: unknown): ErrorBody | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const e = (v as { error?: unknown }).error;
  if (typeof e === "object" && e !== null) return e as ErrorBody;
  // An SSE "error" event or a WebSocket error frame may carry the object itself.
  if (typeof (v as ErrorBody).code === "string") return v as ErrorBody;
  return undefined;
}

function parseRetryAfter(v: string | null | undefined): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
