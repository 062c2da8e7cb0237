"""The heuristic checks a generated instruction must pass, from Self-Instruct's
`bootstrap_instructions.py` (`post_process_gpt3_response`, yizhongw/self-instruct) and Stanford
Alpaca's `generate_instruction.py`, which added "video", "audio", "music", "flowchart", "diagram" to
its banned keywords. Each check returns the rule name a rejected candidate is counted under.

English, as the reference code does: more than 3 and at most 150 words (`len(inst.split()) <= 3 or
> 150` is dropped), no banned keyword as a whole word (case-insensitive), not starting with "Write a
program", not starting with ASCII punctuation, not starting with a non-ASCII character.
Chinese, ours: 6 to 300 characters (a 3-word English task is about 6 Chinese characters), banned
words matched as substrings (Chinese has no word boundaries; 画 alone would catch 刻画 "depict",
so drawing is 画一/画出/画个/绘制), not starting with punctuation, and holding Han characters.
"""
from __future__ import annotations

import re
import string

BANNED_EN = ("image", "images", "graph", "graphs", "picture", "pictures", "file", "files", "map", "maps", "draw",
             "plot", "go to", "video", "audio", "music", "flowchart", "diagram")
BANNED_ZH = ("图片", "图像", "照片", "视频", "音频", "音乐", "录音", "画一", "画出", "画个", "绘制", "绘图", "流程图",
             "示意图", "图表", "地图", "文件", "附件", "播放", "去一趟")
ZH_PUNCTUATION = "，。、；：？！“”‘’（）《》【】…—·「」『』〈〉"
MIN_WORDS, MAX_WORDS = 4, 150
MIN_CHARS_ZH, MAX_CHARS_ZH = 6, 300
_BANNED_EN_RE = re.compile(r"\b(?:%s)\b" % "|".join(re.escape(w) for w in BANNED_EN), re.I)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def is_chinese(text: str) -> bool:
    return bool(_HAN.search(text))


def check(text: str, lang: str) -> str | None:
    """The rule `text` breaks as an instruction in `lang` ("en" or "zh"), or None."""
    if lang == "zh":
        n = len(re.sub(r"\s+", "", text))
        if n < MIN_CHARS_ZH:
            return "too_short"
        if n > MAX_CHARS_ZH:
            return "too_long"
        if any(w in text for w in BANNED_ZH):
            return "banned_keyword"
        if text[0] in string.punctuation or text[0] in ZH_PUNCTUATION:
            return "punctuation"
        if not is_chinese(text):
            return "not_chinese"
        return None
    words = len(text.split())
    if words < MIN_WORDS:
        return "too_short"
    if words > MAX_WORDS:
        return "too_long"
    if _BANNED_EN_RE.search(text):
        return "banned_keyword"
    if text.startswith("Write a program"):  # the reference's note: the model tacks it onto everything
        return "write_a_program"
    if text[0] in string.punctuation:
        return "punctuation"
    if not text[0].isascii():
        return "non_english"
    return None
