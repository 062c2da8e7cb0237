"""`ylink mix`: token-weighted mixtures of real token runs (crawl documents tokenized by a real BPE,
tests/tokenruns.py). Every expectation is computed here from the files themselves: source and
mixture documents are read back with megatron-core's own IndexedDataset and each mixture document
is matched to the source holding the same token ids."""
from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from ylink_data.cli import main
from ylink_data.io.manifest import read_manifest

from .s3server import s3_server
from .shardruns import write_run
from .tokenruns import write_token_run


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    """Three runs of distinct crawl documents: a (60 documents in two pairs), b (12), c (15 in two),
    and a run's output tier (t/tiers/high: 6)."""
    root = tmp_path_factory.mktemp("sources")
    write_token_run(root / "a", [25, 35])
    write_token_run(root / "b", [12], start=300)
    write_token_run(root / "c", [8, 7], start=600)
    write_token_run(root / "t" / "tiers" / "high", [6], start=900)
    return root


def read_pair(prefix: str | Path) -> list[bytes]:
    """Every document of a .bin/.idx pair as megatron-core reads it (token ids as bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # megatron-core warns that Apex / Transformer Engine are absent
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    dataset = IndexedDataset(str(prefix), mmap=True)
    return [dataset[i].tobytes() for i in range(len(dataset))]


def run_docs(run: Path) -> list[bytes]:
    """A run's documents, its pairs in manifest order."""
    manifest = json.loads((run / "manifest.json").read_text())
    return [d for f in manifest["megatron"]["files"] for d in read_pair(run / f["prefix"])]


def owners(runs: dict[str, Path]) -> dict[bytes, str]:
    """Token ids -> the run that holds them; the runs share no document (checked)."""
    found: dict[bytes, str] = {}
    for name, run in runs.items():
        for doc in run_docs(run):
            assert found.setdefault(doc, name) == name, f"{name} shares a document with {found[doc]}"
    return found


def tokens_of(doc: bytes) -> int:
    return len(doc) // 2  # uint16 ids: the crawl tokenizer has 1,000 tokens


def mix(tmp_path: Path, config: dict, name: str = "mix.yaml", *extra: str) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    assert main(["mix", str(path), "--no-progress", *extra]) == 0
    return Path(config["output"]["path"])


def mix_error(tmp_path: Path, config: dict, capsys) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["mix", str(path), "--no-progress"]) == 2
    return capsys.readouterr().err


def config(sources: Path, out: Path, weights: dict[str, float], tokens: int, **changes) -> dict:
    output = {"path": str(out), "materialize": changes.pop("materialize", True)}
    output.update(changes.pop("output", {}))
    return {"name": "test-mix", "sources": [{"path": str(sources / s), "weight": w} for s, w in weights.items()],
            "tokens": tokens, "seed": 0, "max_epochs": 4, "output": output, **changes}


def check_shares(out: Path, runs: dict[str, Path], weights: dict[str, float], tokens: int) -> None:
    """The materialised mixture read back: each source's tokens within one of its documents of
    its share; every source document taken E or E+1 times, E the whole epochs its share holds."""
    mixed = run_docs(out)
    owner = owners(runs)
    taken = Counter()
    for doc in mixed:
        taken[owner[doc]] += tokens_of(doc)
    counts = Counter(mixed)
    report = {s["path"]: s for s in json.loads((out / "mixture.json").read_text())["sources"]}
    for name, run in runs.items():
        docs = run_docs(run)
        available = sum(map(tokens_of, docs))
        share = Fraction(tokens) * Fraction(weights[name]) / sum(map(Fraction, weights.values()))
        assert abs(taken[name] - share) <= max(map(tokens_of, docs)), (name, taken[name], float(share))
        epochs = int(share // available)
        multiplicity = Counter(docs)
        for doc, n in multiplicity.items():
            assert epochs * n <= counts[doc] <= (epochs + 1) * n
        entry = report[str(run)]
        assert entry["tokens_taken"] == taken[name] and entry["tokens_available"] == available
        assert entry["full_epochs"] == epochs
        assert entry["documents_taken"] == sum(counts[d] for d in multiplicity)
    assert set(owner[doc] for doc in mixed) == set(runs)


def test_materialised_shares_within_one_document(sources, tmp_path):
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}  # b: 1.5 epochs of its ~12k tokens
    out = mix(tmp_path, config(sources, tmp_path / "mix", weights, 60_000, output={"shard_tokens": 20_000}))
    check_shares(out, {s: sources / s for s in weights}, weights, 60_000)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == 1 and manifest["shards"] == [] and len(manifest["megatron"]["files"]) >= 3
    # Shuffled: the sources interleave instead of following each other.
    owner = owners({s: sources / s for s in weights})
    runs_of_one_source = 1 + sum(owner[x] != owner[y] for x, y in zip(run_docs(out), run_docs(out)[1:]))
    assert runs_of_one_source > 10
    # data-path.txt names the materialised pairs, weighted by their tokens.
    args = (out / "megatron" / "data-path.txt").read_text().split()
    assert args[1::2] == [str(out.resolve() / f["prefix"]) for f in manifest["megatron"]["files"]]
    assert list(map(int, args[::2])) == [sum(map(tokens_of, read_pair(p))) for p in args[1::2]]


