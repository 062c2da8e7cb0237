"""The HTML run report, `ylink report`, `ylink inspect`, the notebook API (sample_rejected,
preview_op) and the notebooks, on one real quickstart run (with an annotate-mode op and near-duplicate
cluster columns, so that every section of the report has data)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.explore import preview_op, sample_rejected
from ylink_data.report import write_report
from ylink_data.report.gather import gather

from .conftest import REPO, quickstart_config

YLINK = [sys.executable, "-m", "ylink_data.cli"]
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SECTIONS = ["summary", "funnel", "drops", "distributions", "duplicates", "throughput", "quarantine", "config"]


@pytest.fixture(scope="module")
def run_dir(ray_session, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    cfg = quickstart_config(out, output__keep_rejected=True)
    names = [next(iter(s)) for s in cfg["stages"]]
    cfg["stages"].insert(names.index("gopher_quality") + 1, {"fineweb_quality": {"annotate": True}})
    # 0.7 finds one near-duplicate pair in the sample crawl (0.8 finds none).
    cfg["stages"][names.index("minhash_dedup") + 1] = {"minhash_dedup": {"threshold": 0.7, "cluster_columns": True}}
    ylink_data.run(cfg, progress=False)
    return out


@pytest.fixture(scope="module")
def report(run_dir: Path) -> str:
    path = write_report(str(run_dir))
    assert path == f"{run_dir}/report.html"
    return Path(path).read_text(encoding="utf-8")


class _Page(HTMLParser):
    """Tags outside inline SVG, every attribute that can load something, and all text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.links: list[str] = []
        self.svg_depth = 0
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self.svg_depth += 1
            self.svgs += 1
        elif not self.svg_depth:
            self.tags.add(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href", "srcset", "action", "data")]

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.svg_depth -= 1


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


# ---------------------------------------------------------------------------- the report


def test_report_has_every_section_and_plot(report: str, run_dir: Path):
    for key in SECTIONS:
        assert f'<section id="{key}">' in report
    plots = re.findall(r'data-plot="([^"]+)"', report)
    for name in ("funnel", "drops", "lengths", "languages", "hist-lang_score", "hist-quality_score",
                 "hist-fineweb_line_punct_ratio", "hist-fineweb_short_line_ratio", "clusters", "throughput", "timeline"):
        assert name in plots, name
    assert _parse(report).svgs == len(plots) >= 10
    # the config section is the run's config as YAML
    assert "fineweb_quality:" in report and "keep_rejected: true" in report
    # every drop reason of stats.json is listed with its count
    stats = json.loads((run_dir / "stats.json").read_text())
    for stage in stats["stages"]:
        for reason, n in stage["dropped"].items():
            assert re.search(rf'<td class="l">{re.escape(reason)}</td><td class="l">{stage["name"]}</td><td class="">{n:,}<', report)


def test_timeline_lists_every_batch_of_tasks_with_its_spread(report: str, run_dir: Path):
    """The timeline (issue 40 point 3): a row for every step of stats.json's `timing` (each phase,
    each global step, publish), with its tasks, wall, CPU and longest task."""
    timing = json.loads((run_dir / "stats.json").read_text())["timing"]
    section = report.split('<section id="timeline">', 1)[1].split("</section>", 1)[0]
    assert 'data-plot="timeline"' in section
    names = [s["name"] for s in timing["steps"]]
    assert "phase 0" in names and "publish" in names and any(":" in n for n in names)  # a global op's steps too
    for step in timing["steps"]:
        walls = [t["wall_s"] for t in timing["tasks"][step["name"]]]
        row = re.search(rf'<tr><td class="l">{re.escape(escape(step["name"]))}</td><td class="">{step["tasks"]:,}</td>(.*?)</tr>',
                        section)
        assert row, step["name"]
        cells = [float(c.replace(",", "")) for c in re.findall(r'<td class="">([\d.,]+)</td>', row.group(1))]
        assert cells[4] == pytest.approx(max(walls), rel=0.01, abs=0.001)  # the longest task (3 digits shown)
    assert f"The run took {timing['wall_s']:.2f} s" in section


def test_report_is_self_contained(report: str):
    page = _parse(report)
    assert page.tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "h4", "p", "nav",
                         "a", "main", "section", "div", "b", "span", "table", "thead", "tbody", "tr", "th", "td",
                         "pre", "details", "summary"}, "no script, link, img or iframe: nothing to load"
    assert page.links and all(link.startswith("#") for link in page.links), [l for l in page.links if not l.startswith("#")][:5]
    assert "@import" not in report and not re.search(r"url\((?!#)", report)


