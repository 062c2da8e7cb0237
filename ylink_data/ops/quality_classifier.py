"""quality_classifier: score documents with fastText quality classifiers (`ylink quality train`)
and keep, drop or tier them.

`model`: a model path or fsspec URL for every document, a mapping from language (`lang` column) to
model (`"*"` for the rest), or `default`: the project's English and Chinese classifiers
(ylink_data/assets/models/, see their README), Chinese for `zh*` documents and English for the rest.
Documents whose language has no model are dropped with reason `quality_classifier:no_model`.

The score goes to `score_column`: the probability of good quality (0-1) for a good/bad model, the
expected score for a graded one (`ylink quality train --from RUN` without `--threshold`: e.g. 0-5
on the educational rubric of the judge op, FineWeb-Edu's scale), so that `min_score: 3` or tiers
`{high: 3.5, mid: 2.5}` read as the rubric does; thresholds outside a model's scale are refused
when the models load. Then at most one of:
- `min_score`: drop below it (reason `quality_classifier:low_score`);
- `top_fraction`: keep the best fraction of the whole run (a global step: scores are binned into
  65,536 bins, and the cut is the lowest bin edge that keeps at least the fraction, so it keeps at
  most one bin's documents more; reason `quality_classifier:below_top_fraction`);
- `tiers`: `{name: min score}`; each document goes to the best tier whose minimum it reaches
  (`tier_column`), and the run writes each tier to OUTPUT/tiers/<name>/ with its own manifest
  (reason `quality_classifier:below_tiers` for documents under every tier).
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, NonNegativeFloat, PositiveInt

from ylink_data.ops.workspace import Workspace, read_key_columns, write_decision_file
from ylink_data.text.transform.units import unit_language
from ylink_data.ops import register
from ylink_data.core.errors import InputError
from ylink_data.ops.base import BatchResult, GlobalOp, MapOp, named_files
from ylink_data.core.paths import ASSETS
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

DEFAULT_MODELS = ASSETS / "models"
_BINS = 1 << 16
_TIER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

Score = NonNegativeFloat  # a model's probability (0-1), or a graded model's expected score


@register
class QualityClassifier(MapOp, GlobalOp):
    """Scores documents with a fastText quality classifier; see the module docstring."""

    name = "quality_classifier"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        model = params.get("model", "default")
        return [] if model == "default" else named_files("model", model)

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return {params["score_column"]: pa.float32(), **({params["tier_column"]: pa.string()} if params["tiers"] else {})}

    def __init__(self, model: str | Annotated[dict[str, str], Field(min_length=1)] = "default",
                 score_column: str = "quality_score",
                 min_score: Score | None = None, top_fraction: Annotated[float, Field(gt=0, le=1)] | None = None,
                 tiers: dict[str, Score] | None = None, tier_column: str = "quality_tier",
                 prefix_chars: PositiveInt | None = None):
        chosen = [k for k, v in (("min_score", min_score), ("top_fraction", top_fraction), ("tiers", tiers))
                  if v is not None]
        if len(chosen) > 1:
            raise ValueError(f"choose one of min_score, top_fraction and tiers (got {', '.join(chosen)})")
        if tiers is not None:
            bad = [t for t in tiers if not _TIER_NAME.match(t)]
            if not tiers or bad:
                raise ValueError(f"tiers: give names of letters, digits, - and _ (folder names), got {list(tiers)}")
        self.model, self.score_column, self.prefix_chars = model, score_column, prefix_chars
        self.min_score, self.top_fraction, self.tier_column = min_score, top_fraction, tier_column
        # best tier first
        self.tiers = sorted((tiers or {}).items(), key=lambda kv: -kv[1])
        self._models: dict[str, Any] = {}

    @classmethod
    def is_global(cls, params: dict[str, Any]) -> bool:
        return params.get("top_fraction") is not None

    def output_tiers(self) -> tuple[str, list[str]] | None:
        return (self.tier_column, [name for name, _ in self.tiers]) if self.tiers else None

    def model_urls(self) -> dict[str, str]:
        if self.model == "default":
            return {"zh": str(DEFAULT_MODELS / "quality-zh.bin"), "*": str(DEFAULT_MODELS / "quality-en.bin")}
        return {"*": self.model} if isinstance(self.model, str) else dict(self.model)

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        from ylink_data.text.quality.model import QualityModel

        self._models = {lang: QualityModel.load(url, ctx.storage_options(url)) for lang, url in self.model_urls().items()}
        thresholds = [("min_score", self.min_score)] if self.min_score is not None else []
        thresholds += [(f"tiers.{name}", t) for name, t in self.tiers]
        for (lang, url), model in zip(self.model_urls().items(), self._models.values()):
            low, high = model.scale
            for key, value in thresholds:
                if not low <= value <= high:
                    raise InputError(f"{self.name}.{key}: {value:g} is outside the scores of the model {url!r} "
                                     f"({low:g}-{high:g}{', a graded model' if model.grades is not None else ''})")

    def _model_key(self, lang: str | None) -> str | None:
        for key in (lang, unit_language(lang) if lang else None, "*"):
            if key is not None and key in self._models:
                return key
        return None

    def scores(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Scores (NaN where no model) and a mask of documents that had a model."""
        if not self._models:
            self.setup()
        texts = table.column("text").to_pylist()
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else [None] * len(texts)
        keys = [self._model_key(lang) for lang in langs]
        scores = np.full(len(texts), np.nan, np.float32)
        for key in set(keys) - {None}:
            idx = [i for i, k in enumerate(keys) if k == key]
            # languages the model is for (its key, or guessed per text for the "*" model)
            lang = None if key == "*" else key
            scores[idx] = self._models[key].scores([texts[i] for i in idx], lang, self.prefix_chars)
        return scores, np.array([k is not None for k in keys], bool)

    def process(self, table: pa.Table) -> BatchResult:
        scores, scored = self.scores(table)
        dropped: list[str | None] = [None if ok else f"{self.name}:no_model" for ok in scored]
        if self.min_score is not None:
            dropped = [d or (f"{self.name}:low_score" if s < self.min_score else None) for d, s in zip(dropped, scores)]
        table = table.append_column(self.score_column, pa.array(scores, pa.float32(), mask=~scored))
        if self.tiers:
            names = np.array([name for name, _ in self.tiers] + [None], object)
            thresholds = np.array([t for _, t in self.tiers], np.float32)
            which = (scores[:, None] < thresholds[None, :]).sum(axis=1) if len(scores) else np.zeros(0, int)
            # `which` counts the tiers a score misses, best first: thresholds are descending
            tier = names[which]
            dropped = [d or (f"{self.name}:below_tiers" if t is None else None) for d, t in zip(dropped, tier)]
            table = table.append_column(self.tier_column, pa.array(tier.tolist(), pa.string()))
        return BatchResult(table, dropped=dropped if any(dropped) else None)

    # ----------------------------------------------------------- top_fraction: a global step

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        scores, scored = self.scores(table)
        # the cut is one for the run: scores of models with other scales are put on 0-1 to be ranked
        unit = np.full(len(scores), np.nan, np.float32)
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else [None] * len(scores)
        keys = np.array([self._model_key(lang) for lang in langs], object)
        for key in set(keys.tolist()) - {None}:  # one scale per model, applied to its documents at once
            low, high = self._models[key].scale
            rows = keys == key
            unit[rows] = (scores[rows] - low) / (high - low)
        return {"score": pa.array(scores, pa.float32(), mask=~scored),
                "unit": pa.array(np.clip(unit, 0, 1), pa.float32(), mask=~scored)}

    def resolve(self, ctx: Workspace) -> None:
        tasks = sorted(t for t in ctx.parts if ctx.rows.get(t))
        key, unit = ctx.key_column("score"), ctx.key_column("unit")
        counts = ctx.run_tasks(_histogram, [(ctx.fs, ctx.parts[t], unit) for t in tasks],
                               "quality_classifier: score histogram")
        total = np.sum(counts, axis=0) if counts else np.zeros(_BINS, np.int64)
        cut = top_fraction_cut(total, self.top_fraction)
        args = [(ctx.fs, t, ctx.parts[t], key, unit, cut, self.score_column, self.name,
                 ctx.decision_path(f"quality_classifier-{t:05d}")) for t in tasks]
        ctx.decisions += ctx.run_tasks(_decide, args, "quality_classifier: keep the top fraction")


