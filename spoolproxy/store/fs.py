"""A cassette store: a directory or object-storage prefix reached through fsspec.

A store is named by a URL (``s3://bucket/prefix``, ``file:///srv/cassettes``, ``gs://...``,
any protocol fsspec knows) or a plain directory path.  Cassettes in it are addressed by
*keys*: paths relative to the store's root with ``/`` separators
(``2025-01-31/run-42.yaml``).  Keys whose path has a part starting with ``.`` (temporary
uploads, a spool) or ending in ``.bodies`` (side bodies) are not cassettes.

Credentials never appear on the command line: s3fs reads the usual ``AWS_*`` variables,
``~/.aws`` files or instance roles; ``--storage-option KEY=VALUE`` passes other settings
(``endpoint_url=http://127.0.0.1:9000`` for an S3-compatible server).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Iterable

from ..errors import CassetteError, SpoolError, UsageError

#: what to install for stores, Parquet and Dask
SCALE_HINT = "pip install 'spoolproxy[scale]'"

CASSETTE_SUFFIXES = (".yaml", ".yml", ".json")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str | os.PathLike) -> bool:
    """True for ``scheme://...`` (a store URL), False for a plain path."""
    return bool(_SCHEME.match(str(text)))


def require_fsspec():
    """The fsspec module.  Raises SpoolError saying what to install when it is missing."""
    try:
        import fsspec
    except ImportError:
        raise SpoolError(f"cassette stores need fsspec: {SCALE_HINT}") from None
    return fsspec


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def parse_storage_options(items: Iterable[str]) -> dict[str, Any]:
    """``["endpoint_url=http://127.0.0.1:9000", "anon=false"]`` -> fsspec storage options.

    A value that parses as JSON (``false``, ``3``, ``{"region_name": "eu-west-1"}``) is
    taken as that JSON value, anything else as text.  Raises UsageError for an item without
    ``=``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(f"--storage-option {item!r}: expected KEY=VALUE, e.g. endpoint_url=http://127.0.0.1:9000")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def is_cassette_key(key: str) -> bool:
    """True when ``key`` names a cassette: a cassette suffix, not one of spoolproxy's side
    files (``*.verify.json``..., see :func:`~spoolproxy.cassettes.storage.is_side_file`) and
    no ``.``-part or ``*.bodies`` directory on its path."""
    from ..cassettes.storage import is_side_file

    parts = key.split("/")
    if not parts[-1].endswith(CASSETTE_SUFFIXES) or is_side_file(parts[-1]):
        return False
    return not any(p.startswith(".") or p.endswith(".bodies") for p in parts)


class Store:
    """Cassettes under one root (a URL or a directory), through an fsspec filesystem.

    ``options``: fsspec storage options (see :func:`parse_storage_options`).  Raises
    SpoolError when fsspec, or the protocol's backend (s3fs for ``s3://``), is missing or
    the protocol is unknown.  Methods raise SpoolError (CassetteError for one key) with
    the store's URL when the storage answers with an error.
    """

    def __init__(self, url: str | os.PathLike, options: dict[str, Any] | None = None) -> None:
        fsspec = require_fsspec()
        text = str(url)
        self.options = dict(options or {})
        try:
            fs, root = fsspec.core.url_to_fs(text, **self.options)
        except ImportError as exc:
            scheme = text.split("://", 1)[0]
            raise SpoolError(f"{scheme}:// stores need {exc.name or 'another fsspec backend'}: {SCALE_HINT}") from None
        except ValueError as exc:
            raise SpoolError(f"{text}: {_first_line(exc)}; use a directory, file://, s3:// or another fsspec URL") \
                from None
        except TypeError as exc:
            raise UsageError(f"{text}: bad --storage-option: {_first_line(exc)}") from None
        self.fs = fs
        self.root = root.rstrip("/") or root
        self.url = text.rstrip("/") if is_url(text) else str(Path(text))

    @property
    def local(self) -> bool:
        """True for a local directory (atomic rename, directories to create)."""
        protocols = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        return "file" in protocols or "local" in protocols

    def path(self, key: str) -> str:
        """The filesystem path of ``key`` (as fsspec names it)."""
        return f"{self.root}/{key}" if key else self.root

    def url_of(self, key: str) -> str:
        """The URL (or, for a plain directory, the path) a user sees for ``key``."""
        return f"{self.url}/{key}" if is_url(self.url) else str(Path(self.url) / key)

    def keys(self) -> list[str]:
        """Every cassette key under the root, sorted (see :func:`is_cassette_key`).

        Raises SpoolError when the root cannot be listed (missing bucket, no access)."""
        try:
            if self.local and not self.fs.isdir(self.root):
                raise CassetteError(self.url, "no such directory")
            self.fs.invalidate_cache(self.root)  # another process may have written since
            found = self.fs.find(self.root, withdirs=False)
        except SpoolError:
            raise
        except Exception as exc:  # noqa: BLE001 - any backend's error becomes one line
            raise SpoolError(f"cannot list {self.url}: {_first_line(exc)}; check the URL, the bucket and the "
                             "credentials (AWS_* variables or --storage-option)") from None
        prefix = self.root.rstrip("/") + "/"
        keys = [p[len(prefix):] for p in (str(f) for f in found) if p.startswith(prefix)]
        return sorted(k for k in keys if is_cassette_key(k))

    def read(self, key: str) -> bytes:
        """The bytes of ``key``.  Raises CassetteError when it cannot be read."""
        try:
            return self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            raise CassetteError(self.url_of(key), "no such cassette in the store") from None
        except Exception as exc:  # noqa: BLE001
            raise CassetteError(self.url_of(key), f"cannot read: {_first_line(exc)}") from None

    def exists(self, key: str) -> bool:
        """True when ``key`` exists.  Raises SpoolError when the store cannot be asked."""
        try:
            self.fs.invalidate_cache(self.path(key))  # a listing cached earlier must not answer for it
            return bool(self.fs.exists(self.path(key)))
        except Exception as exc:  # noqa: BLE001
            raise SpoolError(f"cannot reach {self.url}: {_first_line(exc)}") from None

    def put_atomic(self, local: str | os.PathLike, key: str) -> str:
        """Upload the file ``local`` to ``key`` so that ``key`` never holds part of it:
        upload to a temporary ``.<name>.<random>.tmp`` key beside it, then move (a rename
        on a local directory, a server-side copy on S3).  Returns :meth:`url_of` ``key``.
        Raises SpoolError when the upload fails (the temporary key is removed)."""
        parent, _, name = key.rpartition("/")
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex[:12]}.tmp" if parent else f".{name}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            if self.local:
                self.fs.makedirs(self.path(key).rpartition("/")[0], exist_ok=True)
            self.fs.put_file(os.fspath(local), self.path(tmp))
            if self.local:
                self.fs.mv(self.path(tmp), self.path(key))  # a rename
            else:  # a server-side copy, without mv's directory listings
                self.fs.cp_file(self.path(tmp), self.path(key))
                self.fs.rm_file(self.path(tmp))
        except Exception as exc:  # noqa: BLE001
            try:
                self.fs.rm_file(self.path(tmp))
            except Exception:  # noqa: BLE001 - best effort; listings skip .tmp keys anyway
                pass
            raise SpoolError(f"cannot upload {key} to {self.url}: {_first_line(exc)}") from None
        return self.url_of(key)

    def probe(self) -> None:
        """Check that the store can be written (a small object written and removed), so a
        wrong bucket or missing credentials fail at start-up, not at the first cassette.
        A local root directory is created.  Raises SpoolError."""
        key = f".spoolproxy-probe-{uuid.uuid4().hex[:12]}"
        try:
            if self.local:
                self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(self.path(key), b"spoolproxy")
            self.fs.rm_file(self.path(key))
        except Exception as exc:  # noqa: BLE001
            raise SpoolError(f"cannot write to {self.url}: {_first_line(exc)}; check the URL, the bucket and the "
                             "credentials (AWS_* variables or --storage-option)") from None


def open_store(url: str | os.PathLike, options: dict[str, Any] | None = None) -> Store:
    """The :class:`Store` at ``url`` (a URL or a directory).  Raises SpoolError."""
    return Store(url, options)


def read_url(url: str, options: dict[str, Any] | None = None) -> bytes:
    """The bytes of one cassette given as a URL (through fsspec) or a local path (no fsspec
    needed).  Raises CassetteError naming ``url``."""
    if not is_url(url):
        try:
            return Path(url).read_bytes()
        except FileNotFoundError:
            raise CassetteError(url, "no such cassette; check the path") from None
        except OSError as exc:
            raise CassetteError(url, f"cannot read: {exc.strerror}") from None
    fsspec = require_fsspec()
    try:
        with fsspec.open(url, "rb", **(options or {})) as fh:
            return fh.read()
    except FileNotFoundError:
        raise CassetteError(url, "no such cassette in the store") from None
    except ImportError as exc:
        raise SpoolError(f"{url.split('://', 1)[0]}:// needs {exc.name or 'an fsspec backend'}: {SCALE_HINT}") from None
    except Exception as exc:  # noqa: BLE001
        raise CassetteError(url, f"cannot read: {_first_line(exc)}") from None


def read_many(urls: list[str], options: dict[str, Any] | None = None) -> list[bytes | CassetteError]:
    """The bytes of each of ``urls`` (or the CassetteError saying why not), in order.

    Stored cassettes are fetched concurrently where the backend can (s3fs and the other
    async fsspec filesystems fetch a list of whole files at once with ``cat_ranges``), which hides an object store's latency
    per request; local paths are read one by one.  Raises SpoolError when a protocol's
    backend is missing."""
    out: list[bytes | CassetteError | None] = [None] * len(urls)
    groups: dict[int, tuple[Any, list[tuple[int, str]]]] = {}
    for i, url in enumerate(urls):
        if not is_url(url):
            try:
                out[i] = read_url(url, options)
            except CassetteError as exc:
                out[i] = exc
            continue
        try:
            fs, path = require_fsspec().core.url_to_fs(url, **(options or {}))
        except ImportError as exc:
            raise SpoolError(f"{url.split('://', 1)[0]}:// needs {exc.name or 'an fsspec backend'}: {SCALE_HINT}") \
                from None
        groups.setdefault(id(fs), (fs, []))[1].append((i, path))
    for fs, entries in groups.values():
        paths = [p for _, p in entries]
        try:  # cat_ranges, not cat: no glob expansion of names such as "test[groq].yaml"
            got = fs.cat_ranges(paths, None, None, on_error="return")
        except Exception as exc:  # noqa: BLE001 - the whole batch failed: say so per cassette
            got = [exc] * len(paths)
        for (i, _p), value in zip(entries, got):
            if isinstance(value, (bytes, bytearray)):
                out[i] = bytes(value)
            elif isinstance(value, FileNotFoundError) or value is None:
                out[i] = CassetteError(urls[i], "no such cassette in the store")
            else:
                out[i] = CassetteError(urls[i], f"cannot read: {_first_line(value)}")
    return out  # type: ignore[return-value]
