// The SDK under another runtime (Bun, Deno): run by runtimes.ts with AIRLOCK_HOST and
// AIRLOCK_TOKEN set, it prints one JSON line of what it saw. Plain JavaScript, so that each
// runtime runs it as it is, against the built dist/.
import { AirlockClient, AirlockError } from "../dist/index.js";

const c = new AirlockClient();
const text = (b) => new TextDecoder().decode(b);
const sb = await c.sandboxes.create({ name: "runtime-smoke" });
const out = {};
try {
  out.exec = (await c.sandboxes.exec(sb.id, { command: "echo hi" })).stdout;
  const s = await c.sandboxes.execStream(sb.id, { command: "cat", stdin: "streamed\n" });
  out.stream = "";
  for await (const ch of s.stdout) out.stream += text(ch);
  out.exitCode = (await s.wait()).exitCode;
  const p = await c.sandboxes.execStream(sb.id, { command: "stty size", tty: true, rows: 30, cols: 90 });
  out.pty = "";
  for await (const ch of p.output) out.pty += text(ch.data);
  await c.sandboxes.files.write(sb.id, "/workspace/x.bin", new Uint8Array([1, 2, 255]));
  out.file = [...(await c.sandboxes.files.read(sb.id, "/workspace/x.bin"))];
  out.events = [];
  for await (const e of c.sandboxes.followEvents(sb.id, { type: "exec." })) {
    out.events.push(e.type);
    if (out.events.length === 2) break;
  }
  try {
    await c.sandboxes.execStream("sbx_0000", { command: "true" });
  } catch (e) {
    out.refused = e instanceof AirlockError ? `${e.status} ${e.code}` : String(e);
  }
} finally {
  await sb[Symbol.asyncDispose]();
}
out.disposed = (await c.sandboxes.get(sb.id)).status;
console.log(JSON.stringify(out));
