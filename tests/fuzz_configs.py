"""Hypothesis strategies for the fuzz tests: plausible HF configs, case settings and garbage.

``hf_configs()`` draws a config.json dict of one family (dense MHA/GQA/MQA, MLA, DSA, hybrid
SWA, Mamba-ish, DeepSeek-V4, MiniMax sparse) with random but plausible geometry; most parse,
some hit a documented rejection (e.g. Mamba heads not divisible by TP), which the tests accept
as long as it is a ``KVCacheConfigError``. ``case_fields()`` draws the deployment settings of a
case file; ``garbage`` is any JSON-ish value, nested, with NaN and infinities; ``mutated()``
breaks a config the ways hand-edited files break (missing, wrong-typed and absurd fields).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Config = dict[str, Any]

POW2_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
HEAD_DIMS = (32, 64, 80, 96, 128, 192, 256)
CONTEXTS = (2048, 4096, 8192, 32768, 131072, 262144)


@st.composite
def _layers(draw: st.DrawFn, high: int = 48) -> int:
    return draw(st.integers(1, high))


@st.composite
def _context(draw: st.DrawFn, cfg: Config) -> Config:
    cfg["max_position_embeddings"] = draw(st.sampled_from(CONTEXTS))
    rope = draw(st.sampled_from(("none", "yarn", "llama3", "linear")))
    if rope == "yarn":
        cfg["rope_scaling"] = {"type": "yarn", "factor": draw(st.sampled_from((2, 4.0, 40))),
                               "original_max_position_embeddings": 4096}
    elif rope == "llama3":
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    elif rope == "linear":
        cfg["rope_scaling"] = {"type": "linear", "factor": draw(st.sampled_from((1.5, 2, 4)))}
    cfg["torch_dtype"] = draw(st.sampled_from(("bfloat16", "float16", "float32")))
    return cfg


@st.composite
def dense_config(draw: st.DrawFn) -> Config:
    """Llama/Qwen/Mistral-style MHA, GQA or MQA (Falcon ``multi_query``), explicit or derived head_dim."""
    heads = draw(st.sampled_from(POW2_HEADS[2:]))
    kind = draw(st.sampled_from(("mha", "gqa", "mqa", "falcon")))
    head_dim = draw(st.sampled_from(HEAD_DIMS))
    cfg: Config = {
        "architectures": [draw(st.sampled_from(("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")))],
        "model_type": "llama",
        "num_hidden_layers": draw(_layers()),
        "num_attention_heads": heads,
        "hidden_size": heads * head_dim,
    }
    if kind == "gqa":
        cfg["num_key_value_heads"] = draw(st.sampled_from([h for h in POW2_HEADS if h < heads]))
    elif kind == "mqa":
        cfg["num_key_value_heads"] = 1
    elif kind == "falcon":
        cfg.update(architectures=["FalconForCausalLM"], model_type="falcon", multi_query=True)
    else:
        cfg["num_key_value_heads"] = heads
    if draw(st.booleans()):
        cfg["head_dim"] = head_dim
    if draw(st.integers(0, 9)) == 0:
        cfg["num_nextn_predict_layers"] = draw(st.integers(0, 2))
    if draw(st.integers(0, 19)) == 0:
        cfg["loop_num"] = draw(st.integers(1, 4))
    return draw(_context(cfg))


@st.composite
def mla_config(draw: st.DrawFn, *, dsa: bool = False) -> Config:
    """DeepSeek-V2/V3 MLA; with ``dsa`` a V3.2 config with a lightning indexer."""
    cfg: Config = {
        "architectures": ["DeepseekV32ForCausalLM" if dsa else draw(
            st.sampled_from(("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM")))],
        "model_type": "deepseek_v32" if dsa else "deepseek_v3",
        "num_hidden_layers": draw(_layers(64)),
        "num_attention_heads": draw(st.sampled_from((16, 32, 64, 128))),
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": draw(st.sampled_from((128, 256, 512))),
        "qk_rope_head_dim": draw(st.sampled_from((32, 64))),
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "num_nextn_predict_layers": draw(st.integers(0, 1)),
    }
    if dsa:
        # 128 is the only index_head_dim the DSA pool accepts; 64 exercises its rejection
        cfg.update(index_topk=2048, index_head_dim=draw(st.sampled_from((128, 128, 128, 64))))
        if draw(st.booleans()):
            cfg["index_topk_freq"] = draw(st.integers(1, 4))
    return draw(_context(cfg))


@st.composite
def hybrid_swa_config(draw: st.DrawFn) -> Config:
    """GPT-OSS (``layer_types``) or MiMo-V2 (``hybrid_layer_pattern`` and SWA heads/dims)."""
    layers = draw(st.integers(2, 48))
    pattern = draw(st.lists(st.booleans(), min_size=layers, max_size=layers))  # True = sliding
    pattern[0] = True
    if draw(st.booleans()):
        heads = draw(st.sampled_from((16, 32, 64)))
        cfg: Config = {
            "architectures": ["GptOssForCausalLM"],
            "model_type": "gpt_oss",
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": draw(st.sampled_from((1, 2, 8))),
            "head_dim": draw(st.sampled_from((64, 128))),
            "hidden_size": 2880,
            "sliding_window": draw(st.sampled_from((64, 128, 512, 4096))),
            "layer_types": ["sliding_attention" if s else "full_attention" for s in pattern],
        }
    else:
        cfg = {
            "architectures": ["MiMoV2FlashForCausalLM"],
            "model_type": "mimo_v2_flash",
            "num_hidden_layers": layers,
            "num_attention_heads": 64,
            "num_key_value_heads": draw(st.sampled_from((2, 4))),
            "head_dim": 192,
            "v_head_dim": 128,
            "hidden_size": 4096,
            "sliding_window": 128,
            "swa_num_key_value_heads": 8,
            "swa_head_dim": 192,
            "swa_v_head_dim": 128,
            "hybrid_layer_pattern": [1 if s else 0 for s in pattern],
        }
    return draw(_context(cfg))


@st.composite
def mamba_config(draw: st.DrawFn) -> Config:
    """Nemotron-H (pattern), Qwen3-Next (GDN interval), Falcon-H1 (every layer) or Jamba."""
    family = draw(st.sampled_from(("nemotron_h", "qwen3_next", "falcon_h1", "jamba")))
    if family == "nemotron_h":
        pattern = draw(st.text(alphabet="M*-", min_size=2, max_size=40).filter(lambda p: "M" in p))
        cfg: Config = {
            "architectures": ["NemotronHForCausalLM"],
            "model_type": "nemotron_h",
            "num_hidden_layers": len(pattern),
            "hybrid_override_pattern": pattern,
            "num_attention_heads": 32,
            "num_key_value_heads": draw(st.sampled_from((2, 8))),
            "attention_head_dim": 128,
            "hidden_size": 4096,
            "mamba_num_heads": draw(st.sampled_from((64, 96, 128))),
            "mamba_head_dim": 64,
            "ssm_state_size": draw(st.sampled_from((64, 128))),
            "n_groups": draw(st.sampled_from((1, 8))),
            "conv_kernel": 4,
        }
    elif family == "qwen3_next":
        cfg = {
            "architectures": ["Qwen3NextForCausalLM"],
            "model_type": "qwen3_next",
            "num_hidden_layers": draw(st.integers(2, 48)),
            "full_attention_interval": draw(st.integers(1, 4)),
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "hidden_size": 2048,
            "linear_num_value_heads": draw(st.sampled_from((16, 32, 48))),
            "linear_num_key_heads": 16,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
        }
    elif family == "falcon_h1":
        cfg = {
            "architectures": ["FalconH1ForCausalLM"],
            "model_type": "falcon_h1",
            "num_hidden_layers": draw(st.integers(1, 44)),
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "hidden_size": 3072,
            "mamba_d_ssm": 3072,
            "mamba_n_heads": draw(st.sampled_from((24, 48))),
            "mamba_d_head": "auto",
            "mamba_d_state": 256,
            "mamba_n_groups": 1,
            "mamba_d_conv": 4,
        }
    else:
        cfg = {
            "architectures": ["JambaForCausalLM"],
            "model_type": "jamba",
            "num_hidden_layers": draw(st.integers(2, 32)),
            "attn_layer_period": draw(st.integers(1, 8)),
            "attn_layer_offset": 0,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "mamba_expand": 2,
            "mamba_d_state": 16,
            "mamba_d_conv": 4,
        }
    cfg["mamba_ssm_dtype"] = draw(st.sampled_from(("float32", "bfloat16", "float16")))
    return draw(_context(cfg))


@st.composite
def llama4_config(draw: st.DrawFn) -> Config:
    """Llama-4: a ``text_config`` wrapper, chunked attention as the window, every 4th layer full."""
    text: Config = {
        "model_type": "llama4_text",
        "num_hidden_layers": draw(st.integers(1, 48)),
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 5120,
        "attention_chunk_size": draw(st.sampled_from((1024, 8192))),
        "max_position_embeddings": draw(st.sampled_from((131072, 10485760))),
        "rope_scaling": {"factor": 16.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    }
    return {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": text}


@st.composite
def kimi_linear_config(draw: st.DrawFn) -> Config:
    """Kimi-Linear: MLA full layers, KDA linear layers listed 1-based in ``kda_layers``."""
    layers = draw(st.integers(2, 27))
    kda = sorted(draw(st.sets(st.integers(1, layers), min_size=1, max_size=layers)))
    return {
        "architectures": ["KimiLinearForCausalLM"],
        "model_type": "kimi_linear",
        "num_hidden_layers": layers,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 72,
        "hidden_size": 2304,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "model_max_length": 1048576,
        "linear_attn_config": {"kda_layers": kda, "num_heads": draw(st.sampled_from((16, 32))), "head_dim": 128,
                               "short_conv_kernel_size": 4},
    }


@st.composite
def dsv4_config(draw: st.DrawFn) -> Config:
    """DeepSeek-V4: ``compress_ratios`` (one per layer plus the MTP layer), window 128."""
    layers = draw(st.integers(2, 43))
    ratios = draw(st.lists(st.sampled_from((0, 4, 128)), min_size=layers + 1, max_size=layers + 1))
    cfg: Config = {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "num_hidden_layers": layers,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "head_dim": 512,
        "qk_rope_head_dim": 64,
        "index_head_dim": 128,
        "hidden_size": 4096,
        "sliding_window": 128,
        "compress_ratios": ratios,
        "num_nextn_predict_layers": 1,
        "max_position_embeddings": draw(st.sampled_from((65536, 1048576))),
    }
    return cfg


@st.composite
def minimax_sparse_config(draw: st.DrawFn) -> Config:
    layers = draw(st.integers(1, 24))
    freq = draw(st.lists(st.integers(0, 2), min_size=layers, max_size=layers))
    return {
        "architectures": ["MiniMaxM3SparseForCausalLM"],
        "model_type": "minimax_m3",
        "num_hidden_layers": layers,
        "num_attention_heads": 48,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 3072,
        "max_position_embeddings": 196608,
        "sparse_attention_config": {
            "sparse_attention_freq": freq,
            "sparse_disable_index_value": draw(st.lists(st.integers(0, 1), min_size=layers, max_size=layers)),
            "sparse_index_dim": 128,
        },
    }


def hf_configs() -> st.SearchStrategy[Config]:
    """A plausible config.json dict of any family (dense weighted up: it has the most variants)."""
    return st.one_of(
        dense_config(),
        dense_config(),
        mla_config(),
        mla_config(dsa=True),
        hybrid_swa_config(),
        llama4_config(),
        mamba_config(),
        kimi_linear_config(),
        dsv4_config(),
        minimax_sparse_config(),
    )


@st.composite
def case_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Deployment settings of a case file (no model, no budget), mostly valid combinations."""
    tp = draw(st.sampled_from((1, 1, 2, 4, 8, 16, 64)))
    attn_dp = draw(st.sampled_from([d for d in (1, 1, 2, 4) if tp % d == 0]))
    dcp = draw(st.sampled_from([d for d in (1, 1, 1, 2, 4, 8) if (tp // attn_dp) % d == 0]))
    pp = draw(st.sampled_from((1, 1, 1, 2, 3, 4)))
    fields: dict[str, Any] = {
        "tp_size": tp,
        "attn_dp_size": attn_dp,
        "dcp_size": dcp,
        "pp_size": pp,
        "pp_rank": draw(st.integers(0, pp - 1)),
        "page_size": draw(st.sampled_from((1, 1, 16, 32, 64, 128, 256, 256))),
        "kv_cache_dtype": draw(
            st.sampled_from(("auto", "auto", "bf16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"))
        ),
        "device": draw(st.sampled_from(("cuda", "cuda", "cuda", "npu"))),
    }
    spec = draw(st.sampled_from((None, None, None, "EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "NGRAM")))
    if spec is not None:
        fields["speculative_algorithm"] = spec
        fields["speculative_num_draft_tokens"] = draw(st.integers(1, 8))
        fields["speculative_num_steps"] = draw(st.integers(1, 4))
        fields["speculative_eagle_topk"] = draw(st.sampled_from((1, 1, 4)))
        if spec != "NGRAM":
            fields["eagle_draft_num_layers"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        fields["max_running_requests"] = draw(st.integers(1, 4096))
    if draw(st.integers(0, 3)) == 0:
        fields["swa_full_tokens_ratio"] = draw(st.floats(0.05, 1.0))
    if draw(st.integers(0, 3)) == 0:
        fields["disable_radix_cache"] = True
        fields["chunked_prefill_size"] = draw(st.sampled_from((-1, 2048, 8192)))
    if draw(st.integers(0, 5)) == 0:
        fields["disaggregation_mode"] = draw(st.sampled_from(("prefill", "decode")))
    if draw(st.integers(0, 9)) == 0:
        fields["is_draft_worker"] = True
    return fields


def fit_page(draw: Callable[[st.SearchStrategy[Any]], Any], config: Config, fields: dict[str, Any]) -> dict[str, Any]:
    """Mostly give a family the page size its pool requires (DSV4 256 on CUDA, DSA 64 on CUDA).

    The rest keep their random page, so the rejections stay exercised too.
    """
    archs = config.get("architectures") or []
    if draw(st.integers(0, 3)) == 0:
        return fields
    if "DeepseekV4ForCausalLM" in archs:
        page = 256 if fields["device"] != "npu" else draw(st.sampled_from((128, 256)))
        return {**fields, "page_size": page}
    if "DeepseekV32ForCausalLM" in archs and fields["device"] != "npu":
        return {**fields, "page_size": 64}
    return fields


def budgets() -> st.SearchStrategy[int]:
    """KV budgets from 1 MiB to 4 TiB, log-uniform-ish (2**e plus a random remainder)."""
    return st.builds(lambda e, r: 2**e + r % 2**e, st.integers(20, 42), st.integers(0, 2**42))


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from((0, -1, 1, 2**63, 10**30, 2**31, 10**400, -(10**400), 10**4000))
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(("auto", "Infinity", "128", "bfloat16", "float8_e4m3fn", "M*-"))
)
#: any JSON-ish value: scalars (NaN and +-Infinity included, as json.loads gives them), lists, objects
garbage: st.SearchStrategy[Any] = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Config]) -> Any:
    """``base`` with 1-4 fields deleted, set to garbage (top level or one level down), or added."""
    cfg: Any = draw(base)
    if draw(st.integers(0, 19)) == 0:
        return draw(garbage)  # not even an object
    for _ in range(draw(st.integers(1, 4))):
        target = cfg
        nested = [k for k, v in cfg.items() if isinstance(v, dict) and v]
        if nested and draw(st.integers(0, 3)) == 0:
            target = cfg[draw(st.sampled_from(sorted(nested)))]
        keys = sorted(target)
        action = draw(st.sampled_from(("delete", "garbage", "garbage", "element", "add")))
        if action == "add" or not keys:
            target[draw(st.text(max_size=8))] = draw(garbage)
            continue
        key = draw(st.sampled_from(keys))
        if action == "delete":
            del target[key]
        elif action == "element" and isinstance(target[key], list) and target[key]:
            target[key][draw(st.integers(0, len(target[key]) - 1))] = draw(garbage)
        else:
            target[key] = draw(garbage)
    return cfg
