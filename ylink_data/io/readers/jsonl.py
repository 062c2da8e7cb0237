"""JSON Lines (plain, .gz, .zst), one document per line, streamed line by line.

Uncompressed files are splittable by byte range: a line belongs to the split in which it starts.
A record's offset is the byte offset of its line in the (decompressed) stream.

With `input.chat: true` a row is a conversation (OpenAI `messages`, ShareGPT `conversations`, Alpaca
`instruction`/`input`/`output`): its conversation fields, as they are, become `text` as one JSON
object, for the `sft_tokenize` op to check and render (a malformed one is dropped there with a named
reason, not lost here); the other fields go into `metadata` as usual.
"""
from __future__ import annotations

import json
import re
from typing import IO, Any, Iterator

from ylink_data.io.charset import Binary, sniff_text
from ylink_data.io.readers.base import (BINARY, DECOMPRESSION_ERRORS, TOO_LARGE, Bad, Record, Skip, Split,
                                        describe_error, is_io_failure)

TEXT_FIELDS = ("text", "raw_content", "content")
URL_FIELDS = ("url", "metadata.url")  # cc_net / RedPajama; dolma
# The fields a chat row's conversation is made of (input.chat): messages, ShareGPT, Alpaca, and the
# system prompt some ShareGPT and Alpaca files give beside the turns.
CHAT_FIELDS = ("messages", "conversations", "instruction", "input", "output", "system")
_CHAT_KEYS = ("messages", "conversations", "instruction", "output")  # at least one of these
_SKIP_CHUNK = 1 << 20
# A JSON escape of a UTF-16 surrogate (\ud800-\udfff) that is not half of a pair: valid JSON, but no
# character, and text holding one cannot be written as UTF-8. Found on the raw line: a high half
# not followed by a low one, a low half not after a high one, or after one that may be text
# (`\\ud83d\ude00` is an escaped backslash, "ud83d" and a lone low half). Only such a line is checked
# parsed; JSON written with ensure_ascii holds a pair for every emoji, and skips the check.
_HIGH, _LOW = rb"\\u[dD][89abAB][0-9a-fA-F]{2}", rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_UNPAIRED_SURROGATE = re.compile(  # written to start with the literal \u, which re then looks for fast
    rb"\\u(?:[dD][89abAB][0-9a-fA-F]{2}(?!%s)|(?:(?<!%s\\u)|(?<=\\%s\\u))[dD][c-fC-F][0-9a-fA-F]{2})"
    % (_LOW, _HIGH, _HIGH))


def read_jsonl(split: Split, f: IO[bytes], max_record_bytes: int, text_field: str | None,
               url_field: str | None, chat: bool = False) -> Iterator[Record | Skip | Bad]:
    pos = split.start
    if pos:
        f.seek(pos - 1)
        # finish the line that started in the previous split, a piece at a time: it may be a huge
        # line that the previous split quarantines, not to be held in memory here either
        pos += _skip_rest_of_line(f) - 1
    end = split.end if split.end is not None else float("inf")
    first = True
    while pos < end:
        try:
            line = f.readline(max_record_bytes + 1)
        except DECOMPRESSION_ERRORS as exc:
            if is_io_failure(exc):
                raise
            yield Bad(pos, f"compressed stream is truncated or corrupt after byte {pos}: {describe_error(exc)}")
            return
        if not line:
            return
        start, pos = pos, pos + len(line)
        if len(line) > max_record_bytes and not line.endswith(b"\n"):
            pos += _skip_rest_of_line(f)
            yield Bad(start, f"line longer than input.max_record_bytes ({max_record_bytes} bytes); raise it to read it",
                      TOO_LARGE)
            continue
        if not line.strip():
            continue  # blank lines separate nothing: not records
        item = _parse(line, start, text_field, url_field, chat)
        if isinstance(item, Bad) and first:
            not_text = _not_text(line, start)
            if not_text is not None:  # the split is no JSON Lines at all: one entry for it, not one a "line"
                yield not_text
                return
        first = False
        yield item


