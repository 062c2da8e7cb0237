"""url_filter: drop documents by their URL, as RefinedWeb does (Penedo et al. 2023, appendix G.1;
datatrove's URLFilter): a domain block list, an exact-URL block list, banned words, soft-banned
words and banned subwords, with an allow list of domains that are never dropped.

Checks, in order (the first that fires is the reason, `url_filter:<reason>`):
- `domain`: the host, or a parent domain of it (`a.b.example.com` -> `b.example.com`, `example.com`,
  `com`), is in `blocked_domains`.
- `url`: the URL is in `blocked_urls` (compared without scheme, `www.`, fragment or trailing `/`, so
  UT1's `example.com/path` entries match).
- `numeric_domain`: the registered name is all digits, at least `numeric_domain_min_digits` of them
  (`3355703.com`); off unless set (RefinedWeb has no such rule; see configs/filters/url-filter.yaml).
- `banned_word`: a word of `banned_words` is a whole token of the host or path.
- `soft_banned_words`: at least `soft_word_threshold` distinct words of `soft_banned_words` are.
- `banned_subword`: a `banned_subwords` entry occurs in the host and path with punctuation removed.

Tokens are runs of letters (any script) or runs of digits of the lowercased host and percent-decoded
path, so `bocai365.com/Yule_Cheng` gives bocai, 365, com, yule, cheng: pinyin spam names glued to
numbers are still caught. The query string and fragment are not looked at. Hosts are normalised:
lowercase, no userinfo, port, trailing dot or leading `www.`, punycode decoded (`xn--...` -> Unicode).

Each list parameter is a list of entries, or a path/URL (fsspec, `.gz` fine) of a file with one entry
per line and `#` comments, such as a UT1 `domains` file; inside a list, an item `@PATH` reads a file
too. With `use_default_lists` the bundled lists (ylink_data/assets/urls/, written by us, small
and conservative) are added to what is given. Documents without a URL are kept (counter `no_url`),
and so are URLs that cannot be parsed (counter `malformed_url`).
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from pydantic import PositiveInt

from ylink_data.text.transform.wordlists import bundled_list, read_list
from ylink_data.ops import register
from ylink_data.ops.base import Document, DocumentFilter, named_files
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

ListParam = str | list[str] | None

# Bundled list per parameter (ylink_data/assets/urls/<name>.txt).
DEFAULT_LISTS = {
    "blocked_domains": "blocked_domains",
    "blocked_urls": None,
    "banned_words": "banned_words",
    "soft_banned_words": "soft_banned_words",
    "banned_subwords": "banned_subwords",
    "allowed_domains": "allowed_domains",
}

_TOKEN = re.compile(r"[^\W\d_]+|\d+")  # runs of letters (any script) or of digits
_PUNCT = re.compile(r"[\W_]+")
_BARE_HOST = re.compile(r"[^/:@?#\s]+")
# Second-level labels under which a country code registers names (example.com.cn, example.co.uk).
_SECOND_LEVEL = {"com", "net", "org", "gov", "edu", "ac", "co", "or", "ne", "go", "gv", "mil"}


class MalformedUrl(ValueError):
    pass


def normalize_host(host: str) -> str:
    """Lowercase, no trailing dot, no leading `www.`, punycode labels decoded."""
    host = host.lower().rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    if "xn--" in host:
        labels = []
        for label in host.split("."):
            if label.startswith("xn--"):
                try:
                    label = label.encode("ascii").decode("idna")  # checks that it round-trips
                except (UnicodeError, ValueError) as exc:
                    raise MalformedUrl(f"bad punycode label {label!r}") from exc
            labels.append(label)
        host = ".".join(labels)
    return host


def split_url(url: str) -> tuple[str, str]:
    """(normalised host, percent-decoded path) of `url`; a URL without a scheme is read as http."""
    url = url.strip()
    if "://" not in url[:12]:
        url = "http://" + url.lstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname  # lowercased, without userinfo, port and IPv6 brackets
    except ValueError as exc:
        raise MalformedUrl(str(exc)) from exc
    if not host or any(c.isspace() for c in host):
        raise MalformedUrl(f"no usable host in {url!r}")
    return normalize_host(host), unquote(parts.path, errors="replace")


def url_key(url: str) -> str:
    """The form `blocked_urls` entries and document URLs are compared in: host + path (+ ?query)."""
    host, path = split_url(url)
    query = urlsplit(url if "://" in url[:12] else "http://" + url).query
    return f"{host}{path}".rstrip("/") + (f"?{query}" if query else "")


def parents(host: str) -> list[str]:
    """`a.b.c` -> [a.b.c, b.c, c]."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


