"""What counts as a secret: the rules :class:`~.redact.Redactor` applies and ``spoolproxy scan`` checks.

Every rule says where its shape comes from (``docs/recording.md`` lists them for users):

* :data:`SECRET_HEADERS`, :data:`SECRET_QUERY` and :data:`SECRET_NAME_RE`: header and query
  parameter *names* whose value is a credential;
* :data:`TOKEN_RULES`: key-shaped strings, matched only as **whole tokens** (see
  :func:`standalone`), so base64/base64url media (an inline video, a PDF) never loses bytes
  to a run of characters that merely looks like a key;
* :data:`URL_RULES`: credentials inside URLs (userinfo, DSNs, webhook URLs whose path is
  the secret), all starting with the literal ``://``;
* :data:`FIELD_RULES`: JSON and form fields, and connection-string keywords, whose value is a
  secret, also inside JSON held in a JSON string (escaped quotes).

Rules sharing a literal prefix are compiled into one regex (:func:`compile_rules`), so a
body is scanned once per prefix, and every scan starts with a literal (or, for field names,
a trie: :func:`alternation`), which keeps a 100 KB body at about 1 ms.  A rule's secret is
its ``s`` group, or the whole match without one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    "x-sentry-auth",
)
SECRET_QUERY = ("key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "sig", "signature",
                "sentry_key", "password", "passwd")

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

#: environment variables of the recorded program whose value is a known secret from the
#: start (``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``STRIPE_SECRET``, ``AWS_SECRET_ACCESS_KEY``...)
ENV_SECRET_RE = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|SECRET_?KEY|SECRET_ACCESS_KEY|PASSWORD|PASSWD|PAT)$", re.I)

#: values that stand in for a key but are none (local servers, docs); never learned as a
#: secret, so the word is not replaced all over a run
NOT_SECRETS = frozenset({
    "ollama", "lm-studio", "lmstudio", "not-needed", "notneeded", "dummy", "placeholder", "undefined", "null",
    "none", "test", "testing", "password", "passwd", "secret", "token", "apikey", "api_key", "api-key",
    "changeme", "example", "sk-no-key-required", "empty", "fake", "fake-key", "unused", "nokey", "no-key",
    "bearer", "basic", "true", "false",
})


@dataclass(frozen=True)
class Rule:
    """One secret shape: ``kind`` (the placeholder's middle part), ``prefix`` (the literal
    every match starts with; rules sharing it are scanned in one pass), ``regex`` (what
    follows the prefix, bytes syntax; the named group ``s`` is the secret, else the whole
    match), ``token`` (the match must stand on its own, :func:`standalone`) and ``source``
    (where the shape is documented)."""

    kind: str
    prefix: str
    regex: str
    source: str
    token: bool = False

    @property
    def pattern(self) -> str:
        """The whole regex (prefix included)."""
        return re.escape(self.prefix) + self.regex


def alternation(words) -> str:
    """A regex matching any of ``words``, as a trie (``a(?:pi_key|ccess_token)``), which
    fails after one or two characters where a flat ``a|b|c`` alternation tries every word."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 and "" not in node else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


#: the token's own characters may not follow it (a longer run is not this key)
_END = r"(?![A-Za-z0-9_\-])"

