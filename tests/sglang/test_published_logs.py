"""The planner end to end against figures real SGLang servers printed at start-up.

Every row is a public log (link in ``docs/validation.md``): the launch settings it shows go in,
the number it printed comes out. Three checks, each against its own published lines:

* end to end: ``max_total_num_tokens`` (or the KV budget when the log prints it);
* memory held before weights load: ``capacity - (avail after load + weight mem usage)``;
* weights: ``Load weight end ... mem usage``.

Tolerances are the ones the current model reaches, rounded up to the next quarter percent
(docs/validation.md explains each gap); a change that moves a figure past them fails here. The
median and worst-case checks cover the SGLang >= 0.5 start-ups (``Launch.sglang_05``); the rows
from older or unknown releases stay as reported figures with their own tolerance.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.preload import preload_memory

GIB = 2**30
PUBLISHED = Path(__file__).parents[1] / "fixtures" / "published"


def published_config(name: str) -> dict[str, Any]:
    """A config kept in tests/fixtures/published/ with its origin."""
    doc: dict[str, Any] = json.loads((PUBLISHED / f"{name}.json").read_text())
    assert doc["origin"]
    config: dict[str, Any] = doc["config"]
    return config


KIMI_K25 = published_config("kimi-k2.5")
GROK_2 = published_config("grok-2")
QWEN3_8B = load_preset_config("qwen3-8b")
DSV4_FLASH = load_preset_config("deepseek-v4-flash")

QWEN3_235B_FP8 = {
    **load_preset_config("qwen3-235b-a22b"),
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}
QWEN3_14B = {  # Qwen/Qwen3-14B config.json (the shape fields the planner reads)
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 17408,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000,
}

QWEN3_32B = {  # Qwen/Qwen3-32B config.json (the shape fields the planner reads)
    **QWEN3_14B,
    "intermediate_size": 25600,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
}
QWEN3_06B = {  # Qwen/Qwen3-0.6B (and Qwen3-Reranker-0.6B) config.json: tied embeddings
    **QWEN3_14B,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "tie_word_embeddings": True,
}
QWEN3_30B_FP8 = {  # Qwen/Qwen3-30B-A3B-FP8: the Qwen3-30B-A3B shapes with 128x128 block FP8
    **load_preset_config("qwen3-30b-a3b"),
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}
_QWEN35 = load_preset_config("qwen3.5-35b-a3b")  # the Qwen3.5 family: GDN dims, attention gate, rope
_QWEN35_MOE_ONLY = ("moe_intermediate_size", "num_experts", "num_experts_per_tok", "shared_expert_intermediate_size")
QWEN35_9B = {  # Qwen/Qwen3.5-9B: the dense shapes its write-up prints (hidden 4096, 32 layers, 16 heads,
    # 4 KV heads, head_dim 256, intermediate 12288, vocab 248320, full attention every 4th layer) on
    # the family's GDN dims, which reproduce the log's Mamba state (ssm 4.38 GB + conv 0.10 GB for
    # 186 slots + 1 at TP2). The row takes the logged weights, so tied/untied head and tower do not enter.
    **{k: v for k, v in _QWEN35.items() if k != "text_config"},
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        **{k: v for k, v in _QWEN35["text_config"].items() if k not in _QWEN35_MOE_ONLY},
        "model_type": "qwen3_5_text",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
        "intermediate_size": 12288,
        "mlp_only_layers": [],
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(32)],
    },
}
GLM5_FP8 = {  # zai-org/GLM-5-FP8: the GLM-5 shapes with DeepSeek-style 128x128 block FP8
    **load_preset_config("glm-5"),
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}


@dataclass(frozen=True)
class Launch:
    """One published start-up: what was launched and what the server printed."""

    source: str
    config: dict[str, Any]
    gpu: str
    tp: int = 1
    attn_dp: int = 1
    mfs: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    tokens: int | None = None  # logged max_total_num_tokens / "#tokens"
    kv_budget_bytes: int | None = None  # logged available bytes, when printed
    weights_gib: float | None = None  # logged "Load weight end ... mem usage"
    avail_after_load_gib: float | None = None  # logged "Load weight end ... avail mem"
    sglang_05: bool = True  # an SGLang >= 0.5 start-up (False: older or version not shown)
    in_stats: bool = True  # False: reported beside the statistics (docs/validation.md says why)

    def plan(self, *, logged_weights: bool = False) -> Any:
        options = dict(self.options)
        if logged_weights and self.weights_gib is not None:
            options["weight_bytes"] = round(self.weights_gib * GIB)
        req = DeploymentRequest(
            self.source,
            {"hf_config": self.config},
            tp_size=self.tp,
            attn_dp_size=self.attn_dp,
            gpu=lookup_gpu(self.gpu),
            mem_fraction_static=self.mfs,
            **options,
        )
        return plan_deployment(req, suggest=False)


QWEN3_30B = load_preset_config("qwen3-30b-a3b")
LLAMA_8B = load_preset_config("llama-3.1-8b")

# End to end. sglang PR 18263 prints the effective mem_fraction_static (0.911, after launch
# resolution) and the profiled budget; the triton backend keeps the planner from applying the
# HIP aiter cut a second time.
E2E = {
    "sglang#18263 MI355X TP1": Launch(
        "sglang#18263",
        QWEN3_30B,
        "MI355X",
        mfs=0.911,
        options={"attention_backend": "triton"},
        kv_budget_bytes=219_721_119_039,
        weights_gib=56.98,
        avail_after_load_gib=230.20,
    ),
    "sglang#17392 H200 DP4": Launch(
        "sglang#17392",
        QWEN3_30B,
        "H200",
        tp=4,
        attn_dp=4,
        mfs=0.80,
        tokens=1_029_388,
        weights_gib=16.39,
        avail_after_load_gib=121.90,
    ),
    # Filed 2025-07-22, before SGLang 0.5.0; the version is not printed (docs/validation.md).
    "vllm#21348 H100 TP4": Launch(
        "vllm#21348", QWEN3_235B_FP8, "H100", tp=4, mfs=0.93, tokens=367_404, sglang_05=False
    ),
    "sglang#4760 H100 TP1": Launch(
        "sglang#4760",
        LLAMA_8B,
        "H100",
        mfs=0.88,
        tokens=442_750,
        weights_gib=15.11,
        avail_after_load_gib=63.48,
        sglang_05=False,  # SGLang 0.4.4
    ),
    # mystous/vllm_hybrid, shadow_assists/features/IDE_023/whitepaper/IDE_023_TSK_043_RAW_DATA.md
    # (2026-08-27, H100 80GB HBM3): server_args print mem_fraction_static=0.83, tp_size=1,
    # attention_backend='triton', page_size=1, context_length=None.
    "Qwen3-30B-A3B-FP8 H100 TP1": Launch(
        "mystous/vllm_hybrid IDE_023 raw data",
        QWEN3_30B_FP8,
        "H100",
        mfs=0.83,
        options={"attention_backend": "triton"},
        tokens=392_920,
        weights_gib=29.15,
        avail_after_load_gib=49.33,
    ),
    "llm-d snapshot guide H100 TP1": Launch(
        "RyanRosario/llm-d",
        QWEN3_32B,
        "H100",
        mfs=0.90,
        options={"context_length": 8192},
        tokens=39_078,
        weights_gib=61.07,
        avail_after_load_gib=17.40,
    ),
    "Qwen3-32B 4x RTX 5090 TP4": Launch(
        "Qwen3-32B Dense BF16 SGLang 4TP write-up",
        QWEN3_32B,
        "RTX-5090",
        tp=4,
        mfs=0.88,
        options={"context_length": 40960, "attention_backend": "triton", "release": "0.5.13"},  # 0.5.13.post1
        tokens=187_069,
        weights_gib=15.50,
    ),
    # The two ajith-sirra-amd/Issues rows ran the rocm/sgl-dev v0.5.8.post1 image, which held 6.4 GiB
    # less before load than the 2026 images the ROCm preload profile is fit to: they take the held
    # memory their logs print (capacity - "Load weight begin. avail mem") and check weights + KV.
    "GLM-5-FP8 MI355X TP8": Launch(
        "ajith-sirra-amd/Issues",
        GLM5_FP8,
        "MI355X",
        tp=8,
        mfs=0.908,
        options={"attention_backend": "triton", "kv_cache_dtype": "fp8_e4m3", "page_size": 1,
                 "overhead_bytes": round((294896 / 1024 - 283.48) * GIB)},  # fmt: skip
        tokens=3_262_823,
        weights_gib=89.58,
        avail_after_load_gib=193.90,
    ),
    "Qwen3-Reranker-0.6B H100 TP1": Launch(
        "SGLang reranker serving write-up (H100 section)",
        QWEN3_06B,
        "H100",
        mfs=0.3,
        options={"disable_radix_cache": True},
        tokens=208_651,
        weights_gib=1.18,
        avail_after_load_gib=77.29,
    ),
    # Qwen3.5-9B on 2x RTX 4090 (GPUs 0 and 2, empty before launch), SGLang main
    # 0.0.0.dev11582+g4df60434d (2026-04-14), --tp-size 2 --mem-fraction-static 0.8
    # --context-length 262144; weights from the log's "Load weight end ... mem usage=8.85 GB"
    # (the published config.json of this model was not in the sources found).
    "Qwen3.5-9B 2x RTX 4090 TP2 (logged weights)": Launch(
        "Qwen3.5-9B TP2 baseline write-up (Exp-001)",
        QWEN35_9B,
        "RTX-4090",
        tp=2,
        mfs=0.8,
        options={"context_length": 262144, "weight_bytes": round(8.85 * GIB)},
        tokens=327_310,
    ),
    "Qwen3-14B 4x RTX 4090 TP4": Launch(
        "Qwen3-14B 4x RTX 4090 service-baseline write-up",
        QWEN3_14B,
        "RTX-4090",
        tp=4,
        mfs=0.80,
        tokens=298_447,
        weights_gib=7.08,
        avail_after_load_gib=16.00,
    ),
    # Kimi-K2.5 (INT4 experts, vision tower): priced from its published config (tests/fixtures/
    # published/kimi-k2.5.json): routed experts INT4 g32, attention/shared/dense bf16, MoonViT,
    # and what ROCm keeps resident (W4A16 g_idx buffers, MLA w_kc/w_vc).
    "Kimi-K2.5 MI355X TP8": Launch(
        "ajith-sirra-amd/Issues",
        KIMI_K25,
        "MI355X",
        tp=8,
        mfs=0.8260405859375,
        options={"attention_backend": "triton", "overhead_bytes": round((294896 / 1024 - 283.53) * GIB)},
        tokens=2_454_421,
        weights_gib=73.58,
        avail_after_load_gib=209.96,
    ),
    # Qwen3-0.6B on one MI355X, SGLang 0.5.17 from pip (a public ROCm bring-up write-up): the pool is
    # allocated ("KV Cache is allocated. #tokens: 1360288") before a missing ROCm kernel stops graph
    # capture; mem_fraction_static 0.6, aiter attention (the default on ROCm).
    "Qwen3-0.6B MI355X TP1 (SGLang 0.5.17 pip)": Launch(
        "SGLang 0.5.17 ROCm bring-up write-up", QWEN3_06B, "MI355X", mfs=0.6, tokens=1_360_288, weights_gib=1.21,
        avail_after_load_gib=286.05,
    ),
    # Qwen3-8B TP1 "clean start-up" reference logs (public GitHub files; the index names them by id
    # only): an SM100 GPU of 177.57 GiB free before load (B200, 2026-04-27) and one of 275.75 GiB
    # (GB300, 284208 MiB, 2026-05-24). server_args are abbreviated in the logs: mem_fraction_static is
    # SGLang's default, which the budget they print reproduces (0.854 and 0.906).
    "Qwen3-8B B200 TP1 (default mfs)": Launch(
        "SGLang clean start-up reference log (B200)", QWEN3_8B, "B200", tokens=992_896, weights_gib=15.28,
        avail_after_load_gib=162.30,
    ),
    "Qwen3-8B GB300 TP1 (default mfs)": Launch(
        "SGLang clean start-up reference log (GB300)", QWEN3_8B, "GB300", tokens=1_707_904, weights_gib=15.28,
        avail_after_load_gib=260.48,
    ),
    # Grok-2 on 8x H100 with --quantization fp8 on the bf16 checkpoint (lmsysorg/sglang:v0.5.2rc2,
    # 2025-09-11; server_args print mem_fraction_static=0.831, triton). Config reconstructed
    # (tests/fixtures/published/grok-2.json). The logged weights are 5 GiB above what the 0.5.23
    # loaders keep (docs/validation.md), so the row is reported beside the statistics.
    "Grok-2 H100 TP8 --quantization fp8": Launch(
        "Grok-2 on-prem write-up",
        GROK_2,
        "H100",
        tp=8,
        mfs=0.831,
        options={"attention_backend": "triton", "weight_quantization": "fp8"},
        tokens=903_439,
        weights_gib=36.73,
        avail_after_load_gib=40.69,
        in_stats=False,
    ),
    # DeepSeek-V4-Flash-Base on 8x H20 (a capacity planner's sample logs, 2026-05-15): the logs print
    # SGLang's KV budget ("DSv4 memory calculation: ... available_bytes=45.78 GB" at mfs 0.88, 19.58 GB at
    # 0.60). Weights from "Memory profiling: available_gpu_memory=57.01 GB, total_gpu_memory=93.58 GB"
    # (36.57 GiB). The Base checkpoint's config is not in the sources found (its bytes per token differ
    # from the V4-Flash preset's), so the budget is the figure compared.
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.88 (budget)": Launch(
        "H20 capacity-planner sample log", DSV4_FLASH, "H20", tp=8, mfs=0.88,
        options={"page_size": 256, "disable_radix_cache": True, "max_running_requests": 256,
                 "weight_bytes": round(36.57 * GIB)},
        kv_budget_bytes=round(45.78 * GIB),
    ),  # fmt: skip
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.60 (budget)": Launch(
        "H20 capacity-planner sample log", DSV4_FLASH, "H20", tp=8, mfs=0.60,
        options={"page_size": 256, "disable_radix_cache": True, "max_running_requests": 256,
                 "kv_cache_dtype": "fp8_e4m3", "weight_bytes": round(36.57 * GIB)},
        kv_budget_bytes=round(19.58 * GIB),
    ),  # fmt: skip
    # DeepSeek-V4-Flash-FP8 on MI300X, TP4 with DP attention 4 (sgl-project/sglang#25118, 2026-05-13):
    # mfs 0.88, fp8 KV, page 256; the log prints "available_bytes=87.26 GB" before the pool assert
    # it reports. Weights from the log (73.43 GiB): DSv4 pricing is approximate.
    "DeepSeek-V4-Flash MI300X TP4 DP4 (budget)": Launch(
        "sglang#25118", DSV4_FLASH, "MI300X", tp=4, attn_dp=4, mfs=0.88,
        options={"page_size": 256, "disable_radix_cache": True, "max_running_requests": 256,
                 "kv_cache_dtype": "fp8_e4m3", "attention_backend": "triton", "weight_bytes": round(73.43 * GIB)},
        kv_budget_bytes=round(87.26 * GIB),
    ),  # fmt: skip
}
# Per-row tolerance (relative): what the planner reaches, rounded up to the next quarter percent.
E2E_TOLERANCE = {
    "sglang#18263 MI355X TP1": 0.0025,  # +0.07% (+0.05% before the ROCm context became a 3-log mean)
    "sglang#17392 H200 DP4": 0.0075,  # +0.55%, mfs inferred (0.80 reproduces the budget)
    "vllm#21348 H100 TP4": 0.0375,  # +3.62%, pre-0.5 SGLang, version not shown
    "sglang#4760 H100 TP1": 0.0025,  # +0.03%, SGLang 0.4.4
    "Qwen3-30B-A3B-FP8 H100 TP1": 0.005,  # +0.36%
    "llm-d snapshot guide H100 TP1": 0.0075,  # +0.71%
    # +0.52% before the ROCm MLA w_kc/w_vc copies (0.13 GiB per rank) were counted
    "GLM-5-FP8 MI355X TP8": 0.005,  # +0.44% (held before load from its log)
    "Qwen3-32B 4x RTX 5090 TP4": 0.0025,  # -0.21%
    "Kimi-K2.5 MI355X TP8": 0.005,  # +0.27% (weights from the config; -0.06% with the logged weights)
    "Qwen3-0.6B MI355X TP1 (SGLang 0.5.17 pip)": 0.0025,  # +0.05%
    "Qwen3-8B B200 TP1 (default mfs)": 0.0025,  # -0.09%
    "Qwen3-8B GB300 TP1 (default mfs)": 0.0025,  # +0.06%
    # Reported beside the statistics (in_stats=False): 0.5.2rc2 logged 5 GiB more weights than the
    # 0.5.23 loaders keep; with the logged weights the row is -2.67% (test below).
    "Grok-2 H100 TP8 --quantization fp8": 0.16,  # +15.55%
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.88 (budget)": 0.0025,  # -0.04%
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.60 (budget)": 0.0025,  # -0.08%
    "DeepSeek-V4-Flash MI300X TP4 DP4 (budget)": 0.0025,  # -0.09%
    "Qwen3-Reranker-0.6B H100 TP1": 0.0075,  # +0.60%
    # 4x RTX 4090 holds 0.91 GiB before load against the PCIe model's 1.54 GiB (GeForce parts run
    # without P2P / custom all-reduce), partly offset by 0.18 GiB more during load; see the docs.
    "Qwen3-14B 4x RTX 4090 TP4": 0.03,  # -2.81%
    # The same GeForce gap at TP2: 1.06 GiB held before load against the model's 1.27 GiB.
    "Qwen3.5-9B 2x RTX 4090 TP2 (logged weights)": 0.03,  # -2.74%
}


def e2e_error(row: Launch, *, logged_weights: bool = False) -> float:
    planned = row.plan(logged_weights=logged_weights)
    if row.kv_budget_bytes is not None:
        return float(planned.budget.available_bytes / row.kv_budget_bytes - 1)
    assert row.tokens is not None
    return float(planned.sizes.max_total_num_tokens / row.tokens - 1)


@pytest.mark.parametrize("name", sorted(E2E))
def test_end_to_end_matches_the_published_start_up(name: str) -> None:
    assert abs(e2e_error(E2E[name])) <= E2E_TOLERANCE[name]


def test_every_row_has_a_tolerance() -> None:
    assert set(E2E_TOLERANCE) == set(E2E)


def sglang_05_errors(*, logged_weights: bool = False) -> list[float]:
    return [
        abs(e2e_error(row, logged_weights=logged_weights)) for row in E2E.values() if row.sglang_05 and row.in_stats
    ]


def test_sglang_05_rows_median_within_one_percent_worst_within_three() -> None:
    errors = sglang_05_errors()
    assert len(errors) >= 15
    assert statistics.median(errors) <= 0.01
    assert max(errors) <= 0.03


def test_sglang_05_rows_with_the_logged_weights() -> None:
    """The same rows with each log's own "Load weight end ... mem usage" in place of the estimate."""
    errors = sglang_05_errors(logged_weights=True)
    assert statistics.median(errors) <= 0.005
    # Qwen3-14B on 4x RTX 4090 (-4.41%): the GeForce gap in memory held before load (docs/validation.md)
    assert max(errors) <= 0.045


