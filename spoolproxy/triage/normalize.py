"""Failure text: a failing run's root cause written so that the same cause reads the same.

A run's **root finding** is its first error-level finding (by interaction), where findings
that only follow from another (``no_final_answer`` after a failed call, ``retry_storm`` of a
failing request) come after the rest.  Its message, plus the provider's error code when the
failed model call carried one, is normalised by :func:`normalize`:

1. secrets and masked keys (``REDACTED-openai-key-1a2b3c4d``, ``sk-...*****2345``) -> ``<secret>``
2. URLs -> ``<url>``; the run's LLM hosts with their paths -> ``<llm-endpoint>``; other
   ``host/path`` -> ``host/<path>``; file paths -> ``<path>``
3. quoted literals (``'...'``, ``"..."``, `````...`````) -> ``<v>``
4. provider phrasings of one cause -> one canonical phrase (:data:`CANONICAL`): OpenAI's
   "Incorrect API key provided", Anthropic's "invalid x-api-key" and Gemini's "API key not
   valid" all become ``invalid api key``
5. the run's model names and known model families -> ``<model>``; provider names
   (OpenAI, Anthropic, Gemini, ...) -> ``<provider>``
6. ids (UUIDs, hex, ``ORD-1002``, ``req_abc123``) -> ``<id>``; HTTP statuses stay
   (``http-401``); other numbers -> ``<n>``; lower case, single spaces.

The result is a :class:`FailureText`: the normalised document that clustering compares,
the root finding's kind and the canonical cause when one was recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..detectors.models import SEVERITY_RANK, Finding, Report, Transcript

#: findings that follow from another one; they are the root only when nothing else failed
CONSEQUENCES: dict[str, int] = {"retry_storm": 1, "no_final_answer": 2}

#: (regex, canonical phrase), tried in order on the lower-cased text; the first phrase
#: matched is the run's cause.  Extend with care: each entry merges provider wordings of
#: one root cause, never two causes.
CANONICAL: list[tuple[str, str]] = [
    (r"(?:the )?(?:requested )?model <v> does not exist(?: or you do not have access to it)?|\bmodel_not_found\b"
     r"|models/\S+ is not found[^.]*|(?:the )?provided model identifier is invalid|\bunknown model\b"
     r"|\bmodel <v> (?:is )?not found|\bnot_found_error\b.*\bmodel\b|\bmodel\b.*\bnot_found_error\b"
     r"|\bmodel: <model>(?=\s*$|[.;,])", "model not found"),
    (r"incorrect api key(?: provided)?|invalid[ _-]?(?:x-)?api[ _-]?key|api[ _-]?key (?:is )?(?:not valid|invalid|expired)"
     r"|\bauthentication_error\b|\bapi_key_invalid\b|invalid (?:authentication|bearer token|credentials)"
     r"|\bunauthenticated\b|authentication (?:failed|required)|\bunauthorized\b", "invalid api key"),
    (r"\binsufficient_quota\b|exceeded your current quota|quota (?:exceeded|exhausted)|credit balance is too low",
     "quota exceeded"),
    (r"rate[ _-]?limit(?:ed|s)?(?:[ _](?:reached|exceeded|error))?|too many requests|resource[ _]exhausted",
     "rate limited"),
    (r"\boverloaded(?:_error)?\b|service unavailable|server is busy|\bbad gateway\b|upstream connect error",
     "provider overloaded"),
    (r"context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|input is too long"
     r"|exceeds the context window", "context too long"),
    (r"token limit reached|(?:output )?cut at the token limit|max_tokens reached", "output token limit"),
    (r"\bpermission[ _]denied\b|\bpermission_error\b|\bforbidden\b", "permission denied"),
]
_CANONICAL = [(re.compile(rx, re.I | re.M), phrase) for rx, phrase in CANONICAL]

#: a status alone names the cause when the wording was not recognised
STATUS_CAUSE = {401: "invalid api key", 403: "permission denied", 429: "rate limited", 502: "provider overloaded",
                503: "provider overloaded", 529: "provider overloaded"}

PROVIDERS = ("azure openai", "azure", "openai", "anthropic", "claude", "google ai", "google", "gemini", "vertex ai",
             "vertex", "amazon bedrock", "bedrock", "aws", "groq", "openrouter", "mistral ai", "mistral", "cohere",
             "deepseek", "together ai", "together", "ollama", "xai", "grok", "perplexity", "fireworks")
_PROVIDER_RE = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in PROVIDERS) + r")\b", re.I)
_MODEL_RE = re.compile(r"\b(?:gpt-[\w.:-]+|o[1-9](?:-(?:mini|pro|preview))?\b|claude-[\w.:-]+|gemini-[\w.:-]+"
                       r"|llama[\w.:-]*|mistral-[\w.:-]+|mixtral[\w.:-]*|command-[\w.:-]+|gemma[\w.:-]*"
                       r"|qwen[\w.:-]*|deepseek-[\w.:-]+|text-embedding-[\w.:-]+)", re.I)
_SECRET_RE = re.compile(r"REDACTED-[a-z0-9-]+-[0-9a-f]{8}|\S*\*{3,}\S*?(?=[\s.,;)]|$)")
_URL_RE = re.compile(r"\b(?:https?|wss?|file)://[^\s'\"<>)]*[^\s'\"<>).,;:]")
_HOST_PATH_RE = re.compile(r"\b((?:[a-z0-9-]+\.)+[a-z]{2,}|localhost|\d+\.\d+\.\d+\.\d+)(?::\d+)?(/[^\s'\"<>)]*)",
                           re.I)
_FILE_RE = re.compile(r"(?<![\w<])(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}/?")
_QUOTED = [re.compile(r'"[^"\n]{0,300}"'), re.compile(r"`[^`\n]{0,300}`"),
           re.compile(r"(?<![\w])'[^'\n]{0,300}'(?![\w])")]
_STATUS_RE = re.compile(r"\b(got|status|http|code|returned|->)\s+([1-5]\d\d)\b", re.I)
_UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_ID_RE = re.compile(r"\b(?:[0-9a-f]{8,}|[a-z]+[-_][a-z0-9]*\d[a-z0-9_-]*|(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{6,})\b", re.I)
_NUM_RE = re.compile(r"(?<![\w<-])[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")
_SPACE_RE = re.compile(r"\s+")


@dataclass
class FailureText:
    """A failing run's root cause, normalised.

    ``document``: the text clustering compares (kind, normalised message, provider code);
    ``kind``: the root finding's kind; ``cause``: the canonical phrase recognised
    (``"invalid api key"``) or None; ``message``: the root finding's original message;
    ``kinds``: every error-level kind of the run, root first; ``provider``: the provider of
    the failed model call, when there is one.
    """

    document: str
    kind: str
    cause: str | None = None
    message: str = ""
    kinds: list[str] = field(default_factory=list)
    provider: str | None = None


def canonical(text: str) -> tuple[str, str | None]:
    """``text`` with provider wordings replaced by canonical phrases, and the first phrase
    found (the cause) or None."""
    cause: str | None = None
    for rx, phrase in _CANONICAL:
        text, n = rx.subn(phrase, text)
        if n and cause is None:
            cause = phrase
    return text, cause


def cause_of(normalized: str) -> str | None:
    """The first canonical phrase (in :data:`CANONICAL` order) found in normalised text."""
    return next((phrase for _rx, phrase in _CANONICAL if phrase in normalized), None)


def normalize(text: str, *, hosts: tuple[str, ...] = (), models: tuple[str, ...] = ()) -> str:
    """The normalised form of one failure message (see the module docstring).

    ``hosts``: the run's LLM hosts (replaced with their paths by ``<llm-endpoint>``);
    ``models``: the run's model names (replaced by ``<model>``).  Pure; never raises.
    """
    t = _SECRET_RE.sub("<secret>", text)
    t = _URL_RE.sub("<url>", t)
    for h in sorted({h for h in hosts if h}, key=len, reverse=True):
        t = re.sub(re.escape(h) + r"(?::\d+)?(?:/[^\s'\"<>)]*)?", "<llm-endpoint>", t, flags=re.I)
    t = _HOST_PATH_RE.sub(lambda m: m.group(1) + "/<path>", t)
    t = _FILE_RE.sub("<path>", t)
    for m in sorted({m for m in models if m and len(m) > 2}, key=len, reverse=True):
        t = re.sub(r"(?<![\w-])" + re.escape(m) + r"(?![\w-])", "<model>", t, flags=re.I)
    for rx in _QUOTED:
        t = rx.sub("<v>", t)
    t = t.lower()
    t, _ = canonical(t)
    t = _MODEL_RE.sub("<model>", t)
    t = _PROVIDER_RE.sub("<provider>", t)
    t = _STATUS_RE.sub(lambda m: f"{m.group(1)} http-{m.group(2)}", t)
    t = _UUID_RE.sub("<id>", t)
    t = _ID_RE.sub(lambda m: m.group(0) if m.group(0).startswith("http-") else "<id>", t)
    t = _NUM_RE.sub("<n>", t)
    return _SPACE_RE.sub(" ", t).strip()


def root_finding(report: Report) -> Finding | None:
    """The run's root finding: the first error-level finding by interaction, consequences
    (:data:`CONSEQUENCES`) last; None when the run has no error-level finding."""
    errors = [f for f in report.findings if SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["error"]]
    if not errors:
        return None
    return min(errors, key=lambda f: (CONSEQUENCES.get(f.kind, 0), f.interactions[0] if f.interactions else 1 << 30,
                                      f.kind))


def failure_text(report: Report, transcript: Transcript) -> FailureText | None:
    """The :class:`FailureText` of a failing run (None when it passes)."""
    root = root_finding(report)
    if root is None:
        return None
    hosts = tuple({s.host for s in transcript.steps if s.kind == "llm"})
    models = tuple({s.llm.model for s in transcript.steps if s.llm is not None and s.llm.model})
    code, provider, status = None, None, None
    for i in root.interactions or []:
        if 0 <= i < len(transcript.steps) and transcript.steps[i].llm is not None:
            step = transcript.steps[i]
            if step.llm.error or not step.ok:
                code, provider, status = step.llm.error_code, step.llm.provider, step.status
                break
    message = normalize(root.message, hosts=hosts, models=models)
    code_text = normalize(code.replace("_", " ") if code and code.isupper() else code, hosts=hosts, models=models) \
        if code else ""
    doc = f"{root.kind}: {message}" + (f" [{code_text}]" if code_text else "")
    cause = cause_of(f"{message}\n{code_text}")
    if cause is None and status in STATUS_CAUSE and root.kind == "http_error":
        cause = STATUS_CAUSE[status]
        doc += f" ({cause})"
    kinds = list(dict.fromkeys([root.kind, *(f.kind for f in report.findings
                                             if SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["error"])]))
    return FailureText(document=doc, kind=root.kind, cause=cause, message=root.message, kinds=kinds, provider=provider)
