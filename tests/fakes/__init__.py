"""Local fake providers speaking the real wire formats (see :mod:`tests.fakes.provider`)."""

from .certs import TestCA, shared_ca
from .provider import FakeProvider, LoggedRequest, Reply, huge_body, json_reply, sse_reply

__all__ = ["FakeProvider", "LoggedRequest", "Reply", "TestCA", "huge_body", "json_reply", "shared_ca", "sse_reply"]