def test_blend_without_materialising(sources, tmp_path):
    weights = {"a": 3, "c": 1, "t/tiers/high": 1}
    out = mix(tmp_path, config(sources, tmp_path / "blend", weights, 20_000, materialize=False))
    assert sorted(p.name for p in out.rglob("*")) == ["data-path.txt", "megatron", "mixture.json"]
    args = (out / "megatron" / "data-path.txt").read_text().split()
    per_source: dict[str, float] = {}
    for weight, prefix in zip(map(float, args[::2]), args[1::2]):
        run = Path(prefix).parent.parent
        name = str(run.relative_to(sources.resolve()))
        pair_tokens = sum(map(tokens_of, read_pair(prefix)))
        run_tokens = sum(map(tokens_of, run_docs(run)))
        share = weights[name] / sum(weights.values())
        assert weight == pytest.approx(share * pair_tokens / run_tokens, rel=1e-10)
        per_source[name] = per_source.get(name, 0) + weight
    assert per_source == pytest.approx({"a": 0.6, "c": 0.2, "t/tiers/high": 0.2}, rel=1e-10)
    report = json.loads((out / "mixture.json").read_text())
    for entry in report["sources"]:
        docs = run_docs(Path(entry["path"]))
        assert abs(entry["tokens_taken"] - entry["share_tokens"]) <= max(map(tokens_of, docs))


def test_repetition_counted_and_max_epochs(sources, tmp_path, capsys):
    weights = {"a": 0.2, "b": 0.8}  # b: 32,000 tokens of its ~12,000, about 2.7 epochs
    b_tokens = sum(map(tokens_of, run_docs(sources / "b")))
    err = mix_error(tmp_path, config(sources, tmp_path / "m", weights, 40_000, max_epochs=2), capsys)
    assert len(err.strip().splitlines()) == 1 and err.startswith("ylink: error: ")
    assert f"sources[1]: {sources / 'b'}'s share, 32,000 of 40,000 tokens" in err
    assert f"{32_000 / b_tokens:.2f} epochs of its {b_tokens:,} tokens, more than max_epochs 2" in err
    out = mix(tmp_path, config(sources, tmp_path / "m", weights, 40_000, max_epochs=3))
    check_shares(out, {"a": sources / "a", "b": sources / "b"}, weights, 40_000)
    entry = json.loads((out / "mixture.json").read_text())["sources"][1]
    assert entry["full_epochs"] == 2 and entry["epochs"] == pytest.approx(entry["tokens_taken"] / b_tokens, abs=1e-6)


