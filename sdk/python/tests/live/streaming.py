"""Interactive exec over the WebSocket: stdin, output chunks, signals, a PTY with resize, the
exit frame's result, errors; sync and async."""

from __future__ import annotations

import asyncio
import signal
import threading

import harness

import airlock


class Streaming(harness.SandboxTest):
    spec = {"name": "streaming"}

    def test_stdin_to_stdout_and_stderr(self) -> None:
        payload = bytes(range(256)) * 512  # 128 KiB: several stdin frames
        with self.c.sandboxes.exec_stream(self.sb.id, "sha256sum; echo to-stderr >&2; exit 7") as s:
            self.assertTrue(s.execution_id.startswith("exec_"))
            s.write(payload)
            s.close_stdin()
            out = {"stdout": b"", "stderr": b""}
            for stream, data in s:
                out[stream] += data
            result = s.wait()
        import hashlib

        self.assertEqual(out["stdout"].split()[0].decode(), hashlib.sha256(payload).hexdigest())
        self.assertEqual(out["stderr"], b"to-stderr\n")
        self.assertEqual(result.exit_code, 7)
        self.assertEqual(result.execution_id, s.execution_id)
        self.assertEqual(self.c.sandboxes.execution(self.sb.id, s.execution_id).result.exit_code, 7)

    def test_interleaved_conversation(self) -> None:
        # A line in, a line out: the output arrives while the command runs.
        with self.c.sandboxes.exec_stream(self.sb.id, "while read l; do echo got:$l; done") as s:
            it = iter(s)
            for word in ("one", "two"):
                s.write(word + "\n")
                self.assertEqual(next(it), ("stdout", f"got:{word}\n".encode()))
            s.close_stdin()
            self.assertEqual(s.wait().exit_code, 0)

    def test_signal(self) -> None:
        with self.c.sandboxes.exec_stream(self.sb.id, ["sleep", "30"]) as s:
            threading.Timer(0.3, s.signal, (signal.SIGTERM,)).start()
            result = s.wait()
        self.assertEqual(result.exit_code, 128 + signal.SIGTERM)

    def test_pty_resize(self) -> None:
        script = "stty size; read go; stty size; tty"
        with self.c.sandboxes.exec_stream(self.sb.id, script, tty=True, rows=24, cols=80) as s:
            seen = b""
            it = iter(s)
            while b"24 80" not in seen:
                stream, data = next(it)
                self.assertEqual(stream, "stdout")  # a terminal has one stream
                seen += data
            s.resize(40, 120)
            s.write("go\n")
            for _, data in it:
                seen += data
            result = s.wait()
        text = seen.decode()
        self.assertIn("24 80\r\n", text)
        self.assertIn("40 120\r\n", text)
        self.assertIn("/dev/pts/", text)
        self.assertEqual(result.exit_code, 0)

    def test_error_frames_and_refusals(self) -> None:
        with self.assertRaises(airlock.NotFoundError):
            self.c.sandboxes.exec_stream("sbx_00000000000000000000", "true")
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            self.c.sandboxes.exec_stream(self.sb.id, "true", env={"": "x"})
        self.assertTrue(cm.exception.field, cm.exception)

    def test_async_session(self) -> None:
        async def go() -> None:
            async with harness.async_client() as ac:
                async with ac.sandboxes.exec_stream(self.sb.id, "cat; echo done >&2") as s:
                    self.assertTrue(s.execution_id.startswith("exec_"))
                    await s.write(b"async hello\n")
                    await s.close_stdin()
                    chunks = [c async for c in s]
                    result = await s.wait()
                self.assertIn(("stdout", b"async hello\n"), chunks)
                self.assertIn(("stderr", b"done\n"), chunks)
                self.assertEqual(result.exit_code, 0)
                async with ac.sandboxes.exec_stream(self.sb.id, "read go; stty size", tty=True, rows=10, cols=20) as s:
                    await s.resize(33, 77)
                    await s.write("go\n")
                    out = b"".join([d async for _, d in s])
                self.assertIn(b"33 77", out)
                with self.assertRaises(airlock.NotFoundError):
                    await ac.sandboxes.exec_stream("sbx_00000000000000000000", "true")

        asyncio.run(go())
