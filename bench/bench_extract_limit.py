"""Benchmark: what bounding `extract.time_limit_s` costs (issue 13, point 6), and the two ways to bound it.

1. The killable extractor process (`ylink_data.text.transform.extract_process`): the default extractor on
   every page of trafilatura's evaluation set in this process and through one reused child, taking
   turns page by page: CPU seconds (for the child side, this process's and the child's; the
   project's measure on a shared machine, see benchtools.py) and wall seconds.
2. A nesting-depth cap before extraction: the pages' real DOM depth (lexbor's tree, as the extractor
   builds it), the depth a byte-level tag scan estimates (open minus close tags, void elements left
   out), and what each check costs next to the extraction.
3. Hostile pages, built here: seconds the extractor takes in-process (in a subprocess, stopped at
   `--hang-limit`), and seconds until `ExtractorProcess` answers at a 1 s limit (the limit, plus
   `GRACE_S` when the page is stuck in C and the child is killed).

    .venv/bin/python bench/bench_extract_limit.py [--shared ../shared/data] [--limit N]

Writes nothing; prints Markdown.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_extract import load_pages  # noqa: E402
from ylink_data.text.transform.extract import DEFAULT_EXTRACTOR, extract_with_engine, load_extractor  # noqa: E402
from ylink_data.core.timelimit import DocumentTimeout  # noqa: E402
from ylink_data.text.transform.extract_process import ExtractorProcess  # noqa: E402

DEPTH_CAP = 512  # Blink's parser stops nesting here (kMaximumHTMLParserDOMTreeDepth)
HOSTILE = {  # name -> page, 0.4 to 2 MB; the first three are tests/chaos/test_extract_time_limit.py's
    "100,000 nested <div>": lambda: "<div>" * 100_000 + "x" + "</div>" * 100_000,
    "50,000 unclosed <b><div>": lambda: "<b><div>" * 50_000 + "x",
    "100,000 unclosed <font size=N>": lambda: "".join(f"<font size={i}>" for i in range(100_000)) + "x",
    "100,000 unclosed <b><i>": lambda: "<b><i>" * 100_000 + "x",
    "one <div> with 100,000 attributes": lambda: "<div " + " ".join(f"a{i}=x" for i in range(100_000)) + ">x</div>",
    "100,000 sibling <p>": lambda: "<p>word word word</p>" * 100_000,
}


def dom_depth(tree) -> int:
    deepest, stack = 0, [(tree.document, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        child = node.first_element_child
        while child is not None:
            stack.append((child, depth + 1))
            child = child.next_element
    return deepest


_TAG = re.compile(rb"<(/?)([a-zA-Z][a-zA-Z0-9]*)")
_VOID = {b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"source",
         b"track", b"wbr", b"param", b"keygen"}


def scanned_depth(html: bytes) -> int:
    depth = deepest = 0
    for m in _TAG.finditer(html):
        if m.group(1):
            depth = max(0, depth - 1)
        elif m.group(2).lower() not in _VOID:
            depth += 1
            deepest = max(deepest, depth)
    return deepest


def overhead(pages: list[dict]) -> tuple[float, float, float, float]:
    """CPU seconds (this process, plus the child's for the child side) and wall seconds per side."""
    import psutil

    load_extractor(DEFAULT_EXTRACTOR)
    child = ExtractorProcess(DEFAULT_EXTRACTOR)
    child.start()
    child_cpu = psutil.Process(child._child.pid)
    sides = [lambda p: extract_with_engine(p["html"], p["url"]), lambda p: child.extract(p["html"], p["url"], 60)]
    cpu, wall = [0.0, 0.0], [0.0, 0.0]
    started_child = sum(child_cpu.cpu_times()[:2])
    for k, page in enumerate(pages):
        outs = [None, None]
        for j in range(2):
            i = (j + k) % 2
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            outs[i] = sides[i](page)
            cpu[i] += time.process_time() - started_cpu
            wall[i] += time.perf_counter() - started_wall
        assert outs[0] == outs[1], page["url"]
    cpu[1] += sum(child_cpu.cpu_times()[:2]) - started_child
    child.close()
    return cpu[0], cpu[1], wall[0], wall[1]


def depth_checks(pages: list[dict]) -> dict:
    from resiliparse.parse.html import HTMLTree

    selector = " > ".join(["*"] * DEPTH_CAP)
    real, scanned, t_select, t_scan, t_extract = [], [], 0.0, 0.0, 0.0
    for page in pages:
        tree = HTMLTree.parse(page["html"])
        real.append(dom_depth(tree))
        started = time.perf_counter()
        tree.document.query_selector(selector)
        t_select += time.perf_counter() - started
        raw = page["html"].encode("utf-8")
        started = time.perf_counter()
        scanned.append(scanned_depth(raw))
        t_scan += time.perf_counter() - started
        started = time.perf_counter()
        extract_with_engine(page["html"], page["url"])
        t_extract += time.perf_counter() - started
    return {"real": sorted(real), "scanned": sorted(scanned), "select": t_select, "scan": t_scan,
            "extract": t_extract}


def in_process_seconds(name: str, hang_limit: float) -> str:
    code = ("import sys, time; sys.path.insert(0, %r); from bench_extract_limit import HOSTILE; "
            "from ylink_data.text.transform.extract import extract_with_engine; page = HOSTILE[%r](); "
            "t = time.perf_counter(); extract_with_engine(page); print(time.perf_counter() - t)"
            % (str(REPO / "bench"), name))
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=hang_limit,
                             check=True)
    except subprocess.TimeoutExpired:
        return f"> {hang_limit:g}"
    return f"{float(out.stdout):.2f}"


