"""`output.megatron`: each shard's token ids as a Megatron-LM indexed dataset, `megatron/part-NNNNN.bin`
and `.idx` beside `data/part-NNNNN.parquet` (io/megatron/write.py), listed in the manifest's
`megatron` section, and `megatron/data-path.txt`, Megatron's weighted --data-path for
--data-args-path (of the run and of each tier folder).

The driver decides once what the pairs hold (`plan`: the tokenizer of the last stage that writes a document's tokens, `tokenize`, loaded to
read its vocabulary, and the dtype); each publish task writes the pair of its shard; data-path.txt
is written just before the manifest, so a manifest that exists always lists pairs that exist."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fsspec

from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import atomic_write, is_local, join
from ylink_data.io.run_files import (ManifestError, RunFile, check_file, check_listed_once, clean_path, count,
                                     json_type, listed_entries)
from ylink_data.io.sinks.base import Listed, ShardOutput, Sink, register, relative_to
from ylink_data.io.sinks.parquet import ParquetShards

if TYPE_CHECKING:  # pyarrow, numpy and tokenizers are loaded by the driver and tasks that write, not by readers
    import pyarrow as pa

DATA_PATH = "data-path.txt"  # in each megatron/ folder: the weighted --data-path, for --data-args-path


@dataclass(frozen=True)
class MegatronPair:
    """One Megatron-LM indexed dataset of the run (`manifest["megatron"]["files"]`): `prefix` is what
    Megatron's --data-path takes ("megatron/part-00000" for part-00000.bin and .idx), relative to
    the run folder."""

    prefix: str
    documents: int
    tokens: int
    bin: RunFile
    idx: RunFile


@dataclass
class ListedPairs(Listed):
    dtype: str
    pairs: list[MegatronPair]


@register
@dataclass(frozen=True)
class MegatronSink(Sink):
    name = "megatron"
    key = "megatron"
    label = "Megatron files"
    whole_run_files = (DATA_PATH,)
    dtype: str = "uint16"      # of the .bin files: uint16 or int32
    tokenizer: dict | None = None  # LoadedTokenizer.describe(): what the manifest records
    keep_token_ids: bool = True    # whether the Parquet shards keep their token_ids column

    @classmethod
    def plan(cls, cfg: Any) -> "MegatronSink | None":
        """The tokenizer is the last `tokenize` stage's (`cfg.document_tokens_params()`: the one whose ids the shards hold); reading
        it here makes a missing file an error before any work."""
        wanted = cfg.output.megatron
        if wanted is None:
            return None
        from ylink_data.io.megatron.write import megatron_dtype
        from ylink_data.text.tokens.load import load_tokenizer

        params = cfg.document_tokens_params()  # validation made sure there is one
        url = params["tokenizer"]
        tok = load_tokenizer(url, cfg.storage_options(url), params.get("eod_token"))
        try:
            dtype = megatron_dtype(wanted.dtype, tok.dtype, tok.max_id)
        except ValueError as exc:
            raise ConfigError(f"output.megatron.dtype: {exc} (tokenizer {redact_url(url)}: {tok.vocab_size:,} "
                              f"tokens, ids up to {tok.max_id:,})") from None
        return cls(dtype, tok.describe(), wanted.keep_token_ids)

    def columns(self, schema: "pa.Schema") -> list[str]:
        from ylink_data.text.tokens.encode import TOKEN_IDS

        return [TOKEN_IDS] if TOKEN_IDS in schema.names else []

    def dropped_columns(self) -> list[str]:
        from ylink_data.text.tokens.encode import TOKEN_IDS

        return [] if self.keep_token_ids else [TOKEN_IDS]

    def write(self, shard: ShardOutput) -> dict[str, Any]:
        import pyarrow as pa

        from ylink_data.io.megatron.write import write_pair

        columns = [_token_ids(t, join(shard.root, shard.path(ParquetShards.folder, ".parquet"))) for t in shard.tables]
        ids = pa.chunked_array([c for column in columns for c in column.chunks], columns[0].type)
        return write_pair(shard.fs, shard.root, shard.path(self.folder, ""), ids, self.dtype)

    def section(self, entries: list[dict[str, Any]], folder: str = "") -> dict[str, Any]:
        pairs = entries if not folder else [_relative(p, folder) for p in entries
                                            if relative_to(p["prefix"], folder) is not None]
        from ylink_data.io.megatron.write import megatron_section

        return megatron_section(pairs, self.dtype, self.tokenizer)

    def finish(self, fs: fsspec.AbstractFileSystem, root: str, section: dict[str, Any], at: str | None = None) -> None:
        """megatron/data-path.txt: "TOKENS PREFIX ..." for Megatron-LM's --data-args-path. Local runs
        get absolute prefixes (usable from any folder); remote ones get prefixes relative to the run
        folder, for training jobs that read it through a mount."""
        from ylink_data.io.megatron.write import data_path_args

        with atomic_write(fs, join(root, self.folder, DATA_PATH)) as f:
            f.write(data_path_args(section["files"], (at or root) if is_local(fs) else "").encode())

    @classmethod
    def check(cls, fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any,
              seen: dict[str, Any]) -> ListedPairs:
        """{"dtype": "uint16", "files": [{"prefix", "documents", "tokens", "bin": {"path", "bytes",
        "sha256"}, "idx": {...}}, ...], ...}, every file checked as a shard is."""
        from ylink_data.io.megatron.indexed import DTYPE_CODES

        if not isinstance(section, dict) or not isinstance(section.get("files"), list):
            raise ManifestError(f"{what}: not an object with a 'files' list; refusing the run")
        dtype = section.get("dtype")
        if dtype not in DTYPE_CODES:
            raise ManifestError(f"{what}: dtype {dtype!r} is not one of {', '.join(DTYPE_CODES)}; refusing the run")
        pairs = []
        for index, entry in enumerate(section["files"]):
            at = f"{what} file {index}"
            if not isinstance(entry, dict):
                raise ManifestError(f"{at}: a JSON {json_type(entry)}, not an object with prefix, bin and idx")
            prefix = clean_path(entry.get("prefix"), at)
            documents, tokens = count(entry, "documents", at), count(entry, "tokens", at)
            files = []
            for kind in ("bin", "idx"):
                file = check_file(fs, root, f"{at} {kind}", entry.get(kind))
                if file.path != f"{prefix}.{kind}":
                    raise ManifestError(f"{at}: {kind} path {file.path!r} is not {prefix}.{kind}; refusing it")
                files.append(check_listed_once(file, at, seen))
            pairs.append(MegatronPair(prefix, documents, tokens, *files))
        return ListedPairs([f for pair in pairs for f in (pair.bin, pair.idx)], dtype, pairs)

    @classmethod
    def listed(cls, section: Any, what: str) -> list[dict[str, Any]]:
        return [p.get(kind) if isinstance(p.get(kind), dict) else {}
                for p in listed_entries(section, what) for kind in ("bin", "idx")]


def _relative(pair: dict[str, Any], folder: str) -> dict[str, Any]:
    out = {**pair, "prefix": relative_to(pair["prefix"], folder)}
    for kind in ("bin", "idx"):
        out[kind] = {**pair[kind], "path": relative_to(pair[kind]["path"], folder)}
    return out


def _token_ids(table: "pa.Table", shard: str) -> "pa.ChunkedArray":
    from ylink_data.text.tokens.encode import TOKEN_IDS

    if TOKEN_IDS not in table.column_names:
        raise YlinkError(f"{shard}: its documents have no {TOKEN_IDS} column for output.megatron (is an op "
                         "after `tokenize` dropping it?); keep `tokenize` among the last stages")
    return table.column(TOKEN_IDS)
