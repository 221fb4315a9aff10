"""Error messages say what to do next: a path that names nothing, a patch file without its
``op``, and the README's patch-file example, which must stay a valid patch file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.fix.patches import PatchError, load_patches, parse_patches

REPO = Path(__file__).resolve().parents[1]


def spool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("args, text", [
    (["detect", "nope/"], "spoolproxy: error: nope: no such file or directory; check the path"),
    (["cluster", "nope/"], "spoolproxy: error: nope: no such file or directory; check the path"),
    (["playback", "-c", "nope.yaml", "--", "true"],
     "spoolproxy: error: nope.yaml: no such cassette or directory; check the path, or record it first "
     "(spoolproxy record -c PATH -- CMD)"),
    (["recover", "nope.yaml"], "spoolproxy: error: nope.yaml: no such cassette or directory, and no journal "
                               ".nope.yaml.spooljournal beside it; check the path"),
])
def test_a_path_that_names_nothing_is_one_line_saying_to_check_it(tmp_path: Path, args, text) -> None:
    r = spool(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(text), line


@pytest.mark.parametrize("kind, allowed", [
    ("system_prompt", "replace, append, prepend, substitute"),
    ("message", "replace, insert"),
])
def test_a_patch_without_op_lists_the_allowed_values(kind: str, allowed: str) -> None:
    with pytest.raises(PatchError) as err:
        parse_patches({"kind": kind, "text": "hi"}, "fix.yaml")
    assert str(err.value) == f"fix.yaml: patch 1 ({kind}) op: missing; give one of {allowed}"


def test_the_readme_patch_file_example_loads(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(# fix\.yaml\n.*?)```", readme, flags=re.S)
    assert len(blocks) == 1, "README's fork section shows one patch file (# fix.yaml)"
    f = tmp_path / "fix.yaml"
    f.write_text(blocks[0], encoding="utf-8")
    patches = load_patches(f)
    assert [p.kind for p in patches.patches] == ["system_prompt", "tool_result"]
    assert patches.patches[0].op == "append" and patches.patches[1].status == 404
