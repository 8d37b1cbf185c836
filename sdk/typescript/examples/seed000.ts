// Seed 000's SDK snippet as its document writes it, with only the import and the class name
// changed (@drd.io/sdk's DRDClient → @airlock/sdk's AirlockClient). The daemon finds itself in
// AIRLOCK_HOST; the key is the snippet's DRD_API_KEY. Its agentId must name an agent of the
// daemon's configuration (`agents` in docs/configuration.md); the test suite runs this file.
import { AirlockClient } from "@airlock/sdk";
const drd = new AirlockClient({ apiKey: process.env.DRD_API_KEY! });
// Create and start a sandbox
const sandbox = await drd.sandboxes.create({
name: "test-agent-v2",
isolation: "container",
agentId: "019agent-scanner-...",
resources: { cpu: "2.0", memoryMb: 4096 },
network: { egressPolicy: "restricted" },
});
await drd.sandboxes.start(sandbox.id);
// Execute a command
const result = await drd.sandboxes.exec(sandbox.id, {
command: "python3 /app/agent.py --test-suite full",
timeout: 120,
});
console.log(`Exit code: ${result.exitCode}`);
console.log(`Output: ${result.stdout}`);
// Stream logs in real-time
const logStream = drd.sandboxes.logs(sandbox.id, { follow: true });
for await (const line of logStream) {
console.log(`[${line.timestamp}] ${line.message}`);
}
// Clean up
await drd.sandboxes.terminate(sandbox.id);
