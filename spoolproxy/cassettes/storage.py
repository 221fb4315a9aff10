"""Reading and writing cassette files: YAML (libyaml when present) or JSON, atomic writes.

``load(path)`` -> :class:`Cassette`; ``save(cassette, path)`` writes atomically (temporary
file in the same directory, fsync, rename) so a crash never leaves half a cassette;
``iter_paths(paths)`` expands directories into their ``*.yaml``/``*.yml``/``*.json`` files.
All failures raise :class:`~spoolproxy.errors.CassetteError` naming the file and line.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import yaml

from ..errors import CassetteError, OutputError
from . import cache, yamlstream
from .format import DocumentReader, FlowList, FormatError, from_document, to_document
from .model import Cassette, Response

try:  # the C loader/dumper are several times faster
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

CASSETTE_SUFFIXES = (".yaml", ".yml", ".json")

#: files spoolproxy writes beside cassettes that are never cassettes themselves: verify's
#: ``<stem>.verify.json`` and ``verification.json``, the judge's ``<stem>.diagnosis.json`` and
#: ``<stem>.fix-N.yaml`` patch files, a suite's ``baseline.json``.  A directory walk
#: (:func:`iter_paths`, triage's runs) leaves them out without a warning.
SIDE_FILE = re.compile(r"\.(diagnosis|verify)\.json$|\.fix-\d+\.yaml$|^(baseline|verification)\.json$")


def is_side_file(path: str | Path) -> bool:
    """True for a file spoolproxy writes beside cassettes (see :data:`SIDE_FILE`)."""
    return SIDE_FILE.search(Path(path).name) is not None


class CassetteLoader(_Loader):
    """Safe loader plus the harmless Python tags old vcrpy cassettes carry (str, tuple)."""


CassetteLoader.add_constructor("tag:yaml.org,2002:python/str", lambda l, n: l.construct_scalar(n))
CassetteLoader.add_constructor("tag:yaml.org,2002:python/unicode", lambda l, n: l.construct_scalar(n))
CassetteLoader.add_constructor("tag:yaml.org,2002:python/tuple", lambda l, n: list(l.construct_sequence(n)))


class CassetteDumper(_Dumper):
    """Literal blocks for multi-line strings, flow style for chunk lists, keys unsorted."""


def _str(dumper: yaml.SafeDumper, s: str):
    if "\n" in s and len(s) > 1:
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|")
    return dumper.represent_str(s)


CassetteDumper.add_representer(str, _str)
CassetteDumper.add_representer(
    FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)


def parse_text(text: str | bytes, path: str | Path = "<cassette>") -> Cassette:
    """Parse cassette text (YAML, or JSON for ``*.json``) into a Cassette.

    Bytes of a large file are looked up in the parsed-document cache (:mod:`.cache`) first.
    YAML is read one interaction at a time (:mod:`.yamlstream`) when its layout allows.

    Raises CassetteError with the file and, for YAML syntax errors, the line number.
    """
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if not raw:
        raise CassetteError(path, "not a cassette: the file is empty (0 bytes)")
    entry = cache._entry(raw) if isinstance(text, bytes) else None
    return _read(io.BytesIO(raw), path, entry, whole=lambda: raw)


def _read(fh: BinaryIO, path: str | Path, entry: Path | None, whole) -> Cassette:
    """The cassette in ``fh``: from the cache ``entry`` when it holds one, else parsed (and
    written to ``entry``).  ``whole()`` gives all the bytes, for the whole-document parse."""
    cached = cache.read_entry(entry)
    if cached is not None:
        try:
            return _build(cached, path)
        except (ValueError, CassetteError):
            pass  # a damaged entry: read the YAML
    if str(path).endswith(".json"):
        doc = _parse_whole(whole(), path, json_text=True)
        cache.put_entry(entry, doc)
        return _from_document(doc, path)
    writer = cache.EntryWriter(entry)
    try:
        cas = _build(_yaml_pieces(fh, path, writer), path)
    except yamlstream.NotStreamable:
        writer.abort()
        doc = _parse_whole(whole(), path, json_text=False)
        cas = _from_document(doc, path)
        cache.put_entry(entry, doc)
        return cas
    except BaseException:
        writer.abort()
        raise
    writer.commit()
    return cas


def _from_document(doc, path) -> Cassette:
    try:
        return from_document(doc)
    except FormatError as exc:
        raise CassetteError(path, str(exc)) from None


def _build(pieces, path) -> Cassette:
    """A cassette from ``("top", (key, value))`` / ``("item", item)`` pieces in file order."""
    reader = DocumentReader()
    count = 0
    try:
        for kind, value in pieces:
            if kind == "item":
                reader.item(value)
                count += 1
            elif value[0] == "interactions":
                reader.top("interactions", None)
                reader.check_version()
                items = value[1] or []
                if not isinstance(items, list):
                    raise FormatError("'interactions' must be a list")
                for item in items:
                    reader.item(item)
                    count += 1
            else:
                reader.top(*value)
        if "interactions" not in reader.doc:
            raise FormatError("not a cassette: no 'interactions' key")
        reader.check_declared(count)
        return reader.finish()
    except FormatError as exc:
        raise CassetteError(path, str(exc)) from None


def _yaml_pieces(fh: BinaryIO, path, writer: cache.EntryWriter):
    """Pieces of a YAML cassette, each segment parsed on its own (see :mod:`.yamlstream`);
    every piece also goes to the cache ``writer``.  Raises NotStreamable (before anything
    was given) or CassetteError."""
    started = False
    for seg in yamlstream.segments(fh):
        if seg.kind == "interactions":
            started = True
            writer.top("interactions", None)
            yield "top", ("interactions", None)
            continue
        value = _parse_segment(seg, path)
        if seg.kind == "item":
            if not isinstance(value, list) or len(value) != 1:
                raise yamlstream.NotStreamable("an interaction that is not one list item")
            writer.item(value[0])
            yield "item", value[0]
            continue
        if not isinstance(value, dict):
            raise yamlstream.NotStreamable("a top-level piece that is not a mapping")
        for key, v in value.items():
            if key == "interactions" and started:
                raise yamlstream.NotStreamable("two interactions keys")
            writer.top(key, v)
            yield "top", (key, v)


def _parse_segment(seg: yamlstream.Segment, path):
    try:
        text = seg.text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteError(
            path, f"not a text file (byte {seg.offset + exc.start} is not UTF-8), so not a YAML cassette") from None
    if "\x00" in text:
        raise CassetteError(path, "binary data, not a YAML cassette")
    try:
        return yaml.load(text, Loader=CassetteLoader)
    except yaml.composer.ComposerError as exc:
        if "alias" in str(getattr(exc, "problem", "")):
            raise yamlstream.NotStreamable("an alias to another piece") from None
        raise _yaml_error(exc, path, seg.line - 1) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path, seg.line - 1) from None


def _yaml_error(exc: yaml.YAMLError, path, first: int = 0) -> CassetteError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return CassetteError(path, f"invalid YAML: {problem}", line=first + mark.line + 1 if mark else None)


def _parse_whole(raw: bytes, path, *, json_text: bool):
    """The whole document (the layouts :mod:`.yamlstream` does not split, and JSON)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteError(path, f"not a text file (byte {exc.start} is not UTF-8), so not a YAML cassette") from None
    if "\x00" in text:
        raise CassetteError(path, "binary data, not a YAML cassette")
    try:
        if json_text:
            return json.loads(text)
        return yaml.load(text, Loader=CassetteLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except json.JSONDecodeError as exc:
        raise CassetteError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None


def load(path: str | Path) -> Cassette:
    """Load one cassette file, one interaction at a time (memory stays within a small
    multiple of the file's size).  Raises CassetteError (missing, unreadable, corrupt)."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        from .journal import journal_path

        if journal_path(p).exists():
            raise CassetteError(
                p, f"not written yet, but the journal of an interrupted recording is beside it: run 'spoolproxy recover {p}'"
            ) from None
        raise CassetteError(p, "no such cassette; check the path (record one with 'spoolproxy record')") from None
    except IsADirectoryError:
        raise CassetteError(p, "is a directory; pass a cassette file") from None
    except OSError as exc:
        raise CassetteError(p, f"cannot read: {exc.strerror}") from None
    try:
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0 and p.is_file():
                raise CassetteError(p, "not a cassette: the file is empty (0 bytes)")
            entry = cache.entry_for_file(fh, size)

            def whole() -> bytes:
                fh.seek(0)
                return fh.read()

            cas = _read(fh, p, entry, whole)
    except IsADirectoryError:
        raise CassetteError(p, "is a directory; pass a cassette file") from None
    except OSError as exc:
        raise CassetteError(p, f"cannot read: {exc.strerror}") from None
    cas.path = p
    return cas


def dumps(cas: Cassette, *, plain: bool = False) -> str:
    """The cassette as YAML text (see :func:`format.to_document`)."""
    return yaml.dump(
        to_document(cas, plain=plain),
        Dumper=CassetteDumper,
        sort_keys=False,
        allow_unicode=True,
        width=1_000_000,
        default_flow_style=False,
    )


def atomic_write(path: str | Path, data: bytes | str, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically (same-directory temp file, fsync, rename),
    creating its missing parent directories.

    A path that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO)
    is written through instead: renaming over it would replace the device itself.
    Raises :class:`~spoolproxy.errors.OutputError` (``cannot write PATH (reason); choose a
    writable path``) when it cannot be written; nothing is left behind then."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if p.exists() and not p.is_file() and not p.is_dir():
            with open(p, "wb") as fh:
                fh.write(raw)
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise OutputError.from_os(p, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise OutputError.from_os(p, exc) from None
        raise


def ensure_dir(path: str | Path) -> Path:
    """Create the output directory ``path`` (and its parents) and check that a file can be
    created in it; returns it.  Raises :class:`~spoolproxy.errors.OutputError` otherwise."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".spoolproxy-probe.", dir=p)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise OutputError.from_os(p, exc) from None
    return p


def check_output_file(path: str | Path) -> None:
    """Raise :class:`~spoolproxy.errors.OutputError` unless a file can be written at
    ``path`` (checked before work whose result would otherwise be lost): it is not a
    directory, and a file can be created in its directory (which is not created here; a
    missing one is fine when its nearest existing ancestor accepts new directories)."""
    p = Path(path)
    if p.is_dir():
        raise OutputError(p, "it is a directory; give a file name")
    if p.exists() and not p.is_file():
        return  # /dev/null, /dev/stdout, a FIFO: written through
    probe = next((a for a in p.parents if a.exists()), Path("."))
    if not probe.is_dir():
        raise OutputError(p, f"{probe} is not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".spoolproxy-probe.", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise OutputError.from_os(p, exc) from None
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(p, "the file is read-only")


def save(cas: Cassette, path: str | Path, *, plain: bool = False) -> Path:
    """Write ``cas`` to ``path`` atomically (YAML; JSON when the name ends in .json).

    The caller redacts first (:class:`~.redact.Redactor`).  Raises
    :class:`~spoolproxy.errors.OutputError` when it cannot be written.
    """
    p = Path(path)
    if p.suffix == ".json":
        text = json.dumps(_jsonable(to_document(cas, plain=True)), indent=2, ensure_ascii=False)
    else:
        text = dumps(cas, plain=plain)
    atomic_write(p, text)
    return p


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def check_writable(path: str | Path) -> None:
    """Raise :class:`~spoolproxy.errors.OutputError` unless a cassette can be created at
    ``path`` (checked before a run; see :func:`check_output_file`)."""
    check_output_file(path)


def iter_paths(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Expand files and directories (recursively, sorted) into cassette file paths.

    A directory gives its ``*.yaml``/``*.yml``/``*.json`` files except hidden ones and
    spoolproxy's own side files (:func:`is_side_file`); a file is given as it is, whatever
    its name.  Raises CassetteError for a path that does not exist.
    """
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if (f.suffix in CASSETTE_SUFFIXES and f.is_file() and not f.name.startswith(".")
                        and not is_side_file(f)):
                    yield f
        elif p.exists():
            yield p
        else:
            raise CassetteError(p, "no such file or directory; check the path")


def side_dir(cassette_path: str | Path) -> Path:
    """Directory for bodies stored outside the YAML: ``<name>.bodies/`` beside the cassette."""
    p = Path(cassette_path)
    return p.with_name(p.name + ".bodies")


def read_body(cas: Cassette, resp: Response) -> bytes:
    """The full response body, reading a side file when the body is stored outside.

    Raises CassetteError when the side file is missing or its sha256 differs; returns
    b"" for an elided body.
    """
    ref = resp.body_ref
    if ref is None:
        return resp.body
    if not ref.file:
        return b""
    base = cas.path.parent if cas.path else Path.cwd()
    f = base / ref.file
    try:
        data = f.read_bytes()
    except OSError:
        raise CassetteError(f, "side body file is missing; re-record or restore it") from None
    if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256:
        raise CassetteError(f, "side body file does not match its sha256 in the cassette")
    return data
