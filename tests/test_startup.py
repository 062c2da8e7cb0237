"""One-time start-up apart from a stage's work on documents (issue 42 point 3: the report's throughput
table showed a worker's start-up, jieba's dictionary or a model loading, as a stage's documents per
second). Every stage of the quickstart's pipeline is checked, in fresh worker processes and again in
a process whose ops are loaded already."""
from __future__ import annotations

import re

import pytest
import ylink_data
from ylink_data.report import write_report

from .conftest import quickstart_config

# Stages whose op loads something once per worker: the fastText language-ID model, jieba's
# dictionary (the crawl has Chinese pages), the bundled quality models.
LOADS = {"langid", "gopher_quality", "quality_classifier"}


def test_start_up_is_counted_apart_once_per_worker(tmp_path):
    cfg = quickstart_config(tmp_path / "fresh", input__split_bytes=200_000, ray__execution="processes",
                            ray__num_cpus=2)
    _, fresh = ylink_data.run(cfg, progress=False)
    stages = {s["name"]: s for s in fresh["stages"]}
    assert set(stages) >= LOADS
    for name, s in stages.items():
        assert s["startup_seconds"] >= 0 and s["seconds"] >= 0, name
    for name in LOADS:
        assert stages[name]["startup_seconds"] > 0, f"{name}: its workers loaded a model: start-up"

    # The same pipeline twice in this process: the second finds every op and model loaded already.
    local = quickstart_config(tmp_path / "first", ray__execution="local")
    ylink_data.run(local, progress=False)
    _, again = ylink_data.run(quickstart_config(tmp_path / "again", ray__execution="local"), progress=False)
    for s in again["stages"]:
        assert s["startup_seconds"] == 0, f"{s['name']}: nothing is loaded twice in one process"
    assert [s["in"] for s in again["stages"]] == [s["in"] for s in fresh["stages"]]

    # The report's table: documents / s from the seconds on documents, start-up in its own column.
    report = open(write_report(str(tmp_path / "fresh"), str(tmp_path / "report.html"))).read()
    table = report[report.index('id="throughput"'):]
    table = table[table.index("<table>"):table.index("</table>")]
    assert "start-up seconds" in table and "seconds on documents" in table
    for name in LOADS:
        s = stages[name]
        row = re.search(rf"<td class=\"l\">{name}</td>(.*?)</tr>", table).group(1)
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
        assert cells[0] == f"{s['in']:,}"
        assert _number(cells[3]) == pytest.approx(s["startup_seconds"], rel=0.006)  # shown to 3 digits
        if s["seconds"] > 0:
            assert _number(cells[2]) == pytest.approx(s["in"] / s["seconds"], rel=0.006)


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))
