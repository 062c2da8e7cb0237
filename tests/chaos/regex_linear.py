"""Every regular expression of the package, and inputs made from its own structure to find the ones
whose time grows faster than their input (issue 39, point 13): tests/chaos/test_regex_linear.py.

The registry is found, not written: every module of ylink_data is imported and its compiled
patterns collected (module globals, containers of them, class attributes), and every `re.<call>`
of its source is read (ast): one with a literal pattern inside a function is compiled here as
written; one whose pattern is built at run time (from a word list, a secret, a number) must have a
builder in DYNAMIC, which makes the patterns it builds from the package's own defaults, or the test
fails naming it. So a new regex is covered the day it is written.

Adversarial inputs come from the pattern's parse tree (`re._parser`): periods repeated to the
length wanted, of
- single characters: the pattern's literals, the ends of its ranges, a character of each of its
  classes and categories, and separators (space, newline, `-`, `.`, `<`, NUL...);
- pairs of the pattern's own characters, with each other and with a space and `-` ("a-a-a-...": a
  word boundary at every other character);
- pumps: for every repeat without a bound (or with a large one), the shortest text that matches
  everything before it, then one or two characters its body takes ("<a <a <a ...",
  "-----BEGIN PRIVATE KEY-----a-----BEGIN ...").
Each pattern is timed on every period at two sizes (its matches all found: `finditer`, the work
of `search`, `sub` and `findall`), and the periods that grow fastest are timed again from 1 KB to
256 KB. Run as `python -m tests.chaos.regex_linear`: one JSON line per pattern.
"""
from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

try:  # the parser of the re module: re._parser from Python 3.11, sre_parse before
    from re import _constants as C  # noqa: N812 (the parser's opcode names)
    from re import _parser
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # noqa: N812
    import sre_parse as _parser

import ylink_data

PACKAGE = Path(ylink_data.__file__).parent
CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"}
BASE = 1024  # characters of the baseline input
SIZES = (BASE, 4 * BASE, 16 * BASE, 64 * BASE, 256 * BASE)
SLACK = 4  # a ratio to the baseline up to SLACK times the ratio of the sizes is linear
# The sizes every period is tried at first: past the bounded repeats of the package (up to 255
# characters), whose time per attempt grows until then, a linear pattern's times grow as the sizes.
SCREEN = (1024, 4096)
FINALISTS = 3  # periods per pattern timed up to 256 KB: those that grew fastest at SCREEN
ATOMS = 8  # characters of a pattern paired with each other (and with space and -)
_REPEATS = tuple(getattr(C, name) for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(C, name))
_ATOMIC = getattr(C, "ATOMIC_GROUP", object())  # Python 3.11's (?>...)
SEPARATORS = " \n\t-.,:;/<>@#=_\"'()[]{}*+?!|\\\x00aZ0é中。，\u3000"


# ----------------------------------------------------------------------------------- the registry
def _dynamic() -> dict[str, Callable[[], list[re.Pattern]]]:
    """Call sites whose pattern is built at run time -> the patterns they build, from the defaults."""
    from ylink_data.core import redaction
    from ylink_data.io.readers import warc
    from ylink_data.ops.badwords import BadWords
    from ylink_data.ops.instruction_filter import InstructionFilter
    from ylink_data.text.transform import normalize

    def badwords() -> list[re.Pattern]:
        out = []
        for language in ("en", "zh"):
            op = BadWords(language=language)
            for spec in op.list_names:
                _, whole, _, substring = op._compile(spec)
                out += [p for p in (whole, substring) if p is not None]
        return out

    def url_subwords() -> list[re.Pattern]:
        from ylink_data.ops.url_filter import UrlFilter

        op = UrlFilter()
        op.setup()
        return [op.subword_re] if op.subword_re is not None else []

    return {
        "ylink_data.ops.instruction_filter:InstructionFilter.__init__": lambda: [InstructionFilter()._refusal],
        "ylink_data.ops.badwords:BadWords._compile": badwords,
        "ylink_data.ops.url_filter:UrlFilter.setup": url_subwords,
        "ylink_data.text.transform.normalize:invisible_pattern":
            lambda: [normalize.invisible_pattern(True, False), normalize.invisible_pattern(False, True)],
        "ylink_data.text.transform.normalize:_blank_line_runs": lambda: [*normalize._blank_line_runs(1),
                                                                          *normalize._blank_line_runs(3)],
        "ylink_data.io.readers.warc:_header_names": lambda: [warc._WARC_NAMES, warc._HTTP_NAMES],
        "ylink_data.core.redaction:_known_pattern":
            lambda: [redaction._known_pattern(("sk-live-0123456789", "hunter22", "abcd"))],
        "ylink_data.engine.runner:Runner._existing_markers": lambda: [re.compile(r"task-(\d+)\.json$"),
                                                                      re.compile(r"part-(\d+)\.json$")],
    }


