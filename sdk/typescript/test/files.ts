// client.sandboxes.files: byte-exact round trips, streams, directories, uploadDir.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { AirlockClient, SandboxHandle } from "@airlock/sdk";
import { text, type Daemon } from "./harness.js";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

export function filesSuite(d: () => Daemon): void {
  describe("files", () => {
    let c: AirlockClient;
    let sb: SandboxHandle;
    before(async () => {
      c = d().client();
      sb = await c.sandboxes.create({ name: "files", resources: { diskMb: 1024 } });
    });
    after(async () => {
      await sb?.[Symbol.asyncDispose]();
    });

    it("round-trips 10 MB of random bytes exactly", async () => {
      const data = new Uint8Array(randomBytes(10 << 20));
      const info = await c.sandboxes.files.write(sb.id, "/workspace/big.bin", data);
      assert.equal(info.size, data.length);
      assert.equal(info.type, "file");
      const back = await c.sandboxes.files.read(sb.id, "/workspace/big.bin");
      assert.equal(back.length, data.length);
      assert.equal(sha(back), sha(data));
      // The sandbox sees the same bytes.
      const r = await c.sandboxes.exec(sb.id, { command: "sha256sum /workspace/big.bin" });
      assert.equal(r.stdout.split(" ")[0], sha(data));
    });

    it("writes text, streams and async iterables; reads text and streams", async () => {
      await c.sandboxes.files.write(sb.id, "notes/a.txt", "héllo\n");
      assert.equal(await c.sandboxes.files.readText(sb.id, "/workspace/notes/a.txt"), "héllo\n");

      const chunks = [new Uint8Array([0, 1, 2]), new Uint8Array([255, 254])];
      async function* gen() {
        yield* chunks;
      }
      await c.sandboxes.files.write(sb.id, "/workspace/gen.bin", gen());
      assert.deepEqual([...(await c.sandboxes.files.read(sb.id, "/workspace/gen.bin"))], [0, 1, 2, 255, 254]);

      const stream = new ReadableStream<Uint8Array>({
        start(ctl) {
          ctl.enqueue(new TextEncoder().encode("from "));
          ctl.enqueue(new TextEncoder().encode("a stream"));
          ctl.close();
        },
      });
      await c.sandboxes.files.write(sb.id, "/workspace/stream.txt", stream);
      const rs = await c.sandboxes.files.readStream(sb.id, "/workspace/stream.txt");
      let got = "";
      for await (const ch of rs as unknown as AsyncIterable<Uint8Array>) got += text(ch);
      assert.equal(got, "from a stream");
    });

    it("sets the mode, lists, stats, makes and removes directories", async () => {
      const fi = await c.sandboxes.files.write(sb.id, "/workspace/bin/run.sh", "#!/bin/sh\necho ran\n", { mode: 0o755 });
      assert.equal(fi.mode, "0755");
      assert.equal((await c.sandboxes.exec(sb.id, { command: "/workspace/bin/run.sh" })).stdout, "ran\n");
      await assert.rejects(c.sandboxes.files.write(sb.id, "/workspace/no/such/dir/x", "x", { parents: false }), { name: "AirlockError" });

      const dir = await c.sandboxes.files.mkdir(sb.id, "/workspace/d1/d2", { parents: true });
      assert.equal(dir.type, "dir");
      await c.sandboxes.files.write(sb.id, "/workspace/d1/f.txt", "f");
      const names = (await c.sandboxes.files.list(sb.id, "/workspace/d1")).map((f) => `${f.name}:${f.type}`).sort();
      assert.deepEqual(names, ["d2:dir", "f.txt:file"]);
      const st = await c.sandboxes.files.stat(sb.id, "/workspace/d1/f.txt");
      assert.equal(st.size, 1);
      assert.equal(st.path, "/workspace/d1/f.txt");

      await assert.rejects(c.sandboxes.files.remove(sb.id, "/workspace/d1"), { name: "AirlockError" });
      await c.sandboxes.files.remove(sb.id, "/workspace/d1", { recursive: true });
      await assert.rejects(c.sandboxes.files.stat(sb.id, "/workspace/d1"), { status: 404 });
    });

    it("uploads a local directory tree", async () => {
      const local = mkdtempSync(join(tmpdir(), "airlock-upload-"));
      try {
        mkdirSync(join(local, "pkg/sub"), { recursive: true });
        mkdirSync(join(local, "empty"));
        writeFileSync(join(local, "main.py"), "print('main')\n");
        writeFileSync(join(local, "pkg/__init__.py"), "");
        const blob = new Uint8Array(randomBytes(300_000));
        writeFileSync(join(local, "pkg/sub/data.bin"), blob);
        writeFileSync(join(local, "tool.sh"), "#!/bin/sh\necho tool\n");
        chmodSync(join(local, "tool.sh"), 0o750);
        symlinkSync("/etc/passwd", join(local, "link"));

        const written = await c.sandboxes.files.uploadDir(sb.id, local, "/workspace/up/");
        assert.deepEqual(written.map((f) => f.path), ["/workspace/up/main.py", "/workspace/up/pkg/__init__.py", "/workspace/up/pkg/sub/data.bin", "/workspace/up/tool.sh"]);
        assert.equal(sha(await c.sandboxes.files.read(sb.id, "/workspace/up/pkg/sub/data.bin")), sha(blob));
        assert.equal((await c.sandboxes.files.stat(sb.id, "/workspace/up/tool.sh")).mode, "0750");
        assert.equal((await c.sandboxes.files.stat(sb.id, "/workspace/up/empty")).type, "dir");
        await assert.rejects(c.sandboxes.files.stat(sb.id, "/workspace/up/link"), { status: 404 }, "symlinks are skipped");
        assert.equal((await c.sandboxes.exec(sb.id, { command: "cd /workspace/up && python3 main.py && ./tool.sh" })).stdout, "main\ntool\n");
      } finally {
        rmSync(local, { recursive: true, force: true });
      }
    });
  });
}
