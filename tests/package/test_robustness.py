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

import kvstrategies.cli.app as cli
from kvstrategies.api import Plan, build, plan
from kvstrategies.case import load_case, parse_case
from kvstrategies.context import KVCacheSettings, SchedulingConfig, SpeculativeConfig
from kvstrategies.core.dtypes import DType, resolve_kv_cache_dtype
from kvstrategies.core.jsonio import parse_json_text, read_json_file
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.models import parse_hf_config
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.config_fields import MAX_CONFIG_DEPTH, validate_config_fields
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.launch.defaults import model_facts_from_hf_config
from kvstrategies.strategies.default import DefaultPoolConfigurator
from tests.helpers import SMALL_LLAMA, planner_request

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
    ("build check_bounds text", lambda: build(_plan({"preset": "llama-3.1-8b", "available_bytes": GIB,
                                                      "pool_max_tokens": 64}), "meta", check_bounds="no"),
     "check_bounds"),  # type: ignore[arg-type]  # fmt: skip
    ("build use_triton text", lambda: build(_plan({"preset": "llama-3.1-8b", "available_bytes": GIB,
                                                    "pool_max_tokens": 64}), "meta", use_triton="x"),
     "use_triton"),  # type: ignore[arg-type]  # fmt: skip
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
    root = Path(__file__).parents[2]
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


# ---- the --gpu planner path: every field the weight estimate / launch rules read ---------------------


def _gpu_request(preset: str, config: dict[str, Any] | None = None, **changes: Any) -> Any:

    source = {"hf_config": config} if config is not None else {"preset": preset}
    return DeploymentRequest(model=preset, source=source, gpu=lookup_gpu("H100"), **changes)


def _nested(preset: str, section: str, **changes: Any) -> dict[str, Any]:
    config = load_preset_config(preset)
    return {**config, section: {**config[section], **changes}}


PLANNER_BAD_CONFIGS = [
    # each of these escaped as OverflowError / hung / printed a negative weight before config_fields
    ("deepseek-v2-lite", lambda: _config("deepseek-v2-lite", vocab_size=1e308), "vocab_size"),
    ("deepseek-v2-lite", lambda: _config("deepseek-v2-lite", num_nextn_predict_layers=10**20), "num_nextn_predict"),
    ("deepseek-v2-lite", lambda: _config("deepseek-v2-lite", hc_mult=2**1000), "hc_mult"),
    ("gemma-2-9b", lambda: _config("gemma-2-9b", hidden_size=-1), "hidden_size"),
    ("deepseek-v2-lite", lambda: _config("deepseek-v2-lite", n_routed_experts=-1), "n_routed_experts"),
    ("mixtral-8x7b", lambda: _config("mixtral-8x7b", num_local_experts=math.nan), "num_local_experts"),
    ("minimax-m2.5", lambda: _config("minimax-m2.5", num_mtp_modules=5000, mtp_transformer_layers=5000),
     "num_mtp_modules"),  # fmt: skip
    ("qwen3.5-35b-a3b", lambda: _nested("qwen3.5-35b-a3b", "vision_config", hidden_size=2**1000),
     "vision_config.hidden_size"),  # fmt: skip
    ("qwen3.5-35b-a3b", lambda: _nested("qwen3.5-35b-a3b", "text_config", mtp_num_hidden_layers=10**19),
     "text_config.mtp_num_hidden_layers"),  # fmt: skip
    ("kimi-linear-48b-a3b", lambda: _nested("kimi-linear-48b-a3b", "linear_attn_config", head_dim=1e308),
     "linear_attn_config.head_dim"),  # fmt: skip
    ("llama-3.1-8b", lambda: _nested("llama-3.1-8b", "rope_scaling", factor=math.inf), "factor"),
    ("deepseek-v3", lambda: _nested("deepseek-v3", "quantization_config", weight_block_size=[0, 128]),
     "weight_block_size"),  # fmt: skip
    ("qwen3-8b", lambda: _config("qwen3-8b", quantization_config={"quant_method": "gptq", "bits": 4,
                                                                  "group_size": 0}), "group_size"),  # fmt: skip
    ("qwen3-8b", lambda: _config("qwen3-8b", quantization_config={"quant_method": "gptq", "bits": 4,
                                                                  "group_size": -2}), "group_size"),  # fmt: skip
    ("qwen3-8b", lambda: _config("qwen3-8b", quantization_config={
        "quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
            "num_bits": 0, "type": "int", "strategy": "channel"}}}}), "num_bits"),  # fmt: skip
    ("mimo-v2-flash", lambda: _config("mimo-v2-flash", moe_layer_freq=[1, -1]), "moe_layer_freq[1]"),
    ("gemma-2-9b", lambda: _config("gemma-2-9b", sliding_window_size=-2), "sliding_window_size"),
]