TOKEN_RULES: tuple[Rule, ...] = (
    Rule("anthropic-key", "sk", r"-ant-[A-Za-z0-9_\-]{20,}" + _END, "Anthropic API keys (sk-ant-api03-, sk-ant-admin01-)", True),
    Rule("openai-key", "sk", r"-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}" + _END,
         "OpenAI API keys (sk-, sk-proj-, sk-svcacct-, sk-admin-)", True),
    Rule("stripe-key", "sk", r"_(?:live|test)_[A-Za-z0-9]{20,}" + _END, "Stripe secret keys (sk_live_, sk_test_)", True),
    Rule("stripe-key", "rk_", r"(?:live|test)_[A-Za-z0-9]{20,}" + _END, "Stripe restricted keys (rk_live_)", True),
    Rule("groq-key", "gsk_", r"[A-Za-z0-9]{20,}" + _END, "Groq API keys (gsk_)", True),
    Rule("github-token", "gh", r"[pousr]_[A-Za-z0-9]{30,}" + _END, "GitHub token formats (ghp_, gho_, ghu_, ghs_, ghr_)", True),
    Rule("github-token", "github_pat_", r"[A-Za-z0-9_]{22,}" + _END, "GitHub fine-grained personal access tokens", True),
    Rule("gitlab-token", "glpat-", r"[A-Za-z0-9_\-]{20,}" + _END, "GitLab personal access tokens (glpat-)", True),
    Rule("google-key", "AIza", r"[0-9A-Za-z_\-]{30,}" + _END, "Google Cloud API keys (AIza)", True),
    Rule("aws-key", "AKIA", r"[0-9A-Z]{16}" + _END, "AWS access key IDs (AKIA)", True),
    Rule("aws-key", "ASIA", r"[0-9A-Z]{16}" + _END, "AWS temporary access key IDs (ASIA)", True),
    Rule("xai-key", "xai-", r"[A-Za-z0-9]{20,}" + _END, "xAI API keys (xai-)", True),
    Rule("slack-token", "xox", r"[abposr]-[A-Za-z0-9\-]{10,}" + _END, "Slack tokens (xoxb-, xoxp-, xoxa- ...)", True),
    Rule("slack-token", "xapp-", r"[A-Za-z0-9\-]{10,}" + _END, "Slack app-level tokens (xapp-)", True),
    Rule("hf-token", "hf_", r"[A-Za-z0-9]{30,}" + _END, "Hugging Face user access tokens (hf_)", True),
    Rule("jwt", "eyJ", r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}" + _END,
         "JSON Web Tokens (RFC 7519 compact form; base64url of '{\"' starts header and payload)", True),
    Rule("telegram-token", "bot", r"(?P<s>[0-9]{8,10}:[A-Za-z0-9_\-]{35})" + _END, "Telegram Bot API tokens in bot URLs"),
    Rule("private-key", "-----BEGIN ", r"(?:[A-Z]+ )*PRIVATE KEY-----(?s:.){16,20000}?-----END (?:[A-Z]+ )*PRIVATE KEY-----",
         "PEM private keys (RFC 7468)"),
)

_NOT_URL = r"\s\"'<>\\"  # characters that end a URL in text (and the backslash of a JSON escape)

URL_RULES: tuple[Rule, ...] = (
    Rule("sentry-dsn", "://", r"(?P<s>[0-9a-f]{32}(?::[0-9a-f]{32})?)@",
         "Sentry DSNs (PROTOCOL://PUBLIC_KEY[:SECRET_KEY]@HOST/PROJECT_ID)"),
    Rule("url-password", "://", r"[^" + _NOT_URL + r"/?#@:]*:(?P<s>[^" + _NOT_URL + r"/?#@]{2,})@",
         "URL userinfo user:password@ (RFC 3986 section 3.2.1): postgres://, redis://, mongodb+srv://, amqp:// DSNs"),
    Rule("slack-webhook", "://", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/\-]{16,})",
         "Slack incoming webhooks and workflow triggers (hooks.slack.com/services/T.../B.../...)"),
    Rule("discord-webhook", "://",
         r"(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api(?:/v[0-9]+)?/webhooks/(?P<s>[0-9]{5,}/[A-Za-z0-9_\-]{20,})",
         "Discord webhooks (/api/webhooks/{webhook.id}/{webhook.token})"),
    Rule("teams-webhook", "://", r"[A-Za-z0-9\-]+\.webhook\.office\.com/webhookb?2?/(?P<s>[^" + _NOT_URL + r"?#]{20,})",
         "Microsoft Teams incoming webhooks (*.webhook.office.com/webhookb2/...)"),
    Rule("teams-webhook", "://", r"outlook\.office(?:365)?\.com/webhook/(?P<s>[^" + _NOT_URL + r"?#]{20,})",
         "Microsoft Teams legacy incoming webhooks (outlook.office.com/webhook/...)"),
    Rule("zapier-webhook", "://", r"hooks\.zapier\.com/hooks/catch/(?P<s>[0-9]+/[A-Za-z0-9]+)",
         "Zapier catch hooks (hooks.zapier.com/hooks/catch/ACCOUNT/HOOK/)"),
    Rule("make-webhook", "://", r"hook\.(?:[a-z0-9]+\.)?(?:make|integromat)\.com/(?P<s>[A-Za-z0-9]{16,})",
         "Make (Integromat) custom webhooks (hook.ZONE.make.com/TOKEN)"),
    Rule("ifttt-webhook", "://",
         r"maker\.ifttt\.com/(?:trigger/[^/" + _NOT_URL + r"]+/(?:json/)?with/key|use)/(?P<s>[A-Za-z0-9_\-]{10,})",
         "IFTTT Webhooks keys (maker.ifttt.com/trigger/EVENT/with/key/KEY)"),
)

