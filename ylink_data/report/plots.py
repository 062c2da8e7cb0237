"""The report's plots as inline SVG strings, drawn with matplotlib's object API (no pyplot: no
global backend is chosen, so a notebook's own backend is left alone).

Text stays text in the SVG (`svg.fonttype: none`, the browser's sans-serif font; nothing is
fetched), metadata is left out and ids are salted per plot so several plots live in one page.
"""
from __future__ import annotations

import io
import math
import re
from collections import Counter
from typing import Sequence

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ylink_data.report.gather import ReportData, Threshold

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
           "#CCB974", "#64B5CD"]
KEPT, DROPPED = "#4C72B0", "#C44E52"
_XML_HEADER = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>[^<]*(?:<(?!/?metadata>)[^<]*)*</metadata>\s*")


def to_svg(fig: Figure, name: str) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"ylink-{name}"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = _METADATA.sub("", _XML_HEADER.sub("", buf.getvalue(), count=1))
    return svg.replace("<svg ", f'<svg class="plot" data-plot="{name}" role="img" ', 1)


def _figure(width: float = 7.0, height: float = 3.2) -> Figure:
    fig = Figure(figsize=(width, height))
    return fig


def _human(n: float, _pos: object = None) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.3g}"


def funnel(data: ReportData) -> str:
    stages = data.stages
    with_bytes = [s.bytes_out is not None for s in stages]
    panels = 2 if sum(with_bytes) > 1 else 1
    fig = _figure(7.0, 0.35 * len(stages) + 1.2)
    names = [s.name for s in stages][::-1]
    ax = fig.add_subplot(1, panels, 1)
    docs = [s.docs_out for s in stages][::-1]
    ax.barh(names, docs, color=KEPT)
    ax.set_title("documents after each stage", fontsize=10)
    ax.xaxis.set_major_formatter(FuncFormatter(_human))
    for y, v in enumerate(docs):
        ax.text(v, y, f" {v:,}", va="center", fontsize=8)
    ax.set_xlim(0, max(docs + [1]) * 1.25)
    if panels == 2:
        ax2 = fig.add_subplot(1, 2, 2, sharey=ax)
        values = [s.bytes_out or 0 for s in stages][::-1]
        ax2.barh(names, values, color=PALETTE[2])
        ax2.set_title("text bytes after each stage", fontsize=10)
        ax2.xaxis.set_major_formatter(FuncFormatter(_human))
        ax2.tick_params(labelleft=False)
        for y, v in enumerate(values):
            ax2.text(v, y, f" {_human(v)}B", va="center", fontsize=8)
        ax2.set_xlim(0, max(values + [1]) * 1.3)
    fig.tight_layout()
    return to_svg(fig, "funnel")


def drops(data: ReportData) -> str | None:
    rows = [r for r in data.reasons if r.count]
    if not rows:
        return None
    stages = list(dict.fromkeys(r.stage for r in rows))
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(stages)}
    fig = _figure(7.0, 0.28 * len(rows) + 1.0)
    ax = fig.add_subplot()
    labels = [r.reason for r in rows][::-1]
    counts = [r.count for r in rows][::-1]
    ax.barh(labels, counts, color=[colors[r.stage] for r in rows][::-1])
    for y, v in enumerate(counts):
        ax.text(v, y, f" {v:,}", va="center", fontsize=8)
    ax.set_xlim(0, max(counts) * 1.2)
    ax.set_title("dropped documents by reason (colour: stage)", fontsize=10)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return to_svg(fig, "drops")


