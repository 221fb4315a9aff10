"""pytest fixtures for the fake providers (loaded by ``tests/conftest.py``).

* ``fake_ca``: the session's :class:`~tests.fakes.certs.TestCA`.
* ``fake_provider``: a fresh :class:`~tests.fakes.provider.FakeProvider` per test
  (HTTPS + HTTP, empty log, zero connections), stopped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .certs import TestCA, shared_ca
from .provider import FakeProvider


@pytest.fixture(scope="session")
def fake_ca() -> TestCA:
    """The test CA and server certificate shared by every fake provider of the session."""
    return shared_ca()


@pytest.fixture
def fake_provider(fake_ca: TestCA) -> Iterator[FakeProvider]:
    """A running fake provider for one test."""
    with FakeProvider(ca=fake_ca) as provider:
        yield provider
