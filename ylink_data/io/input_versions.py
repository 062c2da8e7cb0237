"""Input files known by their content, not by their URL, size and modification time (issue 39
point 2): what a task read is recorded, and a resumed or rerun run checks it against the files now.

- **A local file's content** is a BLAKE2b of its bytes taken in blocks of `BLOCK` bytes
  (`content_id` of the blocks' digests, in order). Each split of a file hashes its own even share
  of the blocks (`owned`), just before its reader reads them (from the page cache then): the tasks
  that read a file cut into pieces hash it once between them, and the id does not depend on how the
  file was cut. Hashing costs about 4% of the cheapest read (JSONL into documents, no op: 0.11 s
  against 2.4 s for 70 MB), and less beside any op.
- **A remote file whose store keeps a content hash** (S3's and HTTP's ETag, GCS's md5Hash, Azure's
  etag: `core.digest.store_version`) is known by it, and none of its bytes are hashed. Files of a
  store that keeps none (memory://, a server without ETag) are hashed as local files are.
- **A local file's stamp** (size, mtime_ns, ctime_ns, inode) tells a later run whether it may have
  changed since: every write changes the ctime, which, unlike the mtime, no user can set back. A
  stamp taken less than `RACY_NS` after the file's last change cannot vouch for it (a second write in
  the same tick of the clock would leave it equal): it still catches changes during the run, but a
  later run hashes the file rather than trust it (`Listed.sound`).

Every phase-0 task checks each split it reads against what the listing saw (`Listed`), before and
after reading it, and records what it read (`SplitRead.record`) in its completion marker. A resumed
run checks those records against the files now (`changed_files`: the stamp where it can vouch, else
the blocks hashed again, or the store's hash); once phase 0 is done the records make each file's
content id (`file_contents`), which run.json's fingerprint holds and a rerun of the finished run
checks the same way. Ids are per input file, so that whatever reuses a part of a run can key it by
the files it read.
"""
from __future__ import annotations

import io
import os
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any, Callable, Sequence

from ylink_data.core.digest import RACY_NS, new_digest, store_version
from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import filesystem, is_local

BLOCK = 4 << 20
_READ = 1 << 20
_CHECKERS = 16  # files checked at once by a rerun (hashing, reading and asking a store release the GIL)

Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode (not the device: NFS clients differ)


@dataclass(frozen=True)
class Listed:
    """What the listing saw of one input file, which every task that reads it checks it still is: a
    local file's stamp, and whether that stamp can vouch for its content on a later run (`sound`);
    or the content hash its store keeps (`version`). Empty for a file the listing did not ask about
    (a path list's URL lines: the task asks)."""

    stamp: Stamp | None = None
    sound: bool = False
    version: str | None = None