@pytest.mark.parametrize(("preset", "make", "field"), PLANNER_BAD_CONFIGS)
def test_planner_refuses_bad_estimate_fields_naming_them(preset: str, make: Any, field: str) -> None:

    with pytest.raises(KVCacheConfigError) as info:
        plan_deployment(_gpu_request(preset, make()), suggest=False)
    assert field in str(info.value)


def test_planner_field_rules_accept_every_shipped_config() -> None:
    """No rule refuses a real config: every preset, every hf_config of the test cases and the published
    configs of tests/fixtures/published (Grok-2's ``"sliding_window_size": -1`` means no window)."""
    from kvstrategies.planner.config_fields import validate_config_fields
    from kvstrategies.presets import preset_names

    configs = [load_preset_config(name) for name in preset_names()]
    for path in (Path(__file__).parents[1] / "fixtures" / "published").glob("*.json"):
        configs.append(json.loads(path.read_text(encoding="utf-8"))["config"])
    for path in (Path(__file__).parents[2] / "cases").glob("*.json"):
        hf = json.loads(path.read_text(encoding="utf-8")).get("hf_config")
        if isinstance(hf, dict):
            configs.append(hf)
    assert len(configs) > 30
    for config in configs:
        validate_config_fields(config)


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"pp_size": 2**63}, "--pp-size"),
        ({"page_size": 0}, "--page-size"),
        ({"chunked_prefill_size": 0}, "--chunked-prefill-size"),
        ({"tp_size": 0}, "--tp"),
        ({"weight_bytes": 2**64}, "--weight-bytes"),
    ],
)
def test_planner_refuses_bad_request_values(changes: dict[str, Any], flag: str) -> None:

    with pytest.raises(KVCacheConfigError, match=re.escape(flag)):
        plan_deployment(_gpu_request("llama-3.1-8b", **changes), suggest=False)


def test_absurd_budgets_are_never_reported() -> None:
    from kvstrategies.planner.config_fields import check_budget_sane
    from kvstrategies.sglang.budget import KVBudget

    good = KVBudget(available_bytes=GIB, source="gpu", gpu_name="X", weight_bytes=GIB)
    check_budget_sane(good, 80 * GIB)
    for bad, kind in (
        (KVBudget(available_bytes=GIB, source="gpu", gpu_name="X", weight_bytes=0), "weight estimate"),
        (KVBudget(available_bytes=-5, source="gpu", gpu_name="X", weight_bytes=GIB), "no KV budget"),
        (KVBudget(available_bytes=81 * GIB, source="gpu", gpu_name="X", weight_bytes=GIB), "larger than the GPU"),
    ):
        with pytest.raises(KVCacheConfigError, match=kind):
            check_budget_sane(bad, 80 * GIB)
    check_budget_sane(KVBudget(available_bytes=10**15, source="given"), 80 * GIB)  # the user's own number


def test_chunked_prefill_2_pow_40_is_answered_without_building_the_graph_list() -> None:
    from kvstrategies.sglang.launch.defaults import prefill_graph_batch_sizes, prefill_graph_bs_count

    for max_bs in (0, 3, 4, 32, 48, 4096, 4607, 4608, 5120, 8192, 16384, 100_000):
        assert prefill_graph_bs_count(max_bs) == len(prefill_graph_batch_sizes(max_bs))
    assert prefill_graph_bs_count(2**40) == 8 + 14 + 8 + 8 + 12 + (2**40 - 4608) // 512 + 1


# ---- files: regular files only, bounded, no duplicate keys -------------------------------------------


