// The SDK's suite: offline tests of the client's machinery (a fake fetch), then everything
// against a real airlock serve that the suite starts (harness.ts).

import { after, afterEach, before, describe } from "node:test";
import { adminSuite } from "./admin.js";
import { cleanupSuite } from "./cleanup.js";
import { compatSuite } from "./compat.js";
import { coverageSuite } from "./coverage.js";
import { errorsSuite } from "./errors.js";
import { eventsSuite } from "./events.js";
import { execSuite } from "./exec.js";
import { filesSuite } from "./files.js";
import { rootReason, start, stop, type Daemon } from "./harness.js";
import { offlineSuite } from "./offline.js";
import { runtimesSuite } from "./runtimes.js";
import { sandboxesSuite } from "./sandboxes.js";
import { seedSuite } from "./seed.js";
import { snapshotsSuite } from "./snapshots.js";
import { toolsSuite } from "./tools.js";

offlineSuite();

const skip = rootReason();
// A test that hangs (a stream that never ends) fails the suite rather than holding make test.
describe("against airlock serve", { skip, timeout: 5 * 60_000 }, () => {
  let daemon: Daemon | undefined;
  let failed = false;
  const d = () => {
    if (!daemon) throw new Error("the daemon did not start");
    return daemon;
  };
  before(async () => {
    daemon = await start();
  });
  afterEach((t) => {
    if ((t as { passed?: boolean }).passed === false) failed = true;
  });
  after(async () => {
    await stop(failed || process.exitCode === 1);
  });

  seedSuite(d);
  compatSuite(d);
  sandboxesSuite(d);
  errorsSuite(d);
  cleanupSuite(d);
  filesSuite(d);
  execSuite(d);
  snapshotsSuite(d);
  eventsSuite(d);
  adminSuite(d);
  toolsSuite(d);
  coverageSuite(d);
  runtimesSuite(d);
});
