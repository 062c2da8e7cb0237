"""One run at a time in an output folder: the driver holds OUTPUT/run.lock from before it looks at
the folder until the manifest is written (or the run fails), and a second run is refused with one
line that says who holds it.

- Local folders: `flock` on the file. The kernel releases it when the holder dies (kill -9
  included), so a lock is never stale; the file's content (host, pid, since) is only for messages.
- Object stores (s3://, gs://...): a lease object {owner, host, pid, since, expires} that the holder
  renews from a background thread. A lease past its expiry, or one whose holder is a dead process
  on this machine, is stale: the next run takes it over and says so.

How exclusive a lease is depends on what the store can do in one request:
- S3 (and stores that speak its conditional writes): exclusive. The lease is created with
  If-None-Match and taken over or renewed with If-Match on the ETag read just before: of two runs
  that try at once, the store lets one win.
- GCS: creating the lease is exclusive (gcsfs creates with ifGenerationMatch=0); taking over a
  stale one is not, as gcsfs cannot make an overwrite conditional.
- Other stores, and a take-over on GCS: the last writer wins, and reading the lease back after
  writing it narrows the race but does not close it: two runs that write within moments of each
  other may both read their own lease back. So the holder reads the lease again before each step
  that cannot be undone (removing the old run, withdrawing manifests, writing the manifest):
  of two such runs, every one but the last writer stops there, with one line, having changed
  nothing; what can still interleave are the moments between that read and the step.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterator

from ylink_data.core.errors import RunStateError, YlinkError
from ylink_data.core.storage import is_local, writing_into
from ylink_data.engine.executors.base import RESUME_HINT
from ylink_data.io.locks import flock, unlock
from ylink_data.io.writable import unwritable
from ylink_data.io.layout import RunLayout

LEASE_TTL_S = 60.0  # a dead holder's lease on an object store blocks other hosts this long


@dataclasses.dataclass
class Holder:
    """Who holds a run folder."""

    owner: str  # unique per acquisition
    host: str
    pid: int
    since: str  # UTC, ISO 8601
    node: str = ""  # this machine and PID namespace: a pid is only meaningful there
    expires: float = 0.0  # leases: Unix time after which the lease is stale

    @classmethod
    def me(cls) -> "Holder":
        return cls(uuid.uuid4().hex, socket.gethostname(), os.getpid(),
                   dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), _node())

    @classmethod
    def parse(cls, data: bytes) -> "Holder | None":
        with contextlib.suppress(ValueError, TypeError, KeyError):
            raw = json.loads(data)
            return cls(**{k: raw[k] for k in ("owner", "host", "pid", "since")},
                       node=str(raw.get("node", "")), expires=float(raw.get("expires", 0)))
        return None

    def encode(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.since}"

    def is_dead_here(self) -> bool:
        """A holder on this machine whose process is gone (kill -9): its lease need not expire."""
        if not self.node or self.node != _node():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            return False
        return False


def _node() -> str:
    """This machine's boot and PID namespace (Linux); "" elsewhere, where leases only expire."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def _protocols(fs) -> set[str]:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


def _condition_failed(exc: OSError) -> bool:
    """A conditional write lost: the object exists, or changed since we read its ETag."""
    if isinstance(exc, FileExistsError):
        return True
    response = getattr(exc.__cause__, "response", None) or {}  # s3fs keeps botocore's error as the cause
    return response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict")


def _holder_in(path: str) -> Holder | None:
    """Who a held lock file says holds it (it may be gone or half-written already)."""
    try:
        with open(path, "rb") as f:
            return Holder.parse(f.read(4096))
    except OSError:
        return None


def _busy(layout: RunLayout, holder: Holder | None) -> RunStateError:
    who = f" ({holder.describe()})" if holder else ""
    return RunStateError(f"output.path {layout.url} is in use by another ylink run{who}; wait for it to "
                         "finish, or choose another output.path")


@contextlib.contextmanager
def hold_run_folder(layout: RunLayout, note: Callable[[str], None],
                    resume_hint: str = RESUME_HINT) -> Iterator["FolderLock"]:
    """Hold `layout`'s folder for the block; raise RunStateError at once if another run holds it.
    `resume_hint`: what the line of a lost lease tells to do (a --fresh run's: rerun without it)."""
    lock: FolderLock = LocalLock(layout) if is_local(layout.fs) else Lease(layout)
    lock.resume_hint = resume_hint
    try:
        lock.acquire(note)
    except YlinkError:
        raise
    except Exception as exc:  # the run's first write: no credentials, no endpoint, no bucket (io/writable.py)
        raise unwritable(exc, layout.url) from None
    try:
        yield lock
    finally:
        lock.release()


