// Coverage against the daemon's live OpenAPI document: the SDK's types are what the generator
// makes of it, every operation has an SDK method that takes and answers its types, and every
// schema and field is in the SDK's public types (read from dist/index.d.ts with the TypeScript
// compiler). Each fails when the daemon grows a route, a parameter, a schema or a field the SDK
// lacks.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import { AirlockClient, operationMethods, operations } from "@airlock/sdk";
import { repoDir, sdkDir, type Daemon } from "./harness.js";

interface Schema {
  properties?: Record<string, unknown>;
  required?: string[];
}
interface Doc {
  paths: Record<string, Record<string, { operationId: string }>>;
  components: { schemas: Record<string, Schema> };
}
interface Generator {
  generate(doc: unknown): string;
  tsName(schema: string): string;
}

/**
 * Schemas no method takes or answers as they are, and why: each must still be an exported type
 * with every field.
 */
const notOnMethods: Record<string, string> = {
  ApiError: "the error object: AirlockError carries its code, message, field and status",
  CompatError: "the compatibility surface's error: an AirlockError",
  Frame: "the exec WebSocket's frames, sent and read by ExecSession",
  ExecStart: "ExecStreamOptions is ExecStart with stdin as bytes or a stream",
  RestoreRequest: "snapshots.restore takes the snapshotId",
  PullRequest: "images.pull takes the ref",
  CompatCreateRequest: "the answer form of a compat create request; requests take CompatCreateRequestInput",
  CompatConfig: "the answer form of a compat config; requests take CompatConfigInput",
  Pool: "a pool's definition: PoolStatus answers it with its counters, put takes PoolInput",
  ToolCallRequest: "tools.call takes the arguments and { sandboxId, agentId } (ToolCallOptions)",
};

