"""Why a file could not be opened, read or written, in one line that names it: the one place that
turns what the storage raised, and the path, into the cause a person can act on.

What the storage raises often hides the cause. fsspec's HTTP filesystem raises FileNotFoundError for
a host whose name does not resolve (the DNS error is its `__cause__`), its local filesystem says a
FIFO "does not exist" (it is not a file), and a /proc file fails with a bare "Invalid argument" (no
file name: its size is unknown until it is read, and seeking to its end fails). So the cause is
found here: the exception's chain for a network failure (with the host), the local path itself for
what kind of entry it is. Every place that opens a file a user named (the input paths, a path list,
a tokenizer, a benchmark, a model, the output folder) says its problem through `file_problem`.
"""
from __future__ import annotations

import errno
import os
import socket
import stat
import urllib.parse

from ylink_data.core.redaction import redact_url

# What a local directory entry that is not a regular file is, in words.
KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}
SPECIAL = (errno.EINVAL, errno.ESPIPE)  # seeking in a file whose size is made up (/proc) fails so


def entry_kind(mode: int) -> str | None:
    """What an entry of this `st_mode` is when it is no regular file ("a FIFO (named pipe)"), else None."""
    return None if stat.S_ISREG(mode) else KINDS.get(stat.S_IFMT(mode), "not a regular file")


def file_problem(exc: BaseException, url: str, missing_fix: str = "check the path or URL",
                 shown: str | None = None) -> str:
    """`url` (as `shown`, else without credentials) and why `exc` was raised opening, reading or
    writing it, with the fix: "x.json is a FIFO (named pipe), not a file; ...". `missing_fix` is the
    fix of a file that does not exist, which depends on what the caller wanted of it."""
    shown = shown or redact_url(url)
    network = unreachable(exc, url)
    if network is not None:
        return f"{shown}: {network}"
    local = _local_path(url)
    if local is not None:
        found = _local_cause(exc, local, shown, missing_fix)
        if found is not None:
            return found
    status = _http_status(exc)
    if isinstance(exc, FileNotFoundError) or status in (404, 410):
        return f"{shown} does not exist; {missing_fix}"
    if isinstance(exc, PermissionError) or status in (401, 403):
        return f"no permission to read {shown} ({_first_line(exc)}); check the credentials (storage: or the environment)"
    if status is not None:
        return f"cannot read {shown}: the server answered HTTP {status}"
    text = " ".join(str(exc).split())[:200]  # with its errno: [Errno 5] Input/output error
    return f"cannot read {shown}: {type(exc).__name__}: {text}".rstrip(": ")


def not_a_folder(url: str, shown: str | None = None) -> str | None:
    """Why the local `url` cannot be a folder, when it cannot: it, or a part of the path to it, is
    something else (a file, a FIFO). None when it can, or `url` is no local path."""
    path = _local_path(url)
    if path is None:
        return None
    shown = shown or redact_url(url)
    try:
        mode = os.stat(path).st_mode
    except NotADirectoryError:
        return f"{shown} cannot be a folder: {_file_on_the_way(path) or 'a part of it'} is a file"
    except OSError:
        blocker = _file_on_the_way(path)
        return f"{shown} cannot be a folder: {blocker} is a file" if blocker else None
    return None if stat.S_ISDIR(mode) else f"{shown} is {entry_kind(mode) or 'a file'}, not a folder"


def unreachable(exc: BaseException, url: str) -> str | None:
    """Why the host of `url` (or of the endpoint the storage options name) could not be reached, with
    the fix, when a network failure is in `exc`'s chain: a name that does not resolve (DNS), a
    connection refused or timed out. None when none is."""
    chain = _chain(exc)
    host = next((f"{e.host}:{e.port}" if getattr(e, "port", None) else e.host
                 for e in chain if isinstance(getattr(e, "host", None), str)), None)
    host = host or urllib.parse.urlsplit(url).netloc.rpartition("@")[2] or "the server"
    for e in chain:
        if isinstance(e, socket.gaierror):
            return (f"cannot reach {host}: its name does not resolve (DNS: {e.strerror or e}); check the host "
                    "name, and the network and DNS of this machine")
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return f"cannot reach {host}: connection refused (nothing listens there); check the host and port"
        if isinstance(e, (TimeoutError, socket.timeout)) or type(e).__name__ in ("ServerTimeoutError",
                                                                                 "ConnectTimeoutError"):
            return f"cannot reach {host}: it did not answer in time; check the host and the network"
    for e in chain:
        if isinstance(e, ConnectionError) or type(e).__name__ in ("ClientConnectorError", "EndpointConnectionError"):
            return f"cannot reach {host}: {_first_line(e)}; check the host and the network"
    return None


def _local_cause(exc: BaseException, path: str, shown: str, missing_fix: str) -> str | None:
    """The cause a local path shows: what kind of entry it is, what is missing on the way to it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f"{shown} is a symlink to {os.readlink(path)}, which does not exist; fix or remove the link"
        blocker = _file_on_the_way(path)
        if blocker is not None:
            return f"{shown} cannot be there: {blocker} is a file, not a folder; choose another path"
        return f"{shown} does not exist; {missing_fix}"
    except NotADirectoryError:
        return f"{shown} cannot be there: {_file_on_the_way(path) or 'a part of it'} is a file, not a folder; " \
               "choose another path"
    except OSError as stat_error:
        if stat_error.errno == errno.ELOOP:
            return f"{shown} is a symlink loop (it leads back to itself); fix or remove the link"
        return None
    kind = entry_kind(mode)
    if kind == "a folder" and isinstance(exc, (IsADirectoryError, FileNotFoundError)):
        return f"{shown} is a folder, not a file; name a file"
    if kind is not None and kind != "a folder":
        return f"{shown} is {kind}, not a file; name a regular file (or copy what it gives into one)"
    if isinstance(exc, PermissionError):
        inside = exc.filename if isinstance(exc.filename, str) and os.path.abspath(exc.filename) != \
            os.path.abspath(path) else None  # a file or folder below the one named
        return f"no permission to read {inside or shown}" + (f" (in {shown})" if inside else "") + \
            f" ({_first_line(exc)})"
    if isinstance(exc, OSError) and exc.errno in SPECIAL and kind is None:
        return (f"{shown} cannot be read as a file: seeking to its end fails ({os.strerror(exc.errno)}): it is a "
                "special file whose contents are made when it is read (as in /proc); copy it into a regular file")
    return None


def _file_on_the_way(path: str) -> str | None:
    """The first part of `path` that is a file where a folder must be, if any."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    return parent if os.path.exists(parent) and not os.path.isdir(parent) else None


def _local_path(url: str) -> str | None:
    if "://" not in url:
        return os.path.expanduser(url)
    return url[len("file://"):] if url.startswith("file://") else None


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out and len(out) < 16:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _http_status(exc: BaseException) -> int | None:
    for e in _chain(exc):
        status = getattr(e, "status", None) or getattr(e, "code", None)
        if isinstance(status, int) and 100 <= status < 600 and type(e).__name__.startswith(("ClientResponse", "HTTP")):
            return status
    return None


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = " ".join(str(exc).split())
    return text[:200]


__all__ = ["KINDS", "entry_kind", "file_problem", "not_a_folder", "unreachable"]
