"""Regression suites: failing runs as test cases, and the runner behind ``spoolproxy test``.

* :mod:`.model` / :mod:`.files`: case files (YAML, strict keys) and suite directories;
* :mod:`.export`: failing cassettes -> cases (``spoolproxy export-test``);
* :mod:`.engine`: a command under playback with the run recorded (artifact run);
* :mod:`.runner` / :mod:`.outcome`: run cases, judge passes / still_fails /
  fails_differently / unreplayable / error;
* :mod:`.baseline` / :mod:`.junit`: regressions against a baseline, JUnit XML.
"""

from .model import Assertions, Case, CaseError, Command, Routing, SignatureFinding
from .outcome import OUTCOMES, CaseResult

__all__ = ["Assertions", "Case", "CaseError", "Command", "Routing", "SignatureFinding", "OUTCOMES", "CaseResult"]