def _not_text(line: bytes, offset: int) -> Bad | None:
    """Why a split's first line, which is no JSON, says the split is no JSON Lines: binary content
    (`binary`) or UTF-16 (JSON Lines are UTF-8, RFC 8259); None for a line that is just broken."""
    # UTF-16LE text split at b"\n" leaves the line feed's NUL at the start of the next line: put one
    # back, but only in a line that has NULs already (a NUL added to any odd-length line made a
    # short UTF-8 line one NUL per KiB: binary).
    sniffed = sniff_text(line + b"\x00" * (len(line) % 2 if b"\x00" in line else 0))
    if isinstance(sniffed, Binary):
        return Bad(offset, f"{sniffed.error('JSON Lines')}; the rest of this part of the file is not read", BINARY)
    if sniffed is not None:
        return Bad(offset, f"{sniffed[1].upper()} text: JSON Lines are UTF-8 (RFC 8259); convert the file "
                           f"(iconv -f {sniffed[1].upper()} -t UTF-8); the rest of this part of it is not read")
    return None


def _parse(line: bytes, offset: int, text_field: str | None, url_field: str | None,
           chat: bool = False) -> Record | Skip | Bad:
    try:
        # Decoded here rather than by json.loads(bytes), whose encoding sniffing costs a tenth of
        # the parse; utf-8-sig drops a byte-order mark as that sniffing does.
        obj = json.loads(line.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        return Bad(offset, f"invalid UTF-8 at byte {exc.start} of the line")
    except ValueError as exc:
        return Bad(offset, f"invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return Bad(offset, f"expected a JSON object per line, got {type(obj).__name__}")
    if _UNPAIRED_SURROGATE.search(line):
        lone = _lone_surrogate(obj)
        if lone:
            return Bad(offset, f"lone surrogate {lone[1]} in {lone[0]}: half of a UTF-16 pair, not a character; "
                               f"fix the line (e.g. replace it with \\ufffd)")
    return record_from_mapping(obj, offset, text_field, url_field, chat)


def _lone_surrogate(value: Any, where: str = "") -> tuple[str, str] | None:
    """(where, escape) of the first string in a parsed JSON value that holds a lone surrogate."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"field {where!r}" if where else "a value", f"\\u{ord(value[exc.start]):04x}"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and (in_key := _lone_surrogate(key)):
            return (f"a key of {where!r}" if where else "a top-level key"), in_key[1]
        found = _lone_surrogate(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def record_from_mapping(obj: dict[str, Any], offset: int, text_field: str | None,
                        url_field: str | None, chat: bool = False) -> Record | Skip | Bad:
    """A JSONL object or a Parquet row: the text field becomes `text` (with `chat`, the conversation
    fields as one JSON object), the url field (a dotted path for nested fields, e.g. `metadata.url`)
    `url`, and every other field goes into `metadata`."""
    if chat:
        return _chat_record(obj, offset, url_field)
    field = text_field or next((k for k in TEXT_FIELDS if k in obj), None)
    if field is None or field not in obj:
        want = repr(text_field) if text_field else " or ".join(map(repr, TEXT_FIELDS))
        return Bad(offset, f"no text field {want} (fields: {', '.join(list(obj)[:8])}); set input.text_field")
    text = obj.pop(field)
    if text is None or (isinstance(text, str) and not text.strip()):
        return Skip(offset, "empty")
    if isinstance(text, bytes):  # a Parquet byte column's value that is not UTF-8 (parquet._as_text)
        return Bad(offset, f"field {field!r} holds bytes that are not UTF-8 text ({text[:40]!r}...); convert the "
                           f"column to UTF-8 strings")
    if not isinstance(text, str):
        return Bad(offset, f"field {field!r} is {type(text).__name__}, not a string")
    return Record(offset, text, _url(obj, url_field), obj)


def _chat_record(obj: dict[str, Any], offset: int, url_field: str | None) -> Record | Bad:
    """The row's conversation fields, whatever their values (checked by sft_tokenize, which names
    what is wrong), as `text`; a row with none of them is not a conversation at all."""
    if not any(k in obj for k in _CHAT_KEYS):
        return Bad(offset, f"no conversation field (messages, conversations, or instruction/output) among fields "
                           f"{', '.join(list(obj)[:8])}; input.chat reads chat rows only")
    conversation = {k: obj.pop(k) for k in CHAT_FIELDS if k in obj}
    return Record(offset, json.dumps(conversation, ensure_ascii=False, default=str), _url(obj, url_field), obj)


def _url(obj: dict[str, Any], url_field: str | None) -> str | None:
    for path in [url_field] if url_field else URL_FIELDS:
        url = _dotted(obj, path)
        if isinstance(url, str):
            return url
    return None


def _dotted(obj: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _skip_rest_of_line(f: IO[bytes]) -> int:
    skipped = 0
    while True:
        chunk = f.readline(_SKIP_CHUNK)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped
