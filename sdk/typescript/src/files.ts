/**
 * Files inside a sandbox. `client.sandboxes.files`. Paths are sandbox paths; relative ones start
 * at the sandbox's workdir. Reads and writes stream: a file need not fit in memory.
 * @module
 */

import { AirlockConnectionError } from "./errors.js";
import type { FileInfo } from "./gen/openapi.js";
import { pathOf, type CallOptions, type RawBody, type Transport } from "./transport.js";

/** What write takes: text (UTF-8), bytes, a Blob (e.g. a file), or a stream of bytes. */
export type FileData = string | Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** Options of write. */
export interface WriteOptions extends CallOptions {
  /** Permission bits: a number (0o755) or octal digits ("0755"). Default 0644. */
  mode?: number | string;
  /** Create missing parent directories (default true). */
  parents?: boolean;
}

/** Options of mkdir. */
export interface MkdirOptions extends CallOptions {
  /** Create missing parent directories too. */
  parents?: boolean;
}

/** Options of remove. */
export interface RemoveOptions extends CallOptions {
  /** Remove a directory and everything in it. */
  recursive?: boolean;
}

/** Files inside sandboxes. */
export class Files {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** readStream opens a file for reading: its content as a stream of bytes. */
  async readStream(id: string, path: string, opts?: CallOptions): Promise<ReadableStream<Uint8Array>> {
    const ans = await this.#t.send({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/files`, query: { path }, accept: "application/octet-stream", ...opts });
    return ans.stream();
  }

  /** read returns a file's content; a missing one is an AirlockError 404. */
  async read(id: string, path: string, opts?: CallOptions): Promise<Uint8Array> {
    const ans = await this.#t.send({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/files`, query: { path }, accept: "application/octet-stream", ...opts });
    try {
      return await ans.bytes();
    } catch (err) {
      if (opts?.signal?.aborted) throw opts.signal.reason ?? err;
      throw new AirlockConnectionError(`airlock: reading ${path} of ${id}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** readText returns a file's content decoded as UTF-8. */
  async readText(id: string, path: string, opts?: CallOptions): Promise<string> {
    return new TextDecoder().decode(await this.read(id, path, opts));
  }

  /**
   * write creates or replaces a file with data, atomically (nobody sees half a file), creating
   * missing parent directories unless `parents: false`. Resolves to the file's description.
   */
  write(id: string, path: string, data: FileData, opts: WriteOptions = {}): Promise<FileInfo> {
    const { mode, parents = true, signal } = opts;
    return this.#t.call({
      method: "PUT",
      path: pathOf`/api/v1/sandboxes/${id}/files`,
      query: { path, mode: typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode, parents: parents ? "true" : undefined },
      body: rawBody(data),
      contentType: "application/octet-stream",
      signal,
    });
  }

  /** list describes the entries of a directory. */
  list(id: string, path: string, opts?: CallOptions): Promise<FileInfo[]> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/files/list`, query: { path }, ...opts });
  }

  /** stat describes one file; a missing one is an AirlockError 404. */
  stat(id: string, path: string, opts?: CallOptions): Promise<FileInfo> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/files/stat`, query: { path }, ...opts });
  }

  /** mkdir creates a directory (and its missing parents with `parents: true`). */
  mkdir(id: string, path: string, opts: MkdirOptions = {}): Promise<FileInfo> {
    const { parents, signal } = opts;
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/sandboxes/${id}/files/mkdir`, query: { path, parents: parents ? "true" : undefined }, signal });
  }

  /** remove removes a file or an empty directory (any directory with `recursive: true`); resolves to what it was. */
  remove(id: string, path: string, opts: RemoveOptions = {}): Promise<FileInfo> {
    const { recursive, signal } = opts;
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/sandboxes/${id}/files`, query: { path, recursive: recursive ? "true" : undefined }, signal });
  }

  /**
   * uploadDir copies a local directory into the sandbox at sandboxDir: it creates each directory
   * and writes each regular file, streamed from disk, with its permission bits. Symbolic links
   * and special files are skipped (a link could lead out of localDir). Resolves to the files
   * written, in the order written. Needs node:fs (Node, Bun, Deno).
   */
  async uploadDir(id: string, localDir: string, sandboxDir: string, opts?: CallOptions): Promise<FileInfo[]> {
    const fs = await import("node:fs");
    const { join } = await import("node:path");
    const written: FileInfo[] = [];
    const base = sandboxDir.replace(/\/+$/, "") || "/";
    await this.mkdir(id, base, { parents: true, ...opts });
    const walk = async (local: string, remote: string): Promise<void> => {
      const entries = await fs.promises.readdir(local, { withFileTypes: true });
      entries.sort((a, b) => (a.name < b.name ? -1 : 1));
      for (const e of entries) {
        const l = join(local, e.name);
        const r = `${remote === "/" ? "" : remote}/${e.name}`;
        if (e.isDirectory()) {
          await this.mkdir(id, r, { parents: true, ...opts });
          await walk(l, r);
        } else if (e.isFile()) {
          const st = await fs.promises.stat(l);
          const data = fs.openAsBlob ? await fs.openAsBlob(l) : await fs.promises.readFile(l);
          written.push(await this.write(id, r, data, { mode: st.mode & 0o777, parents: false, ...opts }));
        }
      }
    };
    await walk(localDir, base);
    return written;
  }
}

/** rawBody turns what write takes into a body fetch sends. */
function rawBody(data: FileData): RawBody {
  if (typeof data === "string" || data instanceof Uint8Array || data instanceof Blob || data instanceof ReadableStream) return data;
  const it = data[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      const { value, done } = await it.next();
      if (done) c.close();
      else c.enqueue(value);
    },
    async cancel(reason) {
      await it.return?.(reason);
    },
  });
}
