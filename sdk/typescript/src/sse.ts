/**
 * Server-sent events: a reader of text/event-stream, and a followed stream (logs, events) that
 * resumes after the last item it delivered when the connection drops, so that no item is
 * delivered twice.
 * @module
 */

import { AirlockConnectionError, AirlockError, errorFromBody } from "./errors.js";
import { decodeEnvelope, readText, type Answer } from "./transport.js";

/** One dispatched event of a text/event-stream. */
export interface SSEEvent {
  id: string;
  event: string;
  data: string;
}

/** The longest line an event stream may have. */
const maxLine = 16 << 20;

/**
 * readEvents parses a text/event-stream (the HTML "server-sent events" format): "field: value"
 * lines, events separated by a blank line, data lines joined with "\n", comments ignored. An event
 * cut off by the end of the stream is dropped, as the format requires.
 */
export async function* readEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<SSEEvent> {
  const decoder = new TextDecoder();
  let buf = "";
  let ev: SSEEvent = { id: "", event: "", data: "" };
  let seen = false;
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (seen) yield { ...ev, event: ev.event || "message", data: ev.data.replace(/\n$/, "") };
        ev = { id: "", event: "", data: "" };
        seen = false;
        continue;
      }
      if (line.startsWith(":")) continue; // a comment, e.g. a keep-alive
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (name === "data") ev.data += val + "\n";
      else if (name === "event") ev.event = val;
      else if (name === "id") ev.id = val;
      else continue; // retry, and fields this reader does not know
      seen = true;
    }
    if (buf.length > maxLine) throw new Error(`event stream line longer than ${maxLine} bytes`);
  }
}

/** A followed stream is reconnected this many times in a row, as long as none brings anything. */
const maxReconnects = 5;

/** How one followed stream (logs, events) is opened and read. */
export interface FollowSpec<T> {
  /** For errors: "logs of sbx_…". */
  what: string;
  /** Opens the stream resuming after `last` (undefined: from the start). */
  open(last: number | undefined, signal: AbortSignal): Promise<Answer>;
  /** The SSE event name of an item. */
  event: string;
  /** The item's sequence number, by which a resumed stream skips what was delivered. */
  seq(item: T): number;
  /** The items of an answer that does not stream (a JSON envelope). */
  page(data: unknown): T[];
  /** Where to start: resume after this sequence number. */
  after?: number;
  signal?: AbortSignal;
}

/** A stream that ended without the daemon's "end": worth resuming. */
class Dropped extends Error {}

/**
 * follow yields the items of a followed stream until the daemon ends it ("end" event), the
 * consumer stops, the signal aborts, or reconnecting fails {@link maxReconnects} times in a row
 * without bringing anything (then an AirlockConnectionError). A refusal (an unknown sandbox, a
 * bad filter) is the AirlockError of its answer. Leaving the loop closes the connection.
 */
export async function* follow<T>(spec: FollowSpec<T>): AsyncGenerator<T, void, undefined> {
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(spec.signal?.reason);
  spec.signal?.addEventListener("abort", onAbort, { once: true });
  let last = spec.after;
  let delivered = 0;
  let connected = false;
  let failures = 0;
  try {
    for (;;) {
      const before = delivered;
      let ans: Answer;
      try {
        ans = await spec.open(last, ctl.signal);
      } catch (err) {
        // A refusal, an abort, or no daemon to begin with ends the stream; a daemon gone
        // mid-stream is retried.
        if (err instanceof AirlockError || ctl.signal.aborted || !connected) throw err;
        await retry(++failures, err);
        continue;
      }
      connected = true;
      try {
        for await (const item of items(spec, ans, ctl.signal)) {
          if (delivered > 0 && last !== undefined && spec.seq(item) <= last) continue; // a resumed stream repeats it
          yield item;
          delivered++;
          last = spec.seq(item);
        }
        return; // the daemon ended the stream
      } catch (err) {
        if (!(err instanceof Dropped) || ctl.signal.aborted) throw ctl.signal.aborted ? (spec.signal?.reason ?? err) : err;
        if (delivered > before) failures = 0;
        await retry(++failures, err.cause);
      }
    }
  } finally {
    spec.signal?.removeEventListener("abort", onAbort);
    ctl.abort(); // closes a connection the consumer left
  }

  async function retry(n: number, cause: unknown): Promise<void> {
    if (n > maxReconnects) {
      throw new AirlockConnectionError(`airlock: following ${spec.what}: ${(cause as Error)?.message ?? cause}`, { cause });
    }
    await sleep(Math.min(100 * 2 ** (n - 1), 1000), ctl.signal);
  }
}

/**
 * items reads one answer of a followed stream: the items of its SSE events until "end", or of
 * a JSON answer when the daemon did not stream. A connection that ends without "end" throws
 * Dropped.
 */
async function* items<T>(spec: FollowSpec<T>, ans: Answer, signal: AbortSignal): AsyncGenerator<T> {
  if (!(ans.header("Content-Type") ?? "").startsWith("text/event-stream")) {
    yield* spec.page(decodeEnvelope(ans, await readText(ans, signal)));
    return;
  }
  try {
    for await (const ev of readEvents(ans.chunks())) {
      if (ev.event === spec.event || ev.event === "message") yield JSON.parse(ev.data) as T;
      else if (ev.event === "end") return;
      else if (ev.event === "error") throw errorFromBody(ans.status, ev.data);
    }
  } catch (err) {
    if (err instanceof AirlockError || err instanceof SyntaxError) throw err;
    throw new Dropped(String(err), { cause: err });
  }
  throw new Dropped("the stream ended before the daemon's end");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}
