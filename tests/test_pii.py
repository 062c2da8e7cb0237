"""The `pii` op on real text: it changes nothing but true PII, replaces synthetic PII inserted into
real sentences, leaves look-alikes (dates, prices, versions, bad checksums) alone, and counts."""
from __future__ import annotations

import datetime
import gzip
import json
import random
import re
from collections import Counter

import pyarrow as pa
import pytest

import ylink_data
from ylink_data.engine.stats import check_invariant
from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.ops import validate_stages
from ylink_data.ops.pii import Pii
from ylink_data.text.transform.pii import PII_TYPES, PiiRedactor, card_valid, cn_id_valid, luhn_valid

from .conftest import TEST_DATA

MARK = {k: f"\x00{k}\x01" for k in PII_TYPES}


def cc_en() -> list[str]:
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def reuters(shared) -> list[str]:
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def thucnews(shared) -> list[str]:
    with open(shared / "zh_thucnews_cnews" / "cnews.val.txt", encoding="utf-8") as f:
        return [line.split("\t", 1)[1] for line in f]


def redacted_values(texts) -> Counter:
    """(kind, original text) for every redaction, recovered by aligning the output with the input."""
    r = PiiRedactor(placeholders=MARK)
    found: Counter = Counter()
    for text in texts:
        out, counts = r.redact(text)
        kinds = re.findall(r"\x00(\w+)\x01", out)
        assert sum(counts.values()) == len(kinds)
        if not kinds:
            assert out == text  # nothing else changed
            continue
        parts = re.split(r"\x00\w+\x01", out)
        m = re.fullmatch("(.+?)".join(re.escape(p) for p in parts), text, re.S)
        assert m, "only the redacted spans differ"
        found.update(zip(kinds, m.groups()))
    return found


# ---- generators of valid synthetic values -------------------------------------------------------

def make_cn_id(region: str, born: datetime.date, seq: int) -> str:
    body = f"{region}{born:%Y%m%d}{seq:03d}"
    total = sum(int(c) * w for c, w in zip(body, (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)))
    return body + "10X98765432"[total % 11]


