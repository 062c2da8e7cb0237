"""The report page: one HTML file with inline CSS and inline SVG plots, no script and no reference
to anything outside it. Every value from the data (texts, URLs, reasons, config) is escaped."""
from __future__ import annotations

import datetime as dt
from html import escape
from typing import Any, Iterable

import yaml

from ylink_data.core.version import __version__
from ylink_data.report import plots
from ylink_data.report.gather import DupPair, DupSource, ReportData, StageRow

TEXT_CHARS = 600

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:14px 28px}
header h1{margin:0;font-size:20px} header p{margin:4px 0 0;color:#cfd8dc;font-size:13px}
nav{padding:8px 28px;background:#eceff1;font-size:13px;position:sticky;top:0;z-index:1}
nav a{margin-right:14px;color:#37474f}
main{padding:4px 28px 40px;max-width:1100px}
section{margin-top:26px} h2{font-size:17px;border-bottom:1px solid #cfd8dc;padding-bottom:4px}
h3{font-size:14px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #dde3e6;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#eceff1} td.l,th.l{text-align:left}
.note{color:#546e7a;font-size:12px;max-width:900px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:10px}
.doc{background:#fff;border:1px solid #dde3e6;border-radius:4px;padding:8px;font-size:12px}
.doc .meta{color:#546e7a;word-break:break-all;margin-bottom:4px}
.doc pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:12px;max-height:16em;overflow:auto}
pre.config{background:#fff;border:1px solid #dde3e6;padding:10px;font-size:12px;overflow:auto}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:8px}
svg.plot{max-width:100%;height:auto;display:block;margin:6px 0;background:#fff}
.kpi{display:inline-block;background:#fff;border:1px solid #dde3e6;border-radius:4px;padding:8px 14px;margin:4px 8px 4px 0}
.kpi b{display:block;font-size:18px} .kpi span{font-size:12px;color:#546e7a}
details summary{cursor:pointer;font-size:13px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px;margin:6px 0 12px}
.pair .head{grid-column:1/3;font-size:12px;color:#37474f}
.pair .side{font-size:11px;font-weight:600;color:#546e7a;margin-bottom:2px}
h4{font-size:13px;margin:14px 0 4px;word-break:break-all}
"""

SECTIONS = [("summary", "Summary"), ("funnel", "Funnel"), ("drops", "Dropped documents"),
            ("distributions", "Distributions"), ("duplicates", "Duplicates"), ("tokens", "Tokens"),
            ("throughput", "Throughput"), ("timeline", "Timeline"),
            ("quarantine", "Quarantine"), ("config", "Config")]


def render(data: ReportData) -> str:
    name = data.manifest.get("name") or data.info.get("name") or "run"
    body = [_summary(data), _funnel(data), _drops(data), _distributions(data), _duplicates(data),
            _tokens(data), _throughput(data), _timeline(data), _quarantine(data), _config(data)]
    nav = "".join(f'<a href="#{key}">{title}</a>' for key, title in SECTIONS)
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>ylink report: {escape(name)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>ylink run report: {escape(name)}</h1>"
            f"<p>{escape(data.url)} · run created {escape(str(data.manifest.get('created', '?')))} · "
            f"report made {made} by ylink-data {escape(__version__)}</p></header>"
            f"<nav>{nav}</nav><main>{''.join(body)}</main></body></html>\n")


def _section(key: str, *parts: str) -> str:
    title = dict(SECTIONS)[key]
    return f'<section id="{key}"><h2>{title}</h2>{"".join(p for p in parts if p)}</section>'


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _table(head: list[str], rows: Iterable[list[Any]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    trs = []
    for row in rows:
        tds = "".join(f'<td class="{"l" if i < left else ""}">{_cell(v)}</td>' for i, v in enumerate(row))
        trs.append(f"<tr>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(trs)}</tbody></table>"


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return escape(str(v))


def _bytes(n: int | None) -> str | None:
    if n is None:
        return None
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _kpi(value: str, label: str) -> str:
    return f'<div class="kpi"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


def _summary(d: ReportData) -> str:
    s = d.stats
    dropped = sum(sum(st.dropped.values()) for st in d.stages)
    kpis = [_kpi(f"{s['input_records']:,}", "input records"),
            _kpi(f"{s['output_records']:,}", "documents kept"),
            _kpi(f"{dropped:,}", "dropped"),
            _kpi(f"{s.get('quarantined', 0):,}", "quarantined"),
            _kpi(_bytes(s.get("input_bytes")) or "—", "raw input bytes"),
            _kpi(_bytes(d.kept_bytes) or "0 B", "text bytes kept"),
            _kpi(f"{len(d.manifest.get('shards', []))}", "shards")]
    parts = ["".join(kpis)]
    if s["input_records"]:
        created = s.get("created", 0)
        if created:  # fan-out ops (chunk, qa_extract) make several rows of one document
            parts.append(_note(f"Books: {s['input_records']:,} in + {created:,} created by ops that make several "
                               f"rows of one document = {s['output_records']:,} kept + {dropped:,} dropped + "
                               f"{s.get('quarantined', 0):,} quarantined."))
        else:
            parts.append(_note(f"{s['output_records'] / s['input_records']:.1%} of input records kept. Books: "
                               f"{s['input_records']:,} in = {s['output_records']:,} kept + {dropped:,} dropped + "
                               f"{s.get('quarantined', 0):,} quarantined."))
    tiers = d.manifest.get("tiers")
    if tiers:
        parts.append("<h3>Output tiers</h3>" + _table(["tier", "folder", "documents"],
                                                       [[k, v.get("path"), v.get("rows")] for k, v in tiers.items()]))
    return _section("summary", *parts)


def _funnel(d: ReportData) -> str:
    rows = []
    fan_out = any(st.created for st in d.stages)  # a "created" column only where an op made rows
    for st in d.stages:
        top = max(st.dropped.items(), key=lambda kv: kv[1])[0] if st.dropped else None
        rows.append([st.name, st.docs_in, *([st.created] if fan_out else []), st.docs_out,
                     sum(st.dropped.values()), st.quarantined, top, _bytes(st.bytes_out)])
    table = _table(["stage", "in", *(["created"] if fan_out else []), "out", "dropped", "quarantined",
                    "main reason", "text bytes out"], rows)
    return _section("funnel", plots.funnel(d), table, _note(d.bytes_note))


def _drops(d: ReportData) -> str:
    if not d.reasons:
        return _section("drops", _note("No document was dropped."))
    table = _table(["reason", "stage", "documents", "text bytes"],
                   [[r.reason, r.stage, r.count, _bytes(r.bytes)] for r in d.reasons], left=2)
    parts = [plots.drops(d), table]
    if not d.keep_rejected:
        parts.append(_note("keep_rejected is off: no dropped documents to show. Rerun with "
                           "`output.keep_rejected: true` to keep them in rejected/ with their reason."))
    else:
        parts.append(_note("Samples: the documents with the smallest hash of their id (seed 0), the same on every "
                           "report of this run. Records dropped while reading (WARC requests, metadata, non-HTML "
                           "responses) are not documents and have no samples."))
        for r in d.reasons:
            if not r.samples:
                continue
            cards = "".join(_doc_card(doc) for doc in r.samples)
            parts.append(f'<h3>{escape(r.reason)} <span class="note">({r.count:,} documents, stage '
                         f'{escape(r.stage)})</span></h3><div class="cards">{cards}</div>')
    return _section("drops", *parts)


def _doc_card(doc: dict[str, Any]) -> str:
    text = doc.get("text") or ""
    facts = [f"id {doc.get('id')}"]
    if doc.get("lang"):
        facts.append(f"lang {doc['lang']}" + (f" ({doc['lang_score']:.2f})" if doc.get("lang_score") is not None else ""))
    if doc.get("quality_score") is not None:
        facts.append(f"quality_score {doc['quality_score']:.3f}")
    facts.append(f"{len(text):,} chars")
    shown = text[:TEXT_CHARS] + (" …" if len(text) > TEXT_CHARS else "")
    url = f"<div class=\"meta\">{escape(doc['url'])}</div>" if doc.get("url") else ""
    return (f'<div class="doc"><div class="meta">{escape(" · ".join(facts))}</div>{url}'
            f"<pre>{escape(shown)}</pre></div>")


def _distributions(d: ReportData) -> str:
    parts = [_note(d.sample_note)]
    parts += [plots.lengths(d) or _note("No kept documents."), plots.languages(d) or ""]
    if d.lang_counts:
        parts.append(_table(["language", "kept documents"], [[k, v] for k, v in d.lang_counts.most_common()]))
    scores = [plots.histogram(c, d.numeric[c], d.thresholds.get(c, [])) for c in d.numeric if c not in d.measure_columns]
    parts.append(f'<div class="plots">{"".join(scores)}</div>')
    if d.measure_columns:
        parts.append("<h3>Measures of ops in annotate mode</h3>")
        parts.append(_note("Dashed lines: the thresholds the op would apply with the run's parameters (not applied "
                           "in annotate mode). Preview a change on a sample with ylink_data.explore.preview_op."))
        measures = [plots.histogram(c, d.numeric[c], d.thresholds.get(c, [])) for c in d.measure_columns]
        parts.append(f'<div class="plots">{"".join(measures)}</div>')
    else:
        parts.append(_note("No measure columns: run an op with `annotate: true` (gopher_quality, c4_quality, "
                           "fineweb_quality, ...) to see the values its rules check."))
    return _section("distributions", *parts)


def _duplicates(d: ReportData) -> str:
    dedup = [(st.name, sum(st.dropped.values())) for st in d.stages if st.name in ("exact_dedup", "minhash_dedup")]
    parts = [_table(["op", "duplicates dropped"], dedup)] if dedup else [_note("The run has no dedup op.")]
    if d.cluster_sizes:
        n = sum(d.cluster_sizes.values())
        members = sum(size * count for size, count in d.cluster_sizes.items())
        parts.append(plots.clusters(d.cluster_sizes) or "")
        parts.append(_note(f"{n:,} near-duplicate clusters seen in the kept and rejected documents, "
                           f"{members:,} documents in them; the largest has {max(d.cluster_sizes):,}."))
    elif any(name == "minhash_dedup" for name, _ in dedup):
        parts.append(_note("Set `cluster_columns: true` on minhash_dedup for cluster sizes."))
    for st in d.stages:
        parts += _removals_by_source(st)
        parts += _pairs(st, [s for s in d.dup_sources if s.stage == st.name])
    return _section("duplicates", *parts)


def _pairs(st: StageRow, sources: list[DupSource]) -> list[str]:
    """A dedup stage's removals side by side with the document kept in their place, per source."""
    if not sources:
        return []
    parts = [f"<h3>{escape(st.name)}: removed and kept, side by side</h3>",
             _note("Per source (the largest share removed first), a sample of its removals (the smallest hash of "
                   "their id, seed 0): each removed document on the left, the document kept in its place "
                   "(`dup_of`) on the right, with their similarity (`dup_similarity`: the exact Jaccard of their "
                   "shingle sets; 1.00 for exact_dedup's equal keys).")]
    for src in sources:
        share = f", {src.removed / src.docs_in:.1%} of {src.docs_in:,}" if src.docs_in else ""
        parts.append(f'<h4>{escape(str(src.source))} <span class="note">({src.removed:,} removed{share})</span></h4>')
        parts += [_pair(p) for p in src.pairs]
    return parts


def _pair(p: DupPair) -> str:
    similarity = "similarity —" if p.similarity is None else f"similarity {p.similarity:.2f}"
    head = f'<div class="head">{escape(similarity)} · {escape(str(p.removed.get("reason")))}</div>'
    removed = f'<div><div class="side">removed</div>{_doc_card(p.removed)}</div>'
    if p.kept is None:
        kept = (f'<div><div class="side">kept: {escape(str(p.removed.get("dup_of")))}</div>'
                f'{_note("Not among this run’s documents: kept by an earlier run (minhash_dedup index).")}</div>')
    else:
        side = "kept" + (f" ({p.kept_note})" if p.kept_note else "")
        kept = f'<div><div class="side">{escape(side)}</div>{_doc_card(p.kept)}</div>'
    return f'<div class="pair">{head}{removed}{kept}</div>'



SOURCES_SHOWN = 20  # sources in the removals table: the most removed share first


def _removals_by_source(st: StageRow) -> list[str]:
    """A dedup op's removals per source (most wiped out first) and their similarities, from stats.json:
    one source losing most of its documents shows at the top."""
    seen, removed = st.breakdowns.get("in_by_source"), st.breakdowns.get("removed_by_source", {})
    if not seen:
        return []
    rows = sorted(((src, n, removed.get(src, 0), removed.get(src, 0) / n) for src, n in seen.items() if n),
                  key=lambda r: (-r[3], -r[2], r[0]))
    parts = [f"<h3>{escape(st.name)}: removals per source</h3>",
             _table(["source", "documents in", "removed", "share removed"],
                    [[src, n, k, f"{share:.1%}"] for src, n, k, share in rows[:SOURCES_SHOWN]])]
    if len(rows) > SOURCES_SHOWN:
        parts.append(_note(f"{len(rows) - SOURCES_SHOWN:,} more sources; stats.json lists every one."))
    similarity = st.breakdowns.get("similarity")
    if similarity:
        parts.append(plots.similarities(similarity, st.name) or "")
        parts.append(_note("Exact Jaccard of each removed document's shingle set with the document kept for it "
                           "(bins of 0.05; 1.00: the same set)."))
    return parts


def _tokens(d: ReportData) -> str:
    """stats.json's `tokens` (the tokenize op's counts, summed from the published shards)."""
    tokens = d.stats.get("tokens")
    if not tokens:
        return _section("tokens", _note("No tokenize op in this pipeline."))
    total, docs = tokens["total"], tokens.get("documents", 0)
    parts = ["".join([_kpi(f"{total:,}", "tokens"), _kpi(f"{docs:,}", "documents"),
                      _kpi(f"{total / docs:,.0f}" if docs else "—", "tokens per document")])]
    share = (lambda n: f"{n / total:.1%}") if total else (lambda n: "—")
    parts.append("<h3>By language</h3>" + _table(["language", "tokens", "share"],
                                                  [[k, n, share(n)] for k, n in tokens["by_lang"].items()]))
    if tokens.get("by_tier"):
        parts.append("<h3>By output tier</h3>" + _table(["tier", "tokens", "share"],
                                                         [[k, n, share(n)] for k, n in tokens["by_tier"].items()]))
    parts.append(_note("Counts include each document's end-of-document token; read from the shards' num_tokens."))
    return _section("tokens", *parts)


def _throughput(d: ReportData) -> str:
    rows = [[st.name, st.docs_in, st.seconds or None, st.docs_per_second, st.startup_seconds or None]
            for st in d.stages]
    return _section("throughput", plots.throughput(d) or "",
                    _table(["stage", "documents in", "seconds on documents", "documents / s",
                            "start-up seconds (once per worker)"], rows),
                    _note("Seconds are task time summed over all workers (not wall time); the resolve step of a "
                          "global op (dedup) runs outside the tasks and is not counted. One-time start-up (an op's "
                          "setup, a model, a dictionary or a child process loaded on first use) is counted apart, "
                          "so documents / s is the stage's rate on documents."))


def _timeline(d: ReportData) -> str:
    """Each batch of tasks (phase, global step, publish) with its tasks' spread: a longest task far
    above the median is a straggler, time outside the batches is the driver's (stats.json `timing`)."""
    timing = d.stats.get("timing")
    if not timing:
        return _section("timeline", _note("This run's stats.json has no per-task timings (written by an older ylink)."))
    rows = []
    for step in timing["steps"]:
        walls = sorted(t["wall_s"] for t in timing["tasks"].get(step["name"], []))
        median = walls[len(walls) // 2] if walls else None
        rows.append([step["name"], step["tasks"], round(step["start_s"], 2), round(step["wall_s"], 2),
                     round(step["cpu_s"], 2), round(median, 3) if median is not None else None,
                     round(walls[-1], 3) if walls else None,
                     round(walls[-1] / median, 1) if walls and median else None])
    inside = sum(s["wall_s"] for s in timing["steps"])
    return _section("timeline", plots.timeline(timing) or "",
                    _table(["step", "tasks", "start s", "wall s", "CPU s", "median task s", "longest task s",
                            "longest / median"], rows),
                    _note(f"The run took {timing['wall_s']:.2f} s; its batches of tasks {inside:.2f} s, the rest "
                          f"({max(0.0, timing['wall_s'] - inside):.2f} s) is the driver's own work (planning, "
                          "deciding between steps, stats). A task's CPU counts its worker's children (the "
                          "extractor). Tasks finished before a resume are not shown."))


def _quarantine(d: ReportData) -> str:
    q = d.quarantine
    if not q:
        return _section("quarantine", _note(f"No record was quarantined ({d.stats.get('quarantined', 0)} in stats)."))
    table = _table(["stage", "reason", "records"],
                   [[s, r, n] for (s, r), n in d.quarantine_counts.most_common()], left=2)
    examples = _table(["file", "offset / id", "stage", "error"],
                      [[e.get("file"), e.get("offset", e.get("id")), e.get("stage") or "read",
                        str(e.get("error", ""))[:300]] for e in q], left=4)
    return _section("quarantine", table, "<h3>First records</h3>", examples)


def _config(d: ReportData) -> str:
    config = d.info.get("config")
    if config is None:
        return _section("config", _note("run.json is missing."))
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)
    parts = [_note("From run.json (credentials removed)."), f'<pre class="config">{escape(text)}</pre>']
    resolved = d.info.get("fingerprinted", {}).get("stages")
    if resolved:
        full = yaml.safe_dump([{n: p} for n, p in resolved], sort_keys=False, allow_unicode=True, width=100)
        parts.append(f'<details><summary>every op parameter, defaults included</summary>'
                     f'<pre class="config">{escape(full)}</pre></details>')
    return _section("config", *parts)
