/**
 * An unbounded single-consumer queue that is an async iterable: what is pushed is yielded in
 * order; after end() the iteration finishes (or throws end's error) once the queue is drained.
 * @module
 */
export class Queue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #ended = false;
  #error: unknown;
  #wake: (() => void) | undefined;

  /** push adds an item, unless the queue has ended. */
  push(item: T): void {
    if (this.#ended) return;
    this.#items.push(item);
    this.#wake?.();
  }

  /** end finishes the queue: the consumer gets what is queued, then the end (or err). */
  end(err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = err;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#ended) {
        if (this.#error !== undefined) throw this.#error;
        return;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}

/** base64 encodes bytes. */
export function toBase64(b: Uint8Array): string {
  const B = (globalThis as { Buffer?: typeof Buffer }).Buffer;
  if (B) return B.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/** fromBase64 decodes base64 into bytes. */
export function fromBase64(s: string): Uint8Array {
  const B = (globalThis as { Buffer?: typeof Buffer }).Buffer;
  if (B) {
    const buf = B.from(s, "base64");
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** bytesOf is the UTF-8 encoding of a string, or the bytes as they are. */
export function bytesOf(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}
