"""``spoolproxy export CASSETTE --format vcrpy|spoolproxy|otel [-o OUT]``: rewrite a cassette.

* ``--format vcrpy`` writes vcrpy's plain layout (string bodies, no ``parsed_body``, no
  spoolproxy extensions, interactions without a response dropped) that stock vcrpy and
  pytest-recording load without spoolproxy's serializer.  Bodies stored in side files are
  inlined so the result stands alone.
* ``--format spoolproxy`` normalises any cassette spoolproxy reads (plain vcrpy,
  pytest-recording, pydantic-ai's ``parsed_body``) into format v1; side files are copied
  next to OUT when it lives elsewhere.
* ``--format otel`` writes the run as OpenTelemetry GenAI spans in OTLP JSON (a root
  ``invoke_agent`` span, one span per model call and per tool call, see
  :mod:`spoolproxy.interop.otel_export`); ``--capture-content`` adds the messages, tool
  arguments and results, which ``spoolproxy import`` needs to read the run back.

All apply redaction (defaults plus ``[redact]`` in spoolproxy.toml) before writing.
OUT ``-`` (the default) writes to stdout; the file is written atomically otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from ..cassettes.model import Cassette
from ..cassettes.redact import Redactor
from ..cassettes.storage import dumps, load, read_body, save
from ..config import section
from ..errors import CassetteError, UsageError


def inline_side_bodies(cas: Cassette) -> Cassette:
    """A copy of *cas* whose side-file bodies are read into the YAML (elided bodies stay
    elided).  Raises CassetteError when a side file is missing or corrupt."""
    items = []
    for it in cas.interactions:
        resp = it.response
        if resp is not None and resp.body_ref is not None and resp.body_ref.file:
            body = read_body(cas, resp)
            chunks = resp.chunks if resp.chunks and sum(c.size for c in resp.chunks) == len(body) else None
            it = it.model_copy(update={"response": resp.model_copy(update={"body": body, "body_ref": None, "chunks": chunks})})
        items.append(it)
    return cas.model_copy(update={"interactions": items})


def copy_side_files(cas: Cassette, out: Path) -> None:
    """Copy the side body files of *cas* next to *out* (same relative names)."""
    if cas.path is None or cas.path.parent.resolve() == out.parent.resolve():
        return
    for it in cas.interactions:
        ref = it.response.body_ref if it.response is not None else None
        if ref is not None and ref.file:
            src, dst = cas.path.parent / ref.file, out.parent / ref.file
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
            except OSError as exc:
                raise CassetteError(src, f"cannot copy side body file to {dst}: {exc.strerror}") from None


@click.command("export")
@click.argument("cassette", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["vcrpy", "spoolproxy", "otel"]), default="vcrpy", show_default=True,
              help="vcrpy: plain vcrpy layout; spoolproxy: normalise into format v1; "
              "otel: OpenTelemetry GenAI spans as OTLP JSON.")
@click.option("--capture-content", is_flag=True,
              help="otel: include messages, tool arguments and tool results (gen_ai.input.messages ...).")
@click.option("-o", "--output", "out", default="-", show_default=True, metavar="OUT",
              help="Output file (.yaml, or .json for JSON; OTLP is always JSON); '-' for stdout.")
def command(cassette: Path, fmt: str, capture_content: bool, out: str) -> None:
    """Write CASSETTE in another layout, with redaction applied."""
    if capture_content and fmt != "otel":
        raise UsageError("--capture-content applies to --format otel only")
    cas = load(cassette)
    red = Redactor.from_config(section("redact"))
    red.learn_env(os.environ)  # this shell's *_API_KEY/*_TOKEN/*_SECRET values, wherever they appear
    if fmt == "otel":
        _export_otel(red.cassette(inline_side_bodies(cas)), capture_content, out)
        return
    plain = fmt == "vcrpy"
    if plain:
        cas = inline_side_bodies(cas)
    cas = red.cassette(cas)
    if out == "-":
        sys.stdout.write(dumps(cas, plain=plain))
        return
    target = Path(out)
    if not plain:
        copy_side_files(cas, target)
    save(cas, target, plain=plain)
    kept = [i for i in cas.interactions if i.response is not None] if plain else cas.interactions
    note = ""
    if len(kept) != len(cas.interactions):
        n = len(cas.interactions) - len(kept)
        note = f"; left out {n} without a response (connection errors), which vcrpy cannot represent"
    click.echo(f"spoolproxy export: wrote {len(kept)} interactions to {target} ({fmt} layout){note}", err=True)


def _export_otel(cas: Cassette, capture_content: bool, out: str) -> None:
    """Write ``cas`` (redacted) as OTLP JSON to ``out`` ('-': stdout)."""
    import json

    from ..cassettes.storage import atomic_write
    from ..detectors import load_detect_config
    from ..interop.otel_export import export_otlp

    doc = export_otlp(cas, capture_content=capture_content, config=load_detect_config())
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if out == "-":
        sys.stdout.write(text)
        return
    target = Path(out)
    atomic_write(target, text)
    n = len(doc["resourceSpans"][0]["scopeSpans"][0]["spans"])
    click.echo(f"spoolproxy export: wrote {n} spans of 1 trace to {target} (OTLP JSON"
               f"{', with message content' if capture_content else ''})", err=True)
