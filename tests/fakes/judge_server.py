"""A fake model server that returns scripted judgements (for the judge's tests).

``POST /v1/chat/completions`` answers an OpenAI ``chat.completion`` whose message content is
what the script returns for the request (:class:`JudgeServer.script`, a function of the
parsed request body), as an OpenAI-compatible server sends a JSON answer.  ``POST
/v1/messages`` answers an Anthropic Messages ``message`` whose ``tool_use`` block (for the
tool the request forces with ``tool_choice``) has the script's answer as ``input``.  Knobs:

* ``refuse_schema``: answer ``400`` with an OpenAI-shaped error naming ``response_format``
  to a request asking for ``json_schema`` (a server without structured output), so the
  judge falls back to ``json_object``;
* ``fence``: wrap the content in a Markdown ```json fence with a line of prose before it
  (a small model's habit), to exercise the tolerant parser.

Every request body is logged (:attr:`JudgeServer.log`).  Plain HTTP on 127.0.0.1, an
ephemeral port; ``url`` is the base URL (``http://127.0.0.1:PORT/v1``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Script = Callable[[dict[str, Any]], Any]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "JudgeServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def date_time_string(self, timestamp=None) -> str:  # no wall clock in recorded bodies
        return "Tue, 01 Dec 2026 09:00:00 GMT"

    def _send(self, status: int, doc: dict[str, Any]) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.rstrip("/").endswith("/v1/messages"):
            return self._anthropic(json.loads(body), body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"unknown path {self.path}", "type": "invalid_request_error"}})
        req = json.loads(body)
        self.server.log.append(req)
        fmt = (req.get("response_format") or {}).get("type")
        if self.server.refuse_schema and fmt == "json_schema":
            return self._send(400, {"error": {"message": "response_format type json_schema is not supported by this "
                                                         "server", "type": "invalid_request_error",
                                              "param": "response_format", "code": None}})
        answer = self.server.script(req)
        content = answer if isinstance(answer, str) else json.dumps(answer)
        if self.server.fence:
            content = f"Here is my judgement.\n```json\n{content}\n```"
        digest = hashlib.sha256(body).hexdigest()
        words = sum(len(str(m.get("content", "")).split()) for m in req.get("messages") or [])
        self._send(200, {"id": f"chatcmpl-{digest[:24]}", "object": "chat.completion", "created": 1764579600,
                         "model": req.get("model"), "system_fingerprint": "fp_fake_judge",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                                      "logprobs": None, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": words, "completion_tokens": len(content.split()),
                                   "total_tokens": words + len(content.split())}})


    def _anthropic(self, req: dict[str, Any], body: bytes) -> None:
        self.server.log.append(req)
        name = (req.get("tool_choice") or {}).get("name") or "answer"
        answer = self.server.script(req)
        digest = hashlib.sha256(body).hexdigest()
        self._send(200, {"id": f"msg_{digest[:24]}", "type": "message", "role": "assistant", "model": req.get("model"),
                         "content": [{"type": "tool_use", "id": f"toolu_{digest[24:48]}", "name": name,
                                      "input": answer if isinstance(answer, dict) else json.loads(answer)}],
                         "stop_reason": "tool_use", "stop_sequence": None,
                         "usage": {"input_tokens": 100, "output_tokens": 40}})


class JudgeServer(ThreadingHTTPServer):
    """The running fake (see the module docstring); ``script`` may be replaced at any time."""

    daemon_threads = True

    def __init__(self, script: Script, *, refuse_schema: bool = False, fence: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.refuse_schema = refuse_schema
        self.fence = fence
        self.log: list[dict[str, Any]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-judge", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> "JudgeServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_text(req: dict[str, Any]) -> str:
    """The compacted run the judge's user message carries (for scripts that quote it)."""
    return next((m["content"] for m in req.get("messages") or [] if m.get("role") == "user"), "")


def asks_for_fixes(req: dict[str, Any]) -> bool:
    """Is this the fix call (not the diagnosis call)?"""
    system = req.get("system") or next((m["content"] for m in req.get("messages") or [] if m.get("role") == "system"), "")
    return "propose fixes" in str(system)