#: JSON keys and form fields whose string value is a secret, anywhere in a body (narrower
#: than SECRET_NAME_RE: bare ``signature``/``key`` are data in LLM traffic, e.g. Anthropic
#: thinking signatures, and a bare ``token`` counts only with a credential-like value)
FIELD_NAMES = (
    "password", "passwd", "Password", "client_secret", "clientSecret", "secret_key", "secretKey", "secret",
    "api_key", "apiKey", "API_KEY", "api-key", "x-api-key", "access_token", "accessToken", "refresh_token",
    "refreshToken", "id_token", "idToken", "auth_token", "authToken", "session_token", "sessionToken", "bot_token",
    "botToken", "bearer_token", "signing_secret", "webhook_secret", "aws_secret_access_key", "aws_session_token",
    "private_key", "privateKey", "authorization", "Authorization",
)
_NAMES = alternation(FIELD_NAMES)
_QUERY = alternation((*FIELD_NAMES, "sig", "signature", "sentry_key", "X-Amz-Signature", "X-Amz-Security-Token",
                      "X-Goog-Signature"))
_ESCAPED_NAMES = alternation(FIELD_NAMES)
#: a JSON string value (escapes allowed) / one level down (JSON inside a JSON string)
_JSON_VALUE = r'"\s*:\s*"(?P<s>(?:[^"\\]|\\.){4,})"'
_ESCAPED_VALUE = r'\\+"\s*:\s*\\+"(?P<s>[^"\\]{4,})\\+"'
_FORM_VALUE = r"=(?P<s>[^&#\s\"'<>\\]{4,})"
_CONN_VALUE = r"=(?P<s>[^\s;&\"'<>\\]{3,})"  # no spaces: 'password = f(x)' in code is not a connection string

FIELD_RULES: tuple[Rule, ...] = (
    Rule("field", '"', _NAMES + _JSON_VALUE,
         "secret JSON fields: OAuth 2.0 (RFC 6749) client_secret, access_token, refresh_token; OpenID Connect "
         "id_token; AWS credentials; password, secret, api_key"),
    Rule("field", '"token"', r'\s*:\s*"(?P<s>[A-Za-z0-9._~+/=\-]{16,})"(?!\s*,\s*"(?:logprob|bytes)")',
         "a bare JSON token field with a credential-like value (16+ characters, no spaces; not logprobs)"),
    Rule("field", '\\"', _ESCAPED_NAMES + _ESCAPED_VALUE,
         "the same fields in JSON held inside a JSON string (tool-call arguments, echoed payloads)"),
    Rule("field", '\\"', r'token\\+"\s*:\s*\\+"(?P<s>[A-Za-z0-9._~+/=\-]{16,})\\+"',
         "a credential-like bare token field inside a JSON string"),
    Rule("field", "?", _QUERY + _FORM_VALUE, "query parameters with those names in a URL, SAS/Power Automate sig"),
    Rule("field", "&", _QUERY + _FORM_VALUE, "form fields with those names (application/x-www-form-urlencoded)"),
    Rule("field", "", r"\A" + _NAMES + _FORM_VALUE, "a form body's first field"),
    Rule("field", "assword", _CONN_VALUE, "connection strings: libpq password=, ADO.NET Password="),
    Rule("field", "ASSWORD", _CONN_VALUE, "connection strings and env files: PASSWORD="),
    Rule("sentry-dsn", "sentry_key=", r"(?P<s>[0-9a-f]{32})", "Sentry auth header / query (sentry_key=)"),
)

