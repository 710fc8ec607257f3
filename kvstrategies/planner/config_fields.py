"""Validate, up front, every config field and setting the ``--gpu`` planner path reads.

The sizing parsers (:mod:`kvstrategies.models`) check the fields that size the KV cache. The
weight estimate (:mod:`kvstrategies.planner.weights`) and the launch rules
(:mod:`kvstrategies.sglang.launch.defaults`) read many more (vocab size, expert counts, MTP/nextn layer
counts, intermediate and vision sizes, hyper-connection multipliers, rope factors, quantization
block sizes) with plain ``int()`` / ``float()``, some of them inside ``for j in range(count)``
loops. :func:`validate_planner_inputs` runs first, at the entry of
:func:`~kvstrategies.planner.plan_deployment`, with the same rules as the sizing fields
(:func:`kvstrategies.models.hf.as_int`: integers or integral floats, no bools, no NaN, bounded
by ``MAX_CONFIG_INT`` and, for counts that drive a loop, by ``MAX_LAYERS``), so no reader ever
sees a negative, non-finite or astronomically large value. A rule applies wherever its key
occurs in the config (top level, ``text_config``, ``vision_config``, ``linear_attn_config``...);
``None`` means "absent" and is left to the readers' defaults.

:func:`check_budget_sane` runs last: a plan is never reported with weights <= 0 bytes or a KV
budget that is not in ``(0, GPU capacity]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..context import MAX_PARALLEL_SIZE
from ..core.validate import MAX_LAYERS, check_float, is_trusted
from ..errors import InsufficientMemoryError, KVCacheConfigError
from ..models.hf import MAX_CONFIG_INT, architectures, as_int
from .request import DeploymentRequest, validate_request

#: most experts (routed, shared or active) a config may declare; real models have at most a few hundred
MAX_EXPERTS = 2**16
#: largest hyper-connection multiplier (``hc_mult``; DeepSeek-V4 uses 4)
MAX_HC_MULT = 1024
#: largest rope scaling factor (real configs: up to 40)
MAX_ROPE_FACTOR = float(2**20)
#: largest parallel degree (TP, PP, DCP, attention DP) a request may ask for
MAX_PARALLEL = MAX_PARALLEL_SIZE
#: how deep the validator descends into nested config objects (real configs: 3)
MAX_CONFIG_DEPTH = 8


@dataclass(frozen=True)
class FieldRule:
    """An integer field in ``[minimum, maximum]`` (``is_list``: a list of such integers;
    ``per_channel``: ``-1`` is accepted too, GPTQ/AWQ's "one group per output channel")."""

    minimum: int
    maximum: int
    is_list: bool = False
    per_channel: bool = False
    #: a list of exactly this many entries (``None``: any count up to the layer limit)
    length: int | None = None


def _rules(names: str, minimum: int, maximum: int, is_list: bool = False) -> dict[str, FieldRule]:
    return {name: FieldRule(minimum, maximum, is_list) for name in names.split()}


#: integer fields read by the weight estimate / launch rules, wherever they appear in the config
INT_FIELDS: dict[str, FieldRule] = {
    # loop counts: layers, MTP / nextn layers, layer periods and offsets
    **_rules("num_hidden_layers depth num_layers attn_layer_period expert_layer_period full_attention_interval",
             1, MAX_LAYERS),  # fmt: skip
    **_rules(
        "num_nextn_predict_layers mtp_num_hidden_layers num_mtp_modules mtp_transformer_layers "
        "first_k_dense_replace max_window_layers num_hash_layers attn_layer_offset expert_layer_offset "
        "interleave_moe_layer_step decoder_sparse_step",
        0,
        MAX_LAYERS,
    ),
    # dimensions that must be positive (a product or a divisor)
    **_rules(
        "hidden_size intermediate_size vocab_size num_attention_heads head_dim v_head_dim qk_head_dim "
        "kv_lora_rank o_lora_rank o_groups attention_head_dim moe_intermediate_size intermediate_size_mlp "
        "ffn_hidden_size index_head_dim index_n_heads index_topk index_kpool swa_head_dim swa_v_head_dim "
        "swa_num_attention_heads swa_num_key_value_heads linear_num_key_heads linear_key_head_dim "
        "linear_num_value_heads linear_value_head_dim linear_conv_kernel_dim num_heads "
        "short_conv_kernel_size mamba_num_heads mamba_n_heads mamba_head_dim mamba_d_head mamba_d_ssm "
        "mamba_d_state mamba_d_conv mamba_dt_rank mamba_expand mamba_n_groups n_groups ssm_state_size "
        "conv_kernel expand time_step_rank max_position_embeddings original_max_position_embeddings "
        "max_sequence_length seq_length max_seq_len model_max_length "
        "attention_chunk_size out_hidden_size patch_size image_size spatial_merge_size temporal_patch_size "
        "in_channels num_channels mamba_chunk_size chunk_size rotary_dim padded_vocab_size ff_intermediate_size "
        "embed_dim in_chans num_position_embeddings",
        1,
        MAX_CONFIG_INT,
    ),
    **_rules("num_key_value_heads q_lora_rank multi_query_group_num", 1, MAX_CONFIG_INT),
    # a window, or -1 / 0 for "no window" (xai-org/grok-2's config.json: ``"sliding_window_size": -1``)
    **_rules("sliding_window sliding_window_size", -1, MAX_CONFIG_INT),
    **_rules("qk_nope_head_dim qk_rope_head_dim shared_expert_intermediate_size shared_intermediate_size "
             "moe_shared_expert_intermediate_size moe_latent_size", 0, MAX_CONFIG_INT),  # fmt: skip
    # expert counts (0 = dense)
    **_rules(
        "n_routed_experts moe_num_experts num_experts num_local_experts n_shared_experts num_shared_experts "
        "num_experts_per_tok num_experts_per_token experts_per_token moe_topk n_group topk_group num_expert_group",
        0,
        MAX_EXPERTS,
    ),
    **_rules("hc_mult", 0, MAX_HC_MULT),
    # per-layer lists
    **_rules("mlp_only_layers kda_layers full_attn_layers compress_ratios hybrid_layer_pattern", 0, MAX_CONFIG_INT,
             is_list=True),  # fmt: skip
    # DeepSeek: a period (``i % moe_layer_freq``); MiMo-V2: one 0/1 flag per layer
    "moe_layer_freq": FieldRule(1, MAX_LAYERS, is_list=True),
    # [block_n, block_k]: SGLang's and vLLM's Fp8Config refuse any other count ("must have 2 dimensions")
    "weight_block_size": FieldRule(1, MAX_CONFIG_INT, is_list=True, length=2),
}

#: integer fields of ``quantization_config`` at any depth (GPTQ/AWQ ``bits`` / ``group_size``,
#: compressed-tensors ``config_groups.*.weights.num_bits`` / ``group_size``): 0 bits would price a
#: linear at 0 bytes; ``group_size: -1`` is per-channel quantization, which SGLang accepts
#: (``sglang.srt.layers.quantization.gptq.gptq.GPTQMarlinConfig.__init__`` reads it as such)
QUANTIZATION_FIELDS: dict[str, FieldRule] = {
    **_rules("bits w_bit num_bits", 1, 64),
    "group_size": FieldRule(1, MAX_CONFIG_INT, per_channel=True),
    "q_group_size": FieldRule(1, MAX_CONFIG_INT, per_channel=True),
    "weight_block_size": FieldRule(1, MAX_CONFIG_INT, is_list=True, length=2),
}

#: float fields of ``rope_scaling`` / ``rope_parameters``: ``(low, high]``
ROPE_FLOAT_FIELDS: dict[str, tuple[float, float]] = {"factor": (0.0, MAX_ROPE_FACTOR)}
#: float fields read wherever they occur, ``(low, high]``: the share of a head that rotates (the RoPE
#: cache's width; transformers v5 moves it into ``rope_parameters``), a vision MLP's width ratio (Qwen2-VL: 4)
FLOAT_FIELDS: dict[str, tuple[float, float]] = {"partial_rotary_factor": (0.0, 1.0), "mlp_ratio": (0.0, 1024.0)}

_SECTION_RULES: dict[str, dict[str, FieldRule]] = {"quantization_config": QUANTIZATION_FIELDS}
_ROPE_SECTIONS = frozenset({"rope_scaling", "rope_parameters"})


def _check_int_field(value: Any, path: str, rule: FieldRule) -> None:
    if rule.is_list:
        if not isinstance(value, (list, tuple)):
            if isinstance(value, (int, float)) and not isinstance(value, bool):  # moe_layer_freq style scalar
                as_int(value, path, minimum=rule.minimum, maximum=rule.maximum)
                return
            raise KVCacheConfigError(
                f"config field {path!r} must be a list of integers, got {value!r:.80}; fix config.json"
            )
        if rule.length is not None and len(value) != rule.length:
            raise KVCacheConfigError(
                f"config field {path!r} must list {rule.length} integers, got {len(value)}: {value!r:.80}; "
                "fix config.json"
            )
        if len(value) > MAX_LAYERS + 16:
            raise KVCacheConfigError(
                f"config field {path!r} has {len(value)} entries, more than any model has layers "
                f"({MAX_LAYERS}); fix config.json"
            )
        low = 0 if path.endswith("moe_layer_freq") else rule.minimum  # per-layer flags may be 0
        for i, item in enumerate(value):
            as_int(item, f"{path}[{i}]", minimum=low, maximum=rule.maximum)
        return
    if rule.per_channel and not isinstance(value, bool) and value == -1:
        return
    as_int(value, path, minimum=rule.minimum, maximum=rule.maximum)


def _check_rope(section: Mapping[str, Any], prefix: str) -> None:
    for key, (low, high) in ROPE_FLOAT_FIELDS.items():
        value = section.get(key)
        if value is not None:
            check_float(value, f"config field '{prefix}{key}'", low=low, high=high, fix="fix config.json")


def validate_config_fields(config: Mapping[str, Any]) -> None:
    """Check every known numeric field of ``config`` (a raw HF ``config.json`` dict), at any depth.

    Raises :class:`KVCacheConfigError` naming the first bad field by its dotted path.
    """
    if not isinstance(config, Mapping):
        raise KVCacheConfigError(f"a model config must be a JSON object, got {type(config).__name__}")
    if is_trusted(config):  # checked whole already, held unchanged (core.validate.trusted)
        return
    architectures(config)  # a bounded list of names, before any reader loops over it
    stack: list[tuple[str, str, Mapping[str, Any], int, dict[str, FieldRule]]] = [("", "", config, 0, INT_FIELDS)]
    while stack:
        prefix, section, node, depth, inherited = stack.pop()
        rules = _SECTION_RULES.get(section, inherited)
        if section in _ROPE_SECTIONS:
            _check_rope(node, prefix)
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, Mapping):
                if depth < MAX_CONFIG_DEPTH:  # quantization_config's sub-objects keep its rules
                    below = rules if rules is QUANTIZATION_FIELDS else INT_FIELDS
                    stack.append((f"{path}.", str(key), value, depth + 1, below))
                continue
            rule = rules.get(key) if isinstance(key, str) else None
            if rule is not None and value is not None:
                _check_int_field(value, path, rule)
            bounds = FLOAT_FIELDS.get(key) if isinstance(key, str) and rules is INT_FIELDS else None
            if bounds is not None and value is not None:
                check_float(value, f"config field {path!r}", low=bounds[0], high=bounds[1], fix="fix config.json")
    _check_totals(config)