def make_card(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(str(rng.randrange(10)) for _ in range(length - len(prefix) - 1))
    for check in "0123456789":
        if luhn_valid(body + check):
            return body + check
    raise AssertionError


def spaced(number: str, groups: tuple[int, ...], sep: str) -> str:
    out, i = [], 0
    for g in groups:
        out.append(number[i:i + g])
        i += g
    return sep.join(out)


def test_generators_and_validators():
    assert cn_id_valid("11010519491231002X")  # the GB 11643-1999 example
    assert make_cn_id("110105", datetime.date(1949, 12, 31), 2) == "11010519491231002X"
    assert cn_id_valid(make_cn_id("440301", datetime.date(1990, 2, 28), 123))
    assert not cn_id_valid(make_cn_id("440301", datetime.date(1990, 2, 28), 123)[:-1] + "0")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert card_valid("4111 1111 1111 1111") and card_valid("378282246310005")
    assert not card_valid("9780306406157")  # an ISBN-13 prefix is no issuer's


# ---- (1) real text: nothing but true PII changes -------------------------------------------------

def test_real_english_web_text_unchanged():
    texts = cc_en()
    assert len(texts) == 10 and sum(map(len, texts)) > 20_000
    assert redacted_values(texts) == Counter()


def test_real_reuters_news_unchanged(shared_data):
    texts = reuters(shared_data)
    assert len(texts) > 10_000
    # Reuters is full of prices, dates, figures, percentages and tickers: none of it is PII.
    assert sum(bool(re.search(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", t)) for t in texts) > 3000
    assert redacted_values(texts) == Counter()


THUCNEWS_PII = {
    ("email", "aus@cscdf.org"): 2, ("email", "gamekefu@kongzhong.com"): 6, ("email", "gm@gfinger.cn"): 2,
    ("email", "jzol@obmgame.com"): 7, ("email", "kefu@lakoo.cn"): 1, ("email", "kf@pri-game.com"): 5,
    ("email", "nu@digifun.cn"): 4,  # written "nu@digifun.cnWAP: http://..." : "WAP" stays
    ("email", "wl@pipgame.cn"): 2, ("email", "xunyiwangluo@126.com"): 1, ("email", "zhanghui@leju.sina.com.cn"): 1,
    ("ip", "121.33.203.124"): 1,
    ("phone", "010-51195220"): 1, ("phone", "010-51656053"): 1, ("phone", "010-58699992"): 1,
    ("phone", "010-62604368"): 1, ("phone", "010-62680826"): 1, ("phone", "010-64465202"): 2,
    ("phone", "010-66412113"): 1, ("phone", "010-66416009"): 1, ("phone", "010-82051776"): 5,
    ("phone", "010-82484958"): 3, ("phone", "010-82536410"): 1, ("phone", "010-82536437"): 1,
    ("phone", "010-82538252"): 1, ("phone", "010-82539252"): 1, ("phone", "010-82539648"): 1,
    ("phone", "010-82613361"): 2, ("phone", "010-82660780"): 1, ("phone", "010-82672760"): 2,
    ("phone", "010-82673440"): 1, ("phone", "010-82699147"): 2, ("phone", "020-38871667"): 1,
    ("phone", "020-38888252"): 1, ("phone", "020-87588437"): 1, ("phone", "021-51528888"): 1,
    ("phone", "021-53020397"): 1, ("phone", "021-62836488"): 1, ("phone", "025-51784003"): 3,
    ("phone", "027-59507035"): 1, ("phone", "027-82819699"): 1, ("phone", "028-66822944"): 2,
    ("phone", "028-85255807"): 1, ("phone", "0371-63596548"): 1, ("phone", "0371-69130127"): 2,
    ("phone", "0472-5685674"): 1, ("phone", "0531-86644358"): 1, ("phone", "0535-6254826"): 1,
    ("phone", "0571-88907528"): 1, ("phone", "0731-82587029"): 4, ("phone", "0755-82871499"): 1,
    ("phone", "13034358993"): 1, ("phone", "13332496588"): 1, ("phone", "13366451711"): 1,
    ("phone", "13422264486"): 1, ("phone", "13619319537"): 4, ("phone", "13701159740"): 1,
    ("phone", "13718848934"): 1, ("phone", "13800138000"): 1, ("phone", "13911256052"): 1,
    ("phone", "13912946503"): 1, ("phone", "13939029831"): 1, ("phone", "13951669919"): 1,
    ("phone", "15029282761"): 1, ("phone", "15902813979"): 1, ("phone", "15911134466"): 1,
    ("phone", "15974181004"): 4, ("phone", "15982441575"): 1, ("phone", "15991615750"): 1,
    ("phone", "400 880 3999"): 5, ("phone", "400-650-6628"): 6, ("phone", "400-8131988"): 1,
    ("phone", "400-886-9955"): 1, ("phone", "400-8880810"): 3, ("phone", "800-810-0909"): 2,
}


def test_real_chinese_news_only_true_pii(shared_data):
    """THUCNews val (1,000 articles): customer-service e-mails and phones in game and shopping news,
    one forum IP; every one hand-checked. Dates (4月12日), prices (4100元), QQ numbers, SMS short
    codes (106633554455) and model numbers stay."""
    texts = thucnews(shared_data)
    assert redacted_values(texts) == Counter(THUCNEWS_PII)
    sample = next(t for t in texts if "QQ：964559581" in t)
    out, _ = PiiRedactor().redact(sample)
    assert "QQ：964559581" in out and "<EMAIL>WAP: http://hai.uen.cn" in out


# ---- (2) synthetic PII in real sentences ---------------------------------------------------------

def synthetic_values() -> list[tuple[str, str]]:
    rng = random.Random(7)
    ids = [make_cn_id(r, datetime.date(y, m, d), s) for r, y, m, d, s in
           [("110101", 1985, 7, 14, 12), ("440305", 2000, 2, 29, 451), ("310104", 1962, 12, 31, 7),
            ("510107", 1999, 1, 1, 998)]]
    assert any(i.endswith("X") for i in ids + [make_cn_id("110105", datetime.date(1949, 12, 31), 2)])
    cards = [make_card("4", 16, rng), make_card("51", 16, rng), make_card("37", 15, rng), make_card("62", 19, rng),
             make_card("6011", 16, rng)]
    values = [("cn_id", i) for i in ids] + [("cn_id", "11010519491231002x")]
    values += [("card", cards[0]), ("card", spaced(cards[1], (4, 4, 4, 4), " ")),
               ("card", spaced(cards[2], (4, 6, 5), "-")), ("card", cards[3]),
               ("card", spaced(cards[4], (4, 4, 4, 4), "-"))]
    values += [("email", e) for e in ["jane.doe@example.com", "li_wei+news@mail.sina.com.cn", "Bob-99@Example.ORG"]]
    values += [("ip", i) for i in ["192.168.1.20", "8.26.56.26", "203.0.113.255", "2001:db8::8a2e:370:7334",
                                   "fe80:0:0:0:202:b3ff:fe1e:8329"]]
    values += [("phone", p) for p in ["+44 20 7946 0958", "+49 (0)30 1234567", "+33 1 23 45 67 89", "+1-212-555-0123",
                                      "(415) 555-2671", "212-555-0199", "650.253.0000", "+86 138 1234 5678",
                                      "+8613912345678", "86-150-1234-5678", "18612345678", "199 8765 4321"]]
    return values


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_synthetic_pii_in_real_sentences(lang, request):
    if lang == "en":
        doc = max(cc_en(), key=len)
    else:
        doc = max(thucnews(request.getfixturevalue("shared_data"))[:50], key=len)
    assert PiiRedactor().redact(doc)[0] == doc
    cuts = [m.end() for m in re.finditer(r"[.,;] |[，。；]", doc)]
    assert len(cuts) > 40
    values = synthetic_values()
    pieces, expected, pos = [], [], 0
    for (kind, value), cut in zip(values, cuts, strict=False):
        chunk = doc[pos:cut]
        pos = cut
        filler = "联系方式：" if lang == "zh" else "contact "
        pieces.append(chunk + filler + value + " ")
        expected.append(chunk + filler + MARK_DEFAULT[kind] + " ")
    pieces.append(doc[pos:])
    expected.append(doc[pos:])
    out, counts = PiiRedactor().redact("".join(pieces))
    assert out == "".join(expected)
    assert counts == Counter(k for k, _ in values)


MARK_DEFAULT = {"email": "<EMAIL>", "ip": "<IP>", "phone": "<PHONE>", "cn_id": "<CN_ID>", "card": "<CARD>"}


# ---- (3) negatives ------------------------------------------------------------------------------

def test_look_alikes_stay():
    good_id = make_cn_id("110101", datetime.date(1985, 7, 14), 12)
    bad_check = good_id[:-1] + ("0" if good_id[-1] != "0" else "1")
    bad_date = make_cn_id("110101", datetime.date(1985, 7, 14), 12).replace("19850714", "19850230")
    bad_date = bad_date[:-1] + "10X98765432"[sum(int(c) * w for c, w in zip(bad_date[:17], (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2))) % 11]
    future = make_cn_id("110101", datetime.date(2090, 1, 1), 12)
    card = make_card("4", 16, random.Random(3))
    bad_card = card[:-1] + str((int(card[-1]) + 1) % 10)
    negatives = [
        bad_check, bad_date, future, bad_card, spaced(bad_card, (4, 4, 4, 4), " "), "4111-1111-1111 1111",
        "9780306406157", "978-0-306-40615-7", "ISBN 0-306-40615-2",
        "12345678901", "10012345678", "11012345678", "23812345678", "1381234567", "138123456789",
        "2023-05-01", "2023年5月1日", "05/01/2023", "12:30:45", "下午3:15", "1987", "¥1,299.00", "$3,500",
        "US$1,234,567.89", "1,299", "12.5%", "3.14159265358979", "version 1.2.3.4", "v10.0.19041.1", "Python 3.11.4",
        "1.2.3.4", "0.0.0.0", "256.1.1.1", "192.168.1", "192.168.1.1.5", "std::vector", "a::b", "12:30",
        "00:1A:2B:3C:4D:5E", "4111111111111111111111", "12345678901234567890", "+5", "+3.5%", "+12 points",
        "1-800-FLOWERS", "555-1234", "123-456-7890", "212-055-0123", "1 212 555", "x13812345678",
        "13812345678901", "user@localhost", "@handle", "a @ b.com", "第13812345678901234567号",
        "净利润13.8亿元，同比增长15.5%", "2010-2011赛季", "20100412", "201004121530",
    ]
    r = PiiRedactor()
    for n in negatives:
        for text in (n, f"The figure {n} was reported.", f"报道称{n}。"):
            assert r.redact(text) == (text, Counter()), text


# ---- (4) counters and parameters -----------------------------------------------------------------

def test_counters_types_and_placeholders():
    docs = cc_en()[:3]
    card = make_card("4", 16, random.Random(5))
    cn_id = make_cn_id("320102", datetime.date(1978, 3, 9), 45)
    texts = [docs[0] + " Mail a@b.com or c@d.org, call +44 20 7946 0958.",
             docs[1] + f" Card {card}, ID {cn_id}, host 10.1.2.3.",
             docs[2]]
    table = pa.Table.from_pylist([{"id": str(i), "text": t} for i, t in enumerate(texts)], DOCUMENT_SCHEMA)
    op = Pii()
    result = op.process(table)
    assert result.counters == {"pii_email": 2, "pii_phone": 1, "pii_card": 1, "pii_cn_id": 1, "pii_ip": 1,
                               "pii_documents": 2}
    assert result.dropped == [None, None, None] and result.errors is None
    out = result.table.column("text").to_pylist()
    assert out[0] == docs[0] + " Mail <EMAIL> or <EMAIL>, call <PHONE>."
    assert out[1] == docs[1] + " Card <CARD>, ID <CN_ID>, host <IP>."
    assert out[2] == docs[2]

    only = Pii(types=("email", "card"), email_placeholder="[email]")
    result = only.process(table)
    assert result.counters == {"pii_email": 2, "pii_card": 1, "pii_documents": 2}
    out = result.table.column("text").to_pylist()
    assert out[0] == docs[0] + " Mail [email] or [email], call +44 20 7946 0958."
    assert out[1] == docs[1] + f" Card <CARD>, ID {cn_id}, host 10.1.2.3."

    (name, params), = validate_stages([{"pii": {"types": ["phone"], "phone_placeholder": "<TEL>"}}])
    assert name == "pii" and tuple(params["types"]) == ("phone",) and params["phone_placeholder"] == "<TEL>"
    (_, params), = validate_stages(["pii"])
    assert tuple(params["types"]) == PII_TYPES and params["card_placeholder"] == "<CARD>"
    from ylink_data.core.errors import ConfigError
    with pytest.raises(ConfigError, match="types"):
        validate_stages([{"pii": {"types": ["ssn"]}}])


# ---- (5) in a real pipeline ----------------------------------------------------------------------

def test_pii_in_a_pipeline(ray_session, tmp_path):
    english = cc_en()
    cn_id = make_cn_id("440305", datetime.date(1991, 8, 8), 66)
    card = spaced(make_card("51", 16, random.Random(9)), (4, 4, 4, 4), " ")
    texts = list(english)
    texts[0] += "\nQuestions? Write to help@shop.example.com or call (415) 555-2671."
    texts[4] += f"\nPaid with {card} on 2023-05-01 for $3,500; ID {cn_id}; server 203.0.113.9."
    texts.append("王先生，手机13812345678，身份证" + cn_id + "，2023年5月1日付款¥1,299.00。")
    expected = list(english)
    expected[0] += "\nQuestions? Write to <EMAIL> or call <PHONE>."
    expected[4] += "\nPaid with <CARD> on 2023-05-01 for $3,500; ID <CN_ID>; server <IP>."
    expected.append("王先生，手机<PHONE>，身份证<CN_ID>，2023年5月1日付款¥1,299.00。")
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t, "n": i}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                   encoding="utf-8")
    path, stats = ylink_data.run({"name": "pii-test", "input": {"paths": [str(src)], "format": "jsonl"},
                                  "output": {"path": str(tmp_path / "out")}, "stages": [{"pii": {}}]})
    assert check_invariant(stats) is None
    assert stats["input_records"] == stats["output_records"] == len(texts)
    stage = next(s for s in stats["stages"] if s["name"] == "pii")
    assert stage["counters"] == {"pii_email": 1, "pii_phone": 2, "pii_card": 1, "pii_cn_id": 2, "pii_ip": 1,
                                 "pii_documents": 3}
    assert not stage.get("dropped")
    table = ylink_data.open_run(path).to_arrow()
    meta, text = table.column("metadata").to_pylist(), table.column("text").to_pylist()
    by_n = {json.loads(m)["n"]: t for m, t in zip(meta, text, strict=True)}
    assert by_n == dict(enumerate(expected))
