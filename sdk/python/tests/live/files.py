"""Files: byte-exact round trips (binary, 10 MB, streamed both ways), the directory calls,
upload_dir."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import tempfile
import tracemalloc
from typing import Iterator, List

import harness

import airlock


@contextlib.contextmanager
def _peak() -> Iterator[List[int]]:
    """How much more memory than at its start the block held at its peak, in bytes."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    grew = [0]
    try:
        yield grew
    finally:
        grew[0] = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()


class Files(harness.SandboxTest):
    spec = {"name": "files"}

    def test_binary_round_trip(self) -> None:
        data = bytes(range(256)) * 3 + b"\x00\r\n\xff"
        info = self.c.files.write(self.sb.id, "/workspace/bin/all.bytes", data, mode=0o600)
        self.assertEqual((info.size, info.mode, info.type), (len(data), "0600", "file"))
        self.assertEqual(self.c.files.read(self.sb.id, "/workspace/bin/all.bytes"), data)
        # The sandbox sees the same bytes.
        r = self.c.sandboxes.exec(self.sb.id, "sha256sum /workspace/bin/all.bytes")
        self.assertEqual(r.stdout.split()[0], hashlib.sha256(data).hexdigest())

    def test_ten_megabytes_streamed_both_ways(self) -> None:
        data = os.urandom(10 << 20)
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.seek(0)
            with _peak() as grew:
                info = self.c.files.write(self.sb.id, "big.bin", f)  # streamed from the file
        self.assertEqual(info.size, len(data))
        self.assertLess(grew[0], 2 << 20, "a file object is streamed, not read whole")
        r = self.c.sandboxes.exec(self.sb.id, "sha256sum big.bin")
        self.assertEqual(r.stdout.split()[0], hashlib.sha256(data).hexdigest())

        got = self.c.files.read(self.sb.id, "big.bin")
        self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(data).digest())
        self.assertEqual(len(got), len(data))
        del got
        with tempfile.TemporaryFile() as out:
            with _peak() as grew:
                n = self.c.files.download(self.sb.id, "big.bin", out)
            self.assertLess(grew[0], 2 << 20, "a download is streamed into the file")
            out.seek(0)
            self.assertEqual(n, len(data))
            self.assertEqual(hashlib.sha256(out.read()).digest(), hashlib.sha256(data).digest())

    def test_text_and_iterables(self) -> None:
        self.c.files.write(self.sb.id, "t.txt", "héllo\n")
        self.assertEqual(self.c.files.read(self.sb.id, "t.txt"), "héllo\n".encode())
        self.c.files.write(self.sb.id, "chunks.bin", iter([b"a" * 70000, b"", b"b" * 5]))  # chunked upload
        self.assertEqual(self.c.files.read(self.sb.id, "chunks.bin"), b"a" * 70000 + b"b" * 5)
        self.c.files.write(self.sb.id, "bytesio.bin", io.BytesIO(b"0123456789"))
        self.assertEqual(self.c.files.read(self.sb.id, "bytesio.bin"), b"0123456789")

    def test_directories(self) -> None:
        made = self.c.files.mkdir(self.sb.id, "/workspace/d/e", parents=True)
        self.assertEqual((made.type, made.path), ("dir", "/workspace/d/e"))
        self.c.files.write(self.sb.id, "/workspace/d/e/x.sh", b"#!/bin/sh\necho x\n", mode="0755")
        names = {(f.name, f.type) for f in self.c.files.list(self.sb.id, "/workspace/d")}
        self.assertEqual(names, {("e", "dir")})
        st = self.c.files.stat(self.sb.id, "/workspace/d/e/x.sh")
        self.assertEqual((st.size, st.mode), (17, "0755"))
        self.assertEqual(self.c.sandboxes.exec(self.sb.id, "/workspace/d/e/x.sh").stdout, "x\n")
        with self.assertRaises(airlock.AirlockError) as cm:
            self.c.files.remove(self.sb.id, "/workspace/d")  # not empty
        self.assertIn(cm.exception.status, (400, 409), cm.exception)
        self.c.files.remove(self.sb.id, "/workspace/d", recursive=True)
        with self.assertRaises(airlock.NotFoundError):
            self.c.files.stat(self.sb.id, "/workspace/d")

    def test_paths_stay_inside_the_sandbox(self) -> None:
        with self.assertRaises(airlock.NotFoundError):
            self.c.files.read(self.sb.id, "../../../../etc/shadow-of-nothing")

    def test_upload_dir(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "pkg", "sub"))
            with open(os.path.join(tmp, "pkg", "a.py"), "w") as f:
                f.write("print('a')\n")
            with open(os.path.join(tmp, "pkg", "sub", "run.sh"), "w") as f:
                f.write("#!/bin/sh\necho sub\n")
            os.chmod(os.path.join(tmp, "pkg", "sub", "run.sh"), 0o755)
            written = self.c.files.upload_dir(self.sb.id, tmp, "/workspace/up")
        self.assertEqual(sorted(f.path for f in written), ["/workspace/up/pkg/a.py", "/workspace/up/pkg/sub/run.sh"])
        self.assertEqual(self.c.sandboxes.exec(self.sb.id, "/workspace/up/pkg/sub/run.sh").stdout, "sub\n")
        self.assertEqual(self.c.files.read(self.sb.id, "/workspace/up/pkg/a.py"), b"print('a')\n")

    def test_async_round_trip(self) -> None:
        data = os.urandom(3 << 20)

        async def go() -> bytes:
            async with harness.async_client() as ac:
                with tempfile.TemporaryFile() as f:
                    f.write(data)
                    f.seek(0)
                    info = await ac.files.write(self.sb.id, "async.bin", f)
                    self.assertEqual(info.size, len(data))
                await ac.files.write(self.sb.id, "async-chunks.bin", iter([data[:100], data[100:]]))
                self.assertEqual(await ac.files.read(self.sb.id, "async-chunks.bin"), data)
                return await ac.files.read(self.sb.id, "async.bin")

        self.assertEqual(asyncio.run(go()), data)
