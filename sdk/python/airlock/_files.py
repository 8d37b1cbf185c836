"""Files inside a sandbox: read, write (streamed both ways), list, stat, mkdir, remove, and a
whole local directory uploaded."""

from __future__ import annotations

import os
import posixpath
import stat as stat_
from typing import IO, Any, Generator, Iterable, List, Optional, Union

from ._call import Call, Plan, envelope, query, raw, sandbox_path
from ._models import FileInfo
from ._ops import Mode, Resource, operation

#: What :meth:`Files.write` sends: bytes, text (UTF-8), a binary file object or an iterable of
#: bytes chunks. File objects and iterables are streamed, never read whole.
Data = Union[bytes, bytearray, memoryview, str, IO[bytes], Iterable[bytes]]


def _mode(mode: Union[int, str, None]) -> Optional[str]:
    return f"{mode:04o}" if isinstance(mode, int) else mode


def _write(id: str, path: str, data: Data, mode: Union[int, str, None], parents: bool) -> Call[FileInfo]:
    body = data.encode("utf-8") if isinstance(data, str) else data
    return Call("PUT", sandbox_path(id, "/files"), envelope(FileInfo), body=body,
                params=query(path=path, mode=_mode(mode), parents=parents or None),
                content_type="application/octet-stream")


def _mkdir(id: str, path: str, parents: bool) -> Call[FileInfo]:
    return Call("POST", sandbox_path(id, "/files/mkdir"), envelope(FileInfo),
                params=query(path=path, parents=parents or None))


class Files(Resource[Mode]):
    """``client.files``: paths are sandbox paths (relative ones start at the sandbox's
    workdir); the daemon resolves them inside the sandbox only. Transfers are streamed: a file
    is never held in memory more than once."""

    _name = "files"

    @operation("get-api-v1-sandboxes-by-id-files")
    def read(self, id: str, path: str) -> Call[bytes]:
        """The file's content. For a large file, :meth:`download` into a file instead."""
        return Call("GET", sandbox_path(id, "/files"), raw, params=query(path=path),
                    accept="application/octet-stream")

    @operation("get-api-v1-sandboxes-by-id-files")
    def download(self, id: str, path: str, dest: IO[bytes]) -> Call[int]:
        """Writes the file's content into ``dest`` (a binary file object) as it arrives;
        returns the number of bytes written."""
        return Call("GET", sandbox_path(id, "/files"), raw, params=query(path=path),
                    accept="application/octet-stream", sink=dest)

    @operation("put-api-v1-sandboxes-by-id-files")
    def write(
        self,
        id: str,
        path: str,
        data: Data,
        *,
        mode: Union[int, str, None] = None,
        parents: bool = True,
    ) -> Call[FileInfo]:
        """Creates or replaces a file (atomically: nobody sees half of it). ``mode`` is the
        permission bits (``0o755`` or ``"0755"``; default 0644); ``parents`` makes missing
        directories. A file object or iterable is streamed (with its size when it is a
        regular file, so that an upload past a limit fails before it starts)."""
        return _write(id, path, data, mode, parents)

    @operation("get-api-v1-sandboxes-by-id-files-list")
    def list(self, id: str, path: str = ".") -> Call[List[FileInfo]]:
        """The entries of a directory."""
        return Call("GET", sandbox_path(id, "/files/list"), envelope([FileInfo]), params=query(path=path))

    @operation("get-api-v1-sandboxes-by-id-files-stat")
    def stat(self, id: str, path: str) -> Call[FileInfo]:
        """One file's description; a missing one is a NotFoundError."""
        return Call("GET", sandbox_path(id, "/files/stat"), envelope(FileInfo), params=query(path=path))

    @operation("post-api-v1-sandboxes-by-id-files-mkdir")
    def mkdir(self, id: str, path: str, *, parents: bool = False) -> Call[FileInfo]:
        """Creates a directory (and its missing parents with ``parents``)."""
        return _mkdir(id, path, parents)

    @operation("delete-api-v1-sandboxes-by-id-files")
    def remove(self, id: str, path: str, *, recursive: bool = False) -> Call[FileInfo]:
        """Removes a file or an empty directory; with ``recursive`` a directory and all in it."""
        return Call("DELETE", sandbox_path(id, "/files"), envelope(FileInfo),
                    params=query(path=path, recursive=recursive or None))

    @operation()
    def upload_dir(self, id: str, local_dir: Union[str, "os.PathLike[str]"], sandbox_dir: str) -> Plan[List[FileInfo]]:
        """Copies a local directory tree into the sandbox at ``sandbox_dir`` (made with its
        parents), keeping the files' permission bits; returns the files written. Symbolic
        links are followed; special files are skipped."""
        return Plan(_upload(id, os.fspath(local_dir), sandbox_dir))


def _upload(id: str, local_dir: str, sandbox_dir: str) -> Generator[Call[Any], Any, List[FileInfo]]:
    if not os.path.isdir(local_dir):
        raise NotADirectoryError(local_dir)
    written: List[FileInfo] = []
    for root, dirs, files in os.walk(local_dir):
        dirs.sort()
        rel = os.path.relpath(root, local_dir)
        target = sandbox_dir if rel == "." else posixpath.join(sandbox_dir, *rel.split(os.sep))
        yield _mkdir(id, target, True)
        for name in sorted(files):
            local = os.path.join(root, name)
            try:
                st = os.stat(local)
            except FileNotFoundError:
                continue  # a dangling link
            if not stat_.S_ISREG(st.st_mode):
                continue
            with open(local, "rb") as f:
                info = yield _write(id, posixpath.join(target, name), f, st.st_mode & 0o7777, False)
            written.append(info)
    return written