def lengths(data: ReportData) -> str | None:
    groups = {lang: v for lang, v in data.lengths_by_lang.items() if v}
    if not groups:
        return None
    top = sorted(groups, key=lambda k: -len(groups[k]))[:6]
    rest = [n for lang, v in groups.items() if lang not in top for n in v]
    series = [(lang, groups[lang]) for lang in top] + ([("other", rest)] if rest else [])
    everything = [n for _, v in series for n in v]
    lo, hi = max(1, min(everything)), max(2, max(everything))
    bins = _log_bins(lo, hi)
    fig = _figure()
    ax = fig.add_subplot()
    ax.hist([[max(n, 1) for n in v] for _, v in series], bins=bins, stacked=True,
            label=[f"{lang} ({len(v):,})" for lang, v in series], color=PALETTE[: len(series)])
    ax.set_xscale("log")
    ax.set_xlabel("characters per kept document (log scale)")
    ax.set_ylabel("documents")
    ax.set_title("text length by language", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return to_svg(fig, "lengths")


def languages(data: ReportData) -> str | None:
    langs = [lang for lang, _ in (data.lang_counts + data.dropped_lang_counts).most_common(15)]
    if not langs:
        return None
    fig = _figure(7.0, 2.8)
    ax = fig.add_subplot()
    kept = [data.lang_counts.get(lang, 0) for lang in langs]
    dropped = [data.dropped_lang_counts.get(lang, 0) for lang in langs]
    ax.bar(langs, kept, color=KEPT, label="kept (all)")
    if any(dropped):
        ax.bar(langs, dropped, bottom=kept, color=DROPPED, label="dropped, with a language (sample)")
    ax.set_ylabel("documents")
    ax.set_title("documents by language", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return to_svg(fig, "languages")


def histogram(column: str, values: dict[str, list[float]], limits: Sequence[Threshold] = ()) -> str:
    """Kept and dropped values of one numeric column, stacked, with the run's thresholds."""
    series = [(k, v) for k, v in values.items() if v]
    everything = [x for _, v in series for x in v]
    lo, hi = min(everything), max(everything)
    integer = all(float(x).is_integer() for x in everything)
    ticks = None
    if integer and hi - lo <= 60:
        bins: Sequence[float] | int = [x - 0.5 for x in range(int(lo), int(hi) + 2)]
        ticks = list(range(int(lo), int(hi) + 1)) if hi - lo <= 12 else None
    else:
        bins = 40 if hi > lo else [lo - 0.5, lo + 0.5]
    fig = _figure(5.2, 2.6)
    ax = fig.add_subplot()
    ax.hist([v for _, v in series], bins=bins, stacked=True, label=[f"{k} ({len(v):,})" for k, v in series],
            color=[KEPT if k == "kept" else DROPPED for k, _ in series])
    for i, t in enumerate(limits):
        for bound, side in ((t.low, "min"), (t.high, "max")):
            if bound is not None and (lo - (hi - lo) <= bound <= hi + (hi - lo) or hi == lo):
                ax.axvline(bound, color="#222", ls="--" if i == 0 else ":", lw=1,
                           label=f"{side} {bound:g}: {t.label}")
    if ticks is not None:
        ax.set_xticks(ticks)
    ax.set_title(column, fontsize=10)
    ax.set_ylabel("documents")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return to_svg(fig, f"hist-{column}")


def clusters(sizes: Counter) -> str | None:
    if not sizes:
        return None
    fig = _figure(7.0, 2.8)
    ax = fig.add_subplot()
    xs = sorted(sizes)
    ax.bar([str(x) for x in xs], [sizes[x] for x in xs], color=PALETTE[4])
    ax.set_xlabel("documents in the cluster")
    ax.set_ylabel("clusters")
    ax.set_yscale("log" if max(sizes.values()) > 100 else "linear")
    ax.set_title("near-duplicate cluster sizes", fontsize=10)
    fig.tight_layout()
    return to_svg(fig, "clusters")


def similarities(bins: dict[str, int], op: str) -> str | None:
    """Removals by measured similarity to the kept document (stats.json's `similarity` breakdown)."""
    if not bins:
        return None
    fig = _figure(7.0, 2.6)
    ax = fig.add_subplot()
    xs = sorted(bins, key=float)
    ax.bar(xs, [bins[x] for x in xs], color=PALETTE[4])
    ax.set_xlabel("Jaccard similarity with the kept document")
    ax.set_ylabel("documents removed")
    ax.set_title(f"{op}: how close each removal was", fontsize=10)
    fig.tight_layout()
    return to_svg(fig, f"similarity-{op}")


def throughput(data: ReportData) -> str | None:
    rows = [s for s in data.stages if s.docs_per_second]
    if not rows:
        return None
    fig = _figure(7.0, 0.3 * len(rows) + 1.0)
    ax = fig.add_subplot()
    names = [s.name for s in rows][::-1]
    rates = [s.docs_per_second or 0 for s in rows][::-1]
    ax.barh(names, rates, color=PALETTE[1])
    ax.set_xscale("log")
    for y, (v, s) in enumerate(zip(rates, rows[::-1])):
        ax.text(v, y, f" {_human(v)}/s ({s.seconds:.3g} s)", va="center", fontsize=8)
    ax.set_xlim(min(rates) / 2, max(rates) * 20)
    ax.set_xlabel("documents per second of task time (log scale)")
    ax.set_title("throughput per stage", fontsize=10)
    fig.tight_layout()
    return to_svg(fig, "throughput")


def timeline(timing: dict | None) -> str | None:
    """The run's tasks on a time axis (stats.json `timing`): one lane per worker, one bar per task,
    coloured by its step (phase, global step, publish); the gaps between a step's last task and the
    next step's first are the driver's serial work, a long bar at a step's end a straggler."""
    if not timing or not timing.get("steps"):
        return None
    workers = sorted({t["worker"] for tasks in timing["tasks"].values() for t in tasks})
    if not workers:
        return None
    lane = {w: i for i, w in enumerate(workers)}
    fig = _figure(7.5, 0.22 * len(workers) + 1.6)
    ax = fig.add_subplot()
    for k, step in enumerate(timing["steps"]):
        color = PALETTE[k % len(PALETTE)]
        tasks = timing["tasks"].get(step["name"], [])
        for w, spans in _by_worker(tasks).items():
            ax.broken_barh(spans, (lane[w] - 0.4, 0.8), facecolors=color, edgecolors="white", linewidth=0.3)
        if tasks:
            ax.barh([], [], color=color, label=f"{step['name']} ({len(tasks)})")
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([w.rsplit(":", 1)[-1] for w in workers], fontsize=7)
    ax.set_ylabel("worker (process id)")
    ax.set_xlim(0, max(timing.get("wall_s") or 0, 1e-3))
    ax.set_xlabel("seconds from the start of the run")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title("timeline: every task on its worker", fontsize=10)
    fig.tight_layout()
    return to_svg(fig, "timeline")


def _by_worker(tasks: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for t in tasks:
        out.setdefault(t["worker"], []).append((t["start_s"], max(t["wall_s"], 1e-4)))
    return out


def _log_bins(lo: float, hi: float, n: int = 40) -> list[float]:
    a, b = math.log10(lo), math.log10(hi * 1.0001)
    return [10 ** (a + (b - a) * i / n) for i in range(n + 1)]
