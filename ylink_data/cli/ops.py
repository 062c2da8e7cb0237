"""`ylink ops [NAME]`: every op with one line each, or one op's parameters (type, bounds, default)
and docstrings, from the registry (`ops/describe.py`, which the documentation prints too)."""
from __future__ import annotations

import argparse

from ylink_data.core.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ops", help="list every op (one line each), or show one op's parameters")
    p.add_argument("name", nargs="?", metavar="NAME", help="an op's YAML name: its parameters, types, bounds, "
                                                            "defaults and docstring")
    p.set_defaults(func=run_ops)


def run_ops(args: argparse.Namespace) -> int:
    from ylink_data.core.errors import did_you_mean
    from ylink_data.ops.describe import format_op, format_op_list, op_names

    if args.name is None:
        print(format_op_list())
        return 0
    names = op_names()
    if args.name not in names:
        hint = did_you_mean(args.name, names) or "; `ylink ops` lists them"
        raise InputError(f"no op named {args.name!r}{hint}")
    print(format_op(args.name))
    return 0
