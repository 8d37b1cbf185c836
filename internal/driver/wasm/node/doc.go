// Package node runs node-style command lines (`node -e CODE`, `node file.js`, `node -p EXPR`)
// for airlock's wasm level, on QuickJS-NG compiled to WebAssembly (the npm package quickjs-wasi,
// installed by scripts/wasm/fetch-quickjs.sh) under wazero.
//
// It is not Node.js: it is a JavaScript engine plus a host-provided subset of Node's API, good
// enough for the scripts agents write. `node --version` prints v22.0.0-quickjs-ng-<version> to
// say so; process.version is v22.0.0 (the API level imitated).
//
// # Use
//
//	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(4096))
//	wasi_snapshot_preview1.MustInstantiate(ctx, r)
//	runner, err := node.NewRunner(ctx, r, quickjsWasm) // once; ~0.5 s (two compilations)
//	res, err := runner.Run(ctx, node.Config{Args: []string{"-e", "console.log(1)"}, Stdout: w, FS: mounts})
//
// Run returns a Result (exit code, whether memory ran out) and an error only when the run
// could not be carried out or its context ended (errors.Is(err, context.DeadlineExceeded)).
// Runs are independent and may run concurrently on one Runner.
//
// # Runtime requirements
//
// The runtime must have wasi_snapshot_preview1 instantiated. NewRunner adds an "env" host
// module (the imports of quickjs.wasm), so "env" is reserved in that runtime; several Runners
// may share it. WithMemoryLimitPages caps each run's linear memory (the snapshot needs 47
// pages); Config.MemoryLimit caps QuickJS's own allocator below that.
//
// Prefer a runtime WITHOUT WithCloseOnContextDone for this package. With it, wazero's compiled
// code leaves to Go at every wasm loop iteration to check for closing, which makes QuickJS's
// interpreter about 9 times slower, and every call from Go into the guest starts a goroutine.
// It is not needed: QuickJS calls an interrupt hook (host_interrupt) while it runs JavaScript,
// regular-expression matching included, and the hook stops the run as soon as ctx is done;
// timers, stdin reads and output all watch ctx too. Runs still work with it, only slower.
//
// # How a run works
//
// NewRunner boots QuickJS once, evaluates the JS prelude (js/*.js, embedded) and keeps the
// linear memory as a snapshot. It then recompiles quickjs.wasm with the snapshot's size as the
// initial memory, so a run never grows memory to start. A run instantiates the module (its own
// instance, closed when the run ends), writes the snapshot into its memory and resets
// __stack_pointer, and calls the prelude's boot() with the command line. Then the host drives the event loop: promise jobs until none are left,
// unhandled rejections, then one macrotask (immediate or due timer) at a time, sleeping until the
// next timer. A warm `node -e 'console.log(1)'` costs about 1.3 ms of Run, most of it the
// instantiation.
//
// Math.random is reseeded per run (QuickJS seeds it once, at context creation). Dates are UTC:
// the guest sees no host time zone.
//
// # What the guest gets
//
// Globals: console (log/info/debug → stdout, error/warn/trace → stderr, util.format rules,
// node-style inspection, table, time, count, group), process (argv, env, exit, exitCode, cwd,
// chdir, platform "wasi", version(s), hrtime, memoryUsage, nextTick, stdout/stderr/stdin,
// 'exit'/'beforeExit'/'uncaughtException'/'unhandledRejection' events), Buffer, setTimeout and
// friends with ref/unref, queueMicrotask, structuredClone, TextEncoder/TextDecoder, URL and
// URLSearchParams, AbortController, EventTarget, crypto.getRandomValues/randomUUID, performance,
// a minimal en-US Intl, and a fetch that rejects (no network).
//
// Modules: fs (synchronous API on Config.FS, with callback and fs.promises wrappers and simple
// streams; node-shaped errors with code, errno, syscall, path), path (POSIX), os, util, events,
// assert (+ strict), buffer, crypto (hashes, HMAC, random), readline (over all of stdin),
// string_decoder, url, querystring, timers (+ promises), perf_hooks, tty, module, process,
// console. child_process, worker_threads, cluster, net, http(s), http2, dgram, tls, dns and
// inspector throw Error with code ERR_UNAVAILABLE ("no processes" / "no network"); stream, zlib,
// vm, v8, async_hooks and a few more throw ERR_UNAVAILABLE as not implemented. Unknown modules
// throw node's MODULE_NOT_FOUND.
//
// Loading: CommonJS require of relative paths, node_modules (package.json main and exports),
// JSON files; ES modules (.mjs, "type": "module", or detected from import/export syntax as
// node 22 does) with import.meta.url/filename/dirname, top-level await, dynamic import(), and
// import of CommonJS and builtin modules. require() of an ES module throws ERR_REQUIRE_ESM.
//
// Errors print like node: the source line and a caret, the stack (V8 format, prelude frames
// left out), extra properties; exit code 1. Unknown command-line flags exit 9.
//
// Known gaps: no REPL, no streams module, no zlib, no Intl beyond en-US basics, no async fs
// underneath (callbacks run on the next tick after synchronous work), stdin is read whole on
// first use, and deep recursion beyond QuickJS's 512 KiB native stack limit is a RangeError.
package node
