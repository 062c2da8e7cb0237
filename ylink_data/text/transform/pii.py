"""PII redaction as plain functions: e-mail addresses, IP addresses, phone numbers, mainland-China
resident ID numbers and payment card numbers, each replaced by a typed placeholder.

Precision first: every pattern is anchored on ASCII letter/digit boundaries (so a digit inside a
longer run of digits never matches, while Chinese characters around a number still count as a
boundary), and every match is validated before it is replaced: ID numbers by their GB 11643-1999
checksum and birth date, card numbers by the Luhn check, an issuer prefix and a length that
issuer uses, IPv6 by `ipaddress`, international phone numbers by their digit count (E.164).
Dates, times, prices, years, version strings, ISBNs and ordinary numbers do not fit these shapes.

Kinds are redacted in a fixed order (e-mail, CN ID, card, IP, phone) so the longer, validated
shapes claim their digits before the looser phone patterns see them. Each kind first asks, with
a substring test or one compiled-regex scan, whether its pattern can match at all.
"""
from __future__ import annotations

import datetime
import ipaddress
import re
from collections import Counter
from typing import Literal

PiiType = Literal["email", "ip", "phone", "cn_id", "card"]
PII_TYPES: tuple[PiiType, ...] = ("email", "ip", "phone", "cn_id", "card")
DEFAULT_PLACEHOLDERS: dict[str, str] = {"email": "<EMAIL>", "ip": "<IP>", "phone": "<PHONE>", "cn_id": "<CN_ID>",
                                        "card": "<CARD>"}

# Boundaries: ASCII word characters only, so "电话13812345678。" still matches but "x13812345678" does not.
_B = r"(?<![0-9A-Za-z_])"
_E = r"(?![0-9A-Za-z_])"

EMAIL_RE = re.compile(
    r"(?<![0-9A-Za-z_.%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,63})@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    # The TLD ends where its case changes: "nu@digifun.cnWAP: ..." (real Chinese news) is "nu@digifun.cn".
    r"(?:[A-Z]?[a-z]{1,23}(?![a-z0-9_-])|[A-Z]{2,24}(?![a-z0-9_-]))")

# 18 characters: 6-digit region, birth date YYYYMMDD (1800-2099), 3-digit sequence, check character.
CN_ID_RE = re.compile(_B + r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[0-9Xx]" + _E)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

# 13-19 digits, contiguous or in the groups cards are printed in (4-4-4-4[-1..3], Amex 4-6-5,
# Diners 4-6-4), one separator kind throughout. Not after a sign, decimal point or thousands comma.
CARD_RE = re.compile(
    r"(?<![0-9A-Za-z_.,+-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5})"
    r"(?![0-9A-Za-z_]|[.,-]\d)")

# Issuer prefixes (IIN ranges) and the lengths each uses: a Luhn-valid number outside them is
# far more often an order number or an ISBN (978/979...) than a card.
_CARD_LENGTHS: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),                            # Visa
    ("51", "55", frozenset({16})), ("2221", "2720", frozenset({16})),  # Mastercard
    ("34", "34", frozenset({15})), ("37", "37", frozenset({15})),   # American Express
    ("300", "305", frozenset({14, 16, 17, 18, 19})), ("36", "36", frozenset({14, 16, 17, 18, 19})),
    ("38", "39", frozenset({14, 16, 17, 18, 19})),                  # Diners Club
    ("6011", "6011", frozenset(range(16, 20))), ("644", "649", frozenset(range(16, 20))),
    ("65", "65", frozenset(range(16, 20))),                         # Discover
    ("3528", "3589", frozenset(range(16, 20))),                     # JCB
    ("62", "62", frozenset(range(16, 20))),                         # UnionPay
    ("5018", "5018", frozenset(range(12, 20))), ("5020", "5020", frozenset(range(12, 20))),
    ("5038", "5038", frozenset(range(12, 20))), ("6304", "6304", frozenset(range(12, 20))),
    ("67", "67", frozenset(range(12, 20))),                         # Maestro
)

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4_RE = re.compile(r"(?<![0-9A-Za-z_.])" + _OCTET + r"(?:\." + _OCTET + r"){3}(?![0-9A-Za-z_]|\.\d)")
# Just before a dotted quad, these words make it a version number, not an address.
_VERSION_BEFORE = re.compile(r"(?i)(?:\bv|\bver\.?|version|release|build|firmware|版本|版本号)\s*(?:[:：]\s*)?$")
IPV6_RE = re.compile(r"(?<![0-9A-Za-z_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z_:]|\.\d)")

# International: "+CC" then 1-6 groups of digits (optionally one in parentheses) with single
# space, dot or dash separators; 8-15 digits in all (E.164 allows 15).
INTL_PHONE_RE = re.compile(r"(?<![0-9A-Za-z_+])\+[1-9]\d{0,2}(?:[ .-]?\(?\d{1,5}\)?){1,6}" + _E)
# Mainland-China mobile: 1[3-9]X XXXX XXXX, optional (+|00)86 prefix, optional space/dash separators.
CN_MOBILE_RE = re.compile(r"(?<![0-9A-Za-z_+])(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?![0-9A-Za-z_]|[ -]?\d)")
# North American: (NXX) NXX-XXXX, NXX-NXX-XXXX, NXX.NXX.XXXX, optional +1 / 1 prefix. Separators are
# required (a bare ten-digit run is just a number), and the same separator is used throughout.
NANP_RE = re.compile(
    r"(?<![0-9A-Za-z_+.,-])(?:\+?1[ .-]?)?"
    r"(?:\([2-9]\d{2}\)[ ]?[2-9]\d{2}[ .-]|[2-9]\d{2}([ .-])[2-9]\d{2}\1)\d{4}"
    r"(?![0-9A-Za-z_]|[.,-]\d)")

