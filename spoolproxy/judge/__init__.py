"""Diagnose and propose: an opt-in model judge whose evidence is checked.

Pure core, thin adapters:

* :mod:`.taxonomy`: the failure labels and how a model's label is read;
* :mod:`.compact`: the run as a bounded, labelled transcript a model can quote from;
* :mod:`.prompt`: the versioned prompts and the JSON Schemas of the answers;
* :mod:`.parse`: a tolerant reader for JSON answers;
* :mod:`.quotes`: every quote checked against the field it cites; an answer without valid
  evidence becomes ``unknown``;
* :mod:`.heuristic`: a label and failing interaction from the deterministic findings alone;
* :mod:`.proposals`: fix proposals kept only if they parse, target something in the run,
  are small and copy none of the run's data;
* :mod:`.cache`: results beside the run, keyed by cassette hash, model and prompt version;
* :mod:`.client`: OpenAI-compatible Chat Completions and Anthropic Messages adapters;
* :mod:`.traffic`: the judge's own calls recorded (and replayed) through spoolproxy;
* :mod:`.service`: ``diagnose``, ``propose``, ``off_track`` over one run.

Entry points: :func:`~.service.diagnose`, :func:`~.service.propose`,
:func:`~.service.off_track`, :func:`~.heuristic.heuristic_diagnosis`.
"""

from __future__ import annotations

from .client import JudgeSettings
from .heuristic import heuristic_diagnosis
from .models import Diagnosis, Fixes, Proposal
from .service import JudgeOptions, diagnose, load_run, off_track, propose
from .taxonomy import FAILURE_LABELS, LABELS

__all__ = ["Diagnosis", "Fixes", "Proposal", "JudgeSettings", "JudgeOptions", "diagnose", "propose", "off_track",
           "load_run", "heuristic_diagnosis", "LABELS", "FAILURE_LABELS"]
