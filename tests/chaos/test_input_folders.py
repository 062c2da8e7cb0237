"""Issue 13, point 10: what a folder input reads. It descended into `.git/`, `.ipynb_checkpoints/`
and `_`-prefixed folders (a `.git/` inside stopped the run), read the run's own output when
output.path lay inside it (so the same command reported "different configuration" on rerun), and
`--set input.paths=` read the working directory recursively."""
from __future__ import annotations

import shutil

import pytest

import ylink_data
from ylink_data.io.listing import expand_paths

from ..conftest import REPO, TEST_DATA
from ..s3server import s3_server
from .processes import ylink

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)


def _no_options(_url):
    return {}


@pytest.fixture
def folder(tmp_path):
    """Real documents in a folder that also holds what a notebook, git and a scratch folder leave."""
    root = tmp_path / "corpus"
    for rel in ("a.jsonl.gz", "2024/b.jsonl.gz"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(JSONL, root / rel)
    junk = {".git/HEAD": b"ref: refs/heads/main\n", ".git/objects/pack/pack-1.pack": b"PACK\x00\x00\x00\x02garbage",
            ".ipynb_checkpoints/a-checkpoint.jsonl.gz": JSONL.read_bytes(),
            "2024/_scratch/c.jsonl.gz": JSONL.read_bytes(), "2024/.d.jsonl.gz": JSONL.read_bytes()}
    for rel, data in junk.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _names(files, root) -> list[str]:
    return [f.url[len(str(root)) + 1:] for f in files]


def test_a_folder_or_a_wildcard_skips_hidden_and_underscore_folders(folder):
    assert _names(expand_paths([str(folder)], _no_options), folder) == ["2024/b.jsonl.gz", "a.jsonl.gz"]
    assert _names(expand_paths([f"{folder}/**/*.jsonl.gz"], _no_options), folder) == ["2024/b.jsonl.gz", "a.jsonl.gz"]
    # Named outright, or by a wildcard that asks for them, such entries are read.
    named = expand_paths([f"{folder}/.ipynb_checkpoints/*.jsonl.gz", f"{folder}/2024/_scratch"], _no_options)
    assert _names(named, folder) == [".ipynb_checkpoints/a-checkpoint.jsonl.gz", "2024/_scratch/c.jsonl.gz"]
    assert _names(expand_paths([f"{folder}/2024/.*.jsonl.gz"], _no_options), folder) == ["2024/.d.jsonl.gz"]


def test_a_git_folder_inside_the_input_does_not_stop_the_run(folder, tmp_path):
    checked = ylink("validate", REPO / "pipelines" / "quickstart.yaml", "--set", f"input.paths={folder}",
                    "--set", f"output.path={tmp_path / 'out'}")
    assert checked.returncode == 0, checked.stderr
    assert "2 input files" in checked.stdout


def test_output_inside_an_input_folder_is_never_read(ray_session, folder, capfd):
    cfg = {"name": "inside", "input": {"paths": [str(folder)]}, "output": {"path": str(folder / "out")},
           "stages": []}
    _, first = ylink_data.run(cfg)
    assert (folder / "out" / "manifest.json").exists()
    capfd.readouterr()
    _, again = ylink_data.run(cfg, progress=False)  # not "a different configuration"
    assert "already complete" in capfd.readouterr().err
    _, fresh = ylink_data.run(cfg, fresh=True)
    assert again == first and fresh["input_records"] == first["input_records"]
    sources = set(ylink_data.open_run(str(folder / "out")).to_arrow().column("source").to_pylist())
    assert sources == {str(folder / "a.jsonl.gz"), str(folder / "2024" / "b.jsonl.gz")}


def test_output_inside_an_input_prefix_on_s3_is_never_read(tmp_path):
    (tmp_path / "s3").mkdir()
    with s3_server(tmp_path / "s3") as server:
        fs = server.filesystem()
        fs.mkdir("corpus")
        for key in ("in/a.jsonl.gz", "in/out/data/part-00000.parquet", "in/out/manifest.json", "in/outside.jsonl.gz"):
            fs.pipe_file(f"corpus/{key}", JSONL.read_bytes())
        options = server.storage_options()
        files = expand_paths(["s3://corpus/in"], lambda _: options, exclude="s3://corpus/in/out")
        assert [f.url for f in files] == ["s3://corpus/in/a.jsonl.gz", "s3://corpus/in/outside.jsonl.gz"]


@pytest.mark.parametrize("setting, key", [("input.paths=", "input.paths[0]"),
                                           ('input.paths=["samples/crawl", "  "]', "input.paths[1]")])
def test_an_empty_input_path_is_refused_naming_its_key(setting, key, tmp_path):
    checked = ylink("validate", REPO / "pipelines" / "quickstart.yaml", "--set", setting,
                    "--set", f"output.path={tmp_path / 'out'}")
    assert checked.returncode == 2
    lines = checked.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{key}: empty path" in lines[0], checked.stderr


def test_an_empty_output_path_is_refused_naming_its_key(tmp_path):
    """`--set output.path=` passed validation and made the working directory the output folder
    (run.lock, then the run's files, among the user's own)."""
    checked = ylink("validate", REPO / "pipelines" / "quickstart.yaml", "--set", "output.path=")
    assert checked.returncode == 2, checked.stdout
    lines = checked.stderr.strip().splitlines()
    assert len(lines) == 1 and "output.path: empty path: name a folder or URL" in lines[0], checked.stderr


def test_an_output_path_equal_to_an_input_file_says_so(tmp_path):
    """Issue 33: it said "nothing matches" (the file was left out as the run's own output)."""
    data = tmp_path / "a.jsonl.gz"
    shutil.copy(JSONL, data)
    checked = ylink("validate", REPO / "pipelines" / "quickstart.yaml", "--set", f"input.paths={data}",
                    "--set", f"output.path={data}")
    assert checked.returncode != 0
    assert "is also output.path" in checked.stderr and "nothing matches" not in checked.stderr, checked.stderr
