"""The planted-secret agent: puts every secret in every place an HTTP client can.

Reads ``{name: value}`` from the JSON file named by ``PLANTED_SECRETS_FILE`` and talks to
the echo upstream at ``PLANTED_UPSTREAM`` (``http://127.0.0.1:PORT``) through the proxy the
environment names.  Per secret, three requests:

1. ``POST /v1/items/<secret, URL-encoded>/detail?api_key=<secret>&note=<secret>`` with
   ``X-Api-Key: <secret>`` (a credential header), ``X-Note: <secret>`` (an ordinary one) and a
   JSON body holding it at depth under ``token``/``secret``/``api_key``/``note``, inside JSON held
   in a string (``arguments``) and in a URL's userinfo;
2. ``POST /v1/form`` with a form body (``password=...&note=...``); the upstream answers with a
   big chunked echo;
3. ``GET`` with the secret as the URL's userinfo password (the client sends it as Basic auth).

Every response echoes the request.  At the end it prints every secret to stdout and stderr
(``PLANTED_SERVICE_TOKEN`` too, which it read from its environment); its lines start with
``agent: `` so a test can tell them from spoolproxy's own.  With
``PLANTED_JOURNAL=<cassette>`` and ``PLANTED_JOURNAL_COPY=<file>`` it first copies the
recording's journal (as it is on disk mid-run).  With ``PLANTED_MODE=replay`` it also sends
one changed request (a miss, so reports carry a diff) and exits 1.
"""

import json
import os
import shutil
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx

secrets = json.loads(Path(os.environ["PLANTED_SECRETS_FILE"]).read_text())
secrets["env-only-token"] = os.environ["PLANTED_SERVICE_TOKEN"]
up = os.environ["PLANTED_UPSTREAM"]
replay = os.environ.get("PLANTED_MODE") == "replay"


def json_body(value: str) -> dict:
    return {"model": "m", "config": {"nested": [{"auth": {"token": value, "secret": value, "api_key": value}},
                                                {"note": value}]},
            "arguments": json.dumps({"password": value, "note": value}),
            "dsn": f"https://svc:{quote(value, safe='')}@api.internal/v1"}


with httpx.Client(timeout=30) as client:
    for name, value in secrets.items():
        host = up.split("//", 1)[1]
        try:
            client.post(f"{up}/v1/items/{quote(value, safe='')}/detail",
                        params={"api_key": value, "note": value},
                        headers={"X-Api-Key": value, "X-Note": value}, json=json_body(value))
            client.post(f"{up}/v1/form", content=urlencode({"password": value, "note": value}),
                        headers={"content-type": "application/x-www-form-urlencoded"})
            client.get(f"http://svc:{quote(value, safe='')}@{host}/v1/userinfo")
        except httpx.HTTPError as exc:
            print(f"agent: request failed: {type(exc).__name__}", file=sys.stderr)
    if replay:
        value = secrets["password"]
        body = json_body(value) | {"changed": list(secrets.values())}
        try:
            client.post(f"{up}/v1/items/{quote(value, safe='')}/detail", params={"api_key": value, "note": value},
                        headers={"X-Api-Key": value, "X-Note": value}, json=body)
        except httpx.HTTPError as exc:
            print(f"agent: changed request failed: {type(exc).__name__}", file=sys.stderr)

if os.environ.get("PLANTED_JOURNAL_COPY"):
    cassette = Path(os.environ["PLANTED_JOURNAL"])
    shutil.copyfile(cassette.with_name(f".{cassette.name}.spooljournal"), os.environ["PLANTED_JOURNAL_COPY"])

everything = " ".join(secrets.values())
for value in secrets.values():
    print(f"agent: using {value}")
print(f"agent: secrets: {everything}", file=sys.stderr)
print(f"agent: all: {everything}", flush=True)
sys.exit(1 if replay else 0)
