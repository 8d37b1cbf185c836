"""The in-tree build backend (_build/airlock_build.py), without pip: the wheel's contents and
RECORD, the sdist (from which a wheel builds again), the editable wheel, reproducibility, and
the TOML subset parser used before Python 3.11."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator

import harness


def backend() -> Any:
    return harness.load_script(harness.SDK / "_build" / "airlock_build.py")


@contextlib.contextmanager
def cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def wheel_files(path: str) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


class Backend(unittest.TestCase):
    def setUp(self) -> None:
        self.b = backend()
        self.out = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.out, ignore_errors=True))

    def build(self, hook: str, root: Path = harness.SDK, sub: str = "") -> str:
        target = os.path.join(self.out, sub)
        os.makedirs(target, exist_ok=True)
        with cwd(root):
            return os.path.join(target, getattr(self.b, hook)(target))

    def test_wheel(self) -> None:
        path = self.build("build_wheel")
        self.assertTrue(path.endswith("airlock_sdk-0.1.0-py3-none-any.whl"))
        files = wheel_files(path)
        info = "airlock_sdk-0.1.0.dist-info"
        package = sorted(p.relative_to(harness.SDK).as_posix() for p in (harness.SDK / "airlock").iterdir()
                         if p.is_file() and p.suffix in (".py", ".typed"))
        self.assertEqual(sorted(n for n in files if n.startswith("airlock/")), package)
        self.assertIn("airlock/py.typed", files)
        meta = files[f"{info}/METADATA"].decode()
        for line in ("Metadata-Version: 2.1", "Name: airlock-sdk", "Version: 0.1.0", "Requires-Python: >=3.9",
                     "Description-Content-Type: text/markdown"):
            self.assertIn(line + "\n", meta)
        self.assertIn("# airlock Python SDK", meta)
        self.assertIn("Root-Is-Purelib: true\nTag: py3-none-any\n", files[f"{info}/WHEEL"].decode())
        record = [line.split(",") for line in files[f"{info}/RECORD"].decode().splitlines()]
        self.assertEqual(sorted(r[0] for r in record), sorted(files))
        for name, digest, size in record:
            if name.endswith("RECORD"):
                self.assertEqual((digest, size), ("", ""))
                continue
            want = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
            self.assertEqual((digest, int(size)), ("sha256=" + want, len(files[name])), name)

    def test_reproducible(self) -> None:
        a = self.build("build_wheel", sub="a")
        b = self.build("build_wheel", sub="b")
        self.assertEqual(Path(a).read_bytes(), Path(b).read_bytes())

    def test_sdist_builds_the_same_wheel(self) -> None:
        sdist = self.build("build_sdist")
        self.assertTrue(sdist.endswith("airlock_sdk-0.1.0.tar.gz"))
        unpacked = Path(self.out) / "unpacked"
        with tarfile.open(sdist) as tf:
            names = tf.getnames()
            tf.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        top = "airlock_sdk-0.1.0"
        for name in ("PKG-INFO", "pyproject.toml", "README.md", "_build/airlock_build.py", "airlock/__init__.py"):
            self.assertIn(f"{top}/{name}", names)
        again = self.build("build_wheel", root=unpacked / top, sub="again")
        self.assertEqual(wheel_files(again), wheel_files(self.build("build_wheel", sub="direct")))

    def test_editable(self) -> None:
        files = wheel_files(self.build("build_editable"))
        self.assertEqual(files["__editable__.airlock_sdk.pth"].decode().strip(), str(harness.SDK))
        self.assertFalse([n for n in files if n.startswith("airlock/")])
        with cwd(harness.SDK):
            self.assertEqual(self.b.get_requires_for_build_wheel(), [])
            self.assertEqual(self.b.prepare_metadata_for_build_wheel(self.out), "airlock_sdk-0.1.0.dist-info")

    def test_toml_subset(self) -> None:
        text = (harness.SDK / "pyproject.toml").read_text()
        mini = self.b._MiniToml(text).parse()
        self.assertEqual(mini["build-system"], {"requires": [], "build-backend": "airlock_build", "backend-path": ["_build"]})
        self.assertEqual(mini["project"]["license"], {"text": "Apache-2.0"})
        try:
            import tomllib
        except ImportError:
            return
        self.assertEqual(mini, tomllib.loads(text))