def test_funnel_bytes_and_clusters_match_the_data(run_dir: Path):
    """Bytes per stage as the run counted them, checked independently: the kept text, and what a
    filter that does not change text drops equals its rejected documents' text; cluster sizes against
    the minhash drops (every cluster keeps one document, and no later op drops any here)."""
    run = ylink_data.open_run(str(run_dir))
    data = gather(run)
    kept = sum(len(t.encode()) for t in run.to_arrow().column("text").to_pylist())
    rejected = run.rejected()
    assert data.kept_bytes == kept and data.stages[-1].bytes_out == kept
    assert [s.bytes_out for s in data.stages] == [s["bytes_out"] for s in run.stats["stages"]]
    dropped_bytes: dict[str, int] = {}
    for text, reason in zip(rejected.column("text").to_pylist(), rejected.column("reason").to_pylist()):
        dropped_bytes[reason] = dropped_bytes.get(reason, 0) + len(text.encode())
    for stage in run.stats["stages"]:
        if stage["name"] in ("langid", "url_filter", "gopher_quality", "exact_dedup", "minhash_dedup"):
            assert stage["bytes_in"] - stage["bytes_out"] == sum(dropped_bytes.get(r, 0) for r in stage["dropped"])
    minhash = next(s for s in run.stats["stages"] if s["name"] == "minhash_dedup")
    assert minhash["dropped"].get("minhash_dedup", 0) >= 1
    assert sum((size - 1) * n for size, n in data.cluster_sizes.items()) == minhash["dropped"]["minhash_dedup"]
    # removals per source and their similarities: stats.json's breakdowns, the rejected rows' evidence
    removed = [(s, sim) for s, sim, r in zip(rejected.column("source").to_pylist(),
                                             rejected.column("dup_similarity").to_pylist(),
                                             rejected.column("reason").to_pylist()) if r == "minhash_dedup"]
    breakdowns = next(st for st in data.stages if st.name == "minhash_dedup").breakdowns
    assert sum(breakdowns["removed_by_source"].values()) == len(removed)
    assert sum(breakdowns["in_by_source"].values()) == minhash["in"]
    assert all(sim >= 0.7 for _, sim in removed)
    assert sum(breakdowns["similarity"].values()) == len(removed)
    # samples per reason come from that reason only
    for row in data.reasons:
        assert all(doc["reason"] == row.reason for doc in row.samples)
        assert len(row.samples) == (min(3, row.count) if row.stage != "read" else 0)


def test_duplicates_section_shows_removals_per_source(report: str):
    section = report[report.index('<section id="duplicates">'):]
    section = section[:section.index("</section>")]
    assert "minhash_dedup: removals per source" in section and "share removed" in section
    assert "how close each removal was" in section  # the similarity histogram (inline SVG)


def test_dedup_removals_sit_beside_the_document_kept_for_them(report: str, run_dir: Path):
    """Every sampled removal of every dedup stage (issue 42 point 4): the document on its right is the
    one its `dup_of` names, as the run holds it, with the removal's own similarity, grouped per source."""
    run = ylink_data.open_run(str(run_dir))
    docs = {}
    for table in (run.to_arrow(), run.rejected()):
        docs.update(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))
    removed = run.rejected().to_pylist()
    evidence = {r["id"]: r for r in removed if r.get("dup_of")}
    data = gather(run)
    section = report[report.index('<section id="duplicates">'):]
    section = section[:section.index("</section>")]
    assert {s.stage for s in data.dup_sources} == {"exact_dedup", "minhash_dedup"}
    for src in data.dup_sources:
        assert f"<h4>{escape(src.source)} " in section
        for pair in src.pairs:
            row = evidence[pair.removed["id"]]
            assert pair.removed["source"] == src.source and row["reason"] == src.stage
            assert pair.kept["id"] == row["dup_of"] and pair.kept["text"] == docs[row["dup_of"]]
            assert pair.similarity == pytest.approx(row["dup_similarity"])
            block = next(b for b in section.split('<div class="pair">') if f"id {pair.removed['id']}" in b)
            removed_at = block.index(escape(pair.removed["text"][:200]))
            assert block.index(escape(pair.kept["text"][:200]), removed_at + 1) > removed_at  # on its right
            assert f"similarity {pair.similarity:.2f}" in block and f"id {pair.kept['id']}" in block


