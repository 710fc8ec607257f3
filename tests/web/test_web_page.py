"""The web page (``web/``, built by ``tools/build_web.py``) in a real browser: headless Chromium
(Debian's ``chromium`` package, driven by ``playwright-core`` from ``web/package-lock.json``)
against a loopback HTTP server. For each deployment the numbers the page shows equal the CLI's
``--json`` for the same command line; a screenshot of each is saved (``KVSTRATEGIES_WEB_ARTIFACTS``,
else the test's temporary folder).

Skipped, saying why, without ``chromium``, ``node`` or the npm packages (``npm ci`` in ``web/``,
as ``.ci/run`` does, or ``.web-cache/`` from a local ``tools/build_web.py`` run).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.checkpoints import shipped_checkpoints
from kvstrategies.cli.web import run_command
from kvstrategies.core.releases import NEWEST_VLLM

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def _node_modules() -> Path | None:
    for folder in (ROOT / "web" / "node_modules", ROOT / ".web-cache" / "node_modules"):
        if (folder / "pyodide" / "pyodide.mjs").is_file() and (folder / "playwright-core").is_dir():
            return folder
    return None


def _skip_reason() -> str | None:
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, as .ci/run does; or set CHROMIUM)"
    if shutil.which("node") is None:
        return "no node on PATH (the page is driven by playwright-core under node)"
    if _node_modules() is None:
        return "web/'s npm packages are not installed: run `npm ci` in web/ (as .ci/run does)"
    return None


#: a HF id no shipped file has: the page can answer it only by fetching it from the (local) Hub,
#: which serves the shipped Qwen/Qwen3-32B config.json under that id
HUB_ID = "kvstrategies-test/Qwen3-32B-mirror"
HUB_SOURCE = "Qwen/Qwen3-32B"

#: the vLLM release the page plans for when none is chosen: the newest
VLLM = ["--vllm-version", NEWEST_VLLM.text]

#: (name, page query, the engines' command lines the page must answer as the CLI does)
CASES: list[tuple[str, str, dict[str, list[str]]]] = [
    ("llama-3.1-70b-8xH100-both", "model=llama-3.1-70b&tp=8&engine=both&lengths=8192,32768&view=plan", {
        "sglang": ["plan", "llama-3.1-70b", "--gpu", "H100-80GB", "--tp", "8", "--sglang-version", "0.5.23",
                   "--request-length", "8192", "--request-length", "32768", "--json"],
        "vllm": ["plan", "llama-3.1-70b", "--engine", "vllm", "--gpu", "H100-80GB", "--tp", "8", *VLLM,
                 "--request-length", "8192", "--request-length", "32768", "--json"]}),
    ("mla-deepseek-v2-lite-both", "model=deepseek-v2-lite&engine=both&lengths=8192&view=plan", {
        "sglang": ["plan", "deepseek-v2-lite", "--gpu", "H100-80GB", "--tp", "1", "--sglang-version", "0.5.23",
                   "--request-length", "8192", "--json"],
        "vllm": ["plan", "deepseek-v2-lite", "--engine", "vllm", "--gpu", "H100-80GB", "--tp", "1", *VLLM,
                 "--request-length", "8192", "--json"]}),
    ("swa-gpt-oss-20b-fp8", "model=gpt-oss-20b&engine=both&kv=fp8_e4m3&page=64&lengths=4096,65536&view=plan", {
        "sglang": ["plan", "gpt-oss-20b", "--gpu", "H100-80GB", "--tp", "1", "--kv-cache-dtype", "fp8_e4m3",
                   "--page-size", "64", "--sglang-version", "0.5.23", "--request-length", "4096",
                   "--request-length", "65536", "--json"],
        "vllm": ["plan", "gpt-oss-20b", "--engine", "vllm", "--gpu", "H100-80GB", "--tp", "1", "--kv-cache-dtype",
                 "fp8_e4m3", *VLLM, "--request-length", "4096", "--request-length", "65536", "--json"]}),
    ("mamba-qwen3-next-tp4-h200", "model=qwen3-next-80b-a3b&gpu=H200&tp=4&engine=sglang&release=0.5.20&view=plan", {
        "sglang": ["plan", "qwen3-next-80b-a3b", "--gpu", "H200", "--tp", "4", "--sglang-version", "0.5.20",
                   "--json"]}),
    ("refusal-llama-3.1-70b-tp1", "model=llama-3.1-70b&view=plan", {
        "sglang": ["plan", "llama-3.1-70b", "--gpu", "H100-80GB", "--tp", "1", "--sglang-version", "0.5.23",
                   "--json"]}),
    ("hub-fetched-config", f"hf={HUB_ID}&hub=/hub&tp=2&engine=both&view=plan", {
        "sglang": ["plan", HUB_ID, "--gpu", "H100-80GB", "--tp", "2", "--sglang-version", "0.5.23", "--json"],
        "vllm": ["plan", HUB_ID, "--engine", "vllm", "--gpu", "H100-80GB", "--tp", "2", *VLLM, "--json"]}),
    ("vllm-release-expert-parallel", "model=qwen3-30b-a3b&tp=2&ep=2&engine=vllm&vllm_release=0.33.0&view=plan", {
        "vllm": ["plan", "qwen3-30b-a3b", "--engine", "vllm", "--gpu", "H100-80GB", "--tp", "2",
                 "--enable-expert-parallel", "--vllm-version", "0.33.0", "--json"]}),
    ("fit-2xRTX-4090", "gpu=RTX-4090&count=2&view=fit",
     {"fit": ["fit", "--gpu", "RTX-4090", "--count", "2", "--json"]}),
]


def _cli(argv: list[str]) -> tuple[int, Any]:
    result = json.loads(run_command(argv))
    return result["rc"], json.loads(result["stdout"])


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    modules = _node_modules()
    assert modules is not None
    work = tmp_path_factory.mktemp("web")
    site = work / "site"
    built = subprocess.run([sys.executable, str(ROOT / "tools" / "build_web.py"), str(site), "--node-modules",
                            str(modules)], capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    hub_file = site / "hub" / HUB_ID / "resolve" / "main" / "config.json"  # the Hub's URL layout
    hub_file.parent.mkdir(parents=True)
    shutil.copy(shipped_checkpoints()[HUB_SOURCE].folder / "config.json", hub_file)
    artifacts = Path(os.environ.get("KVSTRATEGIES_WEB_ARTIFACTS", work / "shots"))
    artifacts.mkdir(parents=True, exist_ok=True)
    cases = work / "cases.json"
    cases.write_text(json.dumps([{"name": name, "query": query} for name, query, _ in CASES]), encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, "NODE_MODULES": str(modules), "USER_DATA_DIR": str(work / "profile"),
               "CHROMIUM": CHROMIUM}  # fmt: skip
        page = f"http://127.0.0.1:{server.server_port}"
        run = subprocess.run(["node", str(ROOT / "tools" / "web_check.mjs"), page, str(cases), str(artifacts)],
                             env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    finally:
        server.shutdown()
    assert run.returncode == 0, run.stderr[-3000:]
    results = {item["name"]: item for item in json.loads(run.stdout)}
    timings = {name: {"wall_ms": item["wall_ms"], **item["timing"]}
               for name, item in results.items() if "timing" in item}  # fmt: skip
    (artifacts / "timings.json").write_text(json.dumps(timings, indent=2), encoding="utf-8")
    return results


def test_no_page_errors(shown: dict[str, Any]) -> None:
    assert shown["_page_errors"]["errors"] == []


PLANS = [case for case in CASES if "fit" not in case[2]]


@pytest.mark.parametrize(("name", "query", "commands"), PLANS, ids=[case[0] for case in PLANS])
def test_plan_numbers_equal_the_cli(
    shown: dict[str, Any], name: str, query: str, commands: dict[str, list[str]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if "hf=" in query:  # the CLI reads the same file from a HF cache, as the page does (never the network)
        snapshot = tmp_path / f"models--{HUB_ID.replace('/', '--')}" / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        shutil.copy(shipped_checkpoints()[HUB_SOURCE].folder / "config.json", snapshot / "config.json")
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cards = {card["engine"]: card for card in shown[name]["cards"]}
    assert set(cards) == set(commands)
    for engine, argv in commands.items():
        card = cards[engine]
        assert card["argv"] == "kvstrategies " + shlex.join(argv)  # the page ran this command line
        rc, doc = _cli(argv)
        if rc != 0:
            assert card["refused"] and card["error"] == doc["error"]
            assert card["option_tokens"] == [option["capacity_tokens"] for option in doc["options"]]
            assert card["option_tokens"], "a does-not-fit shows its options"
            continue
        assert not card["refused"]
        assert card["bars"] > 0  # the breakdown was drawn
        if engine == "sglang":
            answer = doc["planner"]["answer"]
            assert card["tokens"] == answer["tokens_total"]
            assert card["requests"] == {str(c["request_length"]): str(c["total"] if c["served"] else 0)
                                        for c in answer["concurrency"]}  # fmt: skip
            assert card["command"] == doc["planner"]["sglang_command"]["text"]
        else:
            assert card["tokens"] == doc["vllm_log"]["gpu_kv_cache_size_tokens"]
            assert card["requests"] == {str(r["request_length"]): f"{r['max_concurrency']:.2f}"
                                        for r in doc["request_lengths"]}  # fmt: skip


def test_what_fits_equals_the_cli(shown: dict[str, Any]) -> None:
    name, _, commands = CASES[-1]
    rc, doc = _cli(commands["fit"])
    assert rc == 0
    rows = shown[name]["fit"]
    assert [row["model"] for row in rows] == [m["model"] for m in doc["models"]]
    for row, model in zip(rows, doc["models"], strict=True):
        if model["fits"]:
            assert (row["tokens"], row["requests"]) == (model["total_tokens"], model["total_requests"])
        else:
            assert row["reason"] == model["reason"]


def test_state_is_in_the_url(shown: dict[str, Any]) -> None:
    """Each answer's address names what was asked, so the link reproduces it."""
    url = shown["mamba-qwen3-next-tp4-h200"]["url"]
    for part in ("model=qwen3-next-80b-a3b", "gpu=H200", "tp=4", "release=0.5.20", "view=plan"):
        assert part in url
    hub = shown["hub-fetched-config"]["url"]
    assert f"hf={HUB_ID.replace('/', '%2F')}" in hub and "hub=%2Fhub" in hub  # the fetched id and its Hub