class FolderLock:
    resume_hint: str = RESUME_HINT

    def acquire(self, note: Callable[[str], None]) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise RunStateError unless this run still holds the folder (before publishing a manifest)."""

    def release(self) -> None:
        raise NotImplementedError


class LocalLock(FolderLock):
    def __init__(self, layout: RunLayout):
        self.layout = layout
        self.path = layout.lock
        self.fd: int | None = None

    def acquire(self, note: Callable[[str], None]) -> None:
        try:
            with writing_into(self.layout.url):
                previous = self._lock()
        except BaseException:
            self.release()
            raise
        if previous is not None:
            note(f"note: the previous run in {self.layout.url} ({previous.describe()}) ended without "
                 "releasing its lock; taking over")

    def _lock(self) -> Holder | None:
        """Lock the file and write who we are into it; returns who it said held it before."""
        import fcntl

        os.makedirs(self.layout.root, exist_ok=True)
        self.fd = flock(self.path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if self.fd is None:
            raise _busy(self.layout, _holder_in(self.path))
        previous = Holder.parse(os.pread(self.fd, 4096, 0))
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, Holder.me().encode(), 0)
        return previous

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)  # while still locked: a run that opened it meanwhile retries on a new file
        unlock(self.fd)
        self.fd = None


class Lease(FolderLock):
    def __init__(self, layout: RunLayout, ttl_s: float = LEASE_TTL_S):
        self.layout = layout
        self.fs, self.path = layout.fs, layout.lock
        self.ttl_s = ttl_s
        self.me = Holder.me()
        self.lost: str | None = None  # why this run no longer holds the lease
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._held = False

    # ------------------------------------------------------------------ store access

    def _read(self) -> tuple[Holder | None, str | None, bool]:
        """(holder, its ETag, whether an object is there). The ETag is read first, so a conditional
        write based on it fails if the object changed after we read it."""
        self.fs.invalidate_cache(self.path)  # s3fs answers info() from a cached listing of the folder
        try:
            etag = self.fs.info(self.path).get("ETag")
            data = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None, None, False
        return Holder.parse(data), etag, True

    def _write(self, create: bool, etag: str | None) -> bool:
        """Write our lease: only if none exists (`create`), or only over the object with `etag`,
        where the store can make that condition part of the write (see the module's docstring).
        False when the condition failed (someone else wrote first)."""
        lease = dataclasses.replace(self.me, expires=time.time() + self.ttl_s)
        kwargs = {}
        if create:
            kwargs["mode"] = "create"  # S3: If-None-Match; GCS: ifGenerationMatch=0; others: check, then write
        elif etag and _protocols(self.fs) & {"s3", "s3a"}:
            kwargs["IfMatch"] = etag
        try:
            self.fs.pipe_file(self.path, lease.encode(), **kwargs)
        except OSError as exc:
            if _condition_failed(exc):
                return False
            raise
        holder, _, _ = self._read()  # verify: on stores without conditional writes the last writer wins
        if holder is None or holder.owner != lease.owner:
            return False
        self.me = lease
        return True

    # ------------------------------------------------------------------ the lease

    def acquire(self, note: Callable[[str], None]) -> None:
        # A store that refuses (credentials, endpoint, bucket) fails here: hold_run_folder says it in one line.
        for _ in range(5):  # each round loses only to a run that took the lease meanwhile
            holder, etag, present = self._read()
            live = holder is not None and holder.expires > time.time() and not holder.is_dead_here()
            if live:
                raise _busy(self.layout, holder)
            if self._write(create=not present, etag=etag):
                break
        else:
            raise _busy(self.layout, self._read()[0])
        self._held = True
        if present:
            why = "its process is gone" if holder and holder.is_dead_here() else "its lease expired"
            who = f" ({holder.describe()})" if holder else ""
            note(f"note: the previous run in {self.layout.url}{who} ended without releasing its lease "
                 f"({why}); taking over")
        self._renewer = threading.Thread(target=self._renew_until_stopped, name="ylink-lease", daemon=True)
        self._renewer.start()

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):  # three renewals may fail before the lease runs out
            try:
                holder, etag, _ = self._read()
                self.lost = self._not_ours(holder)
                if self.lost is not None:
                    return
                if not self._write(create=False, etag=etag):
                    self.lost = "taken over by another run"
                    return
            except Exception:  # noqa: BLE001 -- a network blip: retry until the lease runs out
                if time.time() > self.me.expires:
                    self.lost = "it could not be renewed before it expired"
                    return

    def check(self) -> None:
        """Read the lease afresh: on a store without conditional writes another run may have
        written its own over ours since the last renewal."""
        if self.lost is None and time.time() > self.me.expires:
            self.lost = "it could not be renewed before it expired"
        if self.lost is None:
            try:
                self.lost = self._not_ours(self._read()[0])
            except Exception as exc:  # noqa: BLE001 -- a lease that cannot be read is not known to be held
                self.lost = f"it could not be read back: {type(exc).__name__}"
        if self.lost is not None:
            raise RunStateError(f"this run lost its lease on {self.layout.url} ({self.lost}): nothing was "
                                f"published; {self.resume_hint}")

    def _not_ours(self, holder: Holder | None) -> str | None:
        """Why the lease as read is not this run's; None when it is."""
        if holder is None:
            return "its lease object was deleted"
        return None if holder.owner == self.me.owner else f"taken over by {holder.describe()}"

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self._held:
            return
        self._held = False
        with contextlib.suppress(Exception):  # an unreleased lease only delays the next run
            holder, _, _ = self._read()
            if holder is not None and holder.owner == self.me.owner:
                self.fs.rm_file(self.path)