def _check_totals(config: Mapping[str, Any]) -> None:
    """Products the estimate loops over: MiniMax-style ``num_mtp_modules * mtp_transformer_layers``."""
    for section in (config, config.get("text_config"), config.get("language_config"), config.get("llm_config")):
        if not isinstance(section, Mapping):
            continue
        modules = section.get("num_mtp_modules") or 0
        per_module = section.get("mtp_transformer_layers") or 1
        numbers = isinstance(modules, (int, float)) and isinstance(per_module, (int, float))
        if numbers and modules * per_module > MAX_LAYERS:
            raise KVCacheConfigError(
                f"config fields 'num_mtp_modules' x 'mtp_transformer_layers' = {modules} x {per_module} MTP layers, "
                f"more than the {MAX_LAYERS} accepted; fix config.json"
            )


def validate_planner_inputs(
    req: DeploymentRequest, config: Mapping[str, Any], *, request_checked: bool = False
) -> None:
    """Everything :func:`~kvstrategies.planner.plan_deployment` reads, before any of it is used
    ``request_checked``: the
    request was just built, and so checked, by :meth:`DeploymentRequest.replace`."""
    if not request_checked:
        validate_request(req)
    validate_config_fields(config)


def check_budget_sane(budget: Any, capacity_bytes: int | None) -> None:
    """Refuse to report weights <= 0 bytes or a KV budget outside ``(0, capacity]``.

    ``budget`` is a :class:`~kvstrategies.sglang.budget.KVBudget`. A budget given directly
    (``--available-bytes``) is the user's number and is not bounded by the GPU.
    """
    if budget.source != "gpu":
        return
    weights = budget.weight_bytes
    if weights is not None and weights <= 0:
        if str(budget.weight_source).startswith("given"):
            raise KVCacheConfigError(f"--weight-bytes must be > 0 with a GPU budget, got {weights}")
        raise KVCacheConfigError(
            f"the weight estimate came out at {weights} bytes per rank, which cannot be right; check the "
            "config's sizes or pass --weight-bytes"
        )
    available = budget.available_bytes
    if available <= 0:
        raise InsufficientMemoryError(
            f"no KV budget left on {budget.gpu_name}: {available / 2**30:.2f} GiB after weights, runtime overhead "
            "and SGLang's reserve; use more GPUs (--tp, --pp-size), a larger --mem-fraction-static, smaller "
            "weights or a larger GPU"
        )
    if capacity_bytes is not None and available > capacity_bytes:
        raise KVCacheConfigError(
            f"the KV budget ({available / 2**30:.2f} GiB) came out larger than the GPU ({capacity_bytes / 2**30:.2f} "
            "GiB), which cannot be right; check the config's sizes or pass --weight-bytes / --available-bytes"
        )
