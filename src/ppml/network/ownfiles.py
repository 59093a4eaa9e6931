"""A party's own files (its peers file, certificate, key, CA bundles, manifest), read only if they are
regular files, and bounded.

A path that names a named pipe, a device or a socket would block a party at start-up (opening a FIFO for
reading waits for a writer) or feed it without end; a party reads such a path never. Each file is opened
without blocking (``O_NONBLOCK``: opening a FIFO returns at once), checked with ``fstat`` on the very
descriptor that is read (no race between a check and the open), and read up to a bound.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["read_own_bytes", "read_own_json", "MAX_OWN_FILE", "NotRegularFileError"]

MAX_OWN_FILE = 64 * 2**20
"""Most bytes of one own file read (a certificate, key, peers file or manifest is kilobytes)."""


class NotRegularFileError(OSError):
    """An own file that is not a regular file (a pipe, a device, a socket, a directory) or is too large."""


def read_own_bytes(path: str | Path, *, what: str, limit: int = MAX_OWN_FILE) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit` bytes.

    Raises
    ------
    FileNotFoundError
        No such file (named, with `what`).
    NotRegularFileError
        Not a regular file, or larger than `limit` (named, with what it is).
    OSError
        It cannot be read (permissions).
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: {what} is missing") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(f"{path}: {what} is not a regular file (it is {_kind(info.st_mode)}); "
                                      "a party reads its own files only from regular files")
        if info.st_size > limit:
            raise NotRegularFileError(f"{path}: {what} is {info.st_size} bytes, more than the {limit} read")
        os.set_blocking(fd, True)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(2**20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise NotRegularFileError(f"{path}: {what} grew beyond the {limit} bytes read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_own_json(path: str | Path, *, what: str, limit: int = MAX_OWN_FILE) -> Any:
    """`path` read by :func:`read_own_bytes` and parsed as JSON.

    Raises
    ------
    FileNotFoundError, NotRegularFileError
        As :func:`read_own_bytes`.
    ValueError
        Not valid JSON (named, with the parser's reason).
    """
    data = read_own_bytes(path, what=what, limit=limit)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {what} is not valid JSON ({exc})") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"
