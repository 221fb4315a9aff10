"""Cassette stores beyond one directory: a local directory or object storage, through fsspec.

* :mod:`.fs`: :class:`~.fs.Store` (list cassette keys, read, write atomically) over any
  fsspec URL (``s3://bucket/prefix``, ``file:///srv/cassettes``, ``gs://...``) or a plain
  directory; :func:`~.fs.open_store`, :func:`~.fs.read_url` and :func:`~.fs.read_many` (a batch,
  concurrently), :func:`~.fs.parse_storage_options`.
* :mod:`.publish`: :class:`~.publish.Publisher`, which moves finished cassettes (and their
  side bodies) from a local spool directory into a store, used by ``spoolproxy serve``.

fsspec (and s3fs for ``s3://``) come with the ``scale`` extra:
``pip install 'spoolproxy[scale]'``; without it every entry point raises one
:class:`~spoolproxy.errors.SpoolError` line saying so.
"""

from .fs import SCALE_HINT, Store, is_url, open_store, parse_storage_options, read_many, read_url

__all__ = ["SCALE_HINT", "Store", "is_url", "open_store", "parse_storage_options", "read_many", "read_url"]
