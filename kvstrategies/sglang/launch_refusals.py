"""What SGLang 0.5.23 refuses at launch, refused here before planning, and the config fields
it fills with a default when the checkpoint's ``config.json`` leaves them out.

Each refusal is a :class:`~kvstrategies.errors.UnsupportedConfigurationError` naming the
flag, the value, the fix and the SGLang check (module and function) that would stop the server:

* architecture not served: ``sglang.srt.models.registry._ModelRegistry.resolve_model_cls``
  (via ``sglang.srt.model_loader.utils.get_model_architecture``); served natively means in that
  release's registry (:mod:`.tables.served`, generated from SGLang by
  ``tools/list_sglang_models.py``), or a Transformers-backend row of the architecture table;
  ``--assume-architecture`` plans the config as a named served architecture and says so;
* attention heads not divisible by the attention-TP size, and the KV-head rule (KV heads a
  multiple of the KV-TP size, or the KV-TP size a multiple of the KV heads):
  ``sglang.srt.layers.linear.QKVParallelLinear.__init__`` (``divide`` ->
  ``sglang.srt.distributed.utils.ensure_divisibility``) and the model's attention
  ``__init__`` asserts (e.g. ``sglang.srt.models.llama.LlamaAttention.__init__``; MLA:
  ``sglang.srt.models.deepseek_v2``'s attention). SGLang pads the heads on CPU instead
  (``sglang.srt.configs.update_config.adjust_config_with_unaligned_cpu_tp``): no refusal there;
* ``--context-length`` above the model's derived maximum:
  ``sglang.srt.configs.model_config.ModelConfig._derive_context_length`` unless
  ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (``--allow-context-length-override``);
* ``--page-size`` 0 or negative: ``sglang.srt.arg_groups.validation_hook.check_server_args``
  (``chunked_prefill_size % page_size``) fails at launch;
* what the weights refuse while they are built and loaded (expert parallelism, block-FP8 and
  NVFP4 shapes, MXFP4 platforms): :mod:`.load_refusals`.

:func:`~kvstrategies.models.architectures.is_served` (the architecture table) decides which
architectures count as served.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core.releases import NEWEST_SGLANG, EngineRelease
from ..errors import UnsupportedConfigurationError
from ..models import ModelGeometry
from ..models.architectures import is_served, model_type_row, names_where, require_loadable, transformers_incompatible
from ..models.geometry import AttentionArch
from ..models.hf import architectures, text_config
from ..planner.model_reading import ModelReading
from ..planner.request import DeploymentRequest, check_page_size
from .launch.defaults import AppliedDefault
from .load_refusals import check_weight_load
from .tables.served import SERVED_ARCHITECTURES

_KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
_CONTEXT_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")


def served_architectures() -> frozenset[str]:
    """Architectures SGLang 0.5.23 serves that this project knows (the architecture table)."""
    return names_where(lambda row: is_served(row.name))


def registry_serves(name: str, release: EngineRelease = NEWEST_SGLANG) -> bool:
    """Whether ``name`` is in ``release``'s model registry (:data:`.tables.served.SERVED_ARCHITECTURES`;
    a release without an entry reads the newest recorded one), or a row of the architecture table
    SGLang serves (natively or through its Transformers backend)."""
    if is_served(name):
        return True
    by_line = SERVED_ARCHITECTURES.get(release.text)
    if by_line is None:
        by_line = SERVED_ARCHITECTURES[max(SERVED_ARCHITECTURES, key=lambda v: tuple(int(p) for p in v.split(".")))]
    return name in by_line


def check_architecture(
    config: Mapping[str, Any], assume: str | None, release: EngineRelease = NEWEST_SGLANG
) -> tuple[Mapping[str, Any], AppliedDefault | None]:
    """The config to plan and, with ``--assume-architecture``, the note saying what was assumed.

    Refuses a config none of whose ``architectures`` is served (SGLang's
    ``_ModelRegistry.resolve_model_cls`` raises "not supported"); ``assume`` must itself be served.
    """
    archs = architectures(config)
    if assume is not None:
        if not is_served(assume):
            raise UnsupportedConfigurationError(
                f"--assume-architecture {assume} is not an architecture this planner knows SGLang 0.5.23 to serve; "
                f"name one such as {_examples()}"
            )
        if assume in archs:
            return config, None
        note = AppliedDefault(
            "architecture",
            assume,
            f"the config's {list(archs) or 'missing architectures'} planned as {assume} (--assume-architecture); "
            "the plan is only as right as that assumption",
        )
        return {**config, "architectures": [assume]}, note
    if any(registry_serves(arch, release) for arch in archs):
        return config, None
    refused = [arch for arch in archs if transformers_incompatible(arch)]
    if refused:
        raise UnsupportedConfigurationError(
            f"SGLang {release.text} refuses {refused[0]} at launch: \"{refused[0]} has no SGlang implementation and "
            "the Transformers implementation is not compatible with SGLang.\" (sglang.srt.model_loader.utils."
            "resolve_transformers_arch with --model-impl auto: its transformers class is not backend-compatible); "
            "serve it with vLLM (--engine vllm), which has a class for it"
        )
    given = f"architectures {list(archs)}" if archs else "no 'architectures' field"
    raise UnsupportedConfigurationError(
        f"the config has {given}, which SGLang 0.5.23 does not serve natively (sglang.srt.models.registry."
        "_ModelRegistry.resolve_model_cls, reached from sglang.srt.model_loader.utils.get_model_architecture, "
        "refuses it unless the Transformers backend can load it). To plan it anyway: pass "
        "--assume-architecture NAME with the served architecture whose attention it shares (a plain "
        "Transformers-backend model keeps the standard KV cache: --assume-architecture LlamaForCausalLM), "
        "or fix 'architectures' in config.json; `kvstrategies presets` lists served models"
    )


def _examples() -> str:
    return "LlamaForCausalLM, Qwen3ForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM"


def check_context_length(requested: int | None, model_max: int, allow_override: bool) -> AppliedDefault | None:
    """Refuse ``--context-length`` above the model's derived maximum unless overridden."""
    if requested is None or requested <= model_max:
        return None
    if allow_override:
        return AppliedDefault(
            "context_length",
            requested,
            f"--allow-context-length-override: above the model's {model_max:,} tokens, as SGLang does with "
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (outputs past the trained length may be wrong)",
        )
    raise UnsupportedConfigurationError(
        f"--context-length {requested:,} is above the model's maximum context of {model_max:,} tokens; SGLang 0.5.23 "
        "refuses it at launch (sglang.srt.configs.model_config.ModelConfig._derive_context_length). Give at most "
        f"--context-length {model_max}, or pass --allow-context-length-override (SGLang's "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)"
    )