def bounded_seconds(child: ExtractorProcess, page: str) -> str:
    started = time.perf_counter()
    try:
        child.extract(page, None, 1.0)
        verdict = "extracted"
    except DocumentTimeout:
        verdict = "timeout"
    return f"{time.perf_counter() - started:.2f} ({verdict})"


def percentile(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pages of evaldata.json")
    ap.add_argument("--hang-limit", type=float, default=60.0, help="stop an in-process hostile page after this")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pages = load_pages(args.shared / "trafilatura_eval", args.limit)

    print(f"- **Machine:** {platform.node() or 'host'}, {platform.machine()}, {os.cpu_count()} cores "
          f"(pinned to one, the child too), Python {platform.python_version()}, "
          f"resiliparse {version('resiliparse')}, trafilatura {version('trafilatura')}")
    command = ".venv/bin/python bench/bench_extract_limit.py" + (f" --limit {args.limit}" if args.limit else "")
    print(f"- **Command:** `{command}`")
    print(f"- **Date:** {dt.date.today().isoformat()}")
    print(f"- **Pages:** {len(pages)} (trafilatura's evaluation set), extractor `{DEFAULT_EXTRACTOR}`\n")

    cpu_in, cpu_child, wall_in, wall_child = overhead(pages)
    print("| extraction | CPU seconds | ms/page | vs in-process | wall seconds | vs in-process |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(f"| in this process | {cpu_in:.2f} | {1000 * cpu_in / len(pages):.2f} | 1.000 | {wall_in:.2f} | 1.000 |")
    print(f"| through one reused `ExtractorProcess` (both processes' CPU) | {cpu_child:.2f} | "
          f"{1000 * cpu_child / len(pages):.2f} | {cpu_child / cpu_in:.3f} | {wall_child:.2f} | "
          f"{wall_child / wall_in:.3f} |")
    print("\nSame text and engine from both on every page.\n")

    d = depth_checks(pages)
    print(f"| depth of the pages | median | p99 | max | pages over {DEPTH_CAP} | check's cost vs extraction |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, values, cost in (("DOM (lexbor), checked with a selector", d["real"], d["select"]),
                                ("byte-level tag scan", d["scanned"], d["scan"])):
        over = sum(v > DEPTH_CAP for v in values)
        print(f"| {label} | {percentile(values, 0.5)} | {percentile(values, 0.99)} | {values[-1]} | {over} | "
              f"{cost / d['extract']:.1%} |")

    print("\n| hostile page | bytes | in-process seconds | `ExtractorProcess`, 1 s limit: seconds |")
    print("| --- | ---: | ---: | ---: |")
    with ExtractorProcess(DEFAULT_EXTRACTOR) as bounded:
        for name, build in HOSTILE.items():
            page = build()
            bounded.start()
            print(f"| {name} | {len(page.encode()):,} | {in_process_seconds(name, args.hang_limit)} | "
                  f"{bounded_seconds(bounded, page)} |")


if __name__ == "__main__":
    main()
