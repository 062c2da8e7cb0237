"""A Hugging Face `tokenizer.json`, by local path or any fsspec URL (s3://, http(s)://, memory://),
loaded once per process: every op instance and every task on a worker shares it."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

from tokenizers import Tokenizer

from ylink_data.core.errors import InputError
from ylink_data.core.file_errors import file_problem
from ylink_data.core.storage import filesystem, is_local
from ylink_data.core.redaction import redact_url

# End-of-document tokens, in the order they are looked for when none is named: GPT-2/Qwen/ylink's,
# Llama 3's, then the SentencePiece family's.
EOD_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")
UINT16_MAX_ID = 2 ** 16 - 1  # ids up to this one are stored in 2 bytes


@dataclass(frozen=True)
class LoadedTokenizer:
    """A tokenizer with what a run records about it: `sha256` of its tokenizer.json (which file
    made the ids), `vocab_size` (special tokens included), the end-of-document id, and `max_id`, the
    largest id it can give: ids need not be dense (a vocabulary trimmed to one language keeps the ids
    of the model it came from; added tokens may sit far above the rest), so its count says nothing
    of how wide an id is."""

    tokenizer: Tokenizer
    url: str
    sha256: str
    vocab_size: int
    eod_id: int | None
    eod_token: str | None
    max_id: int

    @property
    def dtype(self) -> str:
        """The narrowest unsigned integer type that holds every id: "uint16" or "uint32". One per
        tokenizer file (its content is the run's): every task and shard of a run agrees."""
        return token_dtype(self.max_id)

    def describe(self) -> dict:
        """What run.json, the manifest and stats.json say about the tokenizer (URL without credentials)."""
        return {"url": redact_url(self.url), "sha256": self.sha256, "vocab_size": self.vocab_size,
                "eod_id": self.eod_id, "eod_token": self.eod_token, "dtype": self.dtype}


def token_dtype(max_id: int) -> str:
    """The narrowest unsigned integer type of ids up to `max_id`: "uint16" or "uint32"."""
    return "uint16" if max_id <= UINT16_MAX_ID else "uint32"


def load_tokenizer(url: str, storage_options: dict | None = None, eod_token: str | None = None) -> LoadedTokenizer:
    """The tokenizer at `url`, read and parsed once per process for each (url, options, eod_token).
    `eod_token` names the end-of-document token; by default the first of EOD_TOKENS the vocabulary
    has (None when it has none). An unreadable or invalid file is an InputError naming it."""
    options = json.dumps(storage_options or {}, sort_keys=True, default=str)
    return _load(url, options, eod_token)


@functools.lru_cache(maxsize=8)
def _load(url: str, options: str, eod_token: str | None) -> LoadedTokenizer:
    shown = redact_url(url)
    try:
        fs, path = filesystem(url, json.loads(options))
        if is_local(fs) and not fs.isfile(path):  # a FIFO would hang the read: file_problem says what it is
            raise FileNotFoundError(path)
        raw = bytes(fs.cat_file(path))
    except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types
        problem = file_problem(exc, url, "give the path or URL of a tokenizer.json", shown)
        raise InputError(f"tokenizer: {problem}") from None
    try:
        tok = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 -- the Rust side raises a bare Exception
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"tokenizer {shown} is not a Hugging Face tokenizer.json: {first}") from None
    # A tokenizer.json made for inference may pad or truncate (BERT's cut at 512): a batch encode
    # would pad every text to the longest, and training text must never be cut.
    tok.no_padding()
    tok.no_truncation()
    if eod_token is not None:
        eod_id = tok.token_to_id(eod_token)
        if eod_id is None:
            raise InputError(f"tokenizer {shown} has no token {eod_token!r} to end documents with "
                             "(name one it has, or append none)")
    else:
        eod_token = next((t for t in EOD_TOKENS if tok.token_to_id(t) is not None), None)
        eod_id = tok.token_to_id(eod_token) if eod_token else None
    return LoadedTokenizer(tok, url, hashlib.sha256(raw).hexdigest(), tok.get_vocab_size(with_added_tokens=True),
                           eod_id, eod_token, max(tok.get_vocab(with_added_tokens=True).values(), default=0))
