"""Issue 13, point 8: a YAML "billion laughs" is refused at once, wherever YAML is read.

Nine anchors of nine aliases each are a billion values once expanded. The YAML parser shares
aliased nodes, but `${VAR}` expansion of `storage:` copied each one, so `ylink validate` grew past
3.5 GB in a minute. Now the loader counts what aliases add and stops past a small bound, with a
one-line error naming the file and the line; ordinary anchors and merge keys still work.

Issue 39, points 12 and 17: aliases were counted by values, not bytes (4,000 aliases of a 1 MB
string passed validate, then `run` spent 740 s redacting 4 GB of text), and YAML nested 500 deep
(also through --set) gave a 3,000-line RecursionError. Generated below: shapes of alias bombs
(strings, lists, maps, merge keys, aliases of aliases) on each side of the bounds, the expansion
computed here by brute force; and depths on each side of MAX_DEPTH through a file, an included
preset, a --set value and a --set key.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ylink_data.core.errors import ConfigError
from ylink_data.core.yaml_file import MAX_ALIAS_BYTES, MAX_ALIAS_VALUES, MAX_DEPTH, YamlLimit, load_yaml, nesting
from ylink_data.engine.config import load_config

from ..conftest import REPO, SAMPLES

# The child gets 2 GiB of address space: should the bomb go off again, it fails at once with a
# MemoryError instead of taking the machine's memory (validating needs far less).
CHILD = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
         "from ylink_data.cli import main; sys.exit(main(sys.argv[1:]))")


def _laughs(indent: str = "    ") -> str:
    """The classic document: lol1 holds nine strings, each next level nine aliases of the last."""
    lines = [f'{indent}lol1: &lol1 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(2, 10):
        aliases = ", ".join([f"*lol{level - 1}"] * 9)
        lines.append(f"{indent}lol{level}: &lol{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def _pipeline(tmp_path: Path, extra: str = "") -> str:
    return (f"name: laughs\ninput:\n  paths: [{SAMPLES / 'CC-MAIN-2024-22-whirlwind.warc.gz'}]\n"
            f"output:\n  path: {tmp_path / 'out'}\n{extra}")


def _validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, "validate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def _assert_refused(proc: subprocess.CompletedProcess, file: Path, line: int) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ylink: error: {file}: ") and f"(line {line}," in lines[0], lines[0]
    assert "aliases expand too far" in lines[0] and "write the values out" in lines[0]


def test_billion_laughs_under_storage_is_refused_with_one_line(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(_pipeline(tmp_path, "storage:\n  s3:\n" + _laughs()))
    # The aliases of lol2..lol4 add 90 + 819 + 7,380 values; the first of lol5 (line 12) passes 10,000.
    _assert_refused(_validate(str(path)), path, 12)


def test_billion_laughs_in_an_included_preset_is_refused(tmp_path):
    preset = tmp_path / "configs" / "laughs.yaml"
    preset.parent.mkdir()
    preset.write_text("storage:\n  gs:\n" + _laughs())
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path, "include: [configs/laughs.yaml]\n"))
    _assert_refused(_validate(str(path)), preset.resolve(), 7)


def test_billion_laughs_in_a_set_value_is_refused_with_one_line(tmp_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path))
    bomb = "{" + _laughs(indent="").strip().replace("\n", ", ") + "}"
    proc = _validate(str(path), "--set", f"storage.s3.x={bomb}")
    # Refused, not taken as a plain string (the user would never learn that the value was text).
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"ylink: error: {path}: --set storage.s3.x: aliases expand too far"), proc.stderr


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text(_pipeline(tmp_path, "storage:\n  s3:\n    loop: &loop [a, *loop]\n"))
    proc = _validate(str(path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "alias *loop refers to the value it is in" in proc.stderr and "(line 8," in proc.stderr


def test_ordinary_anchors_aliases_and_merge_keys_still_work(tmp_path, monkeypatch):
    monkeypatch.setenv("YLINK_T_REGION", "eu-west-3")
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path, yaml.safe_dump({
        "stages": [{"langid": {"languages": ["en", "zh"], "min_score": 0.5}}],
    }) + """storage:
  s3: &s3
    endpoint_url: http://127.0.0.1:9000
    client_kwargs: {region_name: "${YLINK_T_REGION}"}
  s3a: *s3
  gs: {<<: *s3, project: ylink}
