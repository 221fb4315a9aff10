"""Credential redaction, applied on every path that writes a cassette, journal or report.

Three layers, each replacing a secret by a *stable* placeholder
``REDACTED-<kind>-<8 hex of sha256(secret)>`` (same secret, same placeholder, so
cassettes do not churn in git and playback can still tell two keys apart):

* headers: ``Authorization``, ``x-api-key``, ``api-key``, ``x-goog-api-key``,
  ``proxy-authorization``, ``cookie``, ``set-cookie`` (plus user names); an auth
  scheme such as ``Bearer`` is kept;
* query parameters: ``key``, ``api_key``, ``apikey``, ``token``, ``access_token`` … (plus user names);
* key-shaped strings anywhere in URIs and bodies: OpenAI, Anthropic, Groq, Google,
  xAI, Hugging Face, GitHub, AWS, Slack shapes (plus user regexes).

Configured by ``[redact]`` in spoolproxy.toml: ``headers = [...]``, ``query = [...]``,
``patterns = [...]`` (a regex; group 1, when present, is the part replaced).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from pydantic import BaseModel, Field

from .model import Cassette, HeaderDict, Interaction, Request, Response

SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
    "openai-api-key",
    "x-amz-security-token",
)
SECRET_QUERY = ("key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "sig", "signature")

#: (kind, pattern) for key-shaped strings; order matters (most specific first).
KEY_SHAPES: tuple[tuple[str, str], ...] = (
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
    ("groq-key", r"gsk_[A-Za-z0-9]{20,}"),
    ("google-key", r"AIza[0-9A-Za-z_\-]{30,}"),
    ("xai-key", r"xai-[A-Za-z0-9]{20,}"),
    ("hf-token", r"hf_[A-Za-z0-9]{30,}"),
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("aws-key", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("slack-token", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
)

#: a header or query parameter whose *name* says it carries a secret (beyond the lists
#: above): ``x-auth-token``, ``private-token``, ``x-functions-key``, ``client_secret``,
#: ``X-Amz-Signature``, ``password`` ...  (``idempotency-key`` and ``*-tokens`` counters are not).
SECRET_NAME_RE = re.compile(
    r"(?:^|[-_.])(?:secret|password|passwd|credentials?|signature|sig|token|"
    r"api[-_]?key|apikey|access[-_]?key|secret[-_]?key|subscription[-_]?key|functions[-_]?key|"
    r"private[-_]?key|auth[-_]?token|access[-_]?token|api[-_]?token|refresh[-_]?token|id[-_]?token|"
    r"session[-_]?token|security[-_]?token|private[-_]?token|client[-_]?secret)$",
    re.I,
)

#: JSON keys and form fields whose string value is a secret, anywhere in a body (narrower
#: than SECRET_NAME_RE: bare ``token``/``signature`` are data in LLM traffic, e.g. logprobs
#: and Anthropic thinking signatures).
_FIELD_NAMES = (
    r"password|passwd|client_secret|clientSecret|secret_key|secretKey|api_key|apiKey|access_token|accessToken|"
    r"refresh_token|refreshToken|id_token|auth_token|authToken|session_token|aws_secret_access_key|"
    r"aws_session_token|private_key|privateKey"
)
FIELD_PATTERNS: tuple[tuple[str, str], ...] = (
    ("field", r'"(?:' + _FIELD_NAMES + r')"\s*:\s*"((?:[^"\\]|\\.){4,})"'),
    # form fields: split so each pattern starts with a literal or a class (fast scans)
    ("field", r"[?&](?:" + _FIELD_NAMES + r"|secret)=([^&\s\"']{4,})"),
    ("field", r"\A(?:" + _FIELD_NAMES + r"|secret)=([^&\s\"']{4,})"),
    ("telegram-token", r"bot([0-9]{8,10}:[A-Za-z0-9_\-]{35})(?![A-Za-z0-9_\-])"),
)

#: any placeholder this module writes (also matches the bare word ``REDACTED``).
PLACEHOLDER_RE = re.compile(r"REDACTED(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?")
_PLACEHOLDER_B = re.compile(PLACEHOLDER_RE.pattern.encode())


def placeholder(kind: str, secret: str | bytes) -> str:
    """The stable placeholder for ``secret``: ``REDACTED-<kind>-<8 hex>``."""
    raw = secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret
    return f"REDACTED-{kind}-{hashlib.sha256(raw).hexdigest()[:8]}"


class RedactConfig(BaseModel):
    """The ``[redact]`` table: extra header names, query parameter names and regexes."""

    headers: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)


@dataclass
class Redactor:
    """Replaces secrets in requests and responses.  Pure: returns new objects.

    ``extra_headers``/``extra_query``: names added to the defaults (case-insensitive).
    ``extra_patterns``: regexes; group 1 (when present) is what is replaced.
    """

    extra_headers: Iterable[str] = ()
    extra_query: Iterable[str] = ()
    extra_patterns: Iterable[str] = ()
    _headers: frozenset[str] = field(init=False)
    _query: frozenset[str] = field(init=False)
    _patterns: list[tuple[str, re.Pattern[bytes]]] = field(init=False)

    def __post_init__(self) -> None:
        self._headers = frozenset(h.lower() for h in (*SECRET_HEADERS, *self.extra_headers))
        self._query = frozenset(q.lower() for q in (*SECRET_QUERY, *self.extra_query))
        pats = [(kind, re.compile(p.encode())) for kind, p in (*KEY_SHAPES, *FIELD_PATTERNS)]
        for i, p in enumerate(self.extra_patterns):
            try:
                pats.append(("custom", re.compile(p.encode())))
            except re.error as exc:
                from ..errors import UsageError

                raise UsageError(f"redaction pattern #{i + 1} {p!r} is not a valid regex: {exc}") from None
        self._patterns = pats

    @classmethod
    def from_config(cls, table: dict, *, headers: Iterable[str] = (), patterns: Iterable[str] = ()) -> "Redactor":
        """Build from a ``[redact]`` config table plus command-line additions."""
        cfg = RedactConfig.model_validate(table or {})
        return cls(
            extra_headers=(*cfg.headers, *headers),
            extra_query=cfg.query,
            extra_patterns=(*cfg.patterns, *patterns),
        )

    # -- pieces -----------------------------------------------------------------------
    def bytes_(self, data: bytes) -> bytes:
        """``data`` with every key-shaped string replaced."""
        if not data:
            return data
        for kind, pat in self._patterns:
            data = pat.sub(lambda m, k=kind: self._sub(m, k), data)
        return data

    def text(self, s: str) -> str:
        return self.bytes_(s.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    @staticmethod
    def _sub(m: re.Match[bytes], kind: str) -> bytes:
        if m.re.groups >= 1 and m.group(1) is not None:
            whole, secret = m.group(0), m.group(1)
            if _PLACEHOLDER_B.fullmatch(secret):
                return whole
            start = m.start(1) - m.start(0)
            return whole[:start] + placeholder(kind, secret).encode() + whole[start + len(secret) :]
        if _PLACEHOLDER_B.fullmatch(m.group(0)):
            return m.group(0)
        return placeholder(kind, m.group(0)).encode()

    def is_secret_header(self, name: str) -> bool:
        """True for a header whose value is a credential (by list or by name)."""
        return name.lower() in self._headers or bool(SECRET_NAME_RE.search(name))

    def is_secret_query(self, name: str) -> bool:
        """True for a query parameter whose value is a credential (by list or by name)."""
        return name.lower() in self._query or bool(SECRET_NAME_RE.search(name))

    def header_value(self, name: str, value: str) -> str:
        if not self.is_secret_header(name):
            return self.text(value)
        if PLACEHOLDER_RE.fullmatch(value.split(" ", 1)[-1]):
            return value
        kind = name.lower()
        scheme, sep, cred = value.partition(" ")
        if sep and scheme.lower() in ("bearer", "basic", "token", "bot", "digest", "aws4-hmac-sha256"):
            return f"{scheme} {placeholder(kind, cred)}"
        return placeholder(kind, value)

    def headers(self, headers: HeaderDict) -> HeaderDict:
        return {k: [self.header_value(k, v) for v in vs] for k, vs in headers.items()}

    def uri(self, uri: str) -> str:
        parts = urlsplit(uri)
        if parts.query:
            pairs = parse_qsl(parts.query, keep_blank_values=True)
            if any(self.is_secret_query(k) for k, _ in pairs):
                q = "&".join(
                    f"{quote(k, safe='')}={placeholder('query', v) if self.is_secret_query(k) and not PLACEHOLDER_RE.fullmatch(v) else quote(v, safe='')}"
                    for k, v in pairs
                )
                parts = parts._replace(query=q)
                uri = urlunsplit(parts)
        return self.text(uri)

    # -- whole objects ----------------------------------------------------------------
    def request(self, req: Request) -> Request:
        return req.model_copy(
            update={"uri": self.uri(req.uri), "headers": self.headers(req.headers), "body": self.bytes_(req.body)}
        )

    def response(self, resp: Response) -> Response:
        body = self.bytes_(resp.body)
        chunks = resp.chunks
        if chunks and len(body) != len(resp.body):
            chunks = _rechunk(resp.body, body, chunks, self)
        return resp.model_copy(update={"headers": self.headers(resp.headers), "body": body, "chunks": chunks})

    def interaction(self, it: Interaction) -> Interaction:
        """Redact by position (headers, query, key shapes, fields), then by value: a secret
        found in a credential header or query parameter is also replaced wherever else the
        interaction repeats it (an echo in a response body, a redirect URL)."""
        update: dict = {"request": self.request(it.request)}
        if it.response is not None:
            update["response"] = self.response(it.response)
        learned = self._learned(it.request)
        if learned:
            update = {k: _replace_values(v, learned) for k, v in update.items()}
        return it.model_copy(update=update)

    def _learned(self, req: Request) -> dict[bytes, bytes]:
        """secret value -> its placeholder, for credential headers and query parameters."""
        found: dict[bytes, bytes] = {}
        for k, vs in req.headers.items():
            if self.is_secret_header(k):
                for v in vs:
                    cred = v.partition(" ")[2] if " " in v else v
                    if len(cred) >= 6 and not PLACEHOLDER_RE.fullmatch(cred):
                        found[cred.encode("utf-8", "surrogateescape")] = placeholder(k.lower(), cred).encode()
        for k, v in parse_qsl(req.url.query, keep_blank_values=True):
            if self.is_secret_query(k) and len(v) >= 6 and not PLACEHOLDER_RE.fullmatch(v):
                found[v.encode("utf-8", "surrogateescape")] = placeholder("query", v).encode()
        return found

    def cassette(self, cas: Cassette) -> Cassette:
        return cas.model_copy(update={"interactions": [self.interaction(i) for i in cas.interactions]})


def _replace_values(obj, learned: dict[bytes, bytes]):
    """``obj`` (a Request or Response) with every learned secret value replaced."""
    def sub(data: bytes) -> bytes:
        for secret, ph in learned.items():
            if secret in data:
                data = data.replace(secret, ph)
        return data

    def sub_s(text: str) -> str:
        return sub(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    update = {
        "headers": {k: [sub_s(v) for v in vs] for k, vs in obj.headers.items()},
        "body": sub(obj.body),
    }
    if isinstance(obj, Request):
        update["uri"] = sub_s(obj.uri)
    elif obj.chunks and len(update["body"]) != len(obj.body):
        update["chunks"] = [obj.chunks[0].model_copy(update={"size": len(update["body"])})]
    return obj.model_copy(update=update)


def _rechunk(old: bytes, new: bytes, chunks, red: "Redactor"):
    """Chunk sizes after redaction changed the body length: redact chunk by chunk when
    that gives the same bytes, else keep one chunk per original boundary, scaled."""
    out, pos, parts = [], 0, []
    for c in chunks:
        parts.append(red.bytes_(old[pos : pos + c.size]))
        pos += c.size
    if b"".join(parts) == new:
        return [c.model_copy(update={"size": len(p)}) for c, p in zip(chunks, parts)]
    # a secret straddles a boundary: merge into one chunk at the first offset
    return [chunks[0].model_copy(update={"size": len(new)})]


# -- scanning (spoolproxy scan) -------------------------------------------------------
@dataclass
class SecretHit:
    """A secret-shaped string found by :func:`scan_interaction`: where and what kind."""

    interaction: int
    field: str
    kind: str
    excerpt: str


def scan_interaction(index: int, it: Interaction, red: Redactor | None = None) -> Iterator[SecretHit]:
    """Yield every unredacted secret in one interaction (header, query or body)."""
    red = red or Redactor()
    req = it.request
    places: list[tuple[str, bytes]] = [("request.uri", req.uri.encode()), ("request.body", req.body)]
    for k, vs in req.headers.items():
        places += [(f"request.headers.{k}", v.encode()) for v in vs]
    if it.response is not None:
        places.append(("response.body", it.response.body))
        for k, vs in it.response.headers.items():
            places += [(f"response.headers.{k}", v.encode()) for v in vs]
    for where, data in places:
        for kind, pat in red._patterns:
            for m in pat.finditer(data):
                secret = m.group(1) if m.re.groups >= 1 and m.group(1) is not None else m.group(0)
                if not _PLACEHOLDER_B.fullmatch(secret):
                    s = secret.decode("utf-8", "replace")
                    yield SecretHit(index, where, kind, s[:6] + "…" + f"({len(s)} chars)")
    for k, vs in req.headers.items():
        if red.is_secret_header(k):
            for v in vs:
                cred = v.split(" ", 1)[-1]
                if _looks_secret(cred) and not PLACEHOLDER_RE.search(cred):
                    yield SecretHit(index, f"request.headers.{k}", "credential-header", cred[:4] + "…")
    for k, v in parse_qsl(req.url.query, keep_blank_values=True):
        if red.is_secret_query(k) and _looks_secret(v) and not PLACEHOLDER_RE.search(v):
            yield SecretHit(index, f"request.uri?{k}", "credential-query", v[:4] + "…")


def _looks_secret(value: str) -> bool:
    """A credential value worth reporting: 16+ characters with both letters and digits
    (so test placeholders like ``AUTHORIZATION-XXX`` are not reported)."""
    return len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