def test_mixture_of_a_mixture(sources, tmp_path, capsys):
    inner = mix(tmp_path, config(sources, tmp_path / "inner", {"a": 1, "b": 1}, 20_000), "inner.yaml")
    outer = config(sources, tmp_path / "outer", {"c": 0.3}, 10_000)
    outer["sources"].insert(0, {"path": str(inner), "weight": 0.7})
    out = mix(tmp_path, outer, "outer.yaml")
    check_shares(out, {"inner": inner, "c": sources / "c"}, {"inner": 0.7, "c": 0.3}, 10_000)
    # The inner mixture's documents are a's and b's: the outer one holds only documents of a, b and c.
    owner = owners({s: sources / s for s in "abc"})
    assert {owner[d] for d in run_docs(out)} == {"a", "b", "c"}
    # A mixture that was not materialised is no source: the error says what to change.
    blend = mix(tmp_path, config(sources, tmp_path / "blend", {"a": 1}, 1_000, materialize=False), "blend.yaml")
    outer["sources"][0]["path"] = str(blend)
    err = mix_error(tmp_path, outer, capsys)
    assert f"sources[0].path: {blend} is a mixture that was not materialised" in err and "materialize: true" in err


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_deterministic_and_seeded(sources, tmp_path):
    weights = {"a": 0.5, "b": 0.2, "c": 0.3}
    cfg = config(sources, tmp_path / "one", weights, 30_000, output={"shard_tokens": 8_000})
    first = tree(mix(tmp_path, cfg))
    assert sum(name.endswith(".bin") for name in first) >= 4
    # Rewritten over itself with bigger pairs, then as before: the first pairs' leftovers go, and
    # the same YAML gives the same bytes.
    mix(tmp_path, cfg, "mix.yaml", "--set", "output.shard_tokens=1000000")
    assert sum(name.endswith(".bin") for name in tree(tmp_path / "one")) == 1
    assert tree(mix(tmp_path, cfg)) == first
    # Elsewhere: the same bytes, but for the folder data-path.txt names.
    cfg["output"]["path"] = str(tmp_path / "two")
    second = mix(tmp_path, cfg)
    assert {k: v for k, v in tree(second).items() if k != "megatron/data-path.txt"} == \
        {k: v for k, v in first.items() if k != "megatron/data-path.txt"}
    assert (second / "megatron/data-path.txt").read_text() == \
        (tmp_path / "one/megatron/data-path.txt").read_text().replace(str(tmp_path / "one"), str(second))
    # Another seed: another order (and choice) of documents, the same shares.
    cfg["seed"], cfg["output"]["path"] = 1, str(tmp_path / "three")
    third = mix(tmp_path, cfg)
    assert run_docs(third) != run_docs(tmp_path / "one")
    check_shares(third, {s: sources / s for s in weights}, weights, 30_000)


def test_config_errors_point_at_the_key(sources, tmp_path, capsys):
    good = config(sources, tmp_path / "m", {"a": 1, "b": 1}, 1_000)
    bad = dict(good, sourcs=good["sources"])
    del bad["sources"]
    err = mix_error(tmp_path, bad, capsys)
    assert "sourcs: unknown key; did you mean 'sources'?" in err and "sources: required key is missing" in err
    bad = json.loads(json.dumps(good))
    bad["sources"][1] = {"path": str(sources / "b"), "wieght": 1}
    assert "sources[1].wieght: unknown key; did you mean 'weight'?" in mix_error(tmp_path, bad, capsys)
    bad["sources"][1] = {"path": str(sources / "b"), "weight": 0}
    assert "sources[1].weight: Input should be greater than 0 (got 0)" in mix_error(tmp_path, bad, capsys)
    bad["sources"][1] = {"path": str(sources / "nothing"), "weight": 1}
    err = mix_error(tmp_path, bad, capsys)
    assert f"sources[1].path: {sources / 'nothing'} is not a finished ylink run: no manifest.json" in err
    assert len(err.strip().splitlines()) == 1
    # The same run twice, and the output inside a source.
    bad["sources"][1] = {"path": str(sources / "a"), "weight": 1}
    assert "sources[1].path: " in (err := mix_error(tmp_path, bad, capsys)) and "is also sources[0]" in err
    bad = dict(good, output={"path": str(sources / "a" / "mix")})
    assert "output.path: " in (err := mix_error(tmp_path, bad, capsys)) and "sources[0]" in err