export function coverageSuite(d: () => Daemon): void {
  describe("coverage of the live OpenAPI document", () => {
    let doc: Doc;
    let gen: Generator;
    before(async () => {
      doc = (await d().client().openapi()) as unknown as Doc;
      gen = (await import(pathToFileURL(join(sdkDir, "scripts/gen-types.mjs")).href)) as Generator;
    });

    it("the committed document and the build's types are the live document's", () => {
      const committed = JSON.parse(readFileSync(join(repoDir, "api/openapi.json"), "utf8")) as { info: { version: string } };
      assert.deepEqual({ ...committed, info: { ...committed.info, version: "" } }, { ...doc, info: { ...(doc as unknown as typeof committed).info, version: "" } }, "api/openapi.json is stale: make openapi");
      assert.equal(readFileSync(join(sdkDir, "src/gen/openapi.ts"), "utf8"), gen.generate(doc), "src/gen/openapi.ts is not what scripts/gen-types.mjs makes of the live document: npm run build");
    });

    it("maps every operation to an SDK method that exists", () => {
      const live = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId));
      assert.deepEqual(Object.keys(operationMethods).sort(), [...live].sort(), "operationMethods (src/operations.ts) and the document's operations differ");
      const client = new AirlockClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1" });
      for (const [op, m] of Object.entries(operationMethods)) {
        let target: unknown = client;
        for (const part of m.method.split(".")) target = (target as Record<string, unknown>)[part];
        assert.equal(typeof target, "function", `${op}: client.${m.method} is not a method`);
      }
    });

    describe("the public types (dist/index.d.ts)", () => {
      let checker: ts.TypeChecker;
      let exported: Map<string, ts.Symbol>;
      let clientType: ts.Type;
      before(() => {
        const program = ts.createProgram([join(sdkDir, "dist/index.d.ts")], {
          strict: true,
          noEmit: true,
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext,
          target: ts.ScriptTarget.ES2022,
          lib: ["lib.es2022.d.ts", "lib.esnext.disposable.d.ts"],
          types: ["node"],
          typeRoots: [join(sdkDir, "node_modules/@types")],
        });
        const diags = ts.getPreEmitDiagnostics(program);
        assert.deepEqual(diags.map((x) => ts.flattenDiagnosticMessageText(x.messageText, "\n")), [], "dist/index.d.ts compiles");
        checker = program.getTypeChecker();
        const mod = checker.getSymbolAtLocation(program.getSourceFile(join(sdkDir, "dist/index.d.ts"))!)!;
        exported = new Map(checker.getExportsOfModule(mod).map((s) => [s.name, s]));
        clientType = checker.getDeclaredTypeOfSymbol(resolve(exported.get("AirlockClient")!));
      });

      const resolve = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
      const typeOf = (name: string): ts.Type => {
        const s = exported.get(name);
        assert.ok(s, `the SDK exports no type ${name}`);
        return checker.getDeclaredTypeOfSymbol(resolve(s));
      };

      it("export every schema with every field, required ones not optional", () => {
        for (const [schema, s] of Object.entries(doc.components.schemas)) {
          const t = typeOf(gen.tsName(schema));
          const required = new Set(s.required ?? []);
          for (const field of Object.keys(s.properties ?? {})) {
            const p = t.getProperty(field);
            assert.ok(p, `${schema}.${field} is not in the SDK's type ${gen.tsName(schema)}`);
            const optional = (p.flags & ts.SymbolFlags.Optional) !== 0;
            assert.equal(optional, !required.has(field), `${schema}.${field}: ${required.has(field) ? "required in answers" : "optional"}, the SDK's type says otherwise`);
          }
          for (const p of t.getProperties()) {
            assert.ok(p.name in (s.properties ?? {}), `${gen.tsName(schema)}.${p.name} is not in the document's ${schema}`);
          }
        }
      });

      it("give each operation's method the operation's request, query and answer types", () => {
        for (const [op, m] of Object.entries(operationMethods)) {
          const info = operations[op as keyof typeof operations];
          let t: ts.Type = clientType;
          let sym: ts.Symbol | undefined;
          for (const part of m.method.split(".")) {
            sym = t.getProperty(part);
            assert.ok(sym, `${op}: no ${m.method} in the AirlockClient type`);
            t = checker.getTypeOfSymbol(sym);
          }
          const [sig] = t.getCallSignatures();
          assert.ok(sig, `${op}: ${m.method} is not callable`);
          const params = sig.getParameters().map((p) => checker.getTypeOfSymbol(p));
          const where = `${op} (${m.method})`;

          if (!m.takes && info.request && info.request !== "binary") {
            const want = typeOf(info.request);
            assert.ok(params.some((p) => checker.isTypeAssignableTo(want, p)), `${where}: no parameter takes every ${info.request}`);
          }
          if (!m.answers && info.response && /^[A-Z]/.test(info.response)) {
            const awaited = checker.getAwaitedType(sig.getReturnType())!;
            const list = info.response.endsWith("[]");
            const want = typeOf(info.response.replace(/\[\]$/, ""));
            const got = list ? (checker.isArrayType(awaited) ? checker.getTypeArguments(awaited as ts.TypeReference)[0]! : undefined) : awaited;
            assert.ok(got && checker.isTypeAssignableTo(got, want), `${where}: answers ${checker.typeToString(awaited)}, not ${info.response}`);
          }
          const options = params.at(-1);
          for (const q of info.query) {
            if (m.implicit?.includes(q)) continue;
            assert.ok(options?.getNonNullableType().getProperty(q), `${where}: the query parameter ${q} is not an option of ${m.method}`);
          }
        }
      });

      it("use every schema in the client's methods, or say why not", () => {
        const reached = new Set<string>();
        const seen = new Set<ts.Type>();
        // Types of the SDK's own files are walked through; those of the platform (Promise,
        // AsyncGenerator, Record, Uint8Array) only through their type arguments.
        const ours = (t: ts.Type) => (t.aliasSymbol ?? t.getSymbol())?.declarations?.some((d) => d.getSourceFile().fileName.startsWith(join(sdkDir, "dist"))) ?? false;
        const visit = (t: ts.Type): void => {
          if (seen.has(t)) return;
          seen.add(t);
          const name = (t.aliasSymbol ?? t.getSymbol())?.name;
          if (name) reached.add(name);
          t.aliasTypeArguments?.forEach(visit);
          if (t.isUnionOrIntersection()) t.types.forEach(visit);
          if (t.flags & ts.TypeFlags.Object && (t as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference) {
            checker.getTypeArguments(t as ts.TypeReference).forEach(visit);
          }
          if (!ours(t) && !(t.flags & ts.TypeFlags.Object && (t as ts.ObjectType).objectFlags & ts.ObjectFlags.Anonymous)) return;
          for (const s of t.getCallSignatures()) {
            s.getParameters().forEach((p) => visit(checker.getTypeOfSymbol(p)));
            visit(s.getReturnType());
          }
          for (const p of t.getProperties()) visit(checker.getTypeOfSymbol(p));
        };
        visit(clientType);
        for (const schema of Object.keys(doc.components.schemas)) {
          const name = gen.tsName(schema);
          if (name in notOnMethods) {
            assert.ok(!reached.has(name), `${name} is used by a method now: remove it from notOnMethods`);
            continue;
          }
          assert.ok(reached.has(name), `no method of AirlockClient takes or answers ${name} (a new schema?)`);
        }
      });
    });
  });
}
