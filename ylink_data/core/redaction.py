"""Credentials out of everything ylink writes or shows: run.json, quarantine entries, the `source`
column, reports, the console, logs and error messages.

A secret is recognised by where it sits or by what it is, because neither alone is enough:
- where it sits: the value of a secret-looking key (`key`, `token`, `Authorization`, `AccountKey=`
  in a connection string, `sig=` in a URL query), the user:password of a URL, `Bearer ...`;
- what it is: a value the configuration read from the environment (`${VAR}`: the caller passes
  them as `known`), or the shape of a well-known token (AWS access key ids, GitHub, Slack and `sk-`
  API keys, JWTs, Azure account keys, private key blocks).

A known value is masked in any case (`KEY`, `key`, `Key`): a server that quotes a key back
upper-cased still quotes the key. `Redactor.mask_known` masks the known values alone, for text
that is data (a model's answer), where what looks like a credential may be content.
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable

MASK = "***"
# Environment values shorter than this are not looked for in free text: replacing every "1" or
# "eu" would garble the text, and such a value is no credential (a key name still masks it).
MIN_KNOWN_CHARS = 4

# Words of a key name that mark its value as a credential; compounds written as one word too.
_SECRET_WORDS = frozenset({
    "authorization", "auth", "key", "secret", "token", "password", "passwd", "pwd", "passphrase",
    "credential", "credentials", "session", "sas", "sig", "signature", "cookie",
    "apikey", "accesskey", "secretkey", "accountkey", "privatekey", "connectionstring", "sastoken",
    "sessionid", "jsessionid", "phpsessid"})
# Words of a name: snake_case, kebab-case, camelCase and ACRONYMCase all split the same way.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# scheme://user:password@host: everything before the last @ of the authority. A scheme starts where a
# run of scheme characters does (not at every \b inside "a-a-a-...", each of which would scan the run
# to its end: quadratic). One run up to the authority's end, then back to its last @: a repeated
# group (@[^@]*)* over "@@@...@" pushed a backtracking state per @ and grew faster than the input.
_USERINFO = re.compile(r"((?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
# name=value in a query string, a connection string (`;`) or free text; never inside a path, so
# that `s3://b/key=1/` (Hive partitions) is left alone.
_PAIR = re.compile(r"(?:^|(?<=[?&;\s,\"'(]))([A-Za-z][\w.-]*)=([^&;\s\"',)<>]+)")
_AUTH_SCHEME = re.compile(r"\b(Bearer|bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}")
_TOKEN_SHAPES = re.compile("|".join([
    r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b",  # AWS key ids
    r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    r"\bsk-[A-Za-z0-9_-]{20,}",  # OpenAI-style API keys (sk-..., sk-proj-..., sk-ant-...)
    # JWTs: eyJ at the start of a run of token characters or after a `-` in it. The run is looked at
    # from its start only: first checked once to be a JWT's first two parts (the look-ahead), then
    # its parts before the eyJ are kept (`pre`). `\beyJ...` scanned the run to its end from every
    # `-eyJ` in it: quadratic on "eyJ-eyJ-eyJ-...".
    r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]{5,}\.)(?P<pre>(?:[A-Za-z0-9_]*-)*?)"
    r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API keys
    r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}==",  # Azure storage account keys
]))
# Private key blocks, from a BEGIN line to the first END line after it (`_mask_private_keys`: a
# pattern `BEGIN.*?END` scans to the text's end from every BEGIN that has no END).
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")


# A tokenizer's special tokens (`eod_token: "<|endoftext|>"`, `bos_token`...) are vocabulary, not
# credentials: masking them would hide which token ends a document from run.json and the report.
_VOCABULARY_TOKENS = frozenset({"bos", "eos", "eod", "pad", "unk", "sep", "cls", "mask", "special"})


def is_secret_key(name: str) -> bool:
    """True for names such as `secret`, `api_key`, `X-Amz-Signature`, `AccountKey`, `sig`; not for
    a tokenizer's special tokens (`eod_token`, `bos_token`, `pad_token`...)."""
    words = [w.lower() for w in _WORD.findall(name)]
    if len(words) == 2 and words[1] in ("token", "tokens") and words[0] in _VOCABULARY_TOKENS:
        return False
    return any(w in _SECRET_WORDS for w in words) or "".join(words) in _SECRET_WORDS


