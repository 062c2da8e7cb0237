"""`ylink mix MIX.yaml`: a token-weighted mixture of runs (see ylink_data/tokens/mix.py)."""
from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mix", help="mix runs with Megatron files by token weights: mixture.json, a Megatron "
                                   "--data-path blend and, with output.materialize, shuffled token files")
    p.add_argument("mixture", metavar="MIX.yaml", help="the mixture's YAML (sources, weights, tokens, seed, output)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key by dotted path, e.g. --set tokens=2000000 (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.set_defaults(func=run_mix)


def run_mix(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ylink_data.tokens.mix import describe_plan, plan_mixture, write_mixture
    from ylink_data.tokens.mix_config import load_mix_config

    cfg = load_mix_config(args.mixture, args.overrides)
    console = Console(stderr=True, soft_wrap=True)
    with cfg.redacting_errors():
        plan = plan_mixture(cfg)
        for line in describe_plan(plan):
            console.print(line, highlight=False, markup=False)
        live = sys.stderr.isatty() and not args.no_progress and cfg.output.materialize
        progress = Progress(TextColumn("materialising tokens"), BarColumn(), MofNCompleteColumn(),
                            TimeRemainingColumn(), console=console, disable=not live)
        with progress:
            task = progress.add_task("mix", total=plan.tokens)
            written = write_mixture(plan, lambda n: progress.advance(task, n))
    what = "materialised" if cfg.output.materialize else "planned"
    print(f"{written}: {plan.tokens:,} tokens in {plan.documents:,} documents from {len(plan.takes)} sources, "
          f"{what}")
    return 0