def test_json_files_must_be_regular_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from kvstrategies.core import jsonio

    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        read_json_file("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        read_json_file(fifo)  # would block forever on open/read
    big = tmp_path / "big.json"
    big.write_text('{"a": "' + "x" * 200 + '"}', encoding="utf-8")
    monkeypatch.setattr(jsonio, "MAX_JSON_BYTES", 100)
    with pytest.raises(KVCacheConfigError, match="larger than"):
        read_json_file(big)


def test_case_naming_a_device_or_fifo_as_hf_config_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "config-fifo"
    os.mkfifo(fifo)
    for target in ("/dev/zero", "/dev/urandom", str(fifo)):
        case = tmp_path / "case.json"
        case.write_text(json.dumps({"hf_config": target, "available_bytes": GIB}), encoding="utf-8")
        with pytest.raises(KVCacheConfigError, match="not a regular file"):
            load_case(case)


def test_duplicate_keys_and_lone_surrogates_are_errors() -> None:
    with pytest.raises(KVCacheConfigError, match="'available_bytes' appears twice"):
        parse_json_text('{"available_bytes": 1, "available_bytes": 2}', "dup.json")
    with pytest.raises(KVCacheConfigError, match="appears twice"):
        parse_json_text('{"hf_config": {"a": 1, "a": 1}}', "nested.json")
    with pytest.raises(KVCacheConfigError, match="lone surrogate"):
        parse_json_text('{"architectures": ["Llama\\udc80ForCausalLM"]}', "sur.json")
    assert parse_json_text('{"a": "\\ud83d\\ude00"}', "pair.json") == {"a": "\U0001f600"}  # a valid pair stays


REPORTED_CLI_INPUTS = [
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--gpu-memory", "0"], "--gpu-memory"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--gpu-memory", "9" * 5000], "5000 digits"),
    # a GPU smaller than what is held before weights load: named as such, not as a negative free memory
    (["plan", "llama-3.1-8b", "--gpu-memory", "1GiB"], "GiB held before weights load (CUDA context"),
    # no weights at all: a budget no GPU has, refused for vLLM as for SGLang (a given KV budget may say 0)
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "vllm", "--weight-bytes", "0"],
     "--weight-bytes with a GPU budget"),
    (["plan", "llama-3.1-8b", "--available-bytes", "9" * 5000], "5000 digits"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--pp-size", str(2**63)], "--pp-size"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--chunked-prefill-size", str(2**40)], "mem-fraction-static"),
    (["sweep", "llama-3.1-8b", "--gpu", ","], "--gpu is empty"),
    (["sweep", "llama-3.1-8b", "--gpu", "H100", "--page-size", "0"], "--page-size"),
    (["sweep", "llama-3.1-8b", "--gpu", "H100", "--page-size", ",".join(map(str, range(1, 20_002)))], "cells"),
    # a repeated value is planned once (sweep dedupes the lists), so the bound counts distinct cells
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--page-size", "0"], "--page-size"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--plot", "@dir"], "it is a folder"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--plot", "/dev/null"], "not a regular file"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--plot", "@dir/breakdown"], "unknown image suffix"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--plot", "@dir/breakdown.txt"], "unknown image suffix"),
    (["plan", "--case", "/dev/zero"], "not a regular file"),
    (["plan", "--case", "@dup.json"], "appears twice"),
    (["plan", "@surrogate.json", "--gpu", "H100"], "lone surrogate"),
    (["plan", "--case", "@mamba.json"], "mamba_full_memory_ratio"),
]


@pytest.mark.parametrize(("args", "expected"), REPORTED_CLI_INPUTS)
def test_reported_cli_inputs_end_as_one_line_exit_2(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dup.json").write_text('{"preset": "llama-3.1-8b", "available_bytes": 1, "available_bytes": 2}',
                                       encoding="utf-8")  # fmt: skip
    surrogate = {**load_preset_config("llama-3.1-8b"), "architectures": ["Llama\udc80ForCausalLM"]}
    (tmp_path / "surrogate.json").write_text(json.dumps(surrogate), encoding="utf-8")
    mamba = {"preset": "nemotron-h-8b", "available_bytes": 40 * GIB, "mamba_full_memory_ratio": 1e308}
    (tmp_path / "mamba.json").write_text(json.dumps(mamba), encoding="utf-8")
    resolved = [str(tmp_path) + "/" + a[1:] if a.startswith("@") else a for a in args]
    code, lines = _run_cli(resolved, capsys)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("kvstrategies: error: ")
    assert expected in lines[0], lines[0]