def test_grok_2_with_the_logged_weights() -> None:
    assert abs(e2e_error(E2E["Grok-2 H100 TP8 --quantization fp8"], logged_weights=True)) <= 0.03  # -2.67%


def test_all_rows_median_within_one_percent() -> None:
    errors = [abs(e2e_error(row)) for row in E2E.values() if row.in_stats]
    assert statistics.median(errors) <= 0.01


# Memory held before weights load, from published logs: capacity - (avail after load + mem usage),
# or capacity - "Load weight begin. avail mem" (GiB, the MIN rank where ranks differ).
_MI355X = 294896 / 1024
_ROCM_WRITE_UP = "SGLang 0.5.17 ROCm bring-up write-up"
PRELOAD = [
    ("sglang#11716", "H200", 8, 143771 / 1024 - 137.29),
    ("sglang#17392", "H200", 4, 143771 / 1024 - (121.90 + 16.39)),
    ("InferenceX#2128", "H200", 8, 143771 / 1024 - (12.25 + 125.65)),
    ("sglang#40558", "RTX-PRO-6000", 4, 97887 / 1024 - 94.01),
    ("ktransformers#1870", "RTX-4090", 2, 24564 / 1024 - (19.08 + 3.76)),
    ("sglang#18263", "MI355X", 1, _MI355X - (230.20 + 56.98)),
    ("sglang#4760", "H100-80GB", 1, 81559 / 1024 - (63.48 + 15.11)),
    ("RyanRosario/llm-d", "H100-80GB", 1, 81559 / 1024 - (17.40 + 61.07)),
    ("Grok-2 on-prem write-up", "H100-80GB", 8, 81559 / 1024 - 77.43),
    ("SGLang reranker serving write-up", "H100-80GB", 1, 81559 / 1024 - (77.29 + 1.18)),
    ("Qwen3-14B 4x RTX 4090 write-up", "RTX-4090", 4, 24564 / 1024 - (16.00 + 7.08)),
    ("mystous/vllm_hybrid IDE_023 raw data", "H100-80GB", 1, 81559 / 1024 - 78.48),
    ("Qwen3.5-9B TP2 baseline write-up", "RTX-4090", 2, 24564 / 1024 - 22.93),
    ("SGLang clean start-up reference log (B200)", "B200", 1, 183359 / 1024 - 177.57),
    ("SGLang clean start-up reference log (GB300)", "GB300", 1, 284208 / 1024 - 275.75),
    ("H20 capacity-planner sample log", "H20", 8, 97871 / 1024 - 93.56),
    (_ROCM_WRITE_UP + ", pip route, Qwen3-0.6B", "MI355X", 1, _MI355X - 287.26),
    (_ROCM_WRITE_UP + ", container, Qwen3.8-27B-FP8", "MI355X", 1, _MI355X - (258.78 + 28.49)),
    (_ROCM_WRITE_UP + ", container TP2, Qwen3.8-27B-FP8", "MI355X", 2, _MI355X - (264.75 + 14.49)),
    ("sglang#25118 (DP attention 4)", "MI300X", 4, 196592 / 1024 - 182.61),
    ("GLM-5.2 MI355X TP4 DP-attention run log", "MI355X", 4, _MI355X - 278.42),
]
# Two MI355X TP8 start-ups of the rocm/sgl-dev v0.5.8.post1 image (github.com/ajith-sirra-amd/Issues):
# that image held 6.4 GiB less than the 2026 images the ROCm profile comes from (docs/validation.md).
PRELOAD_OLDER_ROCM_IMAGE = [
    ("ajith-sirra-amd/Issues GLM-5-FP8", "MI355X", 8, _MI355X - 283.48),
    ("ajith-sirra-amd/Issues Kimi-K2.5", "MI355X", 8, _MI355X - 283.53),
]