def check_heads(geometry: ModelGeometry, req: DeploymentRequest) -> None:
    """Attention heads divisible by the attention-TP size; KV heads and KV-TP size, one a
    multiple of the other (see the module doc). Skipped on CPU, where SGLang pads the heads."""
    if req.device == "cpu" or req.attn_dp_size < 1 or req.tp_size % req.attn_dp_size:
        return
    attn_tp = req.tp_size // req.attn_dp_size
    heads = geometry.num_attention_heads
    tp_flag = (
        f"--tp {attn_tp}"
        if req.attn_dp_size == 1
        else f"the attention-TP size {attn_tp} (--tp {req.tp_size} / --attn-dp {req.attn_dp_size})"
    )
    if heads % attn_tp:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 64]
        raise UnsupportedConfigurationError(
            f"{tp_flag} does not divide the model's {heads} attention heads; SGLang 0.5.23 refuses it "
            f"at launch (sglang.srt.layers.linear.QKVParallelLinear.__init__ -> sglang.srt.distributed.utils."
            f"ensure_divisibility; the model's attention __init__, e.g. sglang.srt.models.llama.LlamaAttention."
            f"__init__). Use a TP size that divides {heads}: {', '.join(map(str, divisors))}"
        )
    if geometry.attention_arch is AttentionArch.MLA or req.dcp_size < 1 or attn_tp % req.dcp_size:
        return
    kv_tp = attn_tp // req.dcp_size
    kv = geometry.total_num_kv_heads
    if kv <= 0 or (kv % kv_tp if kv >= kv_tp else kv_tp % kv) == 0:
        return
    raise UnsupportedConfigurationError(
        f"the model's {kv} KV heads cannot be split over a KV-TP size of {kv_tp} (--tp {req.tp_size}"
        f"{f' / --attn-dp {req.attn_dp_size}' if req.attn_dp_size > 1 else ''}"
        f"{f' / --dcp {req.dcp_size}' if req.dcp_size > 1 else ''}): SGLang 0.5.23 needs the KV heads to be a "
        "multiple of it or it a multiple of the KV heads (sglang.srt.layers.linear.QKVParallelLinear.__init__, "
        "replicating KV heads when TP exceeds them); choose a TP size that divides or is a multiple of "
        f"{kv}"
    )


