"""Secret shapes for the planted-secret tests, built at run time from random characters
(no key-shaped literal sits in the repository).

:func:`build` returns ``{name: (value, secret)}``: ``value`` is what a client sends (a key,
a password, a whole webhook URL or DSN), ``secret`` the part that must never reach the disk
(the key itself, the password inside a DSN, the path of a webhook).  :func:`forms` lists the
ways a secret can be written (as is, JSON-escaped, URL-encoded), all of which count as a leak.
"""

from __future__ import annotations

import base64
import json
import random
import string
from urllib.parse import quote, quote_plus

ENV_ONLY = "PLANTED_SERVICE_TOKEN"  # a secret the program gets from its environment only


def _r(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def build(seed: int = 0) -> dict[str, tuple[str, str]]:
    """``{name: (value a client sends, the secret part)}`` for every planted shape."""
    rng = random.Random(seed)
    hexd = "0123456789abcdef"
    up = string.ascii_uppercase + string.digits
    pw_simple = _r(rng, 18)
    pw_symbols = _r(rng, 6) + "&!/+%\"" + _r(rng, 6) + " " + _r(rng, 4)  # needs escaping everywhere
    dsn_pw = _r(rng, 20)
    jwt = ".".join([_b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
                    _b64url(json.dumps({"sub": _r(rng, 12), "iat": 1767225600}).encode()),
                    _b64url(rng.randbytes(32))])
    slack_path = f"T{_r(rng, 9, up)}/B{_r(rng, 11, up)}/{_r(rng, 24)}"
    discord_path = f"{_r(rng, 18, string.digits)}/{_r(rng, 68, string.ascii_letters + string.digits + '_-')}"
    guid = lambda: "-".join(_r(rng, n, hexd) for n in (8, 4, 4, 4, 12))  # noqa: E731
    teams_path = f"{guid()}@{guid()}/IncomingWebhook/{_r(rng, 32, hexd)}/{guid()}"
    zapier_path = f"{_r(rng, 7, string.digits)}/{_r(rng, 7, string.ascii_lowercase + string.digits)}"
    sentry_key = _r(rng, 32, hexd)
    shapes = {
        "openai-key": "sk-proj-" + _r(rng, 48, string.ascii_letters + string.digits + "_-"),
        "anthropic-key": "sk-ant-api03-" + _r(rng, 90, string.ascii_letters + string.digits + "_-") + "AA",
        "github-token": "ghp_" + _r(rng, 36),
        "aws-key-id": "AKIA" + _r(rng, 16, up),
        "google-key": "AIza" + _r(rng, 35, string.ascii_letters + string.digits + "_-"),
        "slack-token": "xoxb-" + _r(rng, 12, string.digits) + "-" + _r(rng, 13, string.digits) + "-" + _r(rng, 24),
        "stripe-key": "sk_live_" + _r(rng, 32),
        "hf-token": "hf_" + _r(rng, 34),
        "jwt": jwt,
        "password": pw_simple,
        "password-symbols": pw_symbols,
        "env-only-token": _r(rng, 40),
    }
    out = {name: (v, v) for name, v in shapes.items()}
    out |= {
        "slack-webhook": (f"https://hooks.slack.com/services/{slack_path}", slack_path),
        "discord-webhook": (f"https://discord.com/api/webhooks/{discord_path}", discord_path),
        "teams-webhook": (f"https://contoso.webhook.office.com/webhookb2/{teams_path}", teams_path),
        "zapier-webhook": (f"https://hooks.zapier.com/hooks/catch/{zapier_path}/", zapier_path),
        "postgres-dsn": (f"postgres://app:{dsn_pw}@db.internal:5432/app", dsn_pw),
        "redis-dsn": (f"redis://:{dsn_pw[::-1]}@cache.internal:6379/0", dsn_pw[::-1]),
        "mongodb-srv-dsn": (f"mongodb+srv://svc:{dsn_pw[:10]}x{dsn_pw[10:]}@cluster0.ab1cd.mongodb.net/db",
                            f"{dsn_pw[:10]}x{dsn_pw[10:]}"),
        "sentry-dsn": (f"https://{sentry_key}@o123456.ingest.sentry.io/7890123", sentry_key),
    }
    return out


def forms(secret: str) -> set[str]:
    """The ways ``secret`` can be written down; each one found on disk is a leak."""
    once = json.dumps(secret)[1:-1]
    return {secret, once, json.dumps(once)[1:-1], quote(secret, safe=""), quote(secret), quote_plus(secret)}