"""))
    cfg = load_config(path)
    assert cfg.storage["s3a"] == cfg.storage["s3"] == {"endpoint_url": "http://127.0.0.1:9000",
                                                       "client_kwargs": {"region_name": "eu-west-3"}}
    assert cfg.storage["gs"]["project"] == "ylink" and cfg.storage["gs"]["client_kwargs"]["region_name"] == "eu-west-3"
    assert cfg.storage_options("s3a://bucket/x")["endpoint_url"] == "http://127.0.0.1:9000"
    assert _validate(str(path)).returncode == 0


# ----------------------------------------------------------------------------- issue 39, point 12
# Each shape is an anchored value and `count` aliases of it. What the aliases add is computed here by
# brute force: the values and bytes of text of PyYAML's composed document walked with every alias
# expanded, less those of the nodes written in it; the data loaded is checked against PyYAML's own.


def _string(size: int) -> str:
    return f"big: &big {'x' * size}\n"


SHAPES = {
    "a long string": lambda: _string(100_000),
    "a list of strings": lambda: "big: &big [" + ", ".join(f"item{i}-{'y' * 40}" for i in range(300)) + "]\n",
    "a map": lambda: "big: &big {" + ", ".join(f"k{i}: {'v' * 60}" for i in range(200)) + "}\n",
    "a map merged": lambda: "big: &big {" + ", ".join(f"k{i}: {'v' * 60}" for i in range(200)) + "}\n",
    "aliases of aliases": lambda: ("small: &small [a, b, c, d, e, f, g, h, i, j]\n"
                                   "big: &big [" + ", ".join(["*small"] * 30) + "]\n"),
    "many tiny values": lambda: "big: &big [" + ", ".join(["z"] * 500) + "]\n",
}


def _aliases(shape: str, count: int) -> str:
    uses = [f"u{i}: {{<<: *big}}" if shape == "a map merged" else f"u{i}: *big" for i in range(count)]
    return SHAPES[shape]() + "uses: {" + ", ".join(uses) + "}\n"


def _walk(node: yaml.Node, seen: set[int] | None) -> tuple[int, int]:
    """(values, bytes of text) of a composed node: with `seen`, each node once (as written, aliases
    sharing them); without, once per place it stands (every alias expanded, a merge key's too)."""
    if seen is not None:
        if id(node) in seen:
            return 0, 0
        seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        return 1, len(node.value.encode())
    kids = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
    parts = [_walk(n, seen) for n in kids]
    return 1 + sum(p[0] for p in parts), sum(p[1] for p in parts)


def _added(text: str) -> tuple[int, int]:
    """What the aliases add, by brute force over PyYAML's own composed graph (small documents here)."""
    node = yaml.compose(text)
    (values, size), (written, written_size) = _walk(node, None), _walk(node, set())
    return values - written, size - written_size


def _under_and_over(shape: str) -> tuple[int, int]:
    """The most aliases that stay within both bounds, and one more."""
    count = 1
    while True:
        values, size = _added(_aliases(shape, count + 1))
        if values > MAX_ALIAS_VALUES or size > MAX_ALIAS_BYTES:
            return count, count + 1
        count += 1


@pytest.mark.parametrize("shape", SHAPES)
def test_aliases_are_bounded_by_values_and_bytes_on_each_side(shape):
    under, over = _under_and_over(shape)
    for count in range(under, over):  # every count up to the bound loads, whole
        text = _aliases(shape, count)
        assert load_yaml(text) == yaml.safe_load(text)
    with pytest.raises(YamlLimit, match="aliases expand too far") as refused:
        load_yaml(_aliases(shape, over))
    assert refused.value.key.startswith("uses.u") and refused.value.problem_mark is not None


def test_four_thousand_aliases_of_a_megabyte_are_refused_at_the_second(tmp_path):
    """The issue's file: 4,000 aliases of a 1 MB string passed validate (4 GB once expanded)."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path, "storage:\n  s3:\n    " + _string(1_000_000).rstrip("\n") +
                                   "\n    copies: [" + ", ".join(["*big"] * 4000) + "]\n"))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: storage.s3.copies[1] (line 9, ") and "aliases expand too far" in message
    assert "\n" not in message


# ----------------------------------------------------------------------------- issue 39, point 17
# A value nested `depth` levels deep (the document is level 1), by nested lists, flow mappings and
# block mappings; through the pipeline file, an included preset, a --set value and a --set key. Up to
# MAX_DEPTH it validates; past it, one line naming the file and the key, never a RecursionError.

DEPTHS = [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 500, 5000]
NESTINGS = ("lists", "flow maps", "block maps")
PLACES = ("file", "include", "--set value", "--set key")


def _nested(levels: int, how: str, indent: int) -> str:
    """YAML text of a value `levels` deep (a scalar is 1 level), written `how`."""
    if how == "lists":
        return "[" * (levels - 1) + "1" + "]" * (levels - 1)
    if how == "flow maps":
        return "{a: " * (levels - 1) + "1" + "}" * (levels - 1)
    if levels == 1:
        return "1"
    return "\n" + "\n".join(" " * (indent + 1 + k) + "a:" + (" 1" if k == levels - 2 else "")
                            for k in range(levels - 1))


def _deep(place: str, depth: int, how: str, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    """(pipeline, overrides, the file an error names, the key it names) for a value `depth` deep."""
    pipeline = tmp_path / "pipeline.yaml"
    if place == "--set key":
        key = "storage.s3." + ".".join(["k"] * (depth - 3))  # `depth - 1` parts: the value at `depth`
        pipeline.write_text(_pipeline(tmp_path))
        return pipeline, [f"{key}=1"], pipeline, "--set storage.s3.k.k.k"
    value = _nested(depth - 3, how, 4)  # under storage.s3.x: level 4 holds the value's top
    if place == "--set value":
        pipeline.write_text(_pipeline(tmp_path))
        return pipeline, [f"storage.s3.x={_nested(depth - 3, 'lists' if how == 'block maps' else how, 0)}"], \
            pipeline, "--set storage.s3.x"
    section = f"storage:\n  {'gs' if place == 'include' else 's3'}:\n    x: {value}\n"
    if place == "file":
        pipeline.write_text(_pipeline(tmp_path, section))
        return pipeline, [], pipeline, "storage.s3.x"
    preset = tmp_path / "configs" / "deep.yaml"
    preset.parent.mkdir()
    preset.write_text(section)
    pipeline.write_text(_pipeline(tmp_path, "include: [configs/deep.yaml]\n"))
    return pipeline, [], preset.resolve(), "storage.gs.x"


# A dotted key nests one way.
NESTED = [(place, how) for place in PLACES for how in NESTINGS if place != "--set key" or how == "lists"]


@pytest.mark.parametrize("place,how", NESTED, ids=[f"{p}-{h}" for p, h in NESTED])
def test_nesting_is_bounded_with_one_line_naming_the_file_and_key(place, how, tmp_path):
    for depth in DEPTHS:
        folder = tmp_path / str(depth)
        folder.mkdir()
        pipeline, overrides, named, key = _deep(place, depth, how, folder)
        if depth <= MAX_DEPTH:
            cfg = load_config(pipeline, overrides)
            section = cfg.storage["gs" if place == "include" else "s3"]
            assert nesting(section) + 2 == depth  # the brute-force depth: `storage.s3` holds levels 1-2
            continue
        with pytest.raises(ConfigError) as refused:
            load_config(pipeline, overrides)
        message = str(refused.value)
        assert "\n" not in message and f"more than {MAX_DEPTH} levels deep" in message, message
        assert message.startswith(f"{named}: {key}"), message


def test_a_deep_file_is_one_line_from_the_command(tmp_path):
    pipeline, _, _, _ = _deep("file", 500, "lists", tmp_path)
    proc = _validate(str(pipeline))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "storage.s3.x[0][0]" in proc.stderr and "(line 8, column" in proc.stderr