@dataclass(frozen=True)
class Redactor:
    """`redact` and `redact_text` with the `known` values (from the environment) prepared once:
    for a caller that redacts many values, such as every quarantine entry of a run."""

    known: tuple[str, ...] = ()

    @classmethod
    def knowing(cls, values: Iterable[str]) -> "Redactor":
        # Longest first, so that a value containing another is masked whole.
        return cls(tuple(sorted({v for v in values if len(v) >= MIN_KNOWN_CHARS}, key=len, reverse=True)))

    def redact(self, value: Any) -> Any:
        return _redact(value, self.known)

    def redact_text(self, text: str) -> str:
        return _redact_text(text, self.known)

    def mask_known(self, text: str) -> str:
        """`text` with the known values masked, in any case, and nothing else: for data (a model's
        answer, which may quote a key back) whose other credential-like strings are content."""
        return _mask_known(text, self.known)


def redact(value: Any, known: Iterable[str] = ()) -> Any:
    """`value` (nested dicts and lists, e.g. a config dump) with every credential masked: values of
    secret-looking keys whole, and secrets inside any string (see `redact_text`)."""
    return Redactor.knowing(known).redact(value)


def _redact(value: Any, known: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: MASK if is_secret_key(str(k)) and _is_set(v) else _redact(v, known)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, known) for v in value]
    if isinstance(value, str):
        return _redact_text(value, known)
    return value


def _is_set(value: Any) -> bool:
    # An empty value is shown as it is: "not set" is worth seeing and hides nothing.
    return value not in ("", None, {}, [])


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """`text` (a message, a URL, a string value) with the `known` values (from the environment),
    URL user:password, secret name=value pairs, `Bearer ...` and token shapes masked."""
    return Redactor.knowing(known).redact_text(text)


def _redact_text(text: str, known: tuple[str, ...]) -> str:
    text = _mask_pairs(_mask_userinfo(_mask_known(text, known)))
    text = _AUTH_SCHEME.sub(lambda m: f"{m[1]} {MASK}", text)
    return _TOKEN_SHAPES.sub(lambda m: (m["pre"] or "") + MASK, _mask_private_keys(text))


def _mask_private_keys(text: str) -> str:
    if "PRIVATE KEY-----" not in text:
        return text
    out, pos = [], 0
    while (begin := _KEY_BEGIN.search(text, pos)) and (end := _KEY_END.search(text, begin.end())):
        out += [text[pos:begin.start()], MASK]
        pos = end.end()
    return "".join(out) + text[pos:]


def _mask_known(text: str, known: tuple[str, ...]) -> str:
    pattern = _known_pattern(known)
    return pattern.sub(MASK, text) if pattern is not None else text


@functools.lru_cache(maxsize=256)
def _known_pattern(known: tuple[str, ...]) -> re.Pattern | None:
    """The known values as one case-insensitive pattern, in their order (`Redactor.knowing`: longest
    first, so that a value containing another is masked whole)."""
    return re.compile("|".join(map(re.escape, known)), re.IGNORECASE) if known else None


def redact_url(url: str) -> str:
    """`url` without its user:password and secret parameters (`sig=`, `token=`,
    `X-Amz-Signature=`...); nothing else changes, so a URL without secrets stays exactly as it was.
    Depends on the URL alone, and two URLs it makes equal name the same file: what it gives is fit
    to make document ids from."""
    path, query_mark, query = _mask_userinfo(url).partition("?")
    return path + query_mark + _mask_pairs(query)


def _mask_userinfo(text: str) -> str:
    return _USERINFO.sub(lambda m: f"{m[1]}{MASK}@", text)


def _mask_pairs(text: str) -> str:
    return _PAIR.sub(lambda m: f"{m[1]}={MASK}" if is_secret_key(m[1]) else m[0], text)


class RedactingFilter(logging.Filter):
    """Attached to a log handler: every record is formatted, then redacted, before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact_text(record.getMessage()), None
        return True
