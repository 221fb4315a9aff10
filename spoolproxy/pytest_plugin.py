"""pytest plugin (entry point ``pytest11: spoolproxy``): regression cases as test items,
a fixture for record/playback of a code block, and ``--spoolproxy`` for pytest-recording suites.

Nothing changes in a test run unless asked:

``--spoolproxy-suite DIR`` (or ini ``spoolproxy_suite = spool``)
    collects the case files of DIR as test items (DIR is added to the collected paths);
    each confirmed case runs like in ``spoolproxy test``: ``passes`` is a pass, any other
    outcome a failure whose message is the one-line explanation plus details; pending and
    rejected cases are skipped.  ``--spoolproxy-live GLOB`` sends hosts upstream.

``spoolproxy_session`` fixture
    ``with spoolproxy_session.record(path): ...`` / ``with spoolproxy_session.playback(path): ...``
    runs the block through an in-process proxy (see :mod:`spoolproxy.suite.inprocess`),
    for clients constructed inside it (the openai SDK, httpx, requests, subprocesses).

``--spoolproxy``
    for suites that replay pytest-recording cassettes (``@pytest.mark.vcr``): one playback
    proxy for the whole session, switched to each test's own cassettes through the playback
    control endpoint, with the proxy environment set for the session so subprocesses and
    non-Python clients spawned by a test are served too.  The cassettes are the ones
    pytest-recording would use: its ``vcr_cassette_dir`` and ``default_cassette_name``
    fixtures (so a project's overrides apply), the ``serializer`` suffix and the marker's
    extra cassettes (``cassettes/<module>/<test>.yaml`` when pytest-recording is not
    installed).  vcrpy's in-process patching is turned off (pytest-recording's
    ``--disable-recording``); matching is vcrpy-compatible (method, URL and stream flag;
    bodies reported as divergences).  A test not marked ``vcr`` gets no cassette: its
    requests miss.  Each test's misses and divergences are attached to its report
    ("spoolproxy playback").  A test that takes pytest-recording's ``vcr`` fixture gets a
    vcrpy-Cassette look-alike (:class:`~spoolproxy.replayer.vcrview.CassetteView`): the
    recorded requests and responses and what the proxy served from them.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("spoolproxy")
    group.addoption("--spoolproxy", action="store_true", default=False,
                    help="serve each test's pytest-recording cassette through one spoolproxy playback proxy")
    group.addoption("--spoolproxy-suite", default=None, metavar="DIR",
                    help="collect the spoolproxy regression cases in DIR as test items")
    group.addoption("--spoolproxy-live", action="append", default=[], metavar="GLOB",
                    help="with --spoolproxy-suite: hosts sent upstream instead of replayed (repeatable)")
    parser.addini("spoolproxy_suite", "spoolproxy regression suite directory collected as test items", default="")


# -- regression cases as test items ---------------------------------------------------------
def _suite_dir(config) -> Path | None:
    """The suite directory: ``--spoolproxy-suite`` (relative to the cwd) or the ini value
    (relative to the rootdir); None when neither is set."""
    option, ini = config.getoption("spoolproxy_suite"), config.getini("spoolproxy_suite")
    if option:
        return Path(option).resolve()
    if ini:
        return (Path(config.rootpath) / ini).resolve()
    return None


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "spoolproxy_case: a spoolproxy regression case collected from a suite file")
    suite = _suite_dir(config)
    if suite is not None:
        if not suite.is_dir():
            raise pytest.UsageError(f"spoolproxy suite directory {suite} does not exist")
        given = [Path(a.split("::")[0]).resolve() for a in config.args]
        if not any(suite == g or g in suite.parents for g in given):
            config.args.append(str(suite))
    if config.getoption("spoolproxy"):
        config.option.disable_recording = True  # pytest-recording: no vcrpy patching under --spoolproxy
        if getattr(config.option, "allowed_hosts", None) is not None or hasattr(config.option, "block_network"):
            # pytest-recording's --block-network must let the client reach the proxy
            config.option.allowed_hosts = ",".join(filter(None, [config.option.allowed_hosts or "", r"127\.0\.0\.1"]))
        # real sockets now sit under the project's clients where vcrpy's stubs had none: a
        # client the project never closes leaves an unclosed socket or asyncio transport,
        # which a `filterwarnings = error` suite would turn into a failure of a later test
        for what in ("unclosed transport", "unclosed <socket", "unclosed <ssl.SSLSocket"):
            config.addinivalue_line("filterwarnings", f"ignore:{what}:ResourceWarning")
        config.pluginmanager.register(VcrLayoutPlayback(config), "spoolproxy-vcr-playback")


def pytest_collect_file(file_path: Path, parent):
    suite = _suite_dir(parent.config)
    if suite is not None and file_path.suffix in (".yaml", ".yml") and file_path.parent == suite \
            and not file_path.name.startswith("."):
        return SuiteCaseFile.from_parent(parent, path=file_path)
    return None


class SuiteCaseFile(pytest.File):
    """One case file: yields one :class:`SuiteCaseItem`."""

    def collect(self):
        yield SuiteCaseItem.from_parent(self, name=self.path.stem)


class CaseFailed(Exception):
    """A case whose outcome is not ``passes`` (message: explanation + details)."""


class SuiteCaseItem(pytest.Item):
    """A regression case run under playback with its run recorded (like ``spoolproxy test``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_marker("spoolproxy_case")

    def runtest(self) -> None:
        from .suite.files import load_case
        from .suite.model import CaseError
        from .suite.runner import RunOptions, run_case

        try:
            case = load_case(self.path)
        except CaseError as exc:
            raise CaseFailed(f"error: {exc}") from None
        if case.status != "confirmed":
            pytest.skip(f"spoolproxy case status: {case.status}")
        live = tuple(self.config.getoption("spoolproxy_live")) or None
        result = run_case(case, self.path, self.path.parent, RunOptions(live=live))
        self.user_properties.append(("spoolproxy_outcome", result.outcome))
        if result.artifact:
            self.user_properties.append(("spoolproxy_artifact", str(result.artifact)))
        if result.outcome != "passes":
            raise CaseFailed("\n".join([f"{result.outcome}: {result.explanation}", *result.details]))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"spoolproxy case {self.name}"


# -- the fixture ------------------------------------------------------------------------------
class SpoolproxySession:
    """What the ``spoolproxy_session`` fixture yields: ``record(...)`` and ``playback(...)``
    context managers (:func:`~spoolproxy.suite.inprocess.record_block` /
    :func:`~spoolproxy.suite.inprocess.playback_block`); relative cassette paths are
    resolved against the test module's directory."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def _path(self, p) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.base / p

    def record(self, cassette, **kwargs):
        from .suite.inprocess import record_block

        return record_block(self._path(cassette), **kwargs)

    def playback(self, *cassettes, **kwargs):
        from .suite.inprocess import playback_block

        return playback_block(*(self._path(c) for c in cassettes), **kwargs)


@pytest.fixture
def spoolproxy_session(request) -> SpoolproxySession:
    """Run a block of a test under spoolproxy record or playback (see :class:`SpoolproxySession`)."""
    return SpoolproxySession(Path(str(request.node.fspath)).parent)


# -- --spoolproxy: pytest-recording layouts -----------------------------------------------------
def _vcr_cassette(item) -> Path | None:
    """The cassette pytest-recording would use for ``item`` (None when not marked ``vcr``)."""
    marker = item.get_closest_marker("vcr")
    if marker is None:
        return None
    module = Path(str(item.fspath))
    default = item.get_closest_marker("default_cassette")
    if default is not None and default.args:
        name = str(default.args[0])
    else:
        name = _default_cassette_name(getattr(item, "cls", None), item.name)
    if not name.endswith((".yaml", ".yml", ".json")):
        name += ".yaml"
    return module.parent / "cassettes" / module.stem / name


def _recording_cassettes(request) -> list[Path] | None:
    """The cassettes pytest-recording would load for this test, from its own fixtures
    (``vcr_cassette_dir``, ``default_cassette_name``, ``vcr_config``), or None when
    pytest-recording is not installed.  Only existing files are returned."""
    import os

    markers = list(request.node.iter_markers(name="vcr"))
    if not markers:
        return []
    try:
        directory = request.getfixturevalue("vcr_cassette_dir")
        name = request.getfixturevalue("default_cassette_name")
        config = dict(request.getfixturevalue("vcr_config") or {})
    except pytest.FixtureLookupError:
        return None
    for m in markers[::-1]:  # the closest marker wins, as in pytest-recording's merge_kwargs
        config.update(m.kwargs)
    suffix = f".{config['serializer']}" if "serializer" in config else ".yaml"
    directory = str(config.get("cassette_library_dir") or directory)
    default = os.path.join(directory, name)
    paths = [default if default.endswith(suffix) else default + suffix]
    paths += [p if os.path.isabs(p) else os.path.join(directory, p) for m in markers for p in m.args]
    out: list[Path] = []
    for p in paths:
        if os.path.exists(p) and Path(p) not in out:
            out.append(Path(p))
    return out


def _default_cassette_name(cls, test_name: str) -> str:
    """pytest-recording's default cassette name (``Class.test`` or ``test``, unsafe characters as ``-``)."""
    try:
        from pytest_recording.plugin import get_default_cassette_name
    except ImportError:  # same rule, without pytest-recording installed
        name = f"{cls.__name__}.{test_name}" if cls else test_name
        for ch in r"<>?%*:|\"'/\\":
            name = name.replace(ch, "-")
        return name
    return get_default_cassette_name(cls, test_name)


class VcrLayoutPlayback:
    """The ``--spoolproxy`` session: one playback proxy, one cassette per test."""

    def __init__(self, config) -> None:
        self.config = config
        self.runner = None
        self._env_cm = None

    def pytest_sessionstart(self, session) -> None:
        from .proxy.runner import ProxyRunner
        from .replayer.addon import Playback
        from .replayer.session import PlaybackConfig, PlaybackSession
        from .suite.inprocess import patched_environ, proxy_environ

        from .errors import SpoolError

        # each client connection closes after its response: a project's pooled client must
        # not carry a connection opened in one test's event loop into the next test
        runner = ProxyRunner([Playback(PlaybackSession(PlaybackConfig(cassettes=[], close_connections=True)))])
        try:
            # a project's `filterwarnings = error` must not turn the proxy's own start-up
            # warnings (mitmproxy's dependencies, while it imports them) into errors
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runner.start()
        except SpoolError as exc:
            raise pytest.UsageError(f"--spoolproxy: {exc}") from None
        self.runner = runner
        self._env_cm = patched_environ(proxy_environ(self.runner))
        self._env_cm.__enter__()

    def pytest_sessionfinish(self, session) -> None:
        if self._env_cm is not None:
            self._env_cm.__exit__(None, None, None)
        if self.runner is not None:
            self.runner.stop()

    def _paths(self, item) -> list[Path]:
        cassette = _vcr_cassette(item)
        return [cassette] if cassette is not None and cassette.exists() else []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        from .replayer import control

        item.stash[_LOADED] = self._paths(item)
        control.switch(self.runner.proxy_url, item.stash[_LOADED])

    @pytest.fixture(autouse=True)
    def _spoolproxy_recording_cassettes(self, request):
        """Switch to exactly the cassettes pytest-recording would load, once its fixtures
        (and the project's overrides of them) are known."""
        from .replayer import control

        paths = _recording_cassettes(request)
        if paths is not None and paths != request.node.stash.get(_LOADED, None):
            request.node.stash[_LOADED] = paths
            control.switch(self.runner.proxy_url, paths)
        yield

    @pytest.fixture
    def vcr(self, request, _spoolproxy_recording_cassettes):
        """pytest-recording's ``vcr`` fixture under ``--spoolproxy``: a view of the cassettes
        the proxy serves to this test, with vcrpy's Cassette API (None when the test is not
        marked ``vcr`` or has no cassette, as under pytest-recording)."""
        from .replayer.vcrview import CassetteView

        paths = request.node.stash.get(_LOADED, [])
        if request.node.get_closest_marker("vcr") is None or not paths:
            yield None
            return
        yield CassetteView(paths, lambda: self._served(request.node))

    def _served(self, item) -> list[tuple[Path, int]]:
        """``(cassette, interaction)`` pairs served to ``item`` so far: closed segments and
        the current one."""
        from .replayer import control

        requests = [*item.stash.get(_SERVED, []), *(control.report(self.runner.proxy_url).get("requests") or [])]
        out = []
        for r in requests:
            ref = r.get("served") if isinstance(r, dict) else None
            if ref:
                out.append((Path.cwd() / ref["cassette"], int(ref["interaction"])))
        return out

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        from .replayer import control

        yield
        # close the segment (setup + call) so its misses go into this test's report; the
        # cassettes stay loaded, with what they served, for teardown
        answer = control.checkpoint(self.runner.proxy_url)
        previous = answer.get("previous") or {}
        item.stash[_SERVED] = list(previous.get("requests") or [])
        lines = _render_segment(previous)
        if lines:
            item.add_report_section("call", "spoolproxy playback", "\n".join(lines))


_LOADED = pytest.StashKey[list]()
_SERVED = pytest.StashKey[list]()


def _render_segment(previous: dict) -> list[str]:
    from .replayer.report import PlaybackReport

    try:
        report = PlaybackReport.model_validate(previous)
    except Exception:  # noqa: BLE001 - a report we cannot read is no reason to fail a test
        return []
    if not (report.misses or report.divergences):
        return []
    return report.render().splitlines()