def test_document_text_is_escaped(run_dir: Path, tmp_path: Path):
    """A real dropped document with `<` in its text (a pager's "< Previous") shows it as text."""
    rejected = ylink_data.open_run(str(run_dir)).rejected()
    texts = [t for t in rejected.column("text").to_pylist() if "<" in t[:500]]
    assert texts, "the sample crawl has dropped pages with '<' in their text"
    page = Path(write_report(str(run_dir), str(tmp_path / "all.html"), samples_per_reason=100)).read_text()
    snippet = re.search(r"<[^\n]{0,30}", texts[0][:500]).group(0)
    assert escape(snippet) in page and snippet not in page
    assert _parse(page).tags <= _parse(Path(run_dir / "report.html").read_text()).tags | {"details", "summary"}


def _without_rejected(run_dir: Path, copy: Path) -> Path:
    """A copy of the run as one with keep_rejected off holds it: no rejected/, none in its manifest."""
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("rejected", "report.html"))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["rejected"] = {"rows": 0, "files": []}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_report_without_rejected_documents_says_what_it_shows(run_dir: Path, tmp_path: Path):
    copy = _without_rejected(run_dir, tmp_path / "run")
    info = json.loads((copy / "run.json").read_text())
    info["config"]["output"]["keep_rejected"] = False
    (copy / "run.json").write_text(json.dumps(info))
    stats = json.loads((copy / "stats.json").read_text())  # as a run written before bytes were counted
    for stage in stats["stages"]:
        del stage["bytes_in"], stage["bytes_out"]
    (copy / "stats.json").write_text(json.dumps(stats))
    data = gather(ylink_data.open_run(str(copy)))
    assert [s.bytes_out is not None for s in data.stages] == [False] * (len(data.stages) - 1) + [True]
    page = Path(write_report(str(copy))).read_text()
    assert "keep_rejected is off" in page and 'data-plot="funnel"' in page


# ---------------------------------------------------------------------------- command line


