"""Reading and writing cassette files: YAML (libyaml when present) or JSON, atomic writes.

``load(path)`` -> :class:`Cassette`; ``save(cassette, path)`` writes atomically (temporary
file in the same directory, fsync, rename) so a crash never leaves half a cassette;
``iter_paths(paths)`` expands directories into their ``*.yaml``/``*.yml``/``*.json`` files.
All failures raise :class:`~spoolproxy.errors.CassetteError` naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import yaml

from ..errors import CassetteError
from . import cache
from .format import FlowList, FormatError, from_document, to_document
from .model import Cassette, Response

try:  # the C loader/dumper are several times faster
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

CASSETTE_SUFFIXES = (".yaml", ".yml", ".json")


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

    Raises CassetteError with the file and, for YAML syntax errors, the line number.
    """
    raw = text if isinstance(text, bytes) else None
    doc = cache.get(raw) if raw is not None else cache._MISSING
    if doc is not cache._MISSING:
        try:
            return from_document(doc)
        except FormatError as exc:
            raise CassetteError(path, str(exc)) from None
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CassetteError(path, f"not a text file (byte {exc.start} is not UTF-8); is this a cassette?") from None
    if "\x00" in text:
        raise CassetteError(path, "binary data, not a YAML cassette")
    try:
        if str(path).endswith(".json"):
            doc = json.loads(text)
        else:
            doc = yaml.load(text, Loader=CassetteLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CassetteError(path, f"invalid YAML: {problem}", line=mark.line + 1 if mark else None) from None
    except json.JSONDecodeError as exc:
        raise CassetteError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    try:
        cas = from_document(doc)
    except FormatError as exc:
        raise CassetteError(path, str(exc)) from None
    if raw is not None:
        cache.put(raw, doc)  # only documents that made a valid cassette
    return cas


def load(path: str | Path) -> Cassette:
    """Load one cassette file.  Raises CassetteError (missing, unreadable, corrupt)."""
    p = Path(path)
    try:
        data = p.read_bytes()
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
    cas = parse_text(data, p)
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
    """Write ``data`` to ``path`` atomically (same-directory temp file, fsync, rename).

    A path that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO)
    is written through instead: renaming over it would replace the device itself."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if p.exists() and not p.is_file() and not p.is_dir():
        with open(p, "wb") as fh:
            fh.write(raw)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def save(cas: Cassette, path: str | Path, *, plain: bool = False) -> Path:
    """Write ``cas`` to ``path`` atomically (YAML; JSON when the name ends in .json).

    The caller redacts first (:class:`~.redact.Redactor`).  Raises CassetteError when the
    directory cannot be written.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.suffix == ".json":
            text = json.dumps(_jsonable(to_document(cas, plain=True)), indent=2, ensure_ascii=False)
        else:
            text = dumps(cas, plain=plain)
        atomic_write(p, text)
    except OSError as exc:
        raise CassetteError(p, f"cannot write: {exc.strerror}; choose a writable --cassette path") from None
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
    """Raise CassetteError unless a cassette can be created at ``path`` (checked before a run)."""
    p = Path(path)
    if p.is_dir():
        raise CassetteError(p, "is a directory; give a file name such as run.yaml")
    parent = p.parent
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CassetteError(p, "is not writable; choose another --cassette path")
    if not probe.is_dir():
        raise CassetteError(p, f"{probe} is not a directory")


def iter_paths(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Expand files and directories (recursively, sorted) into cassette file paths.

    Raises CassetteError for a path that does not exist.
    """
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.suffix in CASSETTE_SUFFIXES and f.is_file() and not f.name.startswith("."):
                    yield f
        elif p.exists():
            yield p
        else:
            raise CassetteError(p, "no such file or directory")


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
