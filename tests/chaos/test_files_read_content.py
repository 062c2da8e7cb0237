"""Every file an op reads counts by its content (issue 33, points 1 and 14), for every op of the
registry: the cases are generated from `Op.files_read` of each op's example parameters, and every
registered op must be either here or declared as reading no file, so that a new op is covered.

For each file: one byte changed in place, with the size and modification time put back, changes the
run's fingerprint (a finished run is then not "already complete", an unfinished one not resumed);
the file removed is one config error naming the op's key and the path (what `ylink validate` prints).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.engine.runner import Runner
from ylink_data.ops import REGISTRY, load_ops, op_class

from ..conftest import REPO, TEST_DATA
from ..tokenruns import crawl_tokenizer

ASSETS = REPO / "ylink_data" / "assets"
PROMPTS = REPO / "configs" / "prompts"
# Ops whose parameters name no file (bundled assets are part of the package).
NO_FILES = {"c4_quality", "exact_dedup", "extract", "fineweb_quality", "gopher_quality", "gopher_repetition",
            "langid", "normalize", "pii", "preference_pairs", "qa_extract", "respond"}


def _copy(src: Path, dst: Path) -> str:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return str(dst)


def _examples(d: Path) -> dict[str, list[dict]]:
    """Parameters of each op that name real files (copies in `d`), in every form the op takes."""
    tok = _copy(crawl_tokenizer(d / "trained"), d / "tok" / "tokenizer.json")
    template = (ASSETS / "chat_templates" / "chatml.jinja").read_text()
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    index = d / "index"
    index.mkdir()
    (index / "index.json").write_text(json.dumps({"version": 1, "files": []}))
    words = _copy(ASSETS / "badwords" / "zh-gambling.txt", d / "lists" / "gambling.txt")
    return {
        "quality_classifier": [{"model": _copy(ASSETS / "models" / "quality-en.bin", d / "model.bin")},
                               {"model": {"en": _copy(ASSETS / "models" / "quality-en.bin", d / "en.bin"),
                                          "zh": _copy(ASSETS / "models" / "quality-zh.bin", d / "zh.bin")}}],
        "decontaminate": [{"benchmarks": [{"path": _copy(TEST_DATA.parent / "data" / "cc_en_head-0174.jsonl.gz",
                                                         d / "bench.jsonl.gz"), "fields": ["text"]}]}],
        "tokenize": [{"tokenizer": tok}],
        "chunk": [{"unit": "tokens", "tokenizer": tok}],
        "sft_tokenize": [{"tokenizer": tok, "tokenizer_config": str(d / "tokenizer_config.json")}],
        "badwords": [{"language": "zh", "lists": [words, "zh-obscene"]}],
        "url_filter": [{"blocked_domains": _copy(ASSETS / "urls" / "blocked_domains.txt", d / "domains.txt"),
                        "banned_words": ["casino", "@" + _copy(ASSETS / "urls" / "banned_words.txt", d / "bw.txt")]}],
        "instruction_filter": [{"column": "text",  # the bundled corpus has no instruction column
                                "phrases": _copy(REPO / "configs" / "datagen" / "refusals.txt", d / "refusals.txt")}],
        "judge": [{"instruction_column": "text", "response_column": "text",
                   "prompt": _copy(PROMPTS / "judge-pointwise-en.txt", d / "judge.txt")}],
        "qa_generate": [{"prompt": _copy(PROMPTS / "qa_generate-en.txt", d / "qa.txt")}],
        "instruct_generate": [{"count": 4, "prompt": _copy(PROMPTS / "self_instruct-en.txt", d / "si.txt")}],
        "minhash_dedup": [{"index": str(index)}],
    }


def _pipeline(tmp: Path, name: str, params: dict) -> dict:
    return {"name": "files", "input": {"paths": [str(TEST_DATA / "cc_en_head-0174.jsonl.gz")]},
            "output": {"path": str(tmp / "out")}, "stages": [{name: params}],
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}


def _change_in_place(path: Path) -> None:
    """One byte of the middle changed to another of its kind; size and times put back."""
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    while not chr(data[at]).isalpha() and at < len(data) - 1:
        at += 1
    data[at] = ord("a") if data[at] != ord("a") else ord("b")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_every_op_is_classified(tmp_path):
    load_ops()
    assert set(_examples(tmp_path)) | NO_FILES == set(REGISTRY), "classify each new op: files it reads, or none"
    for name in NO_FILES:
        assert op_class(name).files_read({}) == []


def _cases(tmp: Path):
    """(op, parameters, key, file) for every file of every form of every op, each in its own folder."""
    for name, forms in _examples(tmp / "list").items():
        for form in range(len(forms)):
            for k in range(len(op_class(name).files_read(forms[form]))):
                params = _examples(tmp / f"{name}-{form}-{k}")[name][form]
                key, url = op_class(name).files_read(params)[k]
                yield name, params, key, url, tmp / f"{name}-{form}-{k}"


def test_every_file_read_counts_by_content(tmp_path):
    cases = list(_cases(tmp_path))
    assert len(cases) >= 14
    for name, params, key, url, root in cases:
        cfg = load_config(_pipeline(root, name, params))
        before = Runner(cfg).plan()
        assert any(entry[0] == f"stages[0].{name}.{key}" for entry in before.fingerprinted["files read"])
        _change_in_place(Path(url))
        after = Runner(cfg).plan()
        assert after.fingerprint != before.fingerprint, f"{name}.{key} ({url}) changed in place, same fingerprint"


def test_every_missing_file_is_one_error_naming_key_and_path(tmp_path):
    for name, params, key, url, root in _cases(tmp_path):
        os.remove(url)
        with pytest.raises(ConfigError) as err:
            Runner(load_config(_pipeline(root, name, params))).plan()
        line = next(p for p in err.value.problems if url in p)
        assert line.startswith(f"stages[0].{name}.{key}: "), line
        assert "\n" not in line


def _swap_link(link: Path) -> None:
    """The link pointed at a changed copy of its file (issue 39 point 3: a benchmark symlink swapped)."""
    target = Path(os.path.realpath(link))
    swapped = target.with_name(f"swapped-{target.name}")
    shutil.copyfile(target, swapped)
    _change_in_place(swapped)
    os.remove(link)
    os.symlink(swapped, link)


def _linked(params: dict, url: str) -> tuple[dict, str] | None:
    """`params` with `url` replaced by a symlink to it (in every form the op names it); None when the
    parameter does not name the file itself (minhash_dedup's index names the folder of index.json)."""
    named = json.dumps(url)[1:-1]
    if named not in json.dumps(params):
        return None
    link = str(Path(url).with_name(f"link-{Path(url).name}"))
    os.symlink(url, link)
    return json.loads(json.dumps(params).replace(named, json.dumps(link)[1:-1])), link


@pytest.mark.parametrize("how", ["changed in place", "symlink swapped"])
def test_every_worker_checks_the_drivers_digest_before_use(tmp_path, how):
    """Issue 39 point 3: a file an op reads that changes after the driver fingerprinted it (in place, or
    its symlink re-pointed, as a benchmark swapped 4 s into a run) is refused by the worker that would
    load it: one line naming the key and the file, and the run stops with nothing published. Run in
    worker processes (in the driver for the links: the same check, half the time), for every file of
    every op."""
    for name, params, key, url, root in _cases(tmp_path):
        if how == "symlink swapped":
            linked = _linked(params, url)
            if linked is None:
                continue
            params, url = linked
        execution = "processes" if how == "changed in place" else "local"
        config = _pipeline(root, name, params) | {"ray": {"execution": execution, "num_cpus": 2},
                                                  "input": {"paths": [str(TEST_DATA / "cc_en_head-0174.jsonl.gz")],
                                                            "split_bytes": 20_000}}
        cfg = load_config(config)

        class ChangedAfterThePlan(Runner):
            def plan(self):
                plan = super().plan()
                (_swap_link if how == "symlink swapped" else _change_in_place)(Path(url))
                return plan

        with pytest.raises(YlinkError) as err:
            ChangedAfterThePlan(cfg, progress=False).run()
        line = str(err.value)
        assert "\n" not in line and line.startswith(f"stages[0].{name}.{key}: {url} changed after the run "
                                                    "fingerprinted it"), f"{name}.{key}: {line}"
        out = root / "out"
        assert not (out / "manifest.json").exists() and not list(out.glob("data/*")), name