def stamp_of(path: str) -> Stamp:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def listed_local(st: os.stat_result, now_ns: int | None = None) -> Listed:
    """What the listing saw of a local file: its stamp, from `st` taken at `now_ns` (now by default)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    return Listed((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino), now_ns - st.st_ctime_ns >= RACY_NS)


def block_count(size: int) -> int:
    return -(-size // BLOCK)


def owned(piece: tuple[int, int], size: int) -> range:
    """The blocks that split `piece` = (i, n: the i-th of a file's n splits) hashes: an even share."""
    i, n = piece
    total = block_count(size)
    return range(i * total // n, (i + 1) * total // n)


def hash_blocks(f: IO[bytes], which: range, size: int) -> list[str]:
    """The digest of each block in `which` of the file `f` of `size` bytes; EOFError if it is shorter."""
    out = []
    for b in which:
        f.seek(b * BLOCK)
        left = min(BLOCK, size - b * BLOCK)
        digest = new_digest()
        while left > 0:
            data = f.read(min(left, _READ))
            if not data:
                raise EOFError(f"the file ends before byte {size}")
            digest.update(data)
            left -= len(data)
        out.append(digest.hexdigest())
    return out


def content_id(digests: Sequence[str]) -> str:
    """A file's content id from the digests of all its blocks, in order."""
    digest = new_digest()
    for d in digests:
        digest.update(bytes.fromhex(d))
    return f"blake2b:{digest.hexdigest()}"


def _fresh_info(fs: Any, path: str) -> dict[str, Any]:
    """`fs.info(path)` asked of the store now, not from the listings fsspec keeps (a long-lived process)."""
    fs.invalidate_cache(path)
    return fs.info(path)


def changed_line(shown: str, why: str) -> InputError:
    return InputError(f"{shown} changed while the run was reading it ({why}): the run stops so that its "
                      "output never mixes two versions of a file; run again once the file is no longer written")


class SplitRead:
    """One task's read of one split, checked: `before` its reader opens the file, that it is the version
    the listing saw (hashing the split's share of its blocks when it is known by its bytes); `after`,
    that it did not change meanwhile. `record()` is what was read, for the task's marker."""

    def __init__(self, split: Any, fs: Any, path: str, inline: bytes | None):
        self.split, self.fs, self.path, self.inline = split, fs, path, inline
        self.shown = redact_url(split.url)
        self.stamp: Stamp | None = None
        self.version: str | None = None
        self.size: int | None = None
        self.digests: list[str] | None = None
        self.first = 0
        self.sound = False

    def before(self) -> None:
        listed = self.split.listed
        if self.inline is not None:  # memory:// bytes the driver shipped: they are what the plan saw
            self._hash(io.BytesIO(self.inline), len(self.inline))
        elif is_local(self.fs):
            now = time.time_ns()
            self.stamp = stamp_of(self.path)
            self._expect(listed.stamp, self.stamp)
            self.sound = listed.sound or now - self.stamp[2] >= RACY_NS
            with open(self.path, "rb") as f:
                self._hash(f, self.stamp[0])
        else:
            info = _fresh_info(self.fs, self.path)
            self.version = store_version(info)
            if listed.version is not None and self.version != listed.version:
                raise changed_line(self.shown, f"its store's version is {self.version}, not {listed.version}")
            if self.version is None:
                with self.fs.open(self.path, "rb") as f:
                    self._hash(f, int(info["size"]))

    def after(self) -> None:
        if self.stamp is not None:
            self._expect(self.stamp, stamp_of(self.path))
        elif self.version is not None:
            now = store_version(_fresh_info(self.fs, self.path))
            if now != self.version:
                raise changed_line(self.shown, f"its store's version went from {self.version} to {now}")

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.shown, "piece": list(self.split.piece)}
        if self.stamp is not None:
            out |= {"stamp": list(self.stamp), "sound": self.sound}
        if self.version is not None:
            out["version"] = self.version
        if self.digests is not None:
            out |= {"size": self.size, "blocks": [self.first, self.digests]}
        return out

    def _hash(self, f: IO[bytes], size: int) -> None:
        which = owned(self.split.piece, size)
        try:
            self.digests = hash_blocks(f, which, size)
        except EOFError:
            raise changed_line(self.shown, "it got shorter") from None
        self.size, self.first = size, which.start

    def _expect(self, listed: Stamp | None, now: Stamp) -> None:
        if listed is None or tuple(listed) == now:
            return
        why = ("its size went from {0[0]} to {1[0]} bytes" if listed[0] != now[0]
               else "another file took its name" if listed[3] != now[3]
               else "it was written, same size")
        raise changed_line(self.shown, why.format(listed, now))


# ----------------------------------------------------------------------------- the driver's side


def file_contents(files: Sequence[Any], records: Sequence[dict[str, Any]]) -> tuple[list[list], list[list]]:
    """([url, content id] of every input file, [url, stamp] of those whose stamp can vouch for it),
    from what the listing knew and what phase 0's tasks read (`records`, all of them)."""
    by_url: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_url[r["url"]].append(r)
    contents, stamps = [], []
    for f in files:
        shown = redact_url(f.url)
        if f.run_shard:
            content = f"sha256:{f.sha256}"
        elif f.listed.version is not None:
            content = f.listed.version
        else:
            content = _content_of_records(shown, by_url[shown])
        contents.append([shown, content])
        if f.listed.stamp is not None and f.listed.sound:
            stamps.append([shown, list(f.listed.stamp)])
    return contents, stamps


def _content_of_records(shown: str, records: list[dict[str, Any]]) -> str:
    versions = {r["version"] for r in records if "version" in r}
    if len(versions) > 1:
        raise changed_line(shown, f"its tasks read versions {', '.join(sorted(versions))}")
    if versions:
        return versions.pop()
    digests: dict[int, str] = {}
    sizes = {r["size"] for r in records if "blocks" in r}
    for r in records:
        if "blocks" in r:
            first, found = r["blocks"]
            digests.update({first + k: d for k, d in enumerate(found)})
    if len(sizes) != 1 or len(digests) != block_count(sizes.copy().pop()):
        raise RuntimeError(f"the tasks' records of {shown} do not cover it; this is a bug in ylink, please report it")
    return content_id([digests[b] for b in range(len(digests))])


def recorded_files(contents: Sequence[Sequence], stamps: Sequence[Sequence]) -> list[dict[str, Any]]:
    """A finished run's record of its input files (run.json) as records `changed_files` checks."""
    stamp_of_url = {url: stamp for url, stamp in stamps}
    out = []
    for url, content in contents:
        record: dict[str, Any] = {"url": url, "content": content}
        if url in stamp_of_url:
            record |= {"stamp": stamp_of_url[url], "sound": True}
        out.append(record)
    return out


def changed_files(records: Sequence[dict[str, Any]], files: Sequence[Any],
                  storage_options_for: Callable[[str], dict[str, Any]]) -> list[str]:
    """The files (URLs without credentials, sorted) whose content now may not be what `records` say
    was read: a task's records (its split's blocks, stamp or store version) or a finished run's
    (each file's content id, `recorded_files`). Per file:
    - a store version is compared with the store's now (one metadata request at most);
    - a stamp that can vouch and is the file's stamp now costs nothing more;
    - a stamp that is the file's now but could not vouch (taken right after a write): the blocks
      recorded are hashed again and compared;
    - a stamp that moved (the file was written, touched, copied back): only the whole content can
      tell, so the file is hashed whole when its records cover it (a finished run's; every split of
      it read), and otherwise counts as changed: a task's share of a file's blocks is not the part
      its documents came from, and a part that no record covers could have changed."""
    current = {redact_url(f.url): f for f in files}
    by_url: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if not r.get("content", "").startswith("sha256:"):  # a run's shard: its sha256 is in the listing
            by_url[r["url"]].append(r)

    def changed(url: str) -> bool:
        f = current.get(url)
        return f is None or not _same_content(f, by_url[url], storage_options_for(f.url))

    urls = sorted(by_url)
    with ThreadPoolExecutor(_CHECKERS) as pool:
        flags = list(pool.map(changed, urls))
    return [u for u, flag in zip(urls, flags) if flag]


def _recorded_version(record: dict[str, Any]) -> str | None:
    """The store's version a record names: a task's `version`, or a finished run's content id that is one."""
    content = record.get("content")
    return record.get("version") or (content if content and not content.startswith("blake2b:") else None)


def _same_content(f: Any, records: list[dict[str, Any]], storage_options: dict[str, Any]) -> bool:
    fs, path = filesystem(f.url, storage_options)
    versions = {v for v in map(_recorded_version, records) if v is not None}
    if versions:
        now = f.listed.version or store_version(_fresh_info(fs, path))
        return versions == {now}
    stamp = f.listed.stamp
    if all(r.get("sound") and tuple(r.get("stamp") or ()) == stamp for r in records):
        return True
    size = stamp[0] if stamp is not None else int(_fresh_info(fs, path)["size"])
    if any(r.get("size", size) != size for r in records):
        return False
    moved = any(r.get("stamp") is None or tuple(r["stamp"]) != stamp for r in records)
    blocks: dict[int, str] = {}
    for r in records:
        if "blocks" in r:
            first, digests = r["blocks"]
            blocks.update({first + k: d for k, d in enumerate(digests)})
    whole = [r["content"] for r in records if "content" in r]
    if moved and not whole and len(blocks) < block_count(size):
        return False  # touched or written, and only part of it on record: cannot tell it is the same
    with (open(path, "rb") if is_local(fs) else fs.open(path, "rb")) as opened:
        try:
            if whole:
                return {content_id(hash_blocks(opened, range(block_count(size)), size))} == set(whole)
            which = sorted(blocks)
            return all(hash_blocks(opened, range(b, b + 1), size) == [blocks[b]] for b in which)
        except EOFError:
            return False