# Mainland-China landlines with a dashed area code (010-64465202, 0731-82587029) and the 400/800
# service numbers (400-650-6628, 400 880 3999, 400-8880810), common in real Chinese news.
CN_LANDLINE_RE = re.compile(
    r"(?<![0-9A-Za-z_+.,-])(?:0[1-9]\d{1,2}-[2-9]\d{6,7}|[48]00(?:-\d{3}-?\d{4}| \d{3} \d{4}))"
    r"(?![0-9A-Za-z_]|[.,-]?\d)")

_HAS_DIGITS3 = re.compile(r"\d{3}")
_HAS_DIGITS13 = re.compile(r"\d{4}[ -]?\d{4}[ -]?\d{4}|\d{13}|\d{4}[ -]?\d{6}")


def cn_id_valid(s: str) -> bool:
    """Whether an 18-character mainland-China resident ID has a valid GB 11643-1999 check character
    and a real birth date (not in the future)."""
    if len(s) != 18 or not s[:17].isdigit():
        return False
    total = sum(int(c) * w for c, w in zip(s[:17], _ID_WEIGHTS))
    if _ID_CHECK[total % 11] != s[17].upper():
        return False
    try:
        born = datetime.date(int(s[6:10]), int(s[10:12]), int(s[12:14]))
    except ValueError:
        return False
    return born <= datetime.date.today()


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def card_valid(number: str) -> bool:
    """Luhn-valid, with an issuer prefix and a length that issuer uses."""
    digits = number.replace(" ", "").replace("-", "")
    if not 12 <= len(digits) <= 19 or not digits.isdigit():
        return False
    for lo, hi, lengths in _CARD_LENGTHS:
        head = digits[:len(lo)]
        if lo <= head <= hi and len(digits) in lengths:
            return luhn_valid(digits)
    return False


def ipv4_valid(text: str, m: re.Match) -> bool:
    octets = m.group().split(".")
    if octets[0] == "0" or all(len(o) == 1 for o in octets):
        return False  # 0.x.x.x is no host; 1.2.3.4 and the like are version numbers far more often
    return not _VERSION_BEFORE.search(text, max(0, m.start() - 20), m.start())


def ipv6_valid(s: str) -> bool:
    groups = [g for g in s.split(":") if g]
    if "::" in s:
        if len(groups) < 3:  # "a::b", "std::x" in code
            return False
    elif len(groups) != 8:
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def intl_phone_valid(s: str) -> bool:
    n = sum(c.isdigit() for c in s)
    return 8 <= n <= 15 and s.count("(") == s.count(")") <= 1


class PiiRedactor:
    """Replaces the chosen kinds of PII with their placeholders; `redact` returns the new text and
    how many of each kind it replaced."""

    def __init__(self, types: tuple[str, ...] | list[str] = PII_TYPES, placeholders: dict[str, str] | None = None):
        unknown = set(types) - set(PII_TYPES)
        if unknown:
            raise ValueError(f"unknown PII types {sorted(unknown)}; known: {', '.join(PII_TYPES)}")
        self.types = frozenset(types)
        self.placeholders = {**DEFAULT_PLACEHOLDERS, **(placeholders or {})}

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        counts: Counter[str] = Counter()
        t = self.types
        if "email" in t and "@" in text:
            text = self._sub(EMAIL_RE, text, "email", counts)
        if not _HAS_DIGITS3.search(text):
            return text, counts
        if "cn_id" in t:
            text = self._sub(CN_ID_RE, text, "cn_id", counts, lambda m: cn_id_valid(m.group()))
        if "card" in t and _HAS_DIGITS13.search(text):
            text = self._sub(CARD_RE, text, "card", counts, lambda m: card_valid(m.group()))
        if "ip" in t:
            if "." in text:
                text = self._sub(IPV4_RE, text, "ip", counts, lambda m: ipv4_valid(text, m))
            if ":" in text:
                text = self._sub(IPV6_RE, text, "ip", counts, lambda m: ipv6_valid(m.group()))
        if "phone" in t:
            if "+" in text:
                text = self._sub(INTL_PHONE_RE, text, "phone", counts, lambda m: intl_phone_valid(m.group()))
            text = self._sub(CN_MOBILE_RE, text, "phone", counts)
            text = self._sub(CN_LANDLINE_RE, text, "phone", counts)
            text = self._sub(NANP_RE, text, "phone", counts)
        return text, counts

    def _sub(self, pattern: re.Pattern, text: str, kind: str, counts: Counter[str], valid=None) -> str:
        placeholder = self.placeholders[kind]

        def replace(m: re.Match) -> str:
            if valid is not None and not valid(m):
                return m.group()
            counts[kind] += 1
            return placeholder

        return pattern.sub(replace, text)
