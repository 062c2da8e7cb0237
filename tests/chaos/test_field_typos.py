"""Issue 33, point 14 (field names): `ylink validate` said ok for a typo in `input.text_field` (then
`ylink run` quarantined every record: "no text field 'txet'") or in `input.url_field` (every url
null). Validate reads the first records of the input (engine/field_check.py) and names the key.

The typos are generated (a letter changed, dropped or doubled at a place drawn with a fixed seed) in
both field keys, over real Common Crawl lines as JSONL and as Parquet; the right names pass."""
from __future__ import annotations

import gzip
import io
import json
import random
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ..conftest import REPO, TEST_DATA
from .processes import ylink

PIPELINE = REPO / "pipelines" / "quickstart.yaml"
RIGHT = {"input.text_field": "body", "input.url_field": "page.address"}


def rows() -> list[dict]:
    """Real lines, with their fields renamed so that neither default name finds them."""
    lines = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines()[:30]
    return [{"body": r["text"], "page": {"address": r["metadata"]["url"]}} for r in map(json.loads, lines)]


def write(folder, fmt: str) -> str:
    if fmt == "jsonl":
        path = folder / "docs.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    else:
        path = folder / "docs.parquet"
        out = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows()), out)
        path.write_bytes(out.getvalue())
    return str(path)


def typo(name: str, rng: random.Random) -> str:
    at = rng.randrange(len(name))
    how = rng.choice(["change", "drop", "double"])
    if how == "change":
        return name[:at] + ("x" if name[at] != "x" else "y") + name[at + 1:]
    if how == "drop" and len(name) > 1:
        return name[:at] + name[at + 1:]
    return name[:at] + name[at] + name[at:]


def _validate(path: str, tmp_path, fields: dict[str, str]):
    sets = [f"--set={k}={v}" for k, v in {"input.paths": f"[{path}]", "output.path": str(tmp_path / "out"),
                                          **fields}.items()]
    return ylink("validate", PIPELINE, *sets)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_right_field_names_pass(tmp_path, fmt):
    checked = _validate(write(tmp_path, fmt), tmp_path, RIGHT)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("key", sorted(RIGHT))
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_field_name_typo_fails_validate_naming_the_key(tmp_path, fmt, key, seed):
    wrong = typo(RIGHT[key], random.Random(f"{key}-{seed}"))
    assert wrong != RIGHT[key]
    path = write(tmp_path, fmt)
    checked = _validate(path, tmp_path, {**RIGHT, key: wrong})
    assert checked.returncode == 2, checked.stdout
    [line] = checked.stderr.strip().splitlines()
    assert re.search(rf"{re.escape(key)}: none of the first \d+ records of {re.escape(path)} ", line), line
    assert repr(wrong) in line, line
    if key == "input.url_field":
        assert f"did you mean {RIGHT[key]!r}" in line, line
