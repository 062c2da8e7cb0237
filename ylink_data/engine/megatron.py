"""`output.megatron` on the run's side. The driver decides once what the pairs hold (`plan_megatron`:
the last `tokenize` stage's tokenizer, loaded to read its vocabulary, and the dtype); each publish
task writes the pair of the shard it publishes (publish.py); the driver then lists them in the
manifests (`sections`) and writes Megatron-LM's --data-path argument files (`write_data_paths`)
just before the manifest, so a manifest that exists always lists pairs that exist."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ylink_data.engine.config import PipelineConfig
from ylink_data.core.errors import ConfigError
from ylink_data.core.storage import atomic_write, is_local, join
from ylink_data.core.redaction import redact_url
from ylink_data.text.tokens.load import load_tokenizer
from ylink_data.io.megatron.write import data_path_args, megatron_dtype, megatron_section
from ylink_data.io.layout import RunLayout
from ylink_data.ops import op_class

DATA_PATH = "data-path.txt"  # in each megatron/ folder: the weighted --data-path, for --data-args-path


@dataclass(frozen=True)
class MegatronPlan:
    dtype: str               # of the .bin files: uint16 or int32
    tokenizer: dict          # LoadedTokenizer.describe(): what the manifest records
    keep_token_ids: bool     # whether the Parquet shards keep their token_ids column


def plan_megatron(cfg: PipelineConfig) -> MegatronPlan | None:
    """What `output.megatron` asks for, or None. The tokenizer is the last `tokenize` stage's (the
    one whose ids the shards hold); reading it here makes a missing file an error before any work."""
    wanted = cfg.output.megatron
    if wanted is None:
        return None
    params = [params for name, params in cfg.ops if op_class(name).writes_document_tokens][-1]
    url = params["tokenizer"]
    tok = load_tokenizer(url, cfg.storage_options(url), params.get("eod_token"))
    try:
        dtype = megatron_dtype(wanted.dtype, tok.dtype)
    except ValueError as exc:
        raise ConfigError(f"output.megatron.dtype: {exc} (tokenizer {redact_url(url)} has "
                          f"{tok.vocab_size:,} tokens)") from None
    return MegatronPlan(dtype, tok.describe(), wanted.keep_token_ids)


def pair_prefix(layout: RunLayout, number: int, tier: str | None) -> str:
    """Where shard `number` (of `tier`) has its pair, relative to the run folder, without .bin/.idx."""
    return "/".join((*layout.tier_dir(tier), "megatron", f"part-{number:05d}"))


def sections(plan: MegatronPlan, pairs: list[dict[str, Any]], tiers: list[str]) -> tuple[dict, dict[str, dict]]:
    """The run manifest's `megatron` section (every pair, tiers' included, as its shards are) and
    each tier's (its pairs, prefixes relative to the tier folder, as its manifest's shard paths)."""
    by_tier = {}
    for tier in tiers:
        folder = f"tiers/{tier}/"
        by_tier[tier] = megatron_section([_relative(p, folder) for p in pairs if p["prefix"].startswith(folder)],
                                         plan.dtype, plan.tokenizer)
    return megatron_section(pairs, plan.dtype, plan.tokenizer), by_tier


def _relative(pair: dict[str, Any], folder: str) -> dict[str, Any]:
    out = {**pair, "prefix": pair["prefix"][len(folder):]}
    for kind in ("bin", "idx"):
        out[kind] = {**pair[kind], "path": pair[kind]["path"][len(folder):]}
    return out


def write_data_paths(layout: RunLayout, run_section: dict, tier_sections: dict[str, dict]) -> None:
    """megatron/data-path.txt of the run and of each tier: "TOKENS PREFIX ..." for Megatron-LM's
    --data-args-path. Local runs get absolute prefixes (usable from any folder); remote ones get
    prefixes relative to the run folder, for training jobs that read it through a mount."""
    for folder, section in [("", run_section), *((f"tiers/{t}", s) for t, s in tier_sections.items())]:
        root = layout.path(folder) if folder else layout.root
        with atomic_write(layout.fs, join(root, "megatron", DATA_PATH)) as f:
            f.write(data_path_args(section["files"], root if is_local(layout.fs) else "").encode())