def preload_errors(rows: list[tuple[str, str, int, float]] = PRELOAD) -> list[float]:
    return [preload_memory(lookup_gpu(gpu), tp=tp).total_bytes / GIB - held for _, gpu, tp, held in rows]


def test_preload_model_tracks_published_logs() -> None:
    errors = [abs(e) for e in preload_errors()]
    assert statistics.median(errors) <= 0.15  # GiB
    # InferenceX#2128 (DeepSeek-V4 container, +0.65), the Grok-2 write-up (SGLang 0.5.2rc2, +0.94) and
    # the 4x RTX 4090 write-up (+0.63) hold less than the model: smaller communication buffers.
    assert max(errors) <= 1.0


def test_older_rocm_image_held_less_than_the_profile() -> None:
    for error in preload_errors(PRELOAD_OLDER_ROCM_IMAGE):
        assert 6.3 <= error <= 6.5  # GiB: the model is above what rocm/sgl-dev v0.5.8.post1 held


# Weights: "Load weight end ... mem usage" (GiB) against the planner's resident weights (+ RoPE cache).
WEIGHTS = [
    ("sglang#4760", LLAMA_8B, "H100", 1, 1, 15.11, 0.01),
    ("xorbitsai/inference#3481", QWEN3_14B, "H100", 1, 1, 27.57, 0.01),
    ("sglang#18263", QWEN3_30B, "MI355X", 1, 1, 56.98, 0.01),
    ("sglang#17392", QWEN3_30B, "H200", 4, 4, 16.39, 0.03),  # lm_head: TP-sharded unless --enable-dp-lm-head
    ("RyanRosario/llm-d", QWEN3_32B, "H100", 1, 1, 61.07, 0.01),
    ("ajith-sirra-amd/Issues", GLM5_FP8, "MI355X", 8, 1, 89.58, 0.015),
    ("Qwen3-32B Dense BF16 SGLang 4TP write-up", QWEN3_32B, "RTX-5090", 4, 1, 15.50, 0.015),
    ("Qwen3-14B 4x RTX 4090 write-up", QWEN3_14B, "RTX-4090", 4, 1, 7.08, 0.03),
    ("mystous/vllm_hybrid IDE_023 raw data", QWEN3_30B_FP8, "H100", 1, 1, 29.15, 0.005),
    # INT4 W4A16 experts, bf16 attention / shared / dense, MoonViT, ROCm's g_idx and w_kc/w_vc: -0.72%
    ("ajith-sirra-amd/Issues Kimi-K2.5", KIMI_K25, "MI355X", 8, 1, 73.58, 0.0075),
    ("SGLang clean start-up reference log (B200)", QWEN3_8B, "B200", 1, 1, 15.28, 0.0025),
]


