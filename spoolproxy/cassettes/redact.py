"""Credential redaction, applied on every path that writes a cassette, journal or report.

A secret becomes a *stable* placeholder ``REDACTED-<kind>-<8 hex of sha256(secret)>``
(same secret, same placeholder, so cassettes do not churn in git and playback can still
tell two keys apart).  What counts as a secret is in :mod:`.secret_rules`:

* by position: credential headers (``Authorization``, ``x-api-key``, ``Cookie`` ... and any
  header whose name says credential; an auth scheme such as ``Bearer`` is kept), credential
  query parameters, secret JSON/form fields at any depth (also inside JSON held in a string);
* by shape: provider keys, tokens and JWTs, matched only as whole tokens (never inside
  base64 media); credentials in URLs (userinfo, DSNs, webhook URLs);
* by value: a :class:`Redactor` remembers every secret it has redacted (and those it is
  told about, such as the recorded program's ``*_API_KEY``/``*_TOKEN``/``*_SECRET``
  variables) and replaces each one wherever else it appears in the run, also JSON-escaped,
  URL-encoded or in a URL path.  Use one Redactor per run.

Configured by ``[redact]`` in spoolproxy.toml: ``headers = [...]``, ``query = [...]``,
``patterns = [...]`` (a regex; group 1, when present, is the part replaced).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Iterable, Iterator, Mapping
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from pydantic import BaseModel, Field

from .model import Cassette, CassetteMeta, HeaderDict, Interaction, Request, Response
from .secret_memory import SecretMemory
from .secret_rules import (ALL_RULES, ENV_SECRET_RE, SECRET_HEADERS, SECRET_NAME_RE, SECRET_QUERY, CompiledRules, Rule,
                           compile_rules, standalone)
from .websocket import map_payloads

__all__ = ["PLACEHOLDER_RE", "RedactConfig", "Redactor", "SECRET_HEADERS", "SECRET_NAME_RE", "SECRET_QUERY",
           "placeholder"]

#: any placeholder this module writes (also matches the bare word ``REDACTED``).
PLACEHOLDER_RE = re.compile(r"REDACTED(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?")
_PLACEHOLDER_B = re.compile(PLACEHOLDER_RE.pattern.encode())

#: headers whose values are redacted where they stand but not remembered: servers rotate
#: them on every response (Cloudflare's ``__cf_bm``), so a long run would collect thousands
_NOT_REMEMBERED_HEADERS = frozenset({"cookie", "set-cookie"})
_COMPILED = tuple(compile_rules(ALL_RULES))
_AUTH_SCHEMES = ("bearer", "basic", "token", "bot", "digest", "aws4-hmac-sha256", "sentry")


def placeholder(kind: str, secret: str | bytes) -> str:
    """The stable placeholder for ``secret``: ``REDACTED-<kind>-<8 hex>``."""
    raw = secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret
    return f"REDACTED-{kind}-{hashlib.sha256(raw).hexdigest()[:8]}"


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class RedactConfig(BaseModel):
    """The ``[redact]`` table: extra header names, query parameter names and regexes."""

    headers: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)


class Redactor:
    """Replaces secrets in requests, responses and text, remembering them for the run.

    ``extra_headers``/``extra_query``: names added to the defaults (case-insensitive).
    ``extra_patterns``: regexes; group 1 (when present) is what is replaced.  Returns new
    objects; the only state is the set of secrets seen so far (thread-safe), so use one
    Redactor per run.  ``remember=False`` gives a stateless Redactor (each call depends on
    its input alone, as playback's matcher needs).  Raises UsageError for an invalid pattern.
    """

    def __init__(self, extra_headers: Iterable[str] = (), extra_query: Iterable[str] = (),
                 extra_patterns: Iterable[str] = (), *, remember: bool = True) -> None:
        self.remember = remember
        self.extra_headers = tuple(extra_headers)
        self.extra_query = tuple(extra_query)
        self.extra_patterns = tuple(extra_patterns)
        self._headers = frozenset(h.lower() for h in (*SECRET_HEADERS, *self.extra_headers))
        self._query = frozenset(q.lower() for q in (*SECRET_QUERY, *self.extra_query))
        self._custom: list[re.Pattern[bytes]] = []
        for i, p in enumerate(self.extra_patterns):
            try:
                self._custom.append(re.compile(p.encode()))
            except re.error as exc:
                from ..errors import UsageError

                raise UsageError(f"redaction pattern #{i + 1} {p!r} is not a valid regex: {exc}") from None
        self.memory = SecretMemory()  #: the secrets seen so far in the run

    @classmethod
    def from_config(cls, table: dict, *, headers: Iterable[str] = (), patterns: Iterable[str] = ()) -> "Redactor":
        """Build from a ``[redact]`` config table plus command-line additions."""
        cfg = RedactConfig.model_validate(table or {})
        return cls(extra_headers=(*cfg.headers, *headers), extra_query=cfg.query, extra_patterns=(*cfg.patterns, *patterns))

    def fork(self) -> "Redactor":
        """A Redactor with the same rules that remembers what this one does so far (and
        from then on learns on its own): one per cassette of a multi-cassette job."""
        other = Redactor(self.extra_headers, self.extra_query, self.extra_patterns, remember=self.remember)
        other.memory = self.memory.copy()
        return other

    # -- remembering ------------------------------------------------------------------
    def learn(self, secret: str | bytes, kind: str = "secret", ph: str | bytes | None = None) -> bool:
        """Remember ``secret`` so it is replaced wherever it appears from now on, in all its
        forms (:class:`~.secret_memory.SecretMemory`: not values under 6 characters, stand-in
        words such as ``ollama``, or beyond 256 secrets).  True when new."""
        if not self.remember:
            return False
        raw = (_b(secret) if isinstance(secret, str) else bytes(secret)).strip()
        ph_b = (_b(ph) if isinstance(ph, str) else ph) if ph is not None else _b(placeholder(kind, raw))
        return self.memory.add(raw, ph_b)

    def learn_request(self, req: Request) -> None:
        """Remember the credentials ``req`` carries by position (credential headers, a Basic
        password, credential query parameters) without redacting anything: cheap, for a
        run that must recognise them later (playback's reports)."""
        if not self.remember:
            return
        for k, vs in req.headers.items():
            if self.is_secret_header(k) and k.lower() not in _NOT_REMEMBERED_HEADERS:
                for v in vs:
                    scheme, sep, cred = v.partition(" ")
                    if sep and scheme.lower() in _AUTH_SCHEMES and cred:
                        self._learn_credential(scheme, cred, k.lower(), self.placeholder_for(cred, k.lower()))
                    else:
                        self.learn(v, k.lower())
        query = urlsplit(req.uri).query
        for seg in query.split("&") if query else ():
            name, eq, value = seg.partition("=")
            if eq and value and self.is_secret_query(unquote_plus(name)):
                self.learn(unquote_plus(value), "query")

    def absorb(self, other: "Redactor") -> None:
        """Remember everything ``other`` remembers, with the same placeholders."""
        for secret, ph in other.memory.items():
            self.learn(secret, "secret", ph)

    def learn_env(self, env: Mapping[str, str]) -> int:
        """Remember the values of ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET`` (and
        ``*_PASSWORD``, ``*_SECRET_ACCESS_KEY``) variables in ``env``; returns how many."""
        n = 0
        for name, value in env.items():
            if value and ENV_SECRET_RE.search(name):
                kind = next((k for k, s, e in self.find(_b(value)) if (s, e) == (0, len(_b(value)))), "env")
                n += self.learn(value, kind)
        return n

    def placeholder_for(self, secret: str, kind: str) -> str:
        """The placeholder of ``secret``: the one it got when first remembered (so one
        secret reads the same everywhere in a run), else :func:`placeholder`."""
        known = self.memory.get(_b(secret).strip())
        return _s(known) if known is not None else placeholder(kind, secret)

    @property
    def remembered(self) -> int:
        """How many secret values this Redactor replaces wherever they appear."""
        return len(self.memory)

    def replace_known(self, data: bytes) -> bytes:
        """``data`` with only the remembered secrets replaced (a substring test per secret)."""
        return self.memory.replace(data) if data else data

    # -- pieces -----------------------------------------------------------------------
    def bytes_(self, data: bytes, *, learn: bool = True) -> bytes:
        """``data`` with every secret replaced: key shapes, URL credentials, secret fields,
        custom patterns, then every remembered secret.  ``learn``: remember what the rules
        found (off for a fragment of a body, where a cut key could look like a shorter one)."""
        if not data:
            return data
        for compiled in _COMPILED:
            data = compiled.pattern.sub(lambda m, c=compiled: self._sub_rule(m, c, learn), data)
        for pat in self._custom:
            data = pat.sub(lambda m: self._sub_custom(m, learn), data)
        return self.memory.replace(data)

    def text(self, s: str) -> str:
        """:meth:`bytes_` for text."""
        return _s(self.bytes_(_b(s))) if s else s

    def _sub_rule(self, m: re.Match[bytes], compiled: CompiledRules, learn: bool) -> bytes:
        rule, start, end = compiled.resolve(m)
        return self._replace_span(m, rule.kind, start, end, rule, learn)

    def _sub_custom(self, m: re.Match[bytes], learn: bool) -> bytes:
        if m.re.groups >= 1 and m.group(1) is not None:
            return self._replace_span(m, "custom", m.start(1), m.end(1), None, learn)
        return self._replace_span(m, "custom", m.start(), m.end(), None, learn)

    def _replace_span(self, m: re.Match[bytes], kind: str, start: int, end: int, rule: Rule | None,
                      learn: bool) -> bytes:
        whole = m.group(0)
        if rule is not None and rule.token and not standalone(m.string, start, end):
            return whole
        secret = m.string[start:end]
        if not secret or _PLACEHOLDER_B.search(secret):
            return whole
        ph = self.memory.get(secret) or _b(placeholder(kind, secret))
        if learn:
            self.learn(secret, kind, ph)
        return whole[: start - m.start()] + ph + whole[end - m.start():]

    def find(self, data: bytes, *, remembered: bool = False) -> Iterator[tuple[str, int, int]]:
        """``(kind, start, end)`` of every secret the rules would replace in ``data``, and
        with ``remembered`` of every remembered secret too (kind ``known-secret``: e.g. an
        environment variable's value); placeholders are skipped.  What ``spoolproxy scan`` reports."""
        for compiled in _COMPILED:
            for m in compiled.pattern.finditer(data):
                rule, start, end = compiled.resolve(m)
                if rule.token and not standalone(data, start, end):
                    continue
                if end > start and not _PLACEHOLDER_B.search(data[start:end]):
                    yield rule.kind, start, end
        for pat in self._custom:
            for m in pat.finditer(data):
                start, end = (m.start(1), m.end(1)) if m.re.groups >= 1 and m.group(1) is not None else m.span()
                if end > start and not _PLACEHOLDER_B.search(data[start:end]):
                    yield "custom", start, end
        if remembered:
            for start, end, whole in self.memory.finditer(data):
                if whole:
                    yield "known-secret", start, end

    def spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Every span a rule or a remembered value could replace (before the whole-token
        check), for cutting a stream where no secret straddles the cut."""
        for compiled in _COMPILED:
            for m in compiled.pattern.finditer(data):
                yield m.span()
        for pat in self._custom:
            for m in pat.finditer(data):
                yield m.span()
        for start, end, _whole in self.memory.finditer(data):
            yield start, end

    def is_secret_header(self, name: str) -> bool:
        """True for a header whose value is a credential (by list or by name)."""
        return name.lower() in self._headers or bool(SECRET_NAME_RE.search(name))

    def is_secret_query(self, name: str) -> bool:
        """True for a query parameter whose value is a credential (by list or by name)."""
        return name.lower() in self._query or bool(SECRET_NAME_RE.search(name))

    def header_value(self, name: str, value: str) -> str:
        """A header value redacted: a credential header's value (its auth scheme kept) becomes
        a placeholder and is remembered; any other value is searched like text."""
        if not self.is_secret_header(name):
            return self.text(value)
        if PLACEHOLDER_RE.fullmatch(value.split(" ", 1)[-1]) or not value.strip():
            return value
        kind = name.lower()
        scheme, sep, cred = value.partition(" ")
        if sep and scheme.lower() in _AUTH_SCHEMES and cred:
            ph = self.placeholder_for(cred, kind)
            self._learn_credential(scheme, cred, kind, ph)
            return f"{scheme} {ph}"
        ph = self.placeholder_for(value, kind)
        if kind not in _NOT_REMEMBERED_HEADERS:
            self.learn(value, kind, ph)
        return ph

    def _learn_credential(self, scheme: str, cred: str, kind: str, ph: str) -> None:
        self.learn(cred, kind, ph)
        if scheme.lower() == "basic":  # user:password, base64: the password may travel elsewhere too
            try:
                user, _, password = base64.b64decode(cred, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return
            self.learn(password, kind)

    def headers(self, headers: HeaderDict) -> HeaderDict:
        """Every header value redacted (see :meth:`header_value`)."""
        return {k: [self.header_value(k, v) for v in vs] for k, vs in headers.items()}

    def uri(self, uri: str) -> str:
        """``uri`` with credential query values replaced (other parameters kept byte for
        byte) and then searched like text (userinfo, webhook paths, key shapes)."""
        parts = urlsplit(uri)
        if parts.query:
            segs = parts.query.split("&")
            changed = False
            for i, seg in enumerate(segs):
                name, eq, value = seg.partition("=")
                if eq and value and self.is_secret_query(unquote_plus(name)) and not PLACEHOLDER_RE.fullmatch(value):
                    plain = unquote_plus(value)
                    ph = self.placeholder_for(plain, "query")
                    self.learn(plain, "query", ph)
                    segs[i] = f"{name}={ph}"
                    changed = True
            if changed:
                uri = urlunsplit(parts._replace(query="&".join(segs)))
        return self.text(uri)

    # -- whole objects ----------------------------------------------------------------
    def request(self, req: Request) -> Request:
        """The request with its URI, headers and body redacted."""
        headers = self.headers(req.headers)  # first: credentials seen here are replaced in URI and body too
        return req.model_copy(update={"uri": self.uri(req.uri), "headers": headers, "body": self.bytes_(req.body)})

    def response(self, resp: Response) -> Response:
        """The response with its headers and body redacted (chunk sizes kept in step)."""
        headers = self.headers(resp.headers)
        body = self.bytes_(resp.body)
        chunks = resp.chunks
        if chunks and len(body) != len(resp.body):
            chunks = _rechunk(resp.body, body, chunks, self)
        return resp.model_copy(update={"headers": headers, "body": body, "chunks": chunks})

    def interaction(self, it: Interaction) -> Interaction:
        """Redact by position and shape, then by value: a secret found anywhere in the
        interaction (a credential header, a password field, a WebSocket message) is also
        replaced wherever else it repeats (an echo in the response, a redirect URL), as are
        secrets remembered from earlier interactions of the run.  WebSocket messages
        (``extra["websocket"]``, and ``extra["websocket_messages"]`` of imported runs) are
        redacted like bodies: text, JSON held in it, binary payloads."""
        before = self.remembered
        update: dict = {"request": self.request(it.request)}
        if it.response is not None:
            update["response"] = self.response(it.response)
        if it.error is not None and it.error.message:
            update["error"] = it.error.model_copy(update={"message": self.text(it.error.message)})
        extra = map_payloads(it.extra, self.text, self.bytes_)  # WebSocket messages (recorded or imported)
        if extra is not it.extra:
            update["extra"] = extra
        if self.remembered != before:  # learned from a later field: replace earlier repeats
            update["request"] = self._known_only(update["request"])
            if "response" in update:
                update["response"] = self._known_only(update["response"])
            if "extra" in update:
                update["extra"] = self._known_only_extra(update["extra"])
        return it.model_copy(update=update)

    def cassette(self, cas: Cassette) -> Cassette:
        """Every interaction redacted (secrets learned late are replaced in earlier ones
        too) and the run facts (:meth:`meta`)."""
        before = self.remembered
        its = [self.interaction(i) for i in cas.interactions]
        if self.remembered != before:
            its = [self.known_only(i) for i in its]
        return cas.model_copy(update={"interactions": its, "meta": self.meta(cas.meta)})

    def meta(self, meta: CassetteMeta) -> CassetteMeta:
        """Run facts redacted: the command line and every string under ``extra`` (any depth:
        a captured stderr tail, a note) searched like text."""
        def walk(v):
            if isinstance(v, str):
                return self.text(v)
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, list):
                return [walk(x) for x in v]
            return v

        return meta.model_copy(update={"command": [self.text(a) for a in meta.command] if meta.command else meta.command,
                                       "extra": walk(meta.extra)})

    def known_only(self, it: Interaction) -> Interaction:
        """Only the remembered secrets replaced (cheap: a substring test per secret), in the
        request, the response and WebSocket messages."""
        if not len(self.memory):
            return it
        update: dict = {"request": self._known_only(it.request)}
        if it.response is not None:
            update["response"] = self._known_only(it.response)
        extra = self._known_only_extra(it.extra)
        if extra is not it.extra:
            update["extra"] = extra
        return it.model_copy(update=update)

    def _known_only_extra(self, extra: dict) -> dict:
        """``extra`` with the remembered secrets replaced in its WebSocket messages."""
        return map_payloads(extra, lambda text: _s(self.memory.replace(_b(text))), self.memory.replace)

    def _known_only(self, obj):
        def sub_s(text: str) -> str:
            return _s(self.memory.replace(_b(text)))

        update = {"headers": {k: [sub_s(v) for v in vs] for k, vs in obj.headers.items()},
                  "body": self.memory.replace(obj.body)}
        if isinstance(obj, Request):
            update["uri"] = sub_s(obj.uri)
        elif obj.chunks and len(update["body"]) != len(obj.body):
            update["chunks"] = [obj.chunks[0].model_copy(update={"size": len(update["body"])})]
        return obj.model_copy(update=update)


def _rechunk(old: bytes, new: bytes, chunks, red: "Redactor"):
    """Chunk sizes after redaction changed the body length: redact chunk by chunk when
    that gives the same bytes, else keep one chunk per original boundary, scaled."""
    parts, pos = [], 0
    for c in chunks:
        parts.append(red.bytes_(old[pos: pos + c.size], learn=False))
        pos += c.size
    if b"".join(parts) == new:
        return [c.model_copy(update={"size": len(p)}) for c, p in zip(chunks, parts)]
    # a secret straddles a boundary: merge into one chunk at the first offset
    return [chunks[0].model_copy(update={"size": len(new)})]
