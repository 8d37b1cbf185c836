/**
 * Interactive exec over the daemon's exec WebSocket (GET /api/v1/sandboxes/{id}/exec): stdout and
 * stderr as async iterables of chunks, stdin, signals, a terminal's size, and the exec result of
 * the exit frame.
 * @module
 */

import { AirlockConnectionError, AirlockError, statusForCode } from "./errors.js";
import type { ExecResult, ExecStart, Frame } from "./gen/openapi.js";
import { Queue, bytesOf, fromBase64, toBase64 } from "./queue.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";
import { openSocket, type Socket } from "./websocket.js";

/** What {@link ExecSession.write} and the `stdin` option take. */
export type StdinData = string | Uint8Array;

/** How to run a command with execStream: the exec request, a terminal, and stdin. */
export interface ExecStreamOptions extends Omit<ExecStart, "stdin">, CallOptions {
  /**
   * The command's whole stdin: sent, then closed. Without it stdin stays open for
   * {@link ExecSession.write} until {@link ExecSession.closeStdin}.
   */
  stdin?: StdinData | AsyncIterable<StdinData>;
}

/** One chunk of a command's output, as {@link ExecSession.output} yields it. */
export interface OutputChunk {
  stream: "stdout" | "stderr";
  data: Uint8Array;
}

/** Signals by name, for {@link ExecSession.signal}. */
const signals = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15 } as const;

/** A signal's number, or one of the common names. */
export type SignalName = keyof typeof signals;

/** The most stdin one frame carries. */
const stdinChunk = 32 << 10;

/**
 * ExecSession is one command running over a WebSocket. Read its output from `output` (stdout and
 * stderr interleaved as they came) or from `stdout` and `stderr` (one of the two ways per
 * session); output not read yet is held in memory. With `tty: true` everything arrives on stdout.
 * `wait()` gives the exec result once the command has exited. Leaving an `await using` block, or
 * `close()`, drops the connection, which ends a command still running.
 */
export class ExecSession implements AsyncDisposable {
  #socket: Socket | undefined;
  #executionId = "";
  #pending: OutputChunk[] | undefined = [];
  #stdout: Queue<Uint8Array> | undefined;
  #stderr: Queue<Uint8Array> | undefined;
  #output: Queue<OutputChunk> | undefined;
  #done = false;
  #failure: unknown; // why the session failed, for the views claimed after it
  #result: Promise<ExecResult>;
  #settle!: { resolve(r: ExecResult): void; reject(e: unknown): void };
  #started: Promise<void>;
  #onStarted!: { resolve(): void; reject(e: unknown): void };

  /** @internal Use `client.sandboxes.execStream`. */
  constructor() {
    this.#result = new Promise((resolve, reject) => (this.#settle = { resolve, reject }));
    this.#started = new Promise((resolve, reject) => (this.#onStarted = { resolve, reject }));
    // Whoever awaits wait() or the start sees a failure; nobody awaiting is not an unhandled one.
    this.#result.catch(() => {});
    this.#started.catch(() => {});
  }

  /** The execution's ID (exec_…), as the daemon's `started` frame gave it. */
  get executionId(): string {
    return this.#executionId;
  }

  /** The command's stdout, chunk by chunk; it ends when the command exits. */
  get stdout(): AsyncIterable<Uint8Array> {
    this.#split();
    return this.#stdout!;
  }

  /** The command's stderr, chunk by chunk; it ends when the command exits. */
  get stderr(): AsyncIterable<Uint8Array> {
    this.#split();
    return this.#stderr!;
  }