ALL_RULES: tuple[Rule, ...] = (*TOKEN_RULES, *URL_RULES, *FIELD_RULES)


@dataclass(frozen=True)
class CompiledRules:
    """Rules sharing one literal prefix, compiled into one regex ``prefix(?:(?P<r0>...)|...)``:
    ``pattern`` and the rules in alternative order with their secret group names."""

    pattern: re.Pattern[bytes]
    rules: tuple[tuple[str, Rule, str | None], ...]

    def resolve(self, m: re.Match[bytes]) -> tuple[Rule, int, int]:
        """(rule, start, end) of the secret in match ``m``."""
        for group, rule, sgroup in self.rules:
            if m.start(group) >= 0:
                if sgroup is not None and m.start(sgroup) >= 0:
                    return rule, m.start(sgroup), m.end(sgroup)
                return rule, m.start(), m.end()
        raise AssertionError("a match without an alternative")  # pragma: no cover


def compile_rules(rules: tuple[Rule, ...]) -> list[CompiledRules]:
    """``rules`` grouped by prefix (first appearance order), one regex per group."""
    groups: dict[str, list[tuple[int, Rule]]] = {}
    for i, rule in enumerate(rules):
        groups.setdefault(rule.prefix, []).append((i, rule))
    out = []
    for prefix, members in groups.items():
        alts, table = [], []
        for i, rule in members:
            has_s = "(?P<s>" in rule.regex
            alts.append(f"(?P<r{i}>" + rule.regex.replace("(?P<s>", f"(?P<s{i}>") + ")")
            table.append((f"r{i}", rule, f"s{i}" if has_s else None))
        head = re.escape(prefix)
        if not prefix and all(r.regex.startswith("\\A") for _, r in members):
            # anchored at the top level, so a search tries position 0 only
            head, alts = "\\A", [a.replace("\\A", "", 1) for a in alts]
        out.append(CompiledRules(re.compile((head + "(?:" + "|".join(alts) + ")").encode()), tuple(table)))
    return out


_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HEX = frozenset(b"0123456789ABCDEFabcdef")
_URLSAFE_ONLY = frozenset(b"-_")


def standalone(data: bytes, start: int, end: int) -> bool:
    """True when ``data[start:end]`` stands on its own as a token, with boundaries that
    base64 and base64url text cannot fake.

    Standard base64 uses ``A-Za-z0-9+/`` (padding ``=`` only at the end), base64url
    ``A-Za-z0-9-_``.  So the character before the token must not be a letter, digit, ``-``
    or ``_`` (unless it ends an escape: ``%3D`` URL-encoding, ``\\n`` JSON), and ``+``/``/``
    next to the token count as boundaries only when the token holds ``-`` or ``_`` (then it
    cannot lie inside standard base64, and base64url has no ``+``/``/``).  ``=`` may precede
    a token (``KEY=sk-...``) but not follow it (base64 padding).
    """
    urlsafe = not _URLSAFE_ONLY.isdisjoint(memoryview(data)[start:min(end, start + 256)].tobytes())
    if start > 0:
        c = data[start - 1]
        if c in _ALNUM:
            escaped = (start >= 2 and data[start - 2] == 0x5C) or (
                start >= 3 and data[start - 3] == 0x25 and data[start - 2] in _HEX and c in _HEX)
            if not escaped:
                return False
        elif c in (0x2D, 0x5F):  # - _
            return False
        elif c in (0x2B, 0x2F) and not urlsafe:  # + /
            if not (c == 0x2F and start >= 2 and data[start - 2] == 0x5C):  # JSON "\/"
                return False
    if end < len(data):
        d = data[end]
        if d == 0x3D:  # =
            return False
        if d in (0x2B, 0x2F) and not urlsafe:
            return False
    return True
