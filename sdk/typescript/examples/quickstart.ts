// The README's quick start: run it against `make run`'s daemon with the key it printed,
//   AIRLOCK_TOKEN=alk_... node quickstart.js
import { AirlockClient } from "@airlock/sdk";

const client = new AirlockClient(); // AIRLOCK_TOKEN, and AIRLOCK_HOST (default http://127.0.0.1:7070)

// The sandbox is terminated when this block is left, also if something in it throws.
await using sb = await client.sandboxes.create({ name: "quickstart", resources: { cpu: "1.0", memoryMb: 512 } });
console.log(`sandbox ${sb.id} is ${sb.status}`);

const res = await client.sandboxes.exec(sb.id, { command: ["python3", "-c", "print(6*7)"] });
console.log(`exit ${res.exitCode}: ${res.stdout.trim()}`); // exit 0: 42

await client.sandboxes.files.write(sb.id, "/workspace/hello.py", "import sys\nprint('hello from', sys.platform)\n");
const session = await client.sandboxes.execStream(sb.id, { command: "python3 /workspace/hello.py" });
for await (const chunk of session.stdout) process.stdout.write(chunk);
console.log(`exit ${(await session.wait()).exitCode}`);
