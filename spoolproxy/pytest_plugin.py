"""pytest plugin entry point (see issue: regression suites collected as test items).

Registered under the ``pytest11`` entry point; adds nothing yet beyond its options.
"""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    group = parser.getgroup("spoolproxy")
    group.addoption("--spoolproxy", action="store_true", default=False,
                    help="serve each test's pytest-recording cassette through one spoolproxy playback proxy")