# ---- plan() with an engine's own context object ---------------------------------------------------


class _EngineContext:
    """A context object as an engine would write one: plain attributes, its own methods."""

    def __init__(self, base: KVCacheSettings, **overrides: Any) -> None:
        for name in ("geometry", "kv_cache_dtype", "page_size", "parallel", "speculative", "device", "platform",
                     "backends", "scheduling", "knobs", "is_draft_worker", "release"):  # fmt: skip
            setattr(self, name, overrides.get(name, getattr(base, name)))
        self._base = base

    def at_pp_rank(self, rank: int) -> Any:
        return self

    def target_context(self) -> Any:
        return self  # a draft whose target is itself: recursed forever before plan() snapshotted it


class _RaisingContext(_EngineContext):
    @property
    def page_size(self) -> int:  # type: ignore[override]
        return self.page_size  # RecursionError

    @page_size.setter
    def page_size(self, value: int) -> None:
        pass


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"page_size": -64}, "page_size"),
        ({"page_size": 0}, "page_size"),  # was ZeroDivisionError
        ({"page_size": "64"}, "page_size"),  # was TypeError
        ({"page_size": 64.0}, "page_size"),
        ({"is_draft_worker": 1}, "is_draft_worker"),
        ({"geometry": {"num_hidden_layers": 32}}, "geometry"),
        ({"parallel": None}, "parallel"),
    ],
)
def test_plan_validates_an_engine_context(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(KVCacheConfigError, match=field):
        plan(_EngineContext(_ctx(), **overrides), 40 * GIB)  # type: ignore[arg-type]


def test_plan_with_an_engine_context_equals_the_settings_plan() -> None:
    settings = _ctx()
    engine = plan(_EngineContext(settings), 40 * GIB)  # type: ignore[arg-type]
    assert engine.sizes == plan(settings, 40 * GIB).sizes
    assert engine.ctx == settings  # the validated snapshot
    draft = _EngineContext(_ctx(preset="deepseek-v3", speculative_algorithm="EAGLE"), is_draft_worker=True)
    assert plan(draft, 40 * GIB).ctx.is_draft_worker  # type: ignore[arg-type]  # no RecursionError


def test_plan_reports_an_engine_property_that_fails() -> None:
    with pytest.raises(KVCacheConfigError, match=r"ctx.* cannot be read .*RecursionError"):
        plan(_RaisingContext(_ctx()), 40 * GIB)  # type: ignore[arg-type]


# ---- build(plan, "meta") allocates nothing proportional to the input ---------------------------------


def test_meta_build_keeps_every_tensor_on_meta_and_allocators_lazy() -> None:
    from kvstrategies.api import MAX_WHAT_IF_REQUESTS

    planned = _plan({"preset": "qwen3-next-80b-a3b", "tp_size": 4, "available_bytes": 40 * GIB,
                     "pool_max_tokens": 2**40, "pool_max_running_requests": MAX_WHAT_IF_REQUESTS})  # fmt: skip
    pools = build(planned, "meta")
    tensors = [t for pool in (pools.req_to_token_pool, pools.token_to_kv_pool) for t in pool.tensors.values()]
    assert tensors and all(t.device.type == "meta" for t in tensors)  # req_generation included
    requests = pools.req_to_token_pool.allocator
    assert requests.available_size() == MAX_WHAT_IF_REQUESTS and not requests._tail  # a lazy range
    assert pools.allocator is not None and pools.allocator.held_count() == -1  # nothing tracked on meta


def test_what_if_request_count_is_bounded() -> None:
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests must be in"):
        _plan({"preset": "llama-3.1-8b", "available_bytes": GIB, "pool_max_tokens": 64,
               "pool_max_running_requests": 2**31})  # fmt: skip


# ---- model parsing: documented defaults and the smallest legal values --------------------------------


def test_jamba_defaults_match_the_values_the_preset_spells_out() -> None:
    """transformers' Jamba defaults (d_conv 4, attention period 8) fill the fields when left out."""
    full = load_preset_config("jamba-v0.1")
    assert (full["mamba_d_conv"], full["attn_layer_period"]) == (4, 8)
    bare = {k: v for k, v in full.items() if k not in ("mamba_d_conv", "attn_layer_period")}
    assert parse_hf_config(bare) == parse_hf_config(full)


def test_smallest_legal_mamba_values_parse() -> None:
    jamba = parse_hf_config(_config("jamba-v0.1", mamba_expand=1, mamba_d_conv=2))
    assert jamba.mamba is not None
    qwen = parse_hf_config(_config("qwen3-next-80b-a3b", linear_conv_kernel_dim=2))
    assert qwen.mamba is not None
    for preset, field in (("jamba-v0.1", "mamba_d_conv"), ("qwen3-next-80b-a3b", "linear_conv_kernel_dim")):
        with pytest.raises(KVCacheConfigError, match=field):
            parse_hf_config(_config(preset, **{field: 1}))


def test_planner_request_bounds_are_inclusive() -> None:
    """Each bound is the largest value accepted: one more is refused (flags named)."""
    from kvstrategies.planner.config_fields import MAX_PARALLEL

    top = 2**63 - 1
    for field, largest, flag in (
        ("weight_bytes", top, "--weight-bytes"),
        ("overhead_bytes", top, "--gpu-overhead"),
        ("available_bytes", top, "--available-bytes"),
        ("tp_size", MAX_PARALLEL, "--tp"),
        ("pp_size", 10_000, "--pp-size"),
        ("chunked_prefill_size", 2**40, "--chunked-prefill-size"),
    ):
        _gpu_request("llama-3.1-8b", **{field: largest})
        with pytest.raises(KVCacheConfigError, match=re.escape(flag)):
            _gpu_request("llama-3.1-8b", **{field: largest + 1})
    _gpu_request("llama-3.1-8b", chunked_prefill_size=-1)  # -1: chunked prefill off


def test_planner_list_fields_are_bounded_by_the_layer_limit() -> None:
    from kvstrategies.planner.config_fields import validate_config_fields

    validate_config_fields({"mlp_only_layers": [0] * 10_016})
    with pytest.raises(KVCacheConfigError, match="mlp_only_layers.*10017 entries"):
        validate_config_fields({"mlp_only_layers": [0] * 10_017})


def test_multimodal_models_reserve_sglangs_100_mib_vlm_cache() -> None:
    """SGLANG_VLM_CACHE_SIZE_MB defaults to 100: a multimodal model's GPU budget holds 100 MiB back."""

    planned = plan_deployment(_gpu_request("qwen3.5-35b-a3b", tp_size=8), suggest=False)
    assert planned.budget.multimodal_bytes == 100 * 2**20
    text_only = plan_deployment(_gpu_request("qwen3-8b"), suggest=False)
    assert text_only.budget.multimodal_bytes == 0


@pytest.mark.parametrize(
    ("mib", "tp", "tier"),
    [
        # sglang/srt/arg_groups/memory_hook.py: strict `gpu_mem < 20/35/60/90/160 * 1024` bands
        (20 * 1024 - 1, 1, (2048, 8)),
        (20 * 1024, 1, (4096, 48)),
        (35 * 1024 - 1, 4, (4096, 160)),
        (35 * 1024, 1, (4096, 32)),
        (60 * 1024, 1, (8192, 256)),
        (160 * 1024 - 1, 4, (8192, 512)),
        (160 * 1024, 1, (16384, 512)),
    ],
)
def test_capacity_tier_bands_are_strict_upper_bounds(mib: int, tp: int, tier: tuple[int, int]) -> None:
    from kvstrategies.sglang.launch.defaults import capacity_tier

    assert capacity_tier(mib, tp) == tier


# ---- how deep the config validator reads, and a request's byte counts --------------------------------------


# --- config_fields: how deep the validator reads -------------------------------------------------


def _at_depth(depth: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """SMALL_LLAMA with ``leaf`` as the object ``depth`` levels below the top (depth 1: ``config["extra"]``)."""
    node = leaf
    for _ in range(depth - 1):
        node = {"a": node}
    return {**SMALL_LLAMA, "extra": node}


def test_the_config_validator_reads_eight_objects_deep() -> None:
    """``validate_config_fields`` checks known integer fields in every nested object down to
    ``MAX_CONFIG_DEPTH`` = 8 levels below the top (real configs nest 3 deep) and stops there, so a
    hostile config cannot make it walk without bound: a bad ``num_attention_heads`` in the object
    8 levels down is refused, one 9 levels down is not read."""
    assert MAX_CONFIG_DEPTH == 8
    bad = {"num_attention_heads": -1}
    with pytest.raises(KVCacheConfigError, match=r"extra(\.a){7}\.num_attention_heads"):
        validate_config_fields(_at_depth(8, bad))
    validate_config_fields(_at_depth(9, bad))  # not read


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [("weight_bytes", 2**63 - 1, True), ("weight_bytes", 2**63, False),
     ("available_bytes", 2**63 - 1, True), ("available_bytes", 2**63, False)],
)  # fmt: skip
def test_byte_counts_of_a_request_stay_below_2_to_the_63(field: str, value: int, ok: bool) -> None:
    """``validate_request`` (run when the request is made): byte counts are int64 (what torch sizes
    hold): 2**63 - 1 is read, 2**63 refused naming the flag and the interval."""
    from kvstrategies.planner.request import validate_request

    if ok:
        validate_request(planner_request(SMALL_LLAMA, **{field: value}))
    else:
        flag = "--" + field.replace("_", "-")
        with pytest.raises(KVCacheConfigError, match=f"{flag} must be in \\[0, {2**63 - 1}\\]"):
            validate_request(planner_request(SMALL_LLAMA, **{field: value}))


# ---- adversarial round: config fields, the vLLM plan, compare, --dtype, fit, pasted vLLM values -------------


def _config_file(tmp_path: Path, preset: str, **changes: Any) -> Path:
    """``preset``'s config.json in a model folder under ``tmp_path``, with ``changes`` (``None``: the key removed)."""
    config = json.loads(json.dumps(load_preset_config(preset)))
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    folder = tmp_path / "my model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, allow_nan=True), encoding="utf-8")
    return folder


@pytest.mark.parametrize("as_file", [False, True])
def test_compare_plans_vllm_on_its_own_budget_for_a_model_folder(
    tmp_path: Path, as_file: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model folder (or its config.json, or a shipped HF id) carries its checkpoint folder in the SGLang
    request's ``source``; compare's own-budget table handed it to vLLM's case, which refused every row
    ("vLLM refuses: unknown case keys ['checkpoint']")."""
    folder = _config_file(tmp_path, "llama-3.1-8b")
    model = str(folder / "config.json") if as_file else str(folder)
    assert cli.main(["compare", model, "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "refuses" not in out and "unknown case keys" not in out
    assert re.search(r"8,192\s+410,721\s+50\s+54\.25 GiB\s+443,904", out), out


@pytest.mark.parametrize(
    ("preset", "changes", "field"),
    [
        ("llama-3.1-8b", {"intermediate_size": 1e308}, "intermediate_size"),  # was OverflowError
        ("deepseek-v3", {"hidden_size": math.nan}, "hidden_size"),  # was ValueError in the FP8 load check
        ("deepseek-v3", {"hidden_size": None}, "hidden_size"),  # was KeyError
        ("glm-4.5", {"partial_rotary_factor": math.nan}, "partial_rotary_factor"),  # was ValueError
    ],
)
def test_the_vllm_plan_checks_the_config_fields_it_reads(
    tmp_path: Path, preset: str, changes: dict[str, Any], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan --engine vllm`` ran none of the planner's config field rules: a NaN, huge or missing field
    was a bare ValueError / OverflowError / KeyError traceback."""
    folder = _config_file(tmp_path, preset, **changes)
    code, lines = _run_cli(["plan", str(folder), "--engine", "vllm", "--gpu", "H200", "--tp", "8"], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("kvstrategies: error: config field") and field in lines[0], lines[0]


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [(None, "partial_rotary_factor", math.nan), (None, "partial_rotary_factor", 1e308),
     (None, "partial_rotary_factor", -0.5), (None, "partial_rotary_factor", True),
     ("vision_config", "num_position_embeddings", math.nan), ("vision_config", "mlp_ratio", 1e308)],
)  # fmt: skip
def test_float_fields_of_the_weight_estimate_are_checked(section: str | None, field: str, value: Any) -> None:
    """The RoPE cache's ``partial_rotary_factor`` and a vision tower's ``mlp_ratio`` / position table
    went through ``int(...)`` unchecked: NaN and 1e308 were tracebacks on the SGLang path too, a
    negative factor a negative RoPE cache."""
    config = json.loads(json.dumps(load_preset_config("qwen3.5-35b-a3b")))
    (config if section is None else config[section])[field] = value
    with pytest.raises(KVCacheConfigError, match=rf"config field '[\w.]*{field}' must be a"):
        plan_deployment(planner_request(config, gpu="H200", tp_size=2))


def test_the_shipped_partial_rotary_factors_are_accepted() -> None:
    for preset in ("glm-4.5", "qwen3.5-35b-a3b"):
        validate_config_fields(load_preset_config(preset))


@pytest.mark.parametrize("dtype", ["int8", "uint64", "bf16", "float8_e4m3fn"])
def test_dtype_outside_sglangs_choices_is_refused(dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``plan --dtype int8`` planned an 8-bit KV cache and printed ``--dtype int8``, which SGLang's argparse
    refuses (choices: auto, half, float16, bfloat16, float, float32)."""
    code, lines = _run_cli(["plan", "llama-3.1-8b", "--gpu", "H100", "--dtype", dtype], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"--dtype '{dtype}' is not one of SGLang's choices" in lines[0], lines[0]


@pytest.mark.parametrize("pasted", [False, True])
def test_dtype_auto_is_sglangs_default(pasted: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """``--dtype auto`` (SGLang's default) was refused, pasted or as a flag: "unknown dtype 'auto'"."""
    base = ["plan", "llama-3.1-8b", "--gpu", "H100", "--json"]
    assert cli.main(base) == 0
    expected = json.loads(capsys.readouterr().out)["sizes"]
    args = (["plan", "--gpu", "H100", "--json", "--", "python", "-m", "sglang.launch_server", "--model-path",
             "meta-llama/Llama-3.1-8B", "--dtype", "auto"] if pasted else [*base, "--dtype", "auto"])  # fmt: skip
    assert cli.main(args) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["sizes"] == expected


def test_fit_refuses_a_kv_dtype_sglang_refuses_once(capsys: pytest.CaptureFixture[str]) -> None:
    """``fit --kv-cache-dtype nonsense`` exited 0 with a table of 116 models that "do not fit", each
    carrying the same argparse refusal."""
    code, lines = _run_cli(["fit", "--gpu", "H100", "--kv-cache-dtype", "auto,nonsense"], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "--kv-cache-dtype 'nonsense' is not one of SGLang's choices" in lines[0], lines[0]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--kv-cache-memory-bytes", "80GB"), ("--kv-cache-memory-bytes", "80GiB"), ("--max-num-seqs", "1k"),
     ("--block-size", "1k")],
)  # fmt: skip
def test_a_pasted_vllm_value_vllm_refuses_is_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``vllm serve M --kv-cache-memory-bytes 80GB`` was planned as 80 GB: the pasted value went to the
    ``plan`` flag, which also reads the planner's spellings; vLLM's argparse refuses it."""
    pasted = ["vllm", "serve", "meta-llama/Llama-3.1-8B", flag, value]
    code, lines = _run_cli(["plan", "--gpu", "H100", "--", *pasted], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"{flag} takes an integer" in lines[0] and repr(value) in lines[0], lines[0]


def test_a_pasted_vllm_value_in_vllms_spelling_still_plans(capsys: pytest.CaptureFixture[str]) -> None:
    for value, tokens in (("80G", "655,360"), ("80g", "610,304"), (str(80 * 2**30), "655,360")):
        pasted = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--kv-cache-memory-bytes", value]
        assert cli.main(["plan", "--gpu", "H100", "--", *pasted]) == 0
        assert f"GPU KV cache size: {tokens} tokens" in capsys.readouterr().out


def test_an_eagle_draft_without_a_model_is_named_when_it_overflows(capsys: pytest.CaptureFixture[str]) -> None:
    """A pasted EAGLE3 launch without --speculative-draft-model-path plans the draft worker's pool (the
    target's 32 layers) after the pool is sized: the warning blamed "the request table (50.16 GiB)" (the
    table is 0.02 GiB) and suggested --context-length; it now names the draft and how to size it."""
    pasted = ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B",
              "--speculative-algorithm", "EAGLE3"]  # fmt: skip
    assert cli.main(["plan", "--gpu", "H100", "--", *pasted]) == 0
    warning = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("WARNING"))
    assert "the request table and the draft worker's KV pool (50.16 GiB) do not fit" in warning, warning
    assert "--speculative-draft-model-path" in warning, warning


@pytest.mark.parametrize("draft", ["8", "9"])
def test_ngram_with_fewer_than_ten_draft_tokens_plans(draft: str, capsys: pytest.CaptureFixture[str]) -> None:
    """NGRAM derives speculative_num_steps = draft tokens // 10 (its BFS breadth): 0 for 8 draft tokens,
    which SGLang accepts (its sizing reads ``steps or 1``); the planner refused the launch naming a flag
    the user never gave ("--speculative-num-steps must be >= 1, got 0")."""
    args = ["plan", "llama-3.1-8b", "--gpu", "H100", "--speculative-algorithm", "NGRAM"]
    assert cli.main([*args, "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["sizes"]
    assert cli.main([*args, "--speculative-num-draft-tokens", draft, "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["sizes"] == expected


@pytest.mark.parametrize("block", [[128, 128, 128], [128]])
@pytest.mark.parametrize("engine", [[], ["--engine", "vllm"]])
def test_a_block_fp8_weight_block_size_lists_two_sizes(
    tmp_path: Path, block: list[int], engine: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``weight_block_size: [128, 128, 128]`` was planned (the vLLM plan read it as not block-FP8); SGLang's
    and vLLM's Fp8Config refuse it at load: "The quantization block size of weight must have 2 dimensions"."""
    qcfg = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": block}
    folder = _config_file(tmp_path, "llama-3.1-8b", quantization_config=qcfg)
    code, lines = _run_cli(["plan", str(folder), "--gpu", "H100", *engine], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "config field 'quantization_config.weight_block_size' must list 2 integers" in lines[0], lines[0]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"name": 1}, "kv_cache_dtype must be a string"),
    ({"name": "auto", "checkpoint_kv_fp8": "yes"}, "checkpoint_kv_fp8 must be True or False"),
    ({"name": "fp8_e4m3", "is_hip": None}, "is_hip must be True or False"),
    ({"name": "auto", "is_cpu": 1}, "is_cpu must be True or False"),
])  # fmt: skip
def test_resolve_kv_cache_dtype_refuses_other_types_by_name(kwargs: dict[str, object], field: str) -> None:
    # the Python API: a truthy string or a number passed as a flag quietly picked fp8 or the HIP dtype before
    with pytest.raises(KVCacheConfigError, match=field):
        resolve_kv_cache_dtype(model_dtype=DType.BFLOAT16, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "value", "words"), [
    ("moe_shared_expert_intermediate_size", 1e308, "above the largest value accepted"),
    ("moe_shared_expert_intermediate_size", "x", "must be an integer"),
    ("moe_latent_size", -5, "must be >= 0"),
])  # fmt: skip
def test_nemotron_h_latent_moe_fields_are_checked(key: str, value: object, words: str) -> None:
    # a float 1e308 raised OverflowError from the weight estimate; a negative latent size was silently ignored
    from kvstrategies.checkpoints import shipped_checkpoints
    from kvstrategies.planner.config_fields import validate_config_fields

    config = dict(shipped_checkpoints()["nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"].config())
    config[key] = value
    with pytest.raises(KVCacheConfigError, match=f"config field '{key}'.*{words}"):
        validate_config_fields(config)
