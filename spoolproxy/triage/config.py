"""The ``[triage]`` table of ``spoolproxy.toml``: clustering and dashboard settings.

```toml
[triage]
embed_model = "nomic-embed-text"       # cluster with this Ollama embedding model (unset: built-in)
ollama_host = "http://127.0.0.1:11434" # where Ollama listens (else $OLLAMA_HOST)
threshold = 0.7                        # cosine distance at which clusters are cut
version_tag = "version"                # the tag the dashboard reads as the agent version
```
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import section
from ..errors import SpoolError


class TriageConfig(BaseModel):
    """Validated ``[triage]`` settings (all optional)."""

    model_config = ConfigDict(extra="forbid")
    embed_model: str | None = None
    ollama_host: str | None = None
    threshold: float | None = Field(None, gt=0, le=2)
    version_tag: str = "version"


def load_triage_config(path: str | Path | None = None) -> TriageConfig:
    """Read ``[triage]`` (``path`` or the usual lookup).  Raises SpoolError naming the bad key."""
    try:
        return TriageConfig.model_validate(section("triage", path))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "triage"
        raise SpoolError(f"config [triage] {where}: {err['msg']}; fix spoolproxy.toml") from None