@pytest.mark.parametrize(("source", "config", "gpu", "tp", "dp", "logged", "tolerance"), WEIGHTS)
def test_weights_match_logged_mem_usage(
    source: str, config: dict[str, Any], gpu: str, tp: int, dp: int, logged: float, tolerance: float
) -> None:
    req = DeploymentRequest(
        source, {"hf_config": config}, tp_size=tp, attn_dp_size=dp, gpu=lookup_gpu(gpu), mem_fraction_static=0.9
    )
    weights = plan_deployment(req, suggest=False).budget.weight_bytes
    assert weights is not None
    assert weights / GIB == pytest.approx(logged, rel=tolerance)


# --- held out: each row that fed a preload constant, planned with the constant fitted without it ---
_B200_CTX = 183359 / 1024 - 177.57
_GB300_CTX = 284208 / 1024 - 275.75
_HIP_TP1 = {"18263": _MI355X - (230.20 + 56.98), "pip": _MI355X - 287.26, "container": _MI355X - (258.78 + 28.49)}
_HIP_TP2 = _MI355X - (264.75 + 14.49)
#: row -> the memory held before load (GiB) its profile gives when that row's own log is left out of the fit
#: (kvstrategies/sglang/preload.py): the Blackwell context from the other TP1 log, the ROCm context from the
#: other two TP1 logs, the ROCm per-peer figure from the GLM-5.2 TP4 log alone; the H20 per-peer figure has
#: no other log, so the Hopper NVLink profile (1.145 + 7 x 2.01 / 7) stands in.
HELD_OUT_PRELOAD_GIB = {
    "Qwen3-8B B200 TP1 (default mfs)": _GB300_CTX,
    "Qwen3-8B GB300 TP1 (default mfs)": _B200_CTX,
    "sglang#18263 MI355X TP1": (_HIP_TP1["pip"] + _HIP_TP1["container"]) / 2,
    "Qwen3-0.6B MI355X TP1 (SGLang 0.5.17 pip)": (_HIP_TP1["18263"] + _HIP_TP1["container"]) / 2,
    # TP2 figure + 2 peers x (GLM-5.2 TP4 - TP2) / 2: the GLM-5.2 run's own figure
    "DeepSeek-V4-Flash MI300X TP4 DP4 (budget)": _HIP_TP2 + 2 * ((_MI355X - 278.42) - _HIP_TP2) / 2,
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.88 (budget)": (1.10 + 1.19) / 2 + 2.01,
    "DeepSeek-V4-Flash-Base H20 TP8 mfs 0.60 (budget)": (1.10 + 1.19) / 2 + 2.01,
}