def config_defaults(config: Mapping[str, Any], geometry: ModelGeometry) -> tuple[AppliedDefault, ...]:
    """Fields the config omits that transformers / SGLang fill with a default, as the parser does."""
    text = text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    out: list[AppliedDefault] = []
    mla = geometry.attention_arch is AttentionArch.MLA
    multi_query = text.get("multi_query") is True or isinstance(text.get("attn_config"), Mapping)
    if not mla and not multi_query and all(text.get(key) is None for key in _KV_HEAD_KEYS):
        out.append(AppliedDefault(
            "num_key_value_heads", geometry.total_num_kv_heads,
            "not in config.json: num_attention_heads (multi-head attention), as transformers' config and "
            "SGLang's ModelConfig.get_total_num_kv_heads default it",
        ))  # fmt: skip
    if not mla and text.get("head_dim") is None and geometry.head_dim:
        out.append(AppliedDefault(
            "head_dim", geometry.head_dim,
            "not in config.json: hidden_size // num_attention_heads (SGLang's ModelConfig._derive_model_shapes)",
        ))  # fmt: skip
    if all(text.get(key) is None for key in _CONTEXT_KEYS):
        type_defaults = dict(model_type_row(model_type).geometry_defaults)
        value = type_defaults.get("max_position_embeddings", 2048)
        reason = (
            f"not in config.json: the default of transformers' config class for model_type {model_type!r}"
            if "max_position_embeddings" in type_defaults
            else "not in config.json: the default of SGLang's sglang.srt.utils.hf_transformers.common."
            "get_context_length"
        )
        if value != geometry.context_len:
            reason += f"; context {geometry.context_len:,} tokens after rope_scaling.factor (get_context_length)"
        out.append(AppliedDefault("max_position_embeddings", value, reason))
    if all(node.get(key) is None for node in (text, config) for key in ("torch_dtype", "dtype")):
        out.append(AppliedDefault(
            "torch_dtype", "float32",
            "not in config.json: SGLang's _get_and_verify_dtype (sglang.srt.configs.model_config) reads float32 and "
            f"serves a 2-byte dtype under --dtype auto; planned as {geometry.model_dtype.torch_name}",
        ))  # fmt: skip
    return tuple(out)


def check_sizes(req: DeploymentRequest) -> None:
    """Parallel sizes are positive counts (named by flag)."""
    for flag, value in (("--tp", req.tp_size), ("--pp-size", req.pp_size), ("--dcp", req.dcp_size),
                        ("--attn-dp", req.attn_dp_size), ("--dp-size", req.dp_replicas)):  # fmt: skip
        if value < 1:
            raise UnsupportedConfigurationError(f"{flag} must be a positive count, got {value}")


def admit(
    req: DeploymentRequest, model: ModelReading
) -> tuple[DeploymentRequest, ModelReading, tuple[AppliedDefault, ...]]:
    """Refuse what the request's SGLang release refuses at launch (``model``: the reading of
    ``req``'s config); return the request and the reading to plan (both of another config when an
    architecture was assumed) and the defaults applied to the config."""
    check_sizes(req)
    check_page_size(req.page_size)
    config, assumed = check_architecture(model.config, req.assume_architecture, req.release)
    if assumed is not None:
        req = replace(req, source={"hf_config": config})
        model = ModelReading(config)
    geometry = model.geometry
    require_loadable(geometry.model_type, req.release)  # the config loads before any weight
    override = check_context_length(req.context_length, geometry.context_len, req.allow_context_length_override)
    check_heads(geometry, req)
    check_weight_load(req, model)
    notes = tuple(item for item in (assumed, override) if item is not None)
    return req, model, (*notes, *config_defaults(config, geometry))