def _bin(scores: np.ndarray) -> np.ndarray:
    return np.minimum((scores * _BINS).astype(np.int64), _BINS - 1)


def top_fraction_cut(counts: np.ndarray, fraction: float) -> int:
    """The lowest bin whose documents, with all better ones, are at least `fraction` of the total."""
    want = math.ceil(fraction * int(counts.sum()))
    from_top = np.cumsum(counts[::-1])
    reached = np.flatnonzero(from_top >= want)
    return _BINS - 1 - int(reached[0]) if reached.size else 0


def _histogram(fs: fsspec.AbstractFileSystem, paths: list[str], key: str) -> np.ndarray:
    scores = read_key_columns(fs, paths, [key]).column(key)
    valid = scores.drop_null().to_numpy()
    return np.bincount(_bin(valid), minlength=_BINS)


def _decide(fs: fsspec.AbstractFileSystem, task: int, paths: list[str], key: str, unit: str, cut: int, score_column: str,
            name: str, out: str) -> str:
    """The task's decisions, written to `out` by the task (the driver holds none of them)."""
    table = read_key_columns(fs, paths, [key, unit])
    scores = table.column(key)
    values = table.column(unit).fill_null(np.nan).to_numpy(zero_copy_only=False)
    below = np.where(np.isnan(values), False, _bin(np.nan_to_num(values)) < cut)
    reasons = np.where(below, f"{name}:below_top_fraction", None)
    no_model = np.asarray(pc.is_null(scores))
    reasons = np.where(no_model, f"{name}:no_model", reasons)
    write_decision_file(fs, out, pa.table({
        "task": pa.array(np.full(table.num_rows, task), pa.int32()), "row": table.column("row"),
        "reason": pa.array(reasons.tolist(), pa.string()), score_column: scores}))
    return out