def held_out_errors() -> dict[str, float]:
    """Every SGLang >= 0.5 row in the statistics, planned without its own log in any fitted constant."""
    out = {}
    for name, row in E2E.items():
        if not (row.sglang_05 and row.in_stats):
            continue
        if name in HELD_OUT_PRELOAD_GIB:
            overhead = round(HELD_OUT_PRELOAD_GIB[name] * GIB)
            row = Launch(**{**row.__dict__, "options": {**row.options, "overhead_bytes": overhead}})
        out[name] = e2e_error(row)
    return out


def test_held_out_rows_median_and_worst() -> None:
    """docs/validation.md, "Held out": 9 rows fed no constant (median 0.55%, worst 2.81%); the 7 that did,
    each with its own log left out, reach median 0.18%, worst 3.56% (the H20 rows, whose per-peer figure
    rests on them alone); all 16: median 0.40%."""
    errors = held_out_errors()
    assert len(errors) == 16
    loo = [abs(errors[name]) for name in HELD_OUT_PRELOAD_GIB]
    assert statistics.median(loo) <= 0.0025 and max(loo) <= 0.0375
    assert statistics.median(abs(e) for e in errors.values()) <= 0.005
    assert abs(errors["DeepSeek-V4-Flash-Base H20 TP8 mfs 0.60 (budget)"]) > 0.03  # the one-log H20 figure
