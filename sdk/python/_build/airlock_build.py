"""The PEP 517 (and PEP 660) build backend of airlock-sdk, standard library only.

pip runs it from pyproject.toml (``build-backend = "airlock_build"``, ``backend-path =
["_build"]``) with the project's directory as the working directory. It reads the PEP 621
``[project]`` table and ``[tool.airlock-build]`` (``packages``, ``sdist-include``) and writes:

- a wheel (``*-py3-none-any.whl``): the packages, and a ``.dist-info`` with METADATA, WHEEL and
  a RECORD of every file's SHA-256 and size;
- an editable wheel (PEP 660): a ``.pth`` file that puts this directory on ``sys.path``;
- a source distribution (``.tar.gz``) with PKG-INFO, from which a wheel builds again.

Archives are reproducible: entries sorted, times from SOURCE_DATE_EPOCH (or 1980-01-01).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

try:
    import tomllib as _tomllib  # 3.11+
except ImportError:  # pragma: no cover: exercised on 3.9 and 3.10
    _tomllib = None  # type: ignore[assignment]

GENERATOR = "airlock_build 1.0"

# ---------------------------------------------------------------------------------------------
# pyproject.toml


class _MiniToml:
    """The part of TOML that pyproject.toml files like ours use, for Pythons before tomllib:
    tables, bare and quoted keys (dotted too), basic strings, integers, booleans, arrays (over
    several lines) and inline tables, comments."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def parse(self) -> Dict[str, Any]:
        root: Dict[str, Any] = {}
        table = root
        while True:
            self._skip(newlines=True)
            if self.i >= len(self.s):
                return root
            if self.s[self.i] == "[":
                if self.s.startswith("[[", self.i):
                    raise ValueError("arrays of tables are not supported")
                end = self.s.index("]", self.i)
                table = root
                for part in self._keys(self.s[self.i + 1 : end]):
                    table = table.setdefault(part, {})
                self.i = end + 1
                continue
            eq = self.s.index("=", self.i)
            *parents, last = self._keys(self.s[self.i : eq])
            self.i = eq + 1
            target = table
            for p in parents:
                target = target.setdefault(p, {})
            target[last] = self._value()

    @staticmethod
    def _keys(text: str) -> List[str]:
        return [k.strip().strip('"') for k in text.split(".")]

    def _skip(self, newlines: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                nl = self.s.find("\n", self.i)
                self.i = len(self.s) if nl < 0 else nl
            elif c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            else:
                return

    def _value(self) -> Any:
        self._skip(newlines=False)
        c = self.s[self.i]
        if c == '"':
            m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(self.s, self.i)
            if not m:
                raise ValueError(f"bad string at {self.i}")
            self.i = m.end()
            return m.group(1).encode().decode("unicode_escape")
        if c in "[{":
            close = "]" if c == "[" else "}"
            items: List[Any] = []
            table: Dict[str, Any] = {}
            self.i += 1
            while True:
                self._skip(newlines=True)
                if self.s[self.i] == close:
                    self.i += 1
                    return items if c == "[" else table
                if c == "[":
                    items.append(self._value())
                else:
                    eq = self.s.index("=", self.i)
                    key = self.s[self.i : eq].strip().strip('"')
                    self.i = eq + 1
                    table[key] = self._value()
                self._skip(newlines=True)
                if self.s[self.i] == ",":
                    self.i += 1
        m = re.compile(r"true|false|[+-]?\d+").match(self.s, self.i)
        if not m:
            raise ValueError(f"unsupported value at {self.i}: {self.s[self.i:self.i + 20]!r}")
        self.i = m.end()
        token = m.group(0)
        return token == "true" if token in ("true", "false") else int(token)


def load_pyproject(path: str = "pyproject.toml") -> Dict[str, Any]:
    text = Path(path).read_text(encoding="utf-8")
    if _tomllib is not None:
        return _tomllib.loads(text)
    return _MiniToml(text).parse()


class _Project:
    """The project as pyproject.toml describes it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        doc = load_pyproject(str(root / "pyproject.toml"))
        self.meta: Dict[str, Any] = doc["project"]
        self.tool: Dict[str, Any] = doc.get("tool", {}).get("airlock-build", {})
        self.name: str = self.meta["name"]
        self.version: str = self.meta["version"]
        # The distribution's name in file names (PEP 427, PEP 625).
        self.stem = re.sub(r"[-_.]+", "_", self.name).lower()
        self.dist_info = f"{self.stem}-{self.version}.dist-info"

    def metadata(self) -> str:
        """The core metadata (METADATA, PKG-INFO), version 2.1."""
        m = self.meta
        lines = ["Metadata-Version: 2.1", f"Name: {self.name}", f"Version: {self.version}"]
        if m.get("description"):
            lines.append(f"Summary: {m['description']}")
        if m.get("keywords"):
            lines.append("Keywords: " + ",".join(m["keywords"]))
        for a in m.get("authors", []):
            if a.get("name"):
                lines.append(f"Author: {a['name']}")
            if a.get("email"):
                lines.append(f"Author-email: {a['email']}")
        lic = m.get("license")
        if isinstance(lic, dict) and lic.get("text"):
            lines.append(f"License: {lic['text']}")
        lines += [f"Classifier: {c}" for c in m.get("classifiers", [])]
        lines += [f"Project-URL: {k}, {v}" for k, v in m.get("urls", {}).items()]
        if m.get("requires-python"):
            lines.append(f"Requires-Python: {m['requires-python']}")
        lines += [f"Requires-Dist: {d}" for d in m.get("dependencies", [])]
        body = ""
        readme = m.get("readme")
        if isinstance(readme, str):
            body = (self.root / readme).read_text(encoding="utf-8")
            ctype = "text/markdown" if readme.lower().endswith(".md") else "text/plain"
            lines.append(f"Description-Content-Type: {ctype}")
        return "\n".join(lines) + "\n\n" + body

    def wheel_info(self) -> str:
        return f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

    def package_files(self) -> Iterator[Tuple[str, Path]]:
        """(archive name, file) of every file of the packages, caches left out."""
        for pkg in self.tool.get("packages", []):
            base = self.root / pkg
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(self.root)
                if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo"):
                    yield rel.as_posix(), path


# ---------------------------------------------------------------------------------------------
# Archives


def _epoch() -> int:
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)  # ≥ 1980-01-01


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _write_wheel(project: _Project, directory: str, files: List[Tuple[str, bytes]]) -> str:
    """Writes a wheel of files plus the .dist-info (with RECORD); returns its file name."""
    info = project.dist_info
    files = sorted(files) + [
        (f"{info}/METADATA", project.metadata().encode("utf-8")),
        (f"{info}/WHEEL", project.wheel_info().encode()),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    name = f"{project.stem}-{project.version}-py3-none-any.whl"
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files:
            zi = zipfile.ZipInfo(arcname, date_time=stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    return name


def _here() -> Path:
    return Path.cwd()


# ---------------------------------------------------------------------------------------------
# The hooks of PEP 517 and PEP 660


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    project = _Project(_here())
    target = Path(metadata_directory) / project.dist_info
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_text(project.metadata(), encoding="utf-8")
    (target / "WHEEL").write_text(project.wheel_info(), encoding="utf-8")
    return project.dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    project = _Project(_here())
    files = [(arcname, path.read_bytes()) for arcname, path in project.package_files()]
    return _write_wheel(project, wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """An editable install: a .pth file naming this directory, so the packages are imported
    from the working tree."""
    project = _Project(_here())
    pth = (str(project.root.resolve()) + "\n").encode()
    return _write_wheel(project, wheel_directory, [(f"__editable__.{project.stem}.pth", pth)])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    project = _Project(_here())
    top = f"{project.stem}-{project.version}"
    members: List[Tuple[str, bytes]] = [("PKG-INFO", project.metadata().encode("utf-8")),
                                        ("pyproject.toml", (project.root / "pyproject.toml").read_bytes())]
    members += [(arcname, path.read_bytes()) for arcname, path in project.package_files()]
    members += [(rel, (project.root / rel).read_bytes()) for rel in project.tool.get("sdist-include", [])]
    name = f"{top}.tar.gz"
    with open(os.path.join(sdist_directory, name), "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=_epoch()) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for arcname, data in sorted(members):
            ti = tarfile.TarInfo(f"{top}/{arcname}")
            ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
            tf.addfile(ti, io.BytesIO(data))
    return name
