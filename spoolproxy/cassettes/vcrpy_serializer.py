"""A vcrpy serializer for spoolproxy cassettes, so ``vcr.use_cassette`` reads format v1.

    import vcr
    from spoolproxy.cassettes import vcrpy_serializer

    my_vcr = vcr.VCR()
    my_vcr.register_serializer("spoolproxy", vcrpy_serializer)
    with my_vcr.use_cassette("cassettes/run.yaml", serializer="spoolproxy"):
        ...

``deserialize`` turns v1 (``parsed_body``, extensions, side-file bodies) into vcrpy's plain
dict; ``serialize`` writes vcrpy's dict as v1 (JSON bodies as YAML structures).  It also
reads plain vcrpy and pydantic-ai ``parsed_body`` cassettes.
"""

from __future__ import annotations

import yaml

from .format import to_document
from .storage import CassetteDumper, dumps, parse_text


def deserialize(cassette_string: str) -> dict:
    """spoolproxy/vcrpy YAML text -> vcrpy's ``{"version": 1, "interactions": [...]}``."""
    cas = parse_text(cassette_string)
    return to_document(cas, plain=True)


def serialize(cassette_dict: dict) -> str:
    """vcrpy's cassette dict -> spoolproxy v1 YAML text."""
    from .format import from_document

    try:
        return dumps(from_document(cassette_dict))
    except ValueError:
        return yaml.dump(cassette_dict, Dumper=CassetteDumper, sort_keys=False, allow_unicode=True)
