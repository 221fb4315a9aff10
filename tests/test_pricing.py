"""Cost you can rely on: per call and per run, from the user's [prices], $0 on local servers
(but list price for closed models reached through a local gateway), the dated table,
LiteLLM's map (a map file here; the installed package when there is one), cache reads and
writes priced apart, and unknown models shown as unknown, never guessed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from spoolproxy.cassettes import Cassette
from spoolproxy.detectors import analyze, build_transcript, load_detect_config
from spoolproxy.detectors.pricing import PRICES_AS_OF, PriceBook, call_cost, is_local_host, table_price

from .test_detect_wire import chat_request, chat_response, ix

USER = [{"role": "user", "content": "hi"}]


def call(host: str, model: str = "gpt-4o-mini", usage=(1_000_000, 100_000), cached: int | None = None,
         scheme: str = "https", path: str = "/v1/chat/completions"):
    body = json.loads(chat_response("Hello.", usage=usage))
    body["model"] = model
    if cached is not None:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return ix("POST", f"{scheme}://{host}{path}", chat_request(USER, model=model), resp=json.dumps(body))


def test_table_prices_and_their_source():
    t = build_transcript(Cassette(interactions=[call("api.openai.com")]))
    (step,) = t.steps
    assert step.llm.cost_usd == pytest.approx(0.15 + 0.06) and step.llm.price_source == f"table {PRICES_AS_OF}"
    assert t.cost_usd == pytest.approx(0.21) and t.price_sources == [f"table {PRICES_AS_OF}"]
    assert table_price("claude-sonnet-4-5-20250929").input == 3.0 and table_price("gpt-5-2025-08-07").output == 10.0


def test_cached_tokens_are_priced_apart():
    t = build_transcript(Cassette(interactions=[call("api.openai.com", usage=(1_000_000, 0), cached=600_000)]))
    # 400k fresh at $0.15/M + 600k cached at $0.075/M
    assert t.cost_usd == pytest.approx(0.06 + 0.045)
    price = table_price("claude-sonnet-4")
    assert call_cost(price, 1_000_000, 0, cache_read_tokens=500_000, cache_write_tokens=100_000) == pytest.approx(
        400_000 * 3 / 1e6 + 500_000 * 0.3 / 1e6 + 100_000 * 3.75 / 1e6)


def test_local_servers_cost_nothing_but_gateways_to_closed_models_do():
    local = build_transcript(Cassette(interactions=[call("127.0.0.1:8080", model="llama-3.1-8b-instruct", scheme="http"),
                                                    call("localhost:11434", model="qwen2.5:7b", scheme="http",
                                                         path="/v1/chat/completions")]))
    assert local.cost_usd == 0 and {s.llm.price_source for s in local.steps} == {"local"}
    gateway = build_transcript(Cassette(interactions=[call("localhost:4000", model="gpt-4o-mini", scheme="http")]))
    assert gateway.cost_usd == pytest.approx(0.21)  # a LiteLLM proxy on localhost still bills OpenAI prices
    assert is_local_host("10.1.2.3") and is_local_host("[::1]:8000") and is_local_host("gpu.local")
    assert not is_local_host("api.openai.com") and is_local_host("gpu.example.org", ("gpu.*",))
    # a local_hosts glob may name the port, as displays show host:port
    assert is_local_host("gpu.example.org:8000", ("gpu.example.org:8000",))
    assert not is_local_host("gpu.example.org:9000", ("gpu.example.org:8000",))


def test_unknown_models_stay_unknown_and_are_named():
    t = build_transcript(Cassette(interactions=[call("api.openai.com"), call("api.example.ai", model="acme-7b")]),
                         )
    assert t.cost_usd is None and t.unpriced_models == ["acme-7b"]
    assert t.steps[0].llm.cost_usd is not None and t.steps[1].llm.cost_usd is None
    report = analyze(Cassette(interactions=[call("api.example.ai", model="acme-7b")]))
    assert report.cost.usd is None and report.cost.unpriced_models == ["acme-7b"] and report.cost.calls == 1


def test_user_prices_and_a_litellm_format_map(tmp_path):
    cmap = tmp_path / "prices.json"
    cmap.write_text(json.dumps({"together_ai/acme-70b": {"input_cost_per_token": 9e-07, "output_cost_per_token": 9e-07,
                                                         "litellm_provider": "together_ai", "mode": "chat"}}))
    (tmp_path / "spoolproxy.toml").write_text(
        f'[prices]\n"acme-7b" = {{ input = 1.0, output = 2.0 }}\nmodel_cost_map = "{cmap}"\nlocal_hosts = ["gpu.*"]\n')
    cfg = load_detect_config(tmp_path / "spoolproxy.toml")
    t = build_transcript(Cassette(interactions=[call("api.example.ai", model="acme-7b", usage=(1_000_000, 1_000_000)),
                                                call("api.together.xyz", model="acme-70b", usage=(1_000_000, 0)),
                                                call("gpu.example.org", model="mine", usage=(5, 5))]), cfg)
    assert [s.llm.cost_usd for s in t.steps] == [pytest.approx(3.0), pytest.approx(0.9), 0]
    assert [s.llm.price_source for s in t.steps] == ["user", "map prices.json", "local"]
    bad = tmp_path / "bad" / "spoolproxy.toml"
    bad.parent.mkdir()
    bad.write_text('[prices]\n"acme-7b" = { input = -1, output = 2.0 }\n')
    from spoolproxy.errors import SpoolError

    with pytest.raises(SpoolError, match=r"config \[prices\] acme-7b.input"):
        load_detect_config(bad)


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm is not installed (optional)")
def test_installed_litellm_map_prices_models_the_table_lacks():
    book = PriceBook()
    price = book.price("gpt-4o-mini-search-preview", host="api.openai.com")
    assert price is not None and price.source == "litellm" and price.input == pytest.approx(0.15)


def test_show_prints_cost_per_step_and_detect_json_per_run(tmp_path):
    from spoolproxy.cassettes import save

    path = tmp_path / "run.yaml"
    save(Cassette(interactions=[call("api.openai.com"), call("api.example.ai", model="acme-7b")]), path)
    (tmp_path / "spoolproxy.toml").write_text("")
    run = lambda *a: subprocess.run([sys.executable, "-m", "spoolproxy", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=tmp_path, timeout=60)
    shown = run("show", str(path), "--width", "200")
    rows = [ln.rstrip() for ln in shown.stdout.splitlines() if ln.startswith(("0 ", "1 "))]
    assert rows[0].endswith("$0.2100") and rows[1].endswith(" ?")
    assert "cost: unknown: no price for acme-7b (add it to [prices] in spoolproxy.toml)" in shown.stdout
    doc = json.loads(run("detect", str(path), "--json").stdout)
    assert doc["cost"] == {"usd": None, "calls": 2, "unpriced_models": ["acme-7b"],
                           "sources": [f"table {PRICES_AS_OF}"], "prices_as_of": PRICES_AS_OF}
