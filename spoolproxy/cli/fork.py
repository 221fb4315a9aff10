"""``spoolproxy fork CASSETTE [--at N] [--patch FILE]... [OPTIONS] [-- CMD]``: rerun a
recorded run from interaction N with patches, the model live, the tools replayed.

Before N every request is served strictly from CASSETTE; from N on the LLM requests go
live with the patches applied, tool requests identical to the parent's are replayed, a
changed GET goes live, a changed side effect (POST, PUT, ...) is blocked unless ``--live``
names its host (see :mod:`spoolproxy.fix.session`).  The command is CMD, else the one
CASSETTE records.  Writes a new cassette linked to its parent; exits with the command's
status (2 for bad input).  ``--dry-run`` prints what the patches change in the first
request they apply to, and runs nothing.  Live budgets and the circuit breaker
(``--max-llm-calls`` ..., ``--circuit-breaker``, or ``[record]``/``[detect]``) apply to what
the fork does from the fork point on, as under ``record``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import UsageError
from .common import CommandWithCmd, ProxySettings, proxy_options
from .guard_options import guard_options

CONTEXT = {"help_option_names": ["-h", "--help"], "allow_interspersed_args": True}


def parse_tool_result(spec: str):
    """``[METHOD ]HOST[/PATH]=[STATUS:]FILE`` -> a ToolResultPatch (FILE is the body; a
    ``.json`` file is sent as JSON).  Raises UsageError."""
    from ..fix.patches import ToolResultPatch

    glob, sep, target = spec.rpartition("=")
    if not sep or not glob.strip() or not target:
        raise UsageError(f"--tool-result {spec!r}: use GLOB=FILE, e.g. 'GET shop.example/orders*=notfound.json' "
                         "or 'shop.example/orders*=404:notfound.json'")
    method, _, rest = glob.strip().rpartition(" ")
    host, slash, path = rest.partition("/")
    status = 200
    head, colon, tail = target.partition(":")
    if colon and head.isdigit():
        status, target = int(head), tail
    f = Path(target)
    try:
        text = f.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--tool-result {spec!r}: cannot read {f} ({exc.strerror or exc})") from None
    body: object = text
    if f.suffix == ".json":
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--tool-result {spec!r}: {f} is not valid JSON ({exc})") from None
    try:
        return ToolResultPatch(method=method or "*", host=host or "*", path="/" + path if slash else "*",
                               status=status, body=body)
    except ValueError as exc:
        raise UsageError(f"--tool-result {spec!r}: {str(exc).splitlines()[-1].strip()}") from None


def parse_route(spec: str):
    """``HOST=URL`` -> a RouteToolPatch.  Raises UsageError."""
    from ..fix.patches import RouteToolPatch

    host, sep, url = spec.partition("=")
    if not sep or not host or not url:
        raise UsageError(f"--route {spec!r}: use HOST=URL, e.g. shop.example=http://127.0.0.1:9000")
    try:
        return RouteToolPatch(host=host, to=url)
    except ValueError as exc:
        raise UsageError(f"--route {spec!r}: {str(exc).splitlines()[-1].strip()}") from None


def build_patches(patch_files, system_append=(), tool_results=(), routes=()):
    """The PatchSet of the command line: patch files in order, then the shorthand options."""
    from ..fix.patches import PatchSet, SystemPromptPatch, load_all

    patches = load_all(patch_files)
    extra = [SystemPromptPatch(op="append", text=t) for t in system_append]
    extra += [parse_tool_result(s) for s in tool_results]
    extra += [parse_route(s) for s in routes]
    return patches + PatchSet(patches=extra, source=["command line"] if extra else [])


def patch_options(fn):
    """``--patch``, ``--system-append``, ``--tool-result``, ``--route`` (shared by fork and verify)."""
    options = [
        click.option("--patch", "patch_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
                     help="Patch file (YAML/JSON: one patch, a list, or {patches: [...]}; repeatable, applied in order)."),
        click.option("--system-append", multiple=True, metavar="TEXT",
                     help="Shorthand for a system_prompt patch appending TEXT as a new line (repeatable)."),
        click.option("--tool-result", "tool_results", multiple=True, metavar="GLOB=FILE",
                     help="Serve FILE for tool requests matching '[METHOD ]HOST[/PATH]' (globs); "
                          "'GLOB=404:FILE' sets the status; a .json FILE is sent as JSON (repeatable)."),
        click.option("--route", "routes", multiple=True, metavar="HOST=URL",
                     help="Send requests to HOST (a glob) to the live server URL instead: a fixed tool (repeatable)."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


@click.command(cls=CommandWithCmd, without_cmd="run the command the cassette records", context_settings=CONTEXT,
               short_help="Rerun a recorded run from interaction N with patches, live.")
@click.argument("cassette", type=click.Path(dir_okay=False))
@proxy_options
@click.option("--at", "at", type=int, default=None, metavar="N",
              help="Fork point: 0-based interaction index (as `spoolproxy show` numbers them; negative counts "
                   "from the end).  Default: the first interaction a patch applies to.")
@patch_options
@click.option("--live", multiple=True, metavar="GLOB",
              help="Hosts whose changed requests may go live, side effects included (repeatable).")
@click.option("--normalize", multiple=True, metavar="REGEX",
              help="Replace matches on both sides before matching requests to the parent (repeatable).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Fork cassette to write (default: <cassette stem>.fork-<N>.yaml beside it).")
@click.option("--dry-run", is_flag=True, help="Print what the patches change in the first request they apply to; run nothing.")
@click.option("--force", is_flag=True, help="Run even when a request patch changes no request of the recorded run.")
@guard_options(scope="the fork (from the fork point on)")
def command(proxy: ProxySettings, cassette, at, patch_files, system_append, tool_results, routes, live, normalize,
            output, dry_run, force, guard_flags) -> None:
    """Fork CASSETTE at interaction N: the same run again, patched, with the model live.

    \b
      spoolproxy fork cassettes/run.yaml --at 2 --system-append "Never refund twice."
      spoolproxy fork cassettes/run.yaml --patch fix.yaml --dry-run
      spoolproxy fork cassettes/run.yaml --tool-result 'GET shop.example/orders*=404:none.json'
      spoolproxy fork cassettes/run.yaml --at 0 --route shop.example=http://127.0.0.1:9000 -- python agent.py
      spoolproxy fork cassettes/run.yaml --at 2 --max-llm-calls 10 --circuit-breaker
    """
    patches = build_patches(patch_files, system_append, tool_results, routes)
    run(proxy, Path(cassette), at, patches, tuple(live), tuple(normalize), Path(output) if output else None,
        dry_run=dry_run, force=force, guard_flags=guard_flags)


def resolve_at(at: int | None, patches, parent) -> int:
    """The fork point: ``at`` (negative from the end), else the first interaction a patch
    applies to.  Raises UsageError when out of range or when nothing gives one."""
    from ..fix.apply import check_targets, first_target

    n = len(parent)
    if at is None:
        found = first_target(patches, parent) if patches else None
        if found is None:
            if not patches:
                raise UsageError(f"nothing to fork with: give a patch (--patch FILE, --system-append, --tool-result, "
                                 f"--route) and/or --at N (0-{n}) to rerun {parent.path} from there")
            why = next((f" (patch {c.patch + 1} does not apply: {c.problem})" for c in check_targets(patches, parent)
                        if c.problem), "")
            raise UsageError(f"no patch applies to {parent.path}{why}, so there is no default fork point: "
                             f"fix the patch's target, or give --at N (0-{n}) to fork there anyway")
        return found
    real = at + n if at < 0 else at
    if not 0 <= real <= n:
        raise UsageError(f"--at {at} is out of range: {parent.path} has {n} interactions (0-{n - 1}; {n} forks "
                         "after the last)")
    return real


def check_patches(patches, parent, at: int, force: bool, say) -> None:
    """Refuse (UsageError) a request patch that changes no request of the recorded run
    from ``at`` on, unless ``force``; warn about tool patches matching nothing."""
    from ..fix.apply import check_targets

    for c in check_targets(patches, parent, at):
        if c.applies:
            continue
        p = patches.patches[c.patch]
        if p.SCOPE == "request" and not force:
            raise UsageError(f"patch {c.patch + 1} ({p.describe()}) does not apply: {c.problem}; fix the patch "
                             "(see --dry-run) or pass --force")
        say(f"spoolproxy: warning: patch {c.patch + 1} ({p.describe()}) matches nothing in the recorded run: {c.problem}")


def default_output(parent: Path, at: int) -> Path:
    """``<stem>.fork-<at>.yaml`` beside the parent (``-2``, ``-3``... when taken)."""
    out = parent.with_name(f"{parent.stem}.fork-{at}.yaml")
    n = 1
    while out.exists():
        n += 1
        out = parent.with_name(f"{parent.stem}.fork-{at}-{n}.yaml")
    return out


def run(proxy: ProxySettings, cassette: Path, at, patches, live, normalize, output, *, dry_run=False,
        force=False, guard_flags: dict | None = None) -> None:
    """The body of ``spoolproxy fork`` (exits through SystemExit with the command's status)."""
    from .. import config
    from ..cassettes.redact import Redactor
    from ..cassettes.storage import check_writable
    from ..fix.apply import preview
    from ..fix.runner import ForkEngine, ForkSpec, load_parent, recorded_command
    from ..suite.matching import project_match_options

    say = (lambda s: None) if proxy.quiet else (lambda s: click.echo(s, err=True))
    parent = load_parent(cassette)
    at = resolve_at(at, patches, parent)
    if dry_run:
        click.echo(f"fork of {cassette} at interaction {at} ({len(parent)} interactions)")
        for line in (preview(patches, parent, at) if patches else ["no patches: a plain rerun from interaction "
                                                                   f"{at} with the model live"]):
            click.echo(line)
        return
    check_patches(patches, parent, at, force, say)
    argv, cwd = recorded_command(parent, proxy.command)
    out = output or default_output(cassette, at)
    if out.resolve() == cassette.resolve():
        raise UsageError(f"-o {out} is the cassette being forked; write the fork elsewhere (the parent stays as it is)")
    check_writable(out)
    base = project_match_options(proxy.config or config.find_config())
    from ..replayer.fingerprint import MatchOptions

    options = MatchOptions(ignore_json_paths=base.ignore_json_paths, normalize=(*base.normalize, *normalize),
                           match_headers=base.match_headers, redact_headers=base.redact_headers,
                           redact_patterns=base.redact_patterns)
    redactor = Redactor.from_config(config.section("redact", proxy.config))
    from ..detectors import load_detect_config
    from ..guards.config import build_guard
    from .guard_options import guard_settings

    guard = build_guard(guard_settings(guard_flags or {}, proxy.config), load_detect_config(proxy.config),
                        say=lambda line: click.echo(redactor.text(line), err=True))
    spec = ForkSpec(parent=cassette, at=at, patches=patches, argv=argv, cwd=cwd, out=out, live=live,
                    options=options, capture=False)
    n = len(patches)
    say(f"spoolproxy: fork of {cassette} at interaction {at}" + (f" with {n} patch{'es' if n != 1 else ''}" if n else ""))
    with ForkEngine(lambda addons: proxy.make_runner(addons, options={"connection_strategy": "lazy"}),
                    lambda runner, env: proxy.env_for(runner, env), redactor) as engine:
        result = engine.run(spec, parent=parent, guard=guard)
    say(f"spoolproxy: wrote {out} ({len(result.cassette)} interactions)")
    for line in result.report.lines() + result.guard_lines:
        say(f"  {line}")
    from .record import _findings

    for line in _findings(result.cassette, proxy.config):
        say(f"  {line}")
    for err in result.proxy_errors[:1]:
        click.echo(f"spoolproxy: warning: internal error while proxying: {err} (rerun with --verbose)", err=True)
    say(f"  compare with the parent: spoolproxy diff {out}")
    raise SystemExit(result.exit_code or 0)
