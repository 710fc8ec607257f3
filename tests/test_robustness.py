"""Robustness at the boundary: large values plan, bad input names its field, files are JSON only.

Companion of test_fuzz.py (random input); these are the hand-picked cases with hand-computed
numbers: 10^7-token pools, 200-layer models at TP 64, budgets up to 2**62 bytes, NVIDIA's
``Infinity`` configs, and the CLI turning every user error into one stderr line and exit 2.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import cli
from kvstrategies.api import Plan, build, plan
from kvstrategies.case import load_case, parse_case
from kvstrategies.context import KVCacheSettings, SchedulingConfig, SpeculativeConfig
from kvstrategies.dtypes import DType, resolve_kv_cache_dtype
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.jsonio import parse_json_text, read_json_file
from kvstrategies.launch_defaults import model_facts_from_hf_config
from kvstrategies.models import parse_hf_config
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies.default import DefaultPoolConfigurator
from kvstrategies.weights import estimate_weights

GIB = 2**30


def _plan(case: dict[str, Any]) -> Plan:
    parsed = parse_case(case)
    return plan(
        parsed.settings,
        parsed.available_bytes,
        max_tokens=parsed.max_tokens,
        pool_max_tokens=parsed.pool_max_tokens,
        pool_max_running_requests=parsed.pool_max_running_requests,
    )


def _dense_200_layers() -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 200,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 8192,
        "max_position_embeddings": 131072,
    }


# ---- large values --------------------------------------------------------------------------------


def test_ten_million_token_pool_plans_and_builds_on_meta() -> None:
    # Llama-3.1-8B bf16: cell = 8 heads x (128 + 128) x 32 layers x 2 B = 131,072 B/token
    planned = _plan({"preset": "llama-3.1-8b", "available_bytes": 2**40, "max_tokens": 10**7})
    assert planned.cell_size_bytes == 131_072
    assert planned.sizes.max_total_num_tokens == 8_388_608  # 2**40 // 131,072
    assert planned.sizes_from_max_tokens is not None
    assert planned.sizes_from_max_tokens.max_total_num_tokens == 10_000_000
    # the pool holds T + page_size rows: (10^7 + 1) x 131,072 B
    assert planned.layout.token_to_kv.planned_bytes == 1_310_720_131_072
    assert build(planned, "meta").allocated_bytes == planned.layout.planned_bytes


def test_200_layer_dense_model_at_tp64() -> None:
    # 8 KV heads at TP 64 -> 1 replicated head per rank; cell = 1 x 256 x 200 x 2 = 102,400 B/token
    planned = _plan({"hf_config": _dense_200_layers(), "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB})
    assert planned.cell_size_bytes == 102_400
    assert planned.sizes.max_total_num_tokens == 419_392  # align(42,949,672,960 // 102,400 = 419,430, 64)
    assert len(planned.layout.token_to_kv.allocations) == 200


def test_200_layer_mla_model_at_tp64() -> None:
    # DeepSeek-V3 geometry stretched to 200 layers: cell = 576 x 200 x 2 B = 230,400 B/token (no TP split)
    config = {**load_preset_config("deepseek-v3"), "num_hidden_layers": 200}
    planned = _plan({"hf_config": config, "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB})
    assert planned.cell_size_bytes == 230_400
    assert planned.sizes.max_total_num_tokens == 186_368  # align(186,413, 64)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({**load_preset_config("gpt-oss-20b"), "num_hidden_layers": 200,
                      "layer_types": ["sliding_attention", "full_attention"] * 100}, id="hybrid-swa"),  # fmt: skip
        pytest.param({**load_preset_config("nemotron-h-8b"), "hybrid_override_pattern": "M-M*" * 50}, id="mamba"),
        pytest.param({**load_preset_config("deepseek-v3.2"), "num_hidden_layers": 200}, id="dsa"),
        pytest.param({**load_preset_config("deepseek-v4-flash"), "num_hidden_layers": 200,
                      "compress_ratios": [0, 4, 128, 4] * 50 + [0]}, id="dsv4"),  # fmt: skip
    ],
)
def test_200_layer_models_of_every_family_plan_at_tp64(config: dict[str, Any]) -> None:
    page = 256 if "compress_ratios" in config else 64
    planned = _plan(
        {"hf_config": config, "tp_size": 64, "page_size": page, "available_bytes": 400 * GIB, "pool_max_tokens": 8192}
    )
    assert planned.sizes.max_total_num_tokens % page == 0
    assert planned.ctx.geometry.num_hidden_layers == 200
    assert build(planned, "meta").allocated_bytes == planned.layout.planned_bytes


def test_budget_of_2_to_the_62_bytes_plans_exactly() -> None:
    planned = _plan({"preset": "llama-3.1-8b", "available_bytes": 2**62})
    assert planned.sizes.max_total_num_tokens == 35_184_372_088_832  # 2**62 // 131,072 = 2**45
    assert planned.sizes.max_running_requests == 4096


def test_budget_beyond_int64_is_rejected_by_name() -> None:
    with pytest.raises(KVCacheConfigError, match="available_bytes"):
        _plan({"preset": "llama-3.1-8b", "available_bytes": 2**63})
    ctx = parse_case({"preset": "llama-3.1-8b", "available_bytes": 1}).settings
    with pytest.raises(KVCacheConfigError, match=r"available_bytes must be in \[1, 9223372036854775807\]"):
        plan(ctx, 2**70)


# ---- NVIDIA's Infinity ---------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["nemotron-h-8b", "nemotron-h-56b"])
def test_nemotron_presets_with_infinity_plan(preset: str) -> None:
    config = load_preset_config(preset)
    assert config["time_step_limit"][1] == math.inf  # the shipped file says Infinity
    planned = _plan({"preset": preset, "available_bytes": 40 * GIB})
    assert isinstance(planned.configurator, DefaultPoolConfigurator)
    assert planned.sizes.max_mamba_cache_size is not None


def test_config_file_with_infinity_loads_from_disk(tmp_path: Path) -> None:
    text = json.dumps(load_preset_config("nemotron-h-8b"))
    assert "Infinity" in text
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(text, encoding="utf-8")
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"hf_config": "model", "available_bytes": 40 * GIB}), encoding="utf-8")
    case = load_case(case_file)
    assert case.settings.geometry.mamba is not None
    assert read_json_file(tmp_path / "model" / "config.json")["time_step_limit"] == [0.0, math.inf]


def test_json_reader_edge_cases(tmp_path: Path) -> None:
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}')
    assert read_json_file(bom) == {"a": 1}
    with pytest.raises(KVCacheConfigError, match="nested too deeply"):
        parse_json_text("[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(KVCacheConfigError, match="big.json: unreadable JSON value"):
        parse_json_text('{"a": ' + "9" * 5000 + "}", "big.json")
    with pytest.raises(KVCacheConfigError, match=r"bad.json: invalid JSON at line 2 column 7"):
        parse_json_text('{"a": 1,\n "b": }', "bad.json")


# ---- the CLI: one stderr line, exit 2 ---------------------------------------------------------------


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    return code, lines


def _files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "empty").mkdir()
    (tmp_path / "latin1.json").write_bytes('{"name": "caf\xe9"}'.encode("latin-1"))
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "truncated.json").write_text('{"num_hidden_layers": 32,\n "head_dim": ', encoding="utf-8")
    (tmp_path / "case_list_config.json").write_text(
        json.dumps({"hf_config": "list.json", "available_bytes": GIB}), encoding="utf-8"
    )
    (tmp_path / "case_unknown_key.json").write_text(
        json.dumps({"preset": "llama-3.1-8b", "available_bytes": GIB, "tensor_parallel": 2}), encoding="utf-8"
    )
    return {p.name: p for p in tmp_path.iterdir()}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["plan", "@empty", "--available-bytes", "40GiB"], r"model folder .*empty has no config.json"),
        (["plan", "@latin1.json", "--available-bytes", "40GiB"], r"latin1.json: not UTF-8 text \(byte 13 is 0xe9\)"),
        (["plan", "@list.json", "--available-bytes", "40GiB"], r"list.json: a model config .* got a JSON list"),
        (["plan", "@truncated.json", "--available-bytes", "40GiB"], r"truncated.json: invalid JSON at line 2 column"),
        (["plan", "--case", "@list.json"], r"list.json: a case file must be a JSON object"),
        (["plan", "--case", "@latin1.json"], r"latin1.json: not UTF-8 text"),
        (["plan", "--case", "@empty"], r"cannot read .*empty: it is a folder"),
        (["plan", "--case", "@missing.json"], r"cannot read .*missing.json"),
        (["plan", "--case", "@case_list_config.json"], r"list.json: a model config \(config.json\) must be"),
        (["plan", "--case", "@case_unknown_key.json"], r"case_unknown_key.json: unknown case keys \['tensor_p"),
        (["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--plot", "@empty/no/such/dir/x.png"],
         r"No such file or directory|kvstrategies\[plot\]"),  # no matplotlib: the install hint  # fmt: skip
        (["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--page-size", "0"], r"--page-size must be a positive"),
    ],
)
def test_cli_user_errors_are_one_line_and_exit_2(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(tmp_path)
    files["missing.json"] = tmp_path / "missing.json"
    resolved = [str(files[a[1:].split("/")[0]]) + a[1:][len(a[1:].split("/")[0]):] if a.startswith("@") else a
                for a in args]  # fmt: skip
    code, lines = _run_cli(resolved, capsys)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("kvstrategies: error: ")
    assert re.search(expected, lines[0]), lines[0]


# ---- every bad input names its field -------------------------------------------------------------------


def _ctx(**fields: Any) -> KVCacheSettings:
    return parse_case({"preset": "llama-3.1-8b", "available_bytes": 1, **fields}).settings


def _config(preset: str, **changes: Any) -> dict[str, Any]:
    return {**load_preset_config(preset), **changes}


BAD_INPUTS = [
    ("layers 1e308", lambda: parse_hf_config(_config("llama-3.1-8b", num_hidden_layers=1e308)), "num_hidden_layers"),
    ("layers as text", lambda: parse_hf_config(_config("llama-3.1-8b", num_hidden_layers="32")), "num_hidden_layers"),
    ("rope factor text", lambda: parse_hf_config(_config("llama-3.1-8b", rope_scaling={"factor": "x"})),
     "rope_scaling.factor"),  # fmt: skip
    ("rope factor inf", lambda: parse_hf_config(_config("mistral-7b", rope_scaling={"factor": math.inf})),
     "rope_scaling.factor"),  # fmt: skip
    ("loop_num huge", lambda: parse_hf_config(_config("llama-3.1-8b", loop_num=1000)), "loop_num"),
    ("no GDN layer", lambda: parse_hf_config(_config("qwen3-next-80b-a3b", full_attention_interval=1)),
     "full_attention_interval"),  # fmt: skip
    ("no KDA layer", lambda: parse_hf_config(_config("kimi-linear-48b-a3b", linear_attn_config={
        "kda_layers": [], "num_heads": 32, "head_dim": 128})), "kda_layers"),  # fmt: skip
    ("index pattern garbage", lambda: parse_hf_config(_config("deepseek-v3.2", index_topk_pattern=5)),
     "index_topk_pattern"),  # fmt: skip
    ("Mamba heads vs TP", lambda: _plan({"preset": "nemotron-h-8b", "tp_size": 3, "available_bytes": 40 * GIB}),
     "not divisible by the linear-attention TP size 3"),  # fmt: skip
    ("DSA index_head_dim", lambda: _plan({"hf_config": _config("deepseek-v3.2", index_head_dim=64), "page_size": 64,
                                          "available_bytes": 40 * GIB}), "index_head_dim"),  # fmt: skip
    ("MXFP8 head dim", lambda: _plan({"hf_config": _config("llama-3.1-8b", head_dim=80), "kv_cache_dtype": "mxfp8",
                                      "available_bytes": 40 * GIB}), "head_dim"),  # fmt: skip
    ("DSV4 cap mode, no compressed layer", lambda: _plan({
        "hf_config": _config("deepseek-v4-flash", num_hidden_layers=2, compress_ratios=[0, 0, 0]), "page_size": 256,
        "max_running_requests": 1, "disable_radix_cache": True, "chunked_prefill_size": 2048,
        "available_bytes": GIB}), "swa_full_tokens_ratio"),  # fmt: skip
    ("kv dtype name", lambda: _ctx(kv_cache_dtype="fp8"), "kv_cache_dtype"),
    ("page 0", lambda: _ctx(page_size=0), "page_size"),
    ("page 2**21", lambda: KVCacheSettings(_ctx().geometry, _ctx().kv_cache_dtype, page_size=2**21), "page_size"),
    ("pp_rank", lambda: _ctx(pp_size=2, pp_rank=2), "pp_rank"),
    ("swa ratio", lambda: select(_ctx(preset="gpt-oss-20b", swa_full_tokens_ratio=1.5)), "swa_full_tokens_ratio"),
    ("mamba ratio -1", lambda: _ctx(mamba_full_memory_ratio=-1), "mamba_full_memory_ratio"),
    ("mamba ratio NaN", lambda: SchedulingConfig(mamba_full_memory_ratio=math.nan), "mamba_full_memory_ratio"),
    ("requests 0", lambda: SchedulingConfig(max_running_requests=0), "max_running_requests"),
    ("draft tokens text", lambda: SpeculativeConfig(num_draft_tokens="4"), "speculative_num_draft_tokens"),  # type: ignore[arg-type]
    ("eviction interval inf", lambda: _ctx(env={"SGLANG_SWA_EVICTION_INTERVAL": math.inf}),
     "SGLANG_SWA_EVICTION_INTERVAL"),  # fmt: skip
    ("platform flag text", lambda: _ctx(platform={"is_sm100": "yes"}), "is_sm100"),
    ("available float", lambda: plan(_ctx(), 1.5), "available_bytes"),  # type: ignore[arg-type]
    ("no context", lambda: plan(None, GIB), "KVCacheContext"),  # type: ignore[arg-type]
    ("geometry garbage", lambda: KVCacheSettings({"layers": 2}, _ctx().kv_cache_dtype), "geometry"),  # type: ignore[arg-type]
    ("model dtype", lambda: resolve_kv_cache_dtype("auto", "bf16"), "model_dtype"),  # type: ignore[arg-type]
    ("dtype name type", lambda: DType.from_name(16), "dtype name"),  # type: ignore[arg-type]
    ("build device", lambda: build(_plan({"preset": "llama-3.1-8b", "available_bytes": GIB, "pool_max_tokens": 64}),
                                   "tpu9"), "device"),  # fmt: skip
    ("weights vocab", lambda: estimate_weights({k: v for k, v in load_preset_config("llama-3.1-8b").items()
                                                if k != "vocab_size"}), "vocab_size"),  # fmt: skip
    ("launch facts", lambda: model_facts_from_hf_config(_config("llama-3.1-8b", num_key_value_heads=[8])),
     "num_key_value_heads"),  # fmt: skip
]


def select(ctx: KVCacheSettings) -> Any:
    from kvstrategies.strategies.registry import select_configurator

    return select_configurator(ctx)


@pytest.mark.parametrize(("call", "field"), [pytest.param(c, f, id=i) for i, c, f in BAD_INPUTS])
def test_bad_input_raises_config_error_naming_the_field(call: Any, field: str) -> None:
    with pytest.raises(KVCacheConfigError) as info:
        call()
    assert field in str(info.value)


def test_error_kinds_are_distinguishable() -> None:
    with pytest.raises(InsufficientMemoryError):
        _plan({"preset": "llama-3.1-8b", "available_bytes": 1000})
    with pytest.raises(UnsupportedConfigurationError):
        _plan({"preset": "llama-3.1-8b", "available_bytes": GIB, "env": {"SGLANG_USE_HND_KVCACHE": "1"}})


def test_docs_errors_lists_every_error_class() -> None:
    """docs/errors.md (tools/error_table.py) has a row for every KVCacheConfigError subclass.

    Subclasses are found in the source text (importing every module would import Triton kernels
    out of the kernel tests' interpreter mode).
    """
    root = Path(__file__).parent.parent
    bases: dict[str, list[str]] = {}
    for source in (root / "kvstrategies").rglob("*.py"):
        for name, parents in re.findall(r"^class (\w+)\(([\w, .]+)\):", source.read_text(encoding="utf-8"), re.M):
            bases[name] = [p.strip().split(".")[-1] for p in parents.split(",")]
    classes = {"KVCacheConfigError"}
    while True:
        more = {name for name, parents in bases.items() if set(parents) & classes} - classes
        if not more:
            break
        classes |= more
    table = (root / "docs" / "errors.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE))
    assert {"LayoutError", "DSV4StateReservationError", "SWAPoolTooSmallError"} <= classes
    assert classes <= listed, sorted(classes - listed)