def _modules() -> Iterator[str]:
    for info in pkgutil.walk_packages([str(PACKAGE)], "ylink_data."):
        if not info.name.endswith("__main__"):
            yield info.name


def _held(value: object, depth: int = 0) -> Iterator[re.Pattern]:
    if isinstance(value, re.Pattern):
        yield value
    elif depth < 2 and isinstance(value, tuple | list | frozenset | set):
        for item in value:
            yield from _held(item, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for item in value.values():
            yield from _held(item, depth + 1)


def _compiled(module) -> Iterator[tuple[str, re.Pattern]]:
    for name, value in vars(module).items():
        for pattern in _held(value):
            yield f"{module.__name__}.{name}", pattern
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, inner in vars(value).items():
                for pattern in _held(inner):
                    yield f"{module.__name__}.{name}.{attr}", pattern


def _sites(module: str) -> Iterator[tuple[str, ast.Call, bool]]:
    """(the enclosing function's qualified name or "", the call, in a function) of every re.<call>."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(source.read_text(encoding="utf-8"))

    def walk(node: ast.AST, scope: list[tuple[str, bool]]) -> Iterator[tuple[str, ast.Call, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                inner = scope + [(getattr(child, "name", "<lambda>"), not isinstance(child, ast.ClassDef))]
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr in CALLS
                    and isinstance(child.func.value, ast.Name) and child.func.value.id in ("re", "regex")):
                yield ".".join(name for name, _ in scope), child, any(is_function for _, is_function in scope)
            yield from walk(child, inner)

    yield from walk(tree, [])


def _flags(call: ast.Call) -> int:
    given = [k.value for k in call.keywords if k.arg == "flags"]
    positional = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2,
                  "split": 3, "sub": 4, "subn": 4}[call.func.attr]
    if len(call.args) > positional:
        given.append(call.args[positional])
    return eval(compile(ast.Expression(given[0]), "<flags>", "eval"), {"re": re}) if given else 0


def registry() -> tuple[dict[str, re.Pattern], list[str]]:
    """({name: pattern} of every pattern of the package, [call sites with a run-time pattern and no
    builder in DYNAMIC])."""
    found: dict[str, re.Pattern] = {}
    seen: set[tuple] = set()

    def add(name: str, pattern: re.Pattern) -> None:
        key = (pattern.pattern, pattern.flags)
        if key not in seen:
            seen.add(key)
            found[name] = pattern

    dynamic = _dynamic()
    missing = []
    for module in _modules():
        for name, pattern in _compiled(importlib.import_module(module)):
            add(name, pattern)
        for scope, call, in_function in _sites(module):
            if not in_function:
                continue  # a module's own pattern: compiled on import, collected above
            try:
                literal = ast.literal_eval(call.args[0])
            except ValueError:
                key = f"{module}:{scope}"
                if key not in dynamic:
                    missing.append(f"{key} (line {call.lineno})")
                continue
            add(f"{module}:{scope}:{call.lineno}", re.compile(literal, _flags(call)))
    for key, build in dynamic.items():
        for k, pattern in enumerate(build()):
            add(f"{key}#{k}", pattern)
    return found, missing


# ------------------------------------------------------------------------------- the inputs
def _in_class(items: list, ch: str) -> bool:
    code = ord(ch)
    for op, av in items:
        if op is C.LITERAL and av == code:
            return True
        if op is C.RANGE and av[0] <= code <= av[1]:
            return True
        if op is C.CATEGORY and re.fullmatch(_CATEGORY.get(av, "(?!)"), ch):
            return True
    return False


_CATEGORY = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
             C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
             C.CATEGORY_UNI_DIGIT: r"\d", C.CATEGORY_UNI_NOT_DIGIT: r"\D", C.CATEGORY_UNI_SPACE: r"\s",
             C.CATEGORY_UNI_NOT_SPACE: r"\S", C.CATEGORY_UNI_WORD: r"\w", C.CATEGORY_UNI_NOT_WORD: r"\W"}


def _class_chars(items: list) -> list[str]:
    """Characters a class takes, one of each of its items (a literal, a range's first, a character
    of a category), in the class's order; for a negated class, the separators it takes."""
    if items and items[0][0] is C.NEGATE:
        return [c for c in SEPARATORS if not _in_class(items[1:], c)][:6]
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE:
            out.append(chr(av[0]))
        elif op is C.CATEGORY:
            out += [c for c in "a_0 \n中-." if re.fullmatch(_CATEGORY.get(av, "(?!)"), c)][:2]
    return out


def _chars(node: tuple) -> list[str]:
    """Characters one node may start with."""
    op, av = node
    if op is C.LITERAL:
        return [chr(av)]
    if op is C.NOT_LITERAL:
        return [c for c in SEPARATORS if ord(c) != av][:4]
    if op is C.IN:
        return _class_chars(av)
    if op is C.ANY:
        return ["a", " ", "\n"]
    if op in _REPEATS:
        return _seq_chars(av[2])
    if op is C.SUBPATTERN:
        return _seq_chars(av[-1])
    if op is _ATOMIC:
        return _seq_chars(av)
    if op is C.BRANCH:
        return [c for branch in av[1] for c in _seq_chars(branch)]
    return []


def _seq_chars(seq) -> list[str]:
    return [c for node in seq for c in _chars(node)]


def _shortest(seq) -> str:
    """A short text that matches the sequence (assertions and anchors taken as met)."""
    out = []
    for op, av in seq:
        if op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
            chars = _chars((op, av))
            out.append(chars[0] if chars else "a")
        elif op in _REPEATS:
            out.append(_shortest(av[2]) * av[0])
        elif op is C.SUBPATTERN:
            out.append(_shortest(av[-1]))
        elif op is _ATOMIC:
            out.append(_shortest(av))
        elif op is C.BRANCH:
            out.append(_shortest(av[1][0]))
    return "".join(out)


def _pumps(seq, before: str) -> Iterator[tuple[str, list[str]]]:
    """(the text before, the characters of its body) for every unbounded or long repeat."""
    for k, (op, av) in enumerate(seq):
        prefix = before + _shortest(seq[:k])
        if op in _REPEATS:
            if av[1] >= 32:  # unbounded (MAXREPEAT) or long
                yield prefix, _seq_chars(av[2])
            yield from _pumps(av[2], prefix)
        elif op is C.SUBPATTERN:
            yield from _pumps(av[-1], prefix)
        elif op is _ATOMIC:
            yield from _pumps(av, prefix)
        elif op is C.BRANCH:
            for branch in av[1]:
                yield from _pumps(branch, prefix)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            yield from _pumps(av[1], prefix)


Shape = tuple[str, str, str]  # an adversarial input: (head, period repeated, tail)


def periods(pattern: re.Pattern) -> list[Shape]:
    """The adversarial inputs of `pattern` (see the module docstring): periods repeated, and for
    every pump its prefix, then its body's character repeated, then one its body does not take (a
    single attempt that backtracks over the whole pump)."""
    source = pattern.pattern.decode("latin-1") if isinstance(pattern.pattern, bytes) else pattern.pattern
    tree = _parser.parse(source, pattern.flags & ~re.UNICODE if isinstance(pattern.pattern, bytes) else pattern.flags)
    own = list(dict.fromkeys(c for c in _seq_chars(list(tree)) if c))
    atoms = list(dict.fromkeys(own[:ATOMS] + list(" -")))
    out = [("", p, "") for p in list(SEPARATORS) + own + [a + b for a in own[:ATOMS] for b in atoms if a != b]]
    for prefix, body in _pumps(list(tree), ""):
        chars = list(dict.fromkeys(body))[:8] or ["a"]
        stops = {next((c for c in group if c not in chars), "") for group in (SEPARATORS, "a0!")}
        for c in chars:
            out += [("", prefix + c, ""), ("", prefix + c + c, "")] + [(prefix, c, stop) for stop in stops]
        out.append(("", prefix, ""))
    if isinstance(pattern.pattern, bytes):
        out = [shape for shape in out if all(ord(c) < 256 for c in "".join(shape))]
    return list(dict.fromkeys(shape for shape in out if shape[1]))


def text_of(shape: Shape, size: int, as_bytes: bool) -> str | bytes:
    head, period, tail = shape
    room = max(size - len(head) - len(tail), len(period))
    text = head + (period * (room // len(period) + 1))[:room] + tail
    return text.encode("latin-1") if as_bytes else text


def shown(shape: Shape) -> str:
    head, period, tail = shape
    return " + ".join(part for part in (repr(head) if head else "", f"{period!r}*", repr(tail) if tail else "") if part)


# ------------------------------------------------------------------------------- the timing
def seconds(pattern: re.Pattern, text: str | bytes, budget: float = 0.002, samples: int = 3) -> float:
    """CPU time to find every match in `text` (this thread's: other processes on a loaded machine
    do not count): the least of `samples` timings, each repeated to last `budget` seconds at least
    (a timing of microseconds is mostly the clock's)."""
    def once(n: int) -> float:
        began = time.thread_time()
        for _ in range(n):
            for _ in pattern.finditer(text):
                pass
        return time.thread_time() - began

    n, took = 1, once(1)
    while took < budget and n < 4096:
        n *= 4
        took = once(n)
    return min([took] + [once(n) for _ in range(samples - 1)]) / n


def growth(pattern: re.Pattern, period: Shape) -> tuple[int, float]:
    """(the largest size reached, its time over the baseline's). Linear is a ratio within SLACK
    times the sizes' ratio at 256 KB; it stops early, at the first size whose ratio is beyond
    2 * SLACK times the sizes' (quadratic time, 16 times the sizes' at 16 KB: its 256 KB would
    take minutes)."""
    as_bytes = isinstance(pattern.pattern, bytes)
    base = seconds(pattern, text_of(period, BASE, as_bytes), samples=5)
    ratio = 1.0
    for size in SIZES[1:]:
        ratio = seconds(pattern, text_of(period, size, as_bytes), samples=3) / base
        if ratio > 2 * SLACK * size / BASE:
            return size, ratio
    return SIZES[-1], ratio


def linear(size: int, ratio: float) -> bool:
    return size == SIZES[-1] and ratio <= SLACK * size / BASE


def probe(pattern: re.Pattern) -> dict:
    """The pattern's worst growth: its periods screened at SCREEN, the FINALISTS timed to 256 KB."""
    as_bytes = isinstance(pattern.pattern, bytes)
    screened = []
    for period in periods(pattern):
        small = seconds(pattern, text_of(period, SCREEN[0], as_bytes), budget=0.0001, samples=1)
        large = seconds(pattern, text_of(period, SCREEN[1], as_bytes), budget=0.0001, samples=1)
        screened.append((large / small, period))
    screened.sort(reverse=True)
    worst = {"size": 0, "ratio": 0.0, "period": ""}
    for _, period in screened[:FINALISTS]:
        size, ratio = growth(pattern, period)
        if ratio / (size / BASE) > worst["ratio"] / max(worst["size"] / BASE, 1):
            worst = {"size": size, "ratio": ratio, "period": shown(period)}
    return worst | {"periods": len(screened)}


def main(names: list[str]) -> None:
    found, missing = registry()
    print(json.dumps({"patterns": len(found), "missing": missing}), flush=True)
    for name, pattern in found.items():
        if names and not any(n in name for n in names):
            continue
        print(json.dumps({"start": name}), flush=True)
        print(json.dumps({"name": name, "pattern": repr(pattern.pattern)[:200]} | probe(pattern)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
