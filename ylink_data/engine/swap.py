"""Replacing a published run by another (issue 41 part 1): a rerun of another configuration into a
folder that holds a finished run publishes the new run in `_work/next/` (`next_layout`: its files
there, its work in the folder's `_work/`), while readers keep reading the old one. Once the new run is
complete there (its manifest written), `swap` writes the journal `_work/swap.json` and rolls forward:

1. `remove`: every manifest is withdrawn first (readers refuse the folder from then on), then the old
   run's files (`RunLayout.own_entries`, run.json last); the journal then says `move`;
2. `move`: each file of `_work/next/` into its place (a link, then the source removed: one file at a
   time, each whole; the sinks wrote their whole-run files for the folder they end in: `Sink.finish`'s
   `at`), the tier manifests, the run's manifest last; then the journal and `_work/next/` go.

A kill at any point leaves the old run (no journal yet: readers read it as it was), or a folder
without a manifest that readers refuse and that the next `ylink run` or `ylink clean` of it completes
(`finish_swap`, first thing under the folder's lock) into the new run: never a manifest that lists
files of two runs.
"""
from __future__ import annotations

from ylink_data.core.storage import publish_copy, remove, write_json, writing_into
from ylink_data.engine.tasks import load_marker
from ylink_data.io.layout import RunLayout, own_entries

NEXT, JOURNAL = "next", "swap.json"
_MANIFEST = "manifest.json"


def next_layout(layout: RunLayout) -> RunLayout:
    """Where a run that replaces the finished one in `layout` publishes its files until the swap."""
    return RunLayout(layout.work(NEXT), layout.fs, f"{layout.url}/_work/{NEXT}", work_root=layout.work())


def remove_published(layout: RunLayout, keep_run_info: bool = False) -> None:
    """Every file a run published (manifests first, run.json last, unless `keep_run_info`: a run that
    writes its own next); never _work/, the lock or llm-cache/."""
    layout.withdraw_manifests()
    for name in own_entries():
        if name not in ("_work", *(["run.json"] if keep_run_info else [])) and layout.fs.exists(layout.path(name)):
            remove(layout.fs, layout.path(name), recursive=True)


def swap(layout: RunLayout) -> None:
    """Put the complete run of `_work/next/` in place of the folder's run (see the module docstring)."""
    write_json(layout.fs, layout.work(JOURNAL), {"state": "remove"})
    finish_swap(layout)


def finish_swap(layout: RunLayout) -> bool:
    """Complete a swap that a journal says was begun; True when there was one."""
    journal = load_marker(layout, layout.work(JOURNAL))
    if journal is None:
        return False
    with writing_into(layout.url):  # a folder it cannot write is one line naming it, not an OSError
        _finish(layout, journal)
    return True


def _finish(layout: RunLayout, journal: dict) -> None:
    fs, source = layout.fs, next_layout(layout)
    if journal.get("state") == "remove":
        remove_published(layout)
        write_json(fs, layout.work(JOURNAL), {"state": "move"})
    moved = source.files()
    manifests = sorted((rel for rel in moved if rel.rsplit("/", 1)[-1] == _MANIFEST), key=lambda r: (r == _MANIFEST, r))
    for rel in sorted(moved):
        if rel not in manifests:
            publish_copy(fs, source.path(rel), layout.path(rel))
            remove(fs, source.path(rel))
    for rel in manifests:
        publish_copy(fs, source.path(rel), layout.path(rel))
        remove(fs, source.path(rel))
    remove(fs, layout.work(JOURNAL))
    if fs.exists(source.root):
        remove(fs, source.root, recursive=True)


__all__ = ["NEXT", "JOURNAL", "next_layout", "remove_published", "swap", "finish_swap"]