  /** The command's stdout and stderr interleaved as they came, each chunk with its stream. */
  get output(): AsyncIterable<OutputChunk> {
    if (this.#stdout) throw new Error("airlock: ExecSession: read either output or stdout and stderr");
    if (!this.#output) {
      this.#output = new Queue();
      for (const c of this.#pending ?? []) this.#output.push(c);
      this.#pending = undefined;
      if (this.#done) this.#endQueues();
    }
    return this.#output;
  }

  /** Sends data to the command's stdin. */
  async write(data: StdinData): Promise<void> {
    const b = bytesOf(data);
    for (let i = 0; i < b.length; i += stdinChunk) {
      await this.#send({ type: "stdin", data: toBase64(b.subarray(i, i + stdinChunk)) });
    }
  }

  /** Closes the command's stdin: it reads the end of its input. */
  closeStdin(): Promise<void> {
    return this.#send({ type: "eof" });
  }

  /** Sends a signal to the command's process group: a number (2) or a name ("SIGINT"). */
  signal(sig: number | SignalName): Promise<void> {
    return this.#send({ type: "signal", signal: typeof sig === "number" ? sig : signals[sig] });
  }

  /** Changes the size of the command's terminal (with `tty: true`). */
  resize(rows: number, cols: number): Promise<void> {
    return this.#send({ type: "resize", rows, cols });
  }

  /**
   * wait resolves with the exec result once the command has exited. A failure the daemon reports
   * (the sandbox is not running, say) rejects with an AirlockError; a connection lost before the
   * exit with an AirlockConnectionError.
   */
  wait(): Promise<ExecResult> {
    return this.#result;
  }

  /** close drops the connection; a command still running is ended by the daemon. */
  close(): void {
    this.#fail(new AirlockConnectionError("airlock: interactive exec: closed by the client"));
  }

  /** Closes the session when an `await using` block leaves. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#done) this.close();
  }

  /** @internal Connects to the daemon, starts the command and waits for its `started` frame. */
  async _start(t: Transport, id: string, opts: ExecStreamOptions): Promise<void> {
    const { stdin, signal, ...start } = opts;
    const path = pathOf`/api/v1/sandboxes/${id}/exec`;
    const url = t.url(path).replace(/^http/, "ws");
    try {
      this.#socket = await openSocket(url, t.authHeaders(), { message: (m) => this.#frame(m), close: (c, r) => this.#closed(c, r) }, signal);
    } catch (err) {
      throw err instanceof AirlockError ? err : await refusal(t, path, err, signal);
    }
    await this.#send({ type: "start", start: start as ExecStart });
    if (stdin !== undefined) {
      void this.#pump(stdin).catch((err) => this.#fail(err));
    }
    await this.#started;
  }

  async #pump(stdin: StdinData | AsyncIterable<StdinData>): Promise<void> {
    if (typeof stdin === "string" || stdin instanceof Uint8Array) await this.write(stdin);
    else for await (const chunk of stdin) await this.write(chunk);
    await this.closeStdin();
  }

  async #send(f: Frame): Promise<void> {
    if (this.#done || !this.#socket) throw new AirlockConnectionError(`airlock: interactive exec: the session has ended; cannot send ${f.type}`);
    await this.#socket.send(JSON.stringify(f));
  }

  #frame(text: string): void {
    let f: Frame;
    try {
      f = JSON.parse(text) as Frame;
    } catch (cause) {
      this.#fail(new Error(`airlock: interactive exec: bad frame from the daemon: ${text.slice(0, 100)}`, { cause }));
      return;
    }
    switch (f.type) {
      case "started":
        this.#executionId = f.executionId ?? "";
        this.#onStarted.resolve();
        break;
      case "stdout":
      case "stderr":
        this.#chunk({ stream: f.type, data: fromBase64(f.data ?? "") });
        break;
      case "exit":
        if (!f.result) {
          this.#fail(new Error("airlock: interactive exec: exit frame without a result"));
          break;
        }
        this.#executionId ||= f.result.executionId;
        this.#finish(f.result);
        break;
      case "error": {
        const e = f.error;
        const code = e?.code ?? "internal";
        this.#fail(new AirlockError({ status: statusForCode(code), code, message: e?.message ?? "interactive exec failed", field: e?.field, sandboxStatus: e?.status }));
        break;
      }
      // Frame types this client does not know are ignored.
    }
  }

  #chunk(c: OutputChunk): void {
    if (this.#pending) this.#pending.push(c);
    else if (this.#output) this.#output.push(c);
    else (c.stream === "stdout" ? this.#stdout : this.#stderr)!.push(c.data);
  }

  #split(): void {
    if (this.#output) throw new Error("airlock: ExecSession: read either output or stdout and stderr");
    if (this.#stdout) return;
    this.#stdout = new Queue();
    this.#stderr = new Queue();
    for (const c of this.#pending ?? []) (c.stream === "stdout" ? this.#stdout : this.#stderr).push(c.data);
    this.#pending = undefined;
    if (this.#done) this.#endQueues();
  }

  #finish(r: ExecResult): void {
    if (this.#done) return;
    this.#done = true;
    this.#endQueues();
    this.#onStarted.resolve();
    this.#settle.resolve(r);
    this.#socket?.close(1000, "");
  }

  #fail(err: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#endQueues(err);
    this.#onStarted.reject(err);
    this.#settle.reject(err);
    this.#socket?.close(1000, "");
  }

  #endQueues(err?: unknown): void {
    this.#failure ??= err;
    for (const q of [this.#stdout, this.#stderr, this.#output]) q?.end(this.#failure);
  }

  #closed(code: number, reason: string): void {
    this.#fail(new AirlockConnectionError(`airlock: interactive exec: the daemon closed the connection before the command exited (${code}${reason ? ` ${reason}` : ""})`));
  }
}

/**
 * refusal explains a WebSocket that could not be opened where the platform's WebSocket does not
 * say why (Bun, Deno): the same route asked without the upgrade answers the refusal (an unknown
 * sandbox's 404, a wrong key's 401), or, when the sandbox is there, a 400 asking for the upgrade:
 * then the failure was the connection's, and err stands.
 */
async function refusal(t: Transport, path: string, err: unknown, signal?: AbortSignal): Promise<unknown> {
  try {
    await t.send({ method: "GET", path, signal });
  } catch (probe) {
    if (probe instanceof AirlockError && probe.field !== "Upgrade") return probe;
  }
  return err;
}

/** execStream runs a command interactively; see Sandboxes.execStream. */
export async function execStream(t: Transport, id: string, opts: ExecStreamOptions): Promise<ExecSession> {
  const s = new ExecSession();
  try {
    await s._start(t, id, opts);
  } catch (err) {
    s.close();
    throw err;
  }
  return s;
}