def test_sources_that_cannot_mix(sources, tmp_path, capsys):
    write_run(tmp_path / "text", shards=1, docs_per_shard=3)  # Parquet only, no Megatron files
    err = mix_error(tmp_path, config(tmp_path, tmp_path / "m", {"text": 1}, 100), capsys)
    assert "sources[0].path: " in err and "has no Megatron files" in err
    assert "output.megatron" in err and "ylink export megatron" in err
    # A run tokenized by another tokenizer (its manifest says so).
    shutil.copytree(sources / "b", tmp_path / "other")
    manifest = json.loads((tmp_path / "other/manifest.json").read_text())
    manifest["megatron"]["tokenizer"]["sha256"] = "f" * 64
    (tmp_path / "other/manifest.json").write_text(json.dumps(manifest))
    cfg = config(sources, tmp_path / "m", {"a": 1}, 100)
    cfg["sources"].append({"path": str(tmp_path / "other"), "weight": 1})
    err = mix_error(tmp_path, cfg, capsys)
    assert "sources[1].path: " in err and "ffffffffffff..." in err and "must share one tokenizer" in err
    # A .idx that is not what the manifest says.
    idx = tmp_path / "other/megatron/part-00000.idx"
    idx.write_bytes(idx.read_bytes()[:-8])
    manifest["megatron"]["tokenizer"]["sha256"] = json.loads((sources / "a/manifest.json").read_text())[
        "megatron"]["tokenizer"]["sha256"]
    (tmp_path / "other/manifest.json").write_text(json.dumps(manifest))
    err = mix_error(tmp_path, cfg, capsys)
    assert str(idx) in err and "the file changed since the run was written" in err
    idx.unlink()
    err = mix_error(tmp_path, cfg, capsys)
    assert f"{idx} is listed in the run's manifest but does not exist" in err
    # An output folder that holds something else is not overwritten.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy/notes.txt").write_text("mine")
    err = mix_error(tmp_path, config(sources, tmp_path / "busy", {"a": 1}, 100), capsys)
    assert "holds files but no mixture.json" in err and (tmp_path / "busy/notes.txt").read_text() == "mine"


def test_source_on_s3(sources, tmp_path, monkeypatch):
    with s3_server(tmp_path / "s3") as server:
        server.upload_folder(sources / "b", "mixsrc/runs/b")
        options = server.storage_options()
        monkeypatch.setenv("MIX_TEST_KEY", options["key"])
        monkeypatch.setenv("MIX_TEST_SECRET", options["secret"])
        weights = {"a": 0.5, "b": 0.5}
        local = mix(tmp_path, config(sources, tmp_path / "local", weights, 20_000))
        cfg = config(sources, tmp_path / "remote", weights, 20_000, storage={"s3": {
            "endpoint_url": options["endpoint_url"], "key": "${MIX_TEST_KEY}", "secret": "${MIX_TEST_SECRET}"}})
        cfg["sources"][1]["path"] = "s3://mixsrc/runs/b"
        remote = mix(tmp_path, cfg)
        # Written to S3 as well: a run that read_manifest accepts, the same pairs.
        server.filesystem().mkdir("mixout")
        cfg["output"]["path"] = "s3://mixout/web"
        assert main(["mix", str(tmp_path / "mix.yaml"), "--no-progress", "--set", "output.path=s3://mixout/web"]) == 0
        on_s3 = read_manifest("s3://mixout/web", options)
        fetched = {p.bin.path: hashlib.sha256(on_s3.fs.cat_file(p.bin.ref.url)).hexdigest() for p in on_s3.megatron}
        data_path = on_s3.fs.cat_file("s3://mixout/web/megatron/data-path.txt").decode().split()
    # The same documents in the same order as from the local copy, and no credential written.
    pairs = [k for k in tree(local) if k.startswith("megatron/part-")]
    assert pairs and all(tree(remote)[k] == tree(local)[k] for k in pairs)
    written = b"".join(p.read_bytes() for p in remote.rglob("*") if p.is_file())
    assert options["secret"].encode() not in written and options["key"].encode() not in written
    assert json.loads((remote / "mixture.json").read_text())["sources"][1]["path"] == "s3://mixsrc/runs/b"
    assert fetched == {k: v for k, v in tree(local).items() if k.endswith(".bin")}
    assert data_path[1::2] == [f"s3://mixout/web/{p.prefix}" for p in on_s3.megatron]
