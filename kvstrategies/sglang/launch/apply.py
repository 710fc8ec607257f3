"""The launch-defaults layer in front of sizing: what SGLang 0.5.23 would choose for the
settings a user left out, turned into the case fields the strategies read.

:func:`resolve_launch` runs :func:`~kvstrategies.sglang.launch.defaults.resolve_launch_defaults` on
the user's explicit flags; :func:`case_fields` maps the resolution (or, without a GPU, the
library's plain defaults) onto a case dict (the format of ``cases/*.json``), so flags, GPUs and case
files share one parsing path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.jsonio import read_json_object
from ...errors import KVCacheConfigError
from ...planner.gpus import Accelerator
from ...planner.request import DeploymentRequest
from ..server_arguments import SERVER_ARGUMENT_RULES
from .defaults import (
    LaunchModelFacts,
    LaunchResolution,
    LaunchSettings,
    model_facts_from_hf_config,
    resolve_launch_defaults,
)


def launch_settings(req: DeploymentRequest) -> LaunchSettings:
    """The user's explicit server arguments (``None`` = left out)."""
    return LaunchSettings(
        mem_fraction_static=req.mem_fraction_static,
        chunked_prefill_size=req.chunked_prefill_size,
        max_running_requests=req.max_running_requests,
        max_total_tokens=req.max_total_tokens,
        context_length=req.context_length,
        kv_cache_dtype=req.kv_cache_dtype,
        page_size=req.page_size,
        attention_backend=req.attention_backend,
        swa_full_tokens_ratio=req.swa_full_tokens_ratio,
        disable_radix_cache=req.disable_radix_cache,
        speculative_algorithm=req.speculative_algorithm,
        speculative_num_draft_tokens=req.speculative_num_draft_tokens,
        **req.launch_extras,
        speculative_num_steps=req.speculative_num_steps,
        speculative_eagle_topk=req.speculative_eagle_topk,
        speculative_draft_model_path=req.speculative_draft_model_path,
        speculative_dflash_block_size=dflash_block_size(req.speculative_draft_model_path),
    )


def draft_config(draft_model_path: str | None) -> dict[str, Any] | None:
    """The draft model's ``config.json`` (a folder or the file), or ``None`` when not given.

    A path that is not there, not a regular file (``/dev/zero``), too large or not a JSON object
    is refused: SGLang could not load that draft model (it reads the config at weight load,
    ``sglang.srt.configs.model_config.ModelConfig``). Read through :mod:`kvstrategies.core.jsonio`
    (bounded, JSON only).
    """
    if draft_model_path is None:
        return None
    path = Path(draft_model_path)
    if not draft_model_path.strip() or not (path.exists() or path.is_symlink()):
        raise KVCacheConfigError(
            f"--speculative-draft-model-path {draft_model_path!r:.120}: no such file or folder; SGLang could not load "
            "the draft model (give its folder or config.json)"
        )
    path = path / "config.json" if path.is_dir() else path
    try:
        return read_json_object(path, "the draft model's config.json")
    except KVCacheConfigError as exc:
        raise KVCacheConfigError(f"--speculative-draft-model-path: {exc}") from exc


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def dflash_block_size(draft_model_path: str | None) -> int | None:
    """The DFLASH block size a draft model's ``config.json`` names (``dflash_config.block_size``,
    else top-level ``block_size``), or ``None`` when absent or unreadable: SGLang then uses 16
    (``speculative_hook._handle_dflash`` reading ``dflash_utils.parse_dflash_draft_config``)."""
    config = draft_config(draft_model_path)
    if config is None:
        return None
    section = config.get("dflash_config")
    holder = section if isinstance(section, dict) and "block_size" in section else config
    return _positive_int(holder.get("block_size"))


def draft_layers(req: DeploymentRequest) -> int | None:
    """``--speculative-draft-layers``, else the draft model config's ``num_hidden_layers``."""
    if req.speculative_draft_layers is not None:
        return req.speculative_draft_layers
    config = draft_config(req.speculative_draft_model_path)
    return None if config is None else _positive_int(config.get("num_hidden_layers"))


