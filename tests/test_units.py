"""English word units: the shortcut for plain pieces (`units._plain_piece`) gives exactly the tokens
of spaCy's affix loop as emulated by `units.split_affixes`, on every distinct piece of real text."""
from __future__ import annotations

import gzip
import json

from ylink_data.text.transform import units


def _real_pieces(shared_data) -> set[str]:
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    for path in sorted((shared_data / "en_gutenberg_nltk_raw").glob("*.txt"))[:6]:
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return {piece for text in texts for piece in text.split()}


def test_plain_pieces_split_as_the_affix_loop_splits_them(shared_data):
    pieces = _real_pieces(shared_data)
    plain = [p for p in pieces if units._plain_piece(p) is not None]
    assert len(plain) > 0.4 * len(pieces)  # the shortcut is worth having: measured 56% of these pieces
    wrong = [(p, units._plain_piece(p), units.split_affixes(p)) for p in plain
             if units._plain_piece(p) != units.split_affixes(p)]
    assert not wrong, wrong[:10]


def test_plain_piece_by_hand():
    assert units.split_piece("word") == ("word",)
    assert units.split_piece("word,") == ("word", ",")
    assert units.split_piece("word.") == ("word", ".")
    assert units.split_piece("Straße!") == ("Straße", "!")
    # left to the loop, whose answers are spaCy's special cases
    for piece, tokens in {"vs.": ("vs.",), "Mr.": ("Mr.",), "cannot": ("can", "not"), "Cannot,": ("Can", "not", ","),
                          "USA.": ("USA", "."), "A.": ("A.",), "a.": ("a.",), "it's": ("it", "'s")}.items():
        assert units._plain_piece(piece) is None
        assert units.split_piece(piece) == tokens, piece
