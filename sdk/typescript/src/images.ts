/**
 * The host's OCI images. `client.images`. Every key lists them; pulling and removing need an
 * admin key (403 otherwise).
 * @module
 */

import type { Image, ImageRemoval } from "./gen/openapi.js";
import type { CallOptions, Transport } from "./transport.js";

/** imagePath is an image's route: a ref's slashes stay (`/api/v1/images/ghcr.io/org/app:v1`). */
function imagePath(ref: string): string {
  return "/api/v1/images/" + ref.split("/").map((s) => encodeURIComponent(s).replace(/%3A/gi, ":").replace(/%40/g, "@")).join("/");
}

/** The daemon's image store. */
export class Images {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** list returns the host's images, sorted by ref. */
  list(opts?: CallOptions): Promise<Image[]> {
    return this.#t.call({ method: "GET", path: "/api/v1/images", ...opts });
  }

  /** get returns one image by ref or digest; an unknown one is an AirlockError 404. */
  get(ref: string, opts?: CallOptions): Promise<Image> {
    return this.#t.call({ method: "GET", path: imagePath(ref), ...opts });
  }

  /**
   * pull fetches an image from its registry (admin key) and resolves to it once stored. A
   * malformed ref is a 400 (`field: "ref"`), one the registry lacks a 404, a registry out of
   * reach a 422.
   */
  pull(ref: string, opts?: CallOptions): Promise<Image> {
    return this.#t.call({ method: "POST", path: "/api/v1/images", json: { ref }, ...opts });
  }

  /** remove deletes an image (by digest: every ref of it) and the layers only it used (admin key). */
  remove(ref: string, opts?: CallOptions): Promise<ImageRemoval> {
    return this.#t.call({ method: "DELETE", path: imagePath(ref), ...opts });
  }

  /** prune removes the layers no image references (admin key). */
  prune(opts?: CallOptions): Promise<ImageRemoval> {
    return this.#t.call({ method: "POST", path: "/api/v1/images/prune", ...opts });
  }
}
