"""Request normalisation and body fingerprints for playback matching.

A live request and a recorded one are compared through their :class:`Normalized` views,
built the same way on both sides:

1. the :class:`~spoolproxy.cassettes.Redactor` (stateless) runs over the URI and body, so a
   real key in the live request looks like the placeholder stored in the cassette;
2. every redaction placeholder (``REDACTED-openai-key-1a2b3c4d``, bare ``REDACTED``,
   :data:`~spoolproxy.cassettes.redact.PLACEHOLDER_RE`) becomes the wildcard ``REDACTED``,
   so two different keys never cause a miss; a query parameter whose whole value is a
   placeholder (``?key=...``) is left out, so a cassette recorded with the parameter
   filtered out still matches; a wildcard the live request cannot produce by itself (a
   secret the recording recognised elsewhere in its run: in a URL path, in a prompt) is
   matched by :func:`wildcard_match` when the exact look-up fails;
3. ``--normalize REGEX`` matches are replaced by ``<normalized>`` (in JSON string values,
   query values and other text bodies);
4. ``--ignore-json-path PATH`` values are replaced by ``<ignored>`` (the structure stays);
5. the built-in SDK rules (:mod:`.rules`) that apply to the endpoint add their own
   normalising regexes and ignored paths, or leave the body out of the comparison;
6. the body becomes canonical bytes: JSON with sorted keys and no whitespace; form bodies as
   sorted ``name=value`` pairs; multipart with its boundary replaced by ``BOUNDARY``; any
   other body as its (redacted, normalised) bytes.

The fingerprint is the SHA-256 of those canonical bytes (hex, 32 characters).  The
**stream flag** (:attr:`Normalized.stream`) says whether the request asks for a streamed
answer: the body's boolean ``stream`` field when present, else whether ``Accept`` names
``text/event-stream`` or NDJSON, else unknown (None).  It is part of the default-match
fallback key, so a drifted request never gets a stream it did not ask for, or the reverse.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlsplit

from ..cassettes.model import Request
from ..cassettes.redact import PLACEHOLDER_RE, Redactor
from ..errors import UsageError
from .rules import Rule, RuleSet, select

WILDCARD = "REDACTED"
NORMALIZED = "<normalized>"
IGNORED = "<ignored>"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

_PATH_TOKEN = re.compile(r"\.([A-Za-z_$@\-][\w$@\-]*)|\.\*|\[\*\]|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]")


def parse_json_path(path: str) -> tuple[Any, ...]:
    """Parse the JSONPath subset ``$.a.b``, ``$.a[*].c``, ``$.a[0]``, ``$['a b']``, ``$.a.*``.

    Returns a tuple of steps: a ``str`` key, an ``int`` index or ``"*"`` (any key or item).
    Raises UsageError for anything else.
    """
    p = path.strip()
    if not p.startswith("$"):
        raise UsageError(f"--ignore-json-path {path!r}: a path starts with '$', e.g. $.metadata.request_id")
    steps: list[Any] = []
    pos = 1
    while pos < len(p):
        m = _PATH_TOKEN.match(p, pos)
        if not m:
            raise UsageError(
                f"--ignore-json-path {path!r}: cannot parse at {p[pos:]!r}; supported: $.a.b, $.a[*].c, $.a[0]"
            )
        tok = m.group(0)
        if m.group(1) is not None:
            steps.append(m.group(1))
        elif m.group(2) is not None:
            steps.append(int(m.group(2)))
        elif m.group(3) is not None:
            steps.append(m.group(3))
        else:
            steps.append("*")
        pos += len(tok)
    if not steps:
        raise UsageError(f"--ignore-json-path {path!r}: names no field; use e.g. $.metadata.request_id")
    return tuple(steps)


def _apply_ignore(value: Any, steps: tuple[Any, ...]) -> Any:
    """``value`` with every node addressed by ``steps`` replaced by IGNORED (a copy where changed)."""
    if not steps:
        return IGNORED
    head, rest = steps[0], steps[1:]
    if isinstance(value, dict):
        if head == "*":
            return {k: _apply_ignore(v, rest) for k, v in value.items()}
        if isinstance(head, str) and head in value:
            out = dict(value)
            out[head] = _apply_ignore(value[head], rest)
            return out
        return value
    if isinstance(value, list):
        if head == "*":
            return [_apply_ignore(v, rest) for v in value]
        if isinstance(head, int) and -len(value) <= head < len(value):
            out = list(value)
            out[head] = _apply_ignore(value[head], rest)
            return out
    return value


@dataclass(frozen=True)
class MatchOptions:
    """What the matcher ignores or normalises.

    ``ignore_json_paths``: JSONPath subset strings (see :func:`parse_json_path`);
    ``normalize``: regexes whose matches are replaced on both sides;
    ``match_headers``: request header names that must be equal (case-insensitive names);
    ``redact_headers``/``redact_patterns``: extra :class:`Redactor` settings;
    ``sdk_rules``: apply the built-in SDK rules (:mod:`.rules`), minus ``disabled_rules``.
    Raises UsageError (from :class:`Fingerprinter`) for an invalid path, regex or rule name.
    """

    ignore_json_paths: tuple[str, ...] = ()
    normalize: tuple[str, ...] = ()
    match_headers: tuple[str, ...] = ()
    redact_headers: tuple[str, ...] = ()
    redact_patterns: tuple[str, ...] = ()
    sdk_rules: bool = True
    disabled_rules: tuple[str, ...] = ()

    def with_extra(self, *, ignore_json_paths: Iterable[str] = (), normalize: Iterable[str] = ()) -> "MatchOptions":
        """A copy with more ignored paths / normalising regexes (used to verify suggestions)."""
        return MatchOptions(
            (*self.ignore_json_paths, *ignore_json_paths),
            (*self.normalize, *normalize),
            self.match_headers,
            self.redact_headers,
            self.redact_patterns,
            self.sdk_rules,
            self.disabled_rules,
        )


@dataclass(frozen=True)
class Normalized:
    """A request as the matchers see it.

    ``query``: sorted ``(name, value)`` pairs; ``body``: canonical bytes; ``body_json``: the
    normalised JSON value (None when the body is not JSON); ``body_kind``: json | form |
    multipart | raw | empty | ignored (an SDK rule leaves it out); ``headers``:
    ``{lower-case name: value}`` for ``match_headers``; ``stream``: the stream flag (True,
    False, or None when the request does not say); ``optional``/``rules``: from the SDK rules
    that apply (see :mod:`.rules`).
    """

    method: str
    scheme: str
    host: str
    port: int
    path: str
    query: tuple[tuple[str, str], ...]
    body: bytes
    body_kind: str
    body_json: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    fingerprint: str = field(default="", compare=False)
    stream: bool | None = field(default=None, compare=False)
    optional: bool = field(default=False, compare=False)
    rules: tuple[str, ...] = field(default=(), compare=False)

    @property
    def url_key(self) -> tuple:
        """Method and URL: the vcrpy-compatible key (``match_on`` method, scheme, host, port, path, query)."""
        return (self.method, self.scheme, self.host, self.port, self.path, self.query)

    @property
    def key(self) -> tuple:
        """Everything the exact matcher compares."""
        return (*self.url_key, self.fingerprint, self.headers)

    def fallback_key(self, stream: bool) -> tuple:
        """The default-match fallback key: method, URL and the stream flag (a recorded
        request whose flag is unknown is filed under both values)."""
        return (*self.url_key, stream)

    @property
    def endpoint(self) -> tuple:
        """Scheme, host, port and path: used to find the nearest recorded request for a miss."""
        return (self.scheme, self.host, self.port, self.path)


class Fingerprinter:
    """Builds :class:`Normalized` views under one :class:`MatchOptions`.  Thread-safe (no
    state: its redactor remembers nothing, so a view depends on the request alone).

    Raises UsageError for an invalid ``--ignore-json-path`` or ``--normalize`` regex.
    """

    def __init__(self, options: MatchOptions | None = None, redactor: Redactor | None = None) -> None:
        self.options = options or MatchOptions()
        # stateless: a request's view must not depend on the requests seen before it
        self.redactor = redactor or Redactor(
            extra_headers=self.options.redact_headers, extra_patterns=self.options.redact_patterns, remember=False
        )
        #: remembers the credentials live requests carried (:meth:`observe`), for what reports show
        self.learner = Redactor(extra_headers=self.options.redact_headers, extra_patterns=self.options.redact_patterns)
        self._paths = [parse_json_path(p) for p in self.options.ignore_json_paths]
        self._regexes: list[re.Pattern[str]] = []
        for rx in self.options.normalize:
            try:
                self._regexes.append(re.compile(rx))
            except re.error as exc:
                raise UsageError(f"--normalize {rx!r} is not a valid regular expression: {exc}") from None
        self._headers = tuple(h.lower() for h in self.options.match_headers)
        self.rules = RuleSet(select(self.options.sdk_rules, self.options.disabled_rules))
        self._rule_parts: dict[str, tuple[tuple[re.Pattern[str], ...], tuple[tuple[Any, ...], ...]]] = {
            r.name: (tuple(re.compile(x) for x in r.normalize), tuple(parse_json_path(p) for p in r.ignore_json_paths))
            for r in self.rules.rules
        }

    def observe(self, req: Request) -> None:
        """Remember the credentials a live request carries (headers, query), so a report's
        URIs hide them also where the rules alone cannot tell (a key in a URL path)."""
        self.learner.learn_request(req)

    def display_uri(self, uri: str) -> str:
        """``uri`` as reports show it: redacted, including every credential observed so far."""
        return self.learner.uri(uri)

    # -- text ------------------------------------------------------------------------
    def text(self, s: str, extra: tuple[re.Pattern[str], ...] = ()) -> str:
        """Placeholders to the wildcard, then ``--normalize`` (and ``extra``) matches to
        ``<normalized>``."""
        s = PLACEHOLDER_RE.sub(WILDCARD, s)
        for rx in self._regexes:
            s = rx.sub(NORMALIZED, s)
        for rx in extra:
            s = rx.sub(NORMALIZED, s)
        return s

    def _walk(self, v: Any, extra: tuple[re.Pattern[str], ...] = ()) -> Any:
        if isinstance(v, str):
            return self.text(v, extra)
        if isinstance(v, dict):
            return {k: self._walk(x, extra) for k, x in v.items()}
        if isinstance(v, list):
            return [self._walk(x, extra) for x in v]
        return v

    # -- body ------------------------------------------------------------------------
    def body(self, body: bytes, content_type: str = "") -> tuple[str, bytes, Any]:
        """``(kind, canonical bytes, normalised JSON or None)`` for a decoded request body."""
        return self._body(body, content_type)[:3]

    def _body(self, body: bytes, content_type: str = "", rules: tuple[Rule, ...] = ()) -> tuple[str, bytes, Any, bool | None]:
        """:meth:`body` plus the body's boolean ``stream`` field (None when absent)."""
        if not body:
            return "empty", b"", None, None
        if any(r.ignore_body for r in rules):
            return "ignored", b"", None, None
        regexes = tuple(rx for r in rules for rx in self._rule_parts[r.name][0])
        paths = [*self._paths, *(p for r in rules for p in self._rule_parts[r.name][1])]
        body = self.redactor.bytes_(body)
        ctype = content_type.lower()
        head = body.lstrip()[:1]
        if head in (b"{", b"["):
            try:
                value = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                value = None
            else:
                stream = value.get("stream") if isinstance(value, dict) else None
                value = self._walk(value, regexes)
                for steps in paths:
                    value = _apply_ignore(value, steps)
                canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                return "json", canon.encode("utf-8"), value, stream if isinstance(stream, bool) else None
        if "multipart/" in ctype or body.startswith(b"--"):
            boundary = _boundary(content_type, body)
            if boundary:
                body = body.replace(b"--" + boundary, b"--BOUNDARY")
                return "multipart", self._bytes(body, regexes), None, None
        if "application/x-www-form-urlencoded" in ctype:
            try:
                pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
            except UnicodeDecodeError:
                pairs = None
            if pairs is not None:
                canon = "&".join(f"{k}={self.text(v, regexes)}" for k, v in sorted(pairs))
                return "form", canon.encode("utf-8"), None, None
        return "raw", self._bytes(body, regexes), None, None

    def _bytes(self, data: bytes, extra: tuple[re.Pattern[str], ...] = ()) -> bytes:
        return self.text(data.decode("utf-8", "surrogateescape"), extra).encode("utf-8", "surrogateescape")

    def refined(self, norm: "Normalized", ignore_json_paths: Iterable[str] = (), normalize: Iterable[str] = ()) -> bytes:
        """``norm``'s canonical body with more ignored paths and normalising regexes applied
        (used to check that a suggested flag would make two requests match).  Raises
        UsageError for an invalid path or regex."""
        try:
            regexes = tuple(re.compile(x) for x in normalize)
        except re.error as exc:
            raise UsageError(f"invalid regular expression: {exc}") from None
        steps = [parse_json_path(p) for p in ignore_json_paths]
        if norm.body_json is None:
            text = norm.body.decode("utf-8", "surrogateescape")
            for rx in regexes:
                text = rx.sub(NORMALIZED, text)
            return text.encode("utf-8", "surrogateescape")
        value = norm.body_json
        if regexes:
            value = self._walk(value, regexes)
        for st in steps:
            value = _apply_ignore(value, st)
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    # -- whole request -----------------------------------------------------------------
    def normalize(self, req: Request) -> Normalized:
        """The :class:`Normalized` view of ``req`` (a recorded or a live request)."""
        parts = urlsplit(self.redactor.uri(req.uri))
        scheme = parts.scheme.lower()
        try:
            port = parts.port or DEFAULT_PORTS.get(scheme, 0)
        except ValueError:
            port = 0
        # a credential parameter (its value a placeholder) is ignored altogether: vcrpy users
        # often drop it when recording (filter_query_parameters), the live request has it
        query = tuple(sorted(
            (k, t) for k, v in parse_qsl(parts.query, keep_blank_values=True) if (t := self.text(v)) != WILDCARD
        ))
        host = (parts.hostname or "").lower()
        path = PLACEHOLDER_RE.sub(WILDCARD, parts.path) or "/"  # a secret in the path (a webhook URL)
        rules = self.rules.for_request(req.method, host, path)
        kind, canon, value, stream = self._body(req.body, req.header("content-type") or "", rules)
        if stream is None and kind != "ignored":
            accept = req.header("accept")
            if accept is not None:
                a = accept.lower()
                stream = "text/event-stream" in a or "ndjson" in a or "jsonl" in a
        headers: tuple[tuple[str, str], ...] = ()
        if self._headers:
            red = self.redactor.headers(req.headers)
            lowered = {k.lower(): ", ".join(v) for k, v in red.items()}
            headers = tuple((h, self.text(lowered.get(h, ""))) for h in self._headers)
        return Normalized(
            method=req.method.upper(),
            scheme=scheme,
            host=host,
            port=port,
            path=path,
            query=query,
            body=canon,
            body_kind=kind,
            body_json=value,
            headers=headers,
            fingerprint=hashlib.sha256(canon).hexdigest()[:32],
            stream=stream,
            optional=any(r.optional for r in rules),
            rules=tuple(r.name for r in rules),
        )


def wildcard_match(recorded: bytes, live: bytes) -> bool:
    """True when ``live`` equals ``recorded`` with every :data:`WILDCARD` standing for one
    or more characters (a secret the recording redacted and the live request still holds).
    Linear time: the literal pieces between wildcards are found left to right."""
    w = WILDCARD.encode()
    if w not in recorded:
        return recorded == live
    pieces = recorded.split(w)
    first, last = pieces[0], pieces[-1]
    if not live.startswith(first) or not live.endswith(last) or len(live) < len(first) + len(last) + len(pieces) - 1:
        return False
    pos, end = len(first), len(live) - len(last)
    for piece in pieces[1:-1]:
        found = live.find(piece, pos + 1, end) if piece else pos + 1
        if found < 0:
            return False
        pos = found + len(piece)
    return end >= pos + 1


def _boundary(ctype: str, body: bytes) -> bytes | None:
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if m:
        return m.group(1).encode("latin-1", "replace")
    first = body.split(b"\r\n", 1)[0]
    if first.startswith(b"--") and 2 < len(first) <= 72 and b" " not in first:
        return first[2:]
    return None
