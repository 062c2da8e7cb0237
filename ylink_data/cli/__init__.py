"""The `ylink` command. Errors a user can fix are printed as one line (exit 2), without the
credentials a URL in them may carry; `--debug` shows the traceback."""
from __future__ import annotations

import argparse
import sys

from ylink_data.core.errors import YlinkError
from ylink_data.core.redaction import redact_text


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except YlinkError as exc:
        if args.debug:
            raise
        print(f"ylink: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine, not ylink: a full disk, a permission, a vanished file
        if args.debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ylink: error: {redact_text(where + (exc.strerror or str(exc)))} "
              f"({type(exc).__name__}; --debug shows where)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from ylink_data.engine.executors.base import resume_hint

        print(f"ylink: interrupted; finished tasks are kept: {resume_hint(getattr(args, 'fresh', False))}",
              file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    """Every command and option: `main` parses with it, the documentation's CLI reference is printed
    from it (docs/hooks/reference.py)."""
    from ylink_data.cli.cache import parse_json_object
    from ylink_data.core.version import __version__

    parser = argparse.ArgumentParser(prog="ylink", description="Turn web crawls into clean LLM training corpora.")
    parser.add_argument("--version", action="version", version=f"ylink-data {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run a pipeline (a rerun of an interrupted run resumes it; a rerun after a "
                                   "config change reuses the phases it leaves unchanged)")
    p.add_argument("pipeline", help="pipeline YAML file")
    _add_set(p)
    p.add_argument("--fresh", action="store_true",
                   help="discard any run already in output.path, its reuse files too, and start over; after an "
                        "interrupted --fresh run, rerun without --fresh to resume it")
    p.add_argument("--no-reuse", action="store_true",
                   help="refuse (exit 2) when output.path holds a run of another configuration, instead of reusing "
                        "its unchanged phases and recomputing the rest (for CI: a config change must be deliberate)")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar, one line per phase")
    p.set_defaults(func=_run)

    p = sub.add_parser("clean", help="remove the reuse files a finished run keeps in OUTPUT/_work/ "
                                     "(the next config change then recomputes every phase)")
    p.add_argument("output", help="the run folder (output.path)")
    p.add_argument("--storage-options", type=parse_json_object, default=None, metavar="JSON",
                   help='fsspec options for the run folder\'s URL, e.g. \'{"endpoint_url": "http://..."}\' '
                        "(credentials are better left to the environment, e.g. AWS_ACCESS_KEY_ID)")
    p.set_defaults(func=_clean)

    p = sub.add_parser("validate", help="check a pipeline's config and inputs without running it")
    p.add_argument("pipeline")
    _add_set(p)
    p.set_defaults(func=_validate)

    p = sub.add_parser("inspect", help="print documents of a run folder or of Parquet/JSONL/WARC files")
    p.add_argument("path")
    p.add_argument("--limit", type=int, default=5, help="documents to show (default 5)")
    p.add_argument("--chars", type=int, default=400, help="characters of text to show per document")
    p.set_defaults(func=_inspect)

    p = sub.add_parser("extract", help="HTML (a file or stdin) -> its main text, with the default extractor")
    p.add_argument("file", nargs="?", default="-", help="HTML file, or - for stdin (default)")
    p.add_argument("--url", help="the page's URL (helps some extractors)")
    p.add_argument("--extractor", help="extractor to use instead of the pipeline default")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="give up on the page after S seconds, as the extract op does (default: the op's, 5)")
    p.set_defaults(func=_extract)

    p = sub.add_parser("langid", help="for each input line, print LANG<TAB>SCORE (ISO 639-1)")
    p.add_argument("file", nargs="?", default="-", help="text file, or - for stdin (default)")
    p.set_defaults(func=_langid)

    from ylink_data.cli.quality import add_parser as add_quality_parser
    add_quality_parser(sub)
    from ylink_data.cli.report import add_parser as add_report_parser
    add_report_parser(sub)
    from ylink_data.cli.tokenizer import add_parser as add_tokenizer_parser
    add_tokenizer_parser(sub)

    from ylink_data.cli.cache import add_parser as add_cache_parser
    add_cache_parser(sub)
    from ylink_data.cli.export import add_parser as add_export_parser; add_export_parser(sub)  # noqa: E702

    from ylink_data.cli.mix import add_parser as add_mix_parser
    add_mix_parser(sub)
    from ylink_data.cli.ops import add_parser as add_ops_parser
    add_ops_parser(sub)

    return parser


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key by dotted path, e.g. --set output.path=/tmp/out (repeatable)")


def _run(args: argparse.Namespace) -> int:
    from ylink_data.engine.config import load_config
    from ylink_data.flow import load_flow, path_is_flow, run_flow
    from ylink_data.engine.runner import Runner

    if path_is_flow(args.pipeline):  # steps: pipelines and a training command, run in order
        for path in run_flow(load_flow(args.pipeline, args.overrides), fresh=args.fresh, reuse=not args.no_reuse,
                             progress=False if args.no_progress else None,
                             say=lambda m: print(m, file=sys.stderr, flush=True)):
            print(path)
        return 0
    cfg = load_config(args.pipeline, args.overrides)
    with cfg.redacting_errors():
        result = Runner(cfg, fresh=args.fresh, progress=False if args.no_progress else None,
                        reuse=not args.no_reuse).run()
    print(cfg.redact(result.path))
    return 0


def _clean(args: argparse.Namespace) -> int:
    from ylink_data.engine.reuse import clean

    held = clean(args.output, args.storage_options, note=lambda line: print(line, file=sys.stderr))
    where = redact_text(args.output)
    print(f"{where}: removed {held:,} bytes of reuse files" if held else f"{where}: no reuse files")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from ylink_data.engine.config import load_config
    from ylink_data.engine.preflight import preflight
    from ylink_data.flow import load_flow, path_is_flow
    from ylink_data.engine.runner import Runner

    if path_is_flow(args.pipeline):
        flow = load_flow(args.pipeline, args.overrides)
        steps = [f"run {s.pipeline.name}" if s.pipeline is not None else f"quality_train -> {s.train.output}"
                 for s in flow.steps]
        print(f"ok: {args.pipeline}: a flow of {len(steps)} steps: " + "; ".join(steps))
        return 0
    cfg = load_config(args.pipeline, args.overrides)
    with cfg.redacting_errors():
        cluster = _check_cluster(cfg) if cfg.ray.address else ""
        plan = Runner(cfg).plan()
        # The checks `ylink run` makes before it writes anything, the same list (engine/preflight.py).
        for warning in preflight(cfg, plan.files, plan.splits):
            print(f"ylink: {redact_text(warning)}", file=sys.stderr)
    ops = " → ".join(["read", *(name for name, _ in cfg.ops)])
    print(f"ok: {args.pipeline}: {len(plan.files)} input files, {len(plan.tasks)} tasks, "
          f"{len(plan.phases)} phase(s): {ops} → {cfg.redact(cfg.output.path)}{cluster}")
    return 0


def _check_cluster(cfg) -> str:
    """Join the cluster of ray.address as a run would (its errors are the run's), and leave it."""
    from ylink_data.engine.executors.ray import check_cluster

    warning, summary = check_cluster(cfg)
    if warning:
        print(f"ylink: {redact_text(warning)}", file=sys.stderr)
    return f"; ray.address {cfg.ray.address}: {summary}"


def _inspect(args: argparse.Namespace) -> int:
    from ylink_data.cli.inspect import inspect_path

    inspect_path(args.path, limit=args.limit, chars=args.chars)
    return 0


def _extract(args: argparse.Namespace) -> int:
    from ylink_data.cli.extract import run_extract

    return run_extract(args)


def _langid(args: argparse.Namespace) -> int:
    from ylink_data.cli.langid import run_langid

    return run_langid(args)