def registered_label(host: str) -> str:
    """The label a name is registered under: `example` in a.example.com or a.example.com.cn
    (an approximation of the public suffix list that needs no download)."""
    labels = host.split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        return labels[-3]
    return labels[-2] if len(labels) >= 2 else labels[0]


@register
class UrlFilter(DocumentFilter):
    """RefinedWeb's URL filter (reasons: domain, url, numeric_domain, banned_word,
    soft_banned_words, banned_subword); see the module docstring for the rules and list formats."""

    name = "url_filter"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        files = []
        for key in DEFAULT_LISTS:  # each list parameter: a file, or entries where `@path` names a file
            given = params.get(key)
            if isinstance(given, str):
                files.append((key, given))
            else:
                files += [(k, v[1:]) for k, v in named_files(key, given) if v.startswith("@")]
        return files

    def __init__(self, blocked_domains: ListParam = None, blocked_urls: ListParam = None,
                 banned_words: ListParam = None, soft_banned_words: ListParam = None,
                 banned_subwords: ListParam = None, allowed_domains: ListParam = None,
                 soft_word_threshold: PositiveInt = 2,
                 numeric_domain_min_digits: PositiveInt | None = None,
                 use_default_lists: bool = True):
        self.sources = {"blocked_domains": blocked_domains, "blocked_urls": blocked_urls,
                        "banned_words": banned_words, "soft_banned_words": soft_banned_words,
                        "banned_subwords": banned_subwords, "allowed_domains": allowed_domains}
        self.soft_word_threshold = soft_word_threshold
        self.numeric_domain_min_digits = numeric_domain_min_digits
        self.use_default_lists = use_default_lists
        self._loaded = False

    def _entries(self, key: str) -> list[str]:
        given = self.sources[key]
        items = [f"@{given}"] if isinstance(given, str) else list(given or [])
        out = bundled_list("urls", DEFAULT_LISTS[key]) if self.use_default_lists and DEFAULT_LISTS[key] else []
        for item in items:
            out.extend(read_list(item[1:], f"url_filter.{key}") if item.startswith("@") else [item.strip()])
        return out

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        """Read every list once per worker."""
        if self._loaded:
            return

        def words(key: str) -> set[str]:
            return {w for w in (_PUNCT.sub("", e.lower()) for e in self._entries(key)) if w}

        def domains(key: str) -> set[str]:
            out = set()
            for entry in self._entries(key):
                try:  # a bare domain (every line of a UT1 `domains` file) needs no URL parsing
                    out.add(normalize_host(entry) if _BARE_HOST.fullmatch(entry) else split_url(entry)[0])
                except MalformedUrl:
                    continue
            return out

        def urls(key: str) -> set[str]:
            out = set()
            for entry in self._entries(key):
                try:
                    out.add(url_key(entry))
                except MalformedUrl:
                    continue
            return out

        self.blocked_domains, self.allowed_domains = domains("blocked_domains"), domains("allowed_domains")
        self.blocked_urls = urls("blocked_urls")
        self.banned_words, self.soft_words = words("banned_words"), words("soft_banned_words")
        subwords = sorted(words("banned_subwords"), key=len, reverse=True)
        self.subword_re = re.compile("|".join(map(re.escape, subwords))) if subwords else None
        self._loaded = True

    def filter(self, doc: Document) -> bool | str:
        self.setup()
        if not doc.url or not doc.url.strip():
            self.count("no_url")
            return True
        try:
            host, path = split_url(doc.url)
        except MalformedUrl:
            self.count("malformed_url")
            return True
        domains = parents(host)
        if not self.allowed_domains.isdisjoint(domains):
            self.count("allowed_domain")
            return True
        if not self.blocked_domains.isdisjoint(domains):
            return "domain"
        if self.blocked_urls and url_key(doc.url) in self.blocked_urls:
            return "url"
        if self.numeric_domain_min_digits and "." in host:
            label = registered_label(host)
            if label.isascii() and label.isdigit() and len(label) >= self.numeric_domain_min_digits:
                return "numeric_domain"
        text = f"{host}{path}".lower()
        tokens = set(_TOKEN.findall(text))
        if not self.banned_words.isdisjoint(tokens):
            return "banned_word"
        if len(tokens & self.soft_words) >= self.soft_word_threshold:
            return "soft_banned_words"
        if self.subword_re is not None and self.subword_re.search(_PUNCT.sub("", text)):
            return "banned_subword"
        return True
