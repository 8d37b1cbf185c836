// Builds the console into internal/console/assets, where go build embeds it (make console):
// the SDK's types generated from api/openapi.json, then one bundle of src/main.ts with its CSS
// (xterm.js's among it) under content-hashed names, index.html naming them, and a .gz of each.
// It fails when the page's first load would be over its budget (gzipped).
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "../..");
const out = join(repo, "internal/console/assets");
/** The first load's budget: every asset the page loads, gzipped (docs/console.md). */
export const budget = 300 * 1024;

// The SDK's types come from the API document; the SDK's build makes them, and so does this.
execFileSync(process.execPath, [join(repo, "sdk/typescript/scripts/gen-types.mjs")], { cwd: join(repo, "sdk/typescript"), stdio: "inherit" });

for (const f of readdirSync(out)) if (f !== "README.md") rmSync(join(out, f), { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await build({
  entryPoints: { app: join(here, "src/main.ts") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["chrome120", "firefox120", "safari17"],
  platform: "browser",
  // The SDK loads these only in Node (ws, node:http...): never in a page.
  external: ["ws", "node:*"],
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  outdir: out,
  metafile: true,
  legalComments: "linked",
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outputs.find((f) => /^app-.*\.js$/.test(f));
const css = outputs.find((f) => /^app-.*\.css$/.test(f));
if (!js || !css) throw new Error(`build: no app bundle among ${outputs.join(", ")}`);
const html = readFileSync(join(here, "src/index.html"), "utf8").replace("{{css}}", css).replace("{{js}}", js);
writeFileSync(join(out, "index.html"), html);

let total = 0;
const sizes = [];
for (const f of readdirSync(out)) {
  if (f === "README.md" || f.endsWith(".gz") || f.endsWith(".LEGAL.txt")) continue;
  const raw = readFileSync(join(out, f));
  const gz = gzipSync(raw, { level: 9 });
  writeFileSync(join(out, f + ".gz"), gz);
  total += gz.length;
  sizes.push(`${f} ${raw.length} B (${gz.length} B gzipped)`);
}
console.log(`console: ${sizes.join(", ")}; first load ${(total / 1024).toFixed(1)} KiB gzipped (budget ${budget / 1024} KiB)`);
if (total > budget) throw new Error(`console: the first load is ${total} B gzipped, over its budget of ${budget} B`);