def draft_head_shape(req: DeploymentRequest) -> dict[str, int]:
    """A separate draft model's attention as a case names it (``eagle_draft_num_kv_heads``, ``eagle_draft_head_dim``:
    what vLLM's EAGLE heads are sized by; SGLang's target pool reads neither), none for the model's own MTP layers
    or an unreadable shape."""
    path = req.speculative_draft_model_path
    if path in (None, "", req.model) or (req.speculative_algorithm or "").upper() not in ("EAGLE", "EAGLE3"):
        return {}
    config = draft_config(path)
    if config is None:
        return {}
    heads = _positive_int(config.get("num_attention_heads"))
    hidden = _positive_int(config.get("hidden_size"))
    kv = _positive_int(config.get("num_key_value_heads")) or heads
    dim = _positive_int(config.get("head_dim")) or (hidden // heads if hidden and heads else None)
    return {"eagle_draft_num_kv_heads": kv, "eagle_draft_head_dim": dim} if kv and dim else {}


def launch_facts(config: Mapping[str, Any]) -> LaunchModelFacts:
    """:func:`~kvstrategies.sglang.launch.defaults.model_facts_from_hf_config`."""
    return model_facts_from_hf_config(config)


def resolve_launch(req: DeploymentRequest, config: Mapping[str, Any]) -> LaunchResolution | None:
    """SGLang's launch resolution for ``req`` on its GPU (``None`` without a GPU)."""
    if req.gpu is None:
        return None
    gpu, settings, release = req.gpu, launch_settings(req), req.release
    sizes = (req.tp_size, req.pp_size, req.attn_dp_size, req.dcp_size)

    return resolve_launch_defaults(
        launch_facts(config), gpu, tp_size=sizes[0], pp_size=sizes[1], attn_dp_size=sizes[2], dcp_size=sizes[3],
        settings=settings, release=release,
    )  # fmt: skip


def platform_fields(gpu: Accelerator) -> dict[str, bool]:
    """The case ``platform`` probes of an accelerator (sglang.srt.utils.common probes)."""
    return {
        "is_sm90": gpu.is_sm90,
        "is_sm100": gpu.is_sm100,
        "is_blackwell": gpu.is_blackwell,
        "is_hip": gpu.is_hip,
        "is_gfx95": gpu.is_gfx95,
    }


def case_fields(req: DeploymentRequest, model_dtype: str, launch: LaunchResolution | None) -> dict[str, Any]:
    """The case dict to plan (``available_bytes`` is filled by the budget step).

    Without a launch resolution the user's values (or ``auto`` / page 1) are used. With one,
    every resolved setting goes in; ``swa_full_tokens_ratio`` only when it counts as explicitly
    set (arg_groups.overrides: the DSV4 model-declared 0.1 does, the 0.8 field fallback does
    not, so the strategy's own default applies then).
    """
    case: dict[str, Any] = {
        "name": req.model,
        **{k: v for k, v in req.source.items() if k != "checkpoint"},  # the weights step reads it
        "tp_size": req.tp_size,
        "pp_size": req.pp_size,
        "pp_rank": req.pp_rank,
        "dcp_size": req.dcp_size,
        "attn_dp_size": req.attn_dp_size,
        "model_dtype": model_dtype,
        "max_tokens": req.max_total_tokens,
        "context_length": req.context_length,
        "device": req.device,
        "eagle_draft_num_layers": draft_layers(req),
        **draft_head_shape(req),
        "disable_radix_cache": req.disable_radix_cache,
        "sglang_version": req.release.text,
    }
    env: dict[str, str] = {}
    if req.allow_context_length_override:  # --allow-context-length-override is SGLang's env knob
        env["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] = "1"
    if req.mamba_ssm_dtype is not None:  # ServerArgs sets the env knob (arg_groups/serving_hook.py)
        env["SGLANG_MAMBA_SSM_DTYPE"] = req.mamba_ssm_dtype
    if env:
        case["env"] = env
    if launch is None:
        case.update(
            kv_cache_dtype=req.kv_cache_dtype or "auto",
            page_size=1 if req.page_size is None else req.page_size,
            max_running_requests=req.max_running_requests,
            attention_backend=req.attention_backend,
            speculative_algorithm=req.speculative_algorithm,
            speculative_num_draft_tokens=req.speculative_num_draft_tokens,
            swa_full_tokens_ratio=req.swa_full_tokens_ratio,
            chunked_prefill_size=req.chunked_prefill_size,
        )
        return case
    gpu = req.gpu
    assert gpu is not None  # a launch resolution needs a GPU
    case.update(
        kv_cache_dtype=launch.kv_cache_dtype,
        page_size=launch.page_size or 1,
        max_running_requests=launch.max_running_requests,
        attention_backend=launch.attention_backend,
        prefill_attention_backend=launch.prefill_attention_backend,
        decode_attention_backend=launch.decode_attention_backend,
        dsa_prefill_backend=launch.dsa_prefill_backend,
        dsa_decode_backend=launch.dsa_decode_backend,
        dsv4_attn_backend=launch.dsv4_attn_backend,
        speculative_algorithm=launch.speculative_algorithm,
        # NGRAM derives steps = draft tokens // 10, so 0 below 10 draft tokens; SGLang's sizing reads
        # ``speculative_num_steps or 1`` (mem_cache/allocation_sizing.py), as the case reads None
        speculative_num_steps=launch.speculative_num_steps or None,
        speculative_eagle_topk=launch.speculative_eagle_topk,
        speculative_num_draft_tokens=launch.speculative_num_draft_tokens,
        swa_full_tokens_ratio=launch.swa_full_tokens_ratio if launch.swa_full_tokens_ratio_explicit else None,
        chunked_prefill_size=launch.chunked_prefill_size,
        disable_radix_cache=launch.disable_radix_cache,
        disable_overlap_schedule=launch.disable_overlap_schedule,
        disable_hybrid_swa_memory=launch.disable_hybrid_swa_memory,
        mamba_radix_cache_strategy=launch.mamba_radix_cache_strategy,
        platform=platform_fields(gpu),
    )
    if launch.attn_dp_size is not None:  # the launch forced its DP attention (DSA up to 0.5.5)
        case["attn_dp_size"] = launch.attn_dp_size
    if not SERVER_ARGUMENT_RULES["mamba_radix_cache_strategy"].holds(req.release):
        case["mamba_radix_cache_strategy"] = "auto"  # 0.5.6 has no such argument (its radix cache is no_buffer's)
    if gpu.is_npu:
        case["device"] = "npu"
    return case
