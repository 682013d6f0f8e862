"""Files an agent leaves behind (its answer, memory notes, hook log, event stream, stored sessions),
read without ever following a link: each path component is opened relative to the one before it
with ``O_NOFOLLOW``, and only a regular file with no other name (no hard link) is read, up to a
size limit. A symbolic link, a FIFO, a device, a socket or a hard link is refused with its reason,
so an agent cannot make git-hermit read a file outside its workspace (``answer.txt`` → ``~/.gitconfig``),
sandboxed or not, nor block it on a FIFO.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

DEFAULT_LIMIT = 64 * 1024 * 1024      # a trajectory can be long; nothing an agent leaves is read past this
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class RefusedFile(Exception):
    """An agent's file that is not read: ``reason`` names the path and why (never its content)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LeftFile:
    """What one read found: the bytes, or None with ``refused`` saying why (None when simply absent)."""

    data: bytes | None
    refused: str | None = None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def read_left_file(root: Path, relative: str, *, limit: int = DEFAULT_LIMIT) -> bytes | None:
    """The bytes of ``root/relative`` (None when it does not exist); RefusedFile when any component
    below ``root`` is a link or the file is special, hard-linked or over ``limit`` bytes."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise RefusedFile(f"{relative}: not a plain relative path")
    try:
        directory = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefusedFile(f"{relative}: its directory {root} cannot be opened ({exc.strerror})") from None
    try:
        for index, part in enumerate(parts[:-1]):
            where = "/".join(parts[:index + 1])
            try:
                info = os.lstat(part, dir_fd=directory)
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(info.st_mode):
                raise RefusedFile(f"{relative}: {where} is {_kind(info.st_mode)}")
            inner = os.open(part, _DIR_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
        return _read_regular(directory, parts[-1], relative, limit)
    finally:
        os.close(directory)


def _read_regular(directory: int, name: str, relative: str, limit: int) -> bytes | None:
    try:
        before = os.lstat(name, dir_fd=directory)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(before.st_mode):
        raise RefusedFile(f"{relative} is {_kind(before.st_mode)}")
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedFile(f"{relative} is a symbolic link") from None
        raise RefusedFile(f"{relative} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise RefusedFile(f"{relative} changed while it was opened")
        if info.st_nlink > 1:
            # another name for the same file, possibly outside the workspace: what it holds is not
            # the agent's to hand over (git-hermit makes every workspace file a copy, never a link)
            raise RefusedFile(f"{relative} is a hard link ({info.st_nlink} names)")
        if info.st_size > limit:
            raise RefusedFile(f"{relative} is over {limit:,} bytes ({info.st_size:,})")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise RefusedFile(f"{relative} grew over {limit:,} bytes while it was read")
        return data
    finally:
        os.close(fd)


def left_file(root: Path, relative: str, *, limit: int = DEFAULT_LIMIT) -> LeftFile:
    """``read_left_file`` as a value: a refusal is reported, not raised."""
    try:
        return LeftFile(read_left_file(root, relative, limit=limit))
    except RefusedFile as refused:
        return LeftFile(None, refused.reason)


def is_plain_file(root: Path, path: Path) -> bool:
    """Whether ``path`` (under ``root``) is reached from ``root`` through real directories only and is a
    regular file with one name: what may be handed to a reader that opens it by path (the agent that
    made it has exited, so nothing can swap it in between)."""
    try:
        relative = Path(path).relative_to(root).as_posix()
    except ValueError:
        return False
    parts = PurePosixPath(relative).parts
    if not parts:
        return False
    current, info = Path(root), None
    for part in parts:
        current = current / part
        try:
            info = os.lstat(current)
        except OSError:
            return False
        if stat.S_ISLNK(info.st_mode):
            return False
    return info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink == 1