def test_report_command(run_dir: Path, tmp_path: Path):
    out = tmp_path / "r.html"
    proc = subprocess.run([*YLINK, "report", str(run_dir), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out) and "<svg" in out.read_text()


@pytest.mark.parametrize("make", ["missing", "unfinished"])
def test_report_command_refuses_what_is_not_a_finished_run(tmp_path: Path, make: str):
    target = tmp_path / "run"
    if make == "unfinished":
        target.mkdir()
        (target / "run.json").write_text("{}")
    proc = subprocess.run([*YLINK, "report", str(target)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ylink: error:") and str(target) in lines[0]
    assert ("no such run folder" if make == "missing" else "unfinished") in lines[0]


def _inspect(*args: str) -> str:
    proc = subprocess.run([*YLINK, "inspect", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_inspect_run_folder_prints_a_summary_and_documents(run_dir: Path):
    out = _inspect(str(run_dir), "--limit", "3")
    stats = json.loads((run_dir / "stats.json").read_text())
    assert f"{stats['output_records']} documents kept of {stats['input_records']} input records" in out
    for stage in stats["stages"]:
        assert re.search(rf"^│ {stage['name']} +{stage['in']:,} +{stage['out']:,}", out, re.M), stage["name"]
    assert "top drop reasons: warc_request" in out
    ids = ylink_data.open_run(str(run_dir)).to_arrow().column("id").to_pylist()[:3]
    assert [f"#{i + 1} {doc_id}" in out for i, doc_id in enumerate(ids)] == [True] * 3
    assert "lang=" in out and "quality_score=" in out


def test_inspect_parquet_files_shows_their_columns(run_dir: Path):
    shard = sorted((run_dir / "data").glob("*.parquet"))[0]
    first = pq.read_table(shard).slice(0, 2).to_pylist()
    out = _inspect(str(shard), "--limit", "2")
    assert all(doc["id"] in out for doc in first) and "fineweb_list_ratio=" in out
    rejected = sorted((run_dir / "rejected").glob("*.parquet"))[0]
    doc = pq.read_table(rejected).slice(0, 1).to_pylist()[0]
    out = _inspect(str(rejected), "--limit", "1")
    assert doc["id"] in out and f"reason={doc['reason']}" in out


# ---------------------------------------------------------------------------- notebook API


def test_sample_rejected_is_reproducible_and_matches_reason_prefixes(run_dir: Path):
    run = ylink_data.open_run(str(run_dir))
    every = set(run.rejected("gopher_quality").column("id").to_pylist())
    assert len(every) > 5
    sample = sample_rejected(run, "gopher_quality", n=5, seed=0)
    assert sample.num_rows == 5 and set(sample.column("id").to_pylist()) <= every
    assert all(r.startswith("gopher_quality:") for r in sample.column("reason").to_pylist())
    assert sample.equals(sample_rejected(str(run_dir), "gopher_quality", n=5, seed=0))
    # a sample of n is the start of a sample of more, and all of them when n is large
    assert sample_rejected(run, "gopher_quality", n=8).column("id").to_pylist()[:5] == sample.column("id").to_pylist()
    assert set(sample_rejected(run, "gopher_quality", n=1000).column("id").to_pylist()) == every
    exact = sample_rejected(run, "exact_dedup", n=10)
    assert exact.column("reason").to_pylist() == ["exact_dedup"] * exact.num_rows and exact.num_rows >= 1
    assert sample_rejected(run, "no_such_op", n=3).num_rows == 0


def test_preview_with_the_runs_parameters_agrees_with_the_run(run_dir: Path):
    preview = preview_op(str(run_dir), "gopher_quality", n=10_000, source="both")
    s = preview.summary()
    assert s["newly_dropped"] == s["newly_kept"] == 0
    assert preview.preview_reasons == preview.run_reasons and s["dropped"] >= 10
    # langid drops come before gopher_quality; exact/minhash drops after it
    assert s["not reached"] == sum(ylink_data.open_run(str(run_dir)).stats["stages"][3]["dropped"].values())


def test_preview_of_a_stricter_threshold_drops_more(run_dir: Path):
    run = ylink_data.open_run(str(run_dir))
    preview = preview_op(run, "gopher_quality", {"min_doc_words": 100}, n=10_000, source="both")
    assert preview.newly_kept.num_rows == 0
    newly = preview.newly_dropped
    assert newly.num_rows >= 1
    assert set(newly.column("preview_reason").to_pylist()) == {"gopher_quality:word_count"}
    assert preview.params["min_doc_words"] == 100 and preview.params["language"] == "auto"  # the run's, changed
    text = repr(preview)
    assert "gopher_quality with min_doc_words=100" in text and f"{newly.num_rows} newly dropped" in text
    frame = preview.to_pandas()
    assert len(frame) == preview.sampled and {"run_reason", "preview_reason", "run_verdict"} <= set(frame.columns)
    # on kept documents only, a lower bar changes nothing and a table works as input
    kept = run.to_arrow()
    same = preview_op(kept, "gopher_quality", {"language": "auto", "min_doc_words": 10}, n=10_000)
    assert same.summary()["newly_dropped"] == 0 and same.sampled == kept.num_rows


def test_preview_by_default_shows_what_a_looser_threshold_brings_back(run_dir: Path, tmp_path: Path):
    """The default source reads rejected/ when the run kept it: documents gopher dropped for too few
    words that a lower bar keeps are `newly_kept`; source="all" is the same sample."""
    looser = preview_op(str(run_dir), "gopher_quality", {"min_doc_words": 10}, n=10_000)
    back = looser.newly_kept
    assert back.num_rows >= 1 and looser.note is None
    assert set(back.column("run_reason").to_pylist()) == {"gopher_quality:word_count"}
    assert f"{back.num_rows} newly kept" in repr(looser)
    assert preview_op(str(run_dir), "gopher_quality", {"min_doc_words": 10}, n=10_000, source="all").table.equals(looser.table)
    # a run without rejected/ previews its kept documents and says what it cannot show
    copy = _without_rejected(run_dir, tmp_path / "run")
    kept_only = preview_op(str(copy), "gopher_quality", {"min_doc_words": 10}, n=10_000)
    assert kept_only.newly_kept.num_rows == 0 and "keep_rejected: true" in repr(kept_only)
    with pytest.raises(ValueError, match="'auto', 'kept', 'rejected', 'both', 'all'"):
        preview_op(str(run_dir), "gopher_quality", source="every")


def test_preview_refuses_global_ops_and_bad_parameters(run_dir: Path):
    with pytest.raises(YlinkError, match="whole corpus"):
        preview_op(str(run_dir), "minhash_dedup")
    with pytest.raises(ConfigError, match="did you mean 'min_doc_words'"):
        preview_op(str(run_dir), "gopher_quality", {"min_doc_wrds": 3})


def test_preview_of_a_classifier_threshold(run_dir: Path):
    preview = preview_op(str(run_dir), "quality_classifier", {"min_score": 0.5}, n=10_000, source="kept")
    scores = preview.table.column("quality_score")
    low = pc.sum(pc.less(scores, 0.5)).as_py()
    assert preview.newly_dropped.num_rows == low >= 1  # the run kept every scored document


# ---------------------------------------------------------------------------- notebooks


def test_notebooks_are_committed_without_outputs():
    import nbformat

    assert NOTEBOOKS, "notebooks/ has at least one notebook"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: strip outputs"


RUN_NOTEBOOK = re.compile(r"^jupyter nbconvert --to notebook --execute (notebooks/\S+\.ipynb) --output-dir (\S+)$", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_as_its_first_cell_says(path: Path, tmp_path: Path):
    """Issue 42 point 6: the notebook says how to run it, and that command (nbconvert, from the
    `notebook` extra) runs it headless in a clone; its run goes to the clone's out/, nothing is left
    in the temporary folder."""
    import nbformat

    intro = nbformat.read(path, as_version=4).cells[0]
    assert intro.cell_type == "markdown"
    found = RUN_NOTEBOOK.search(intro.source)
    assert found and found.group(1) == f"notebooks/{path.name}", "the first cell gives the command that runs it"
    clone = tmp_path / "clone"
    (clone / "notebooks").mkdir(parents=True)
    shutil.copy(path, clone / "notebooks" / path.name)  # a copy: the notebook finds the clone from its own folder
    for rel in ("samples", "pipelines", "configs"):
        (clone / rel).symlink_to(REPO / rel)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           "TMPDIR": str(scratch), "JUPYTER_PLATFORM_DIRS": "1"}
    proc = subprocess.run(["bash", "-c", found.group(0)], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(clone / found.group(2) / path.name, as_version=4)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook plots"
    assert any("newly dropped" in o.get("text", "") for o in outputs), "the notebook previews a threshold"
    assert (clone / "out" / "explore-quickstart" / "manifest.json").is_file()
    assert not list(scratch.glob("ylink-explore-*")), "a run folder left in the temporary folder"


# ---------------------------------------------------------------------------- in a browser


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                                  "(apt-get install chromium; CI installs it)")
def test_report_in_headless_chromium(report: str, run_dir: Path, tmp_path: Path):
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("request", lambda r: requests.append(r.url))
        page.goto((run_dir / "report.html").as_uri(), wait_until="load")
        boxes = page.eval_on_selector_all("svg.plot", "els => els.map(e => [e.dataset.plot, e.getBoundingClientRect().width, e.getBoundingClientRect().height])")
        texts = page.eval_on_selector_all("svg.plot text", "els => els.length")
        # each dedup pair: the removed document and the kept one side by side, on one row
        pairs = page.eval_on_selector_all(".pair", "els => els.map(e => Array.from(e.querySelectorAll(':scope > div:not(.head)'))"
                                          ".map(c => { const r = c.getBoundingClientRect(); return [r.left, r.top, r.width]; }))")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert problems == []
    assert requests == [(run_dir / "report.html").as_uri()], "the page loads nothing but itself"
    assert len(boxes) >= 10 and all(w > 200 and h > 100 for _, w, h in boxes), boxes
    assert texts > 50  # axis labels and titles are text
    assert pairs and all(len(p) == 2 and p[0][0] < p[1][0] and p[0][1] == p[1][1] and p[0][2] > 300 for p in pairs), pairs
