"""Which launches lose the prefill CUDA graph, per SGLang release: the rules and allow-lists.

Data for :func:`.graphs.cuda_graph_step`. SGLang evaluates one list of incompatibilities for the
breakable prefill graph (``arg_groups.cuda_graph_hook.apply_cuda_graph_compatibility``; up to
0.5.18 ``ServerArgs._disable_breakable_cudagraph_if_incompatible``) and another for a multimodal
model moved to ``tc_piecewise`` (``ServerArgs._disable_tc_piecewise_cudagraph_if_incompatible``);
entries came and went between releases, so each is a :class:`~kvstrategies.core.releases.ReleaseRule`
or a :class:`~kvstrategies.core.releases.ByRelease`. The allow-lists themselves
(``configs.model_config.multimodal_breakable_cuda_graph_supported_model_archs`` and its piecewise
twin) are the architecture rows' ``breakable_multimodal`` / ``piecewise_multimodal`` with the
releases each row's ``releases`` gives (:func:`kvstrategies.models.architectures.names_holding`).
"""

from __future__ import annotations

from ....core.releases import ByRelease, ReleaseRule, span

_BREAKABLE = "sglang.srt.server_args.ServerArgs._disable_breakable_cudagraph_if_incompatible"
_HOOK = "sglang.srt.arg_groups.cuda_graph_hook.apply_cuda_graph_compatibility"

#: MLA attention turns the breakable prefill graph off (0.5.17: DSA exempt; 0.5.18: no MLA rule)
BREAKABLE_OFF_FOR_MLA = ReleaseRule(
    "launch-breakable-off-for-mla", span(last="0.5.17"),
    "MLA attention disables the breakable prefill cuda graph", _BREAKABLE, topic="launch",
)  # fmt: skip
BREAKABLE_OFF_FOR_DSA = ReleaseRule(
    "launch-breakable-off-for-dsa", span(last="0.5.16"),
    "the MLA rule also disables the breakable prefill graph of DSA models (0.5.17 exempts them)", _BREAKABLE,
    topic="launch",
)  # fmt: skip
#: Nemotron-H's hybrid Mamba2 prefill is not breakable-safe (0.5.17 only)
BREAKABLE_OFF_FOR_NEMOTRON_H = ReleaseRule(
    "launch-breakable-off-for-nemotron-h", span("0.5.17", "0.5.17"),
    "Nemotron-H (hybrid Mamba2 prefill) disables the breakable prefill cuda graph", _BREAKABLE, topic="launch",
)  # fmt: skip
BREAKABLE_OFF_FOR_DP_ATTENTION = ReleaseRule(
    "launch-breakable-off-for-dp-attention", span(last="0.5.16"),
    "DP attention disables the breakable prefill cuda graph", _BREAKABLE, topic="launch",
)  # fmt: skip
#: decode context parallel turns both prefill graphs off (no rule in 0.5.15)
PREFILL_GRAPH_OFF_FOR_DCP = ReleaseRule(
    "launch-prefill-graph-off-for-dcp", span("0.5.16"),
    "decode context parallel (dcp_size > 1) disables the prefill cuda graph", _HOOK, topic="launch",
)  # fmt: skip
#: the MoE all-to-all backends the breakable graph tolerates
BREAKABLE_A2A_BACKENDS: ByRelease[tuple[str, ...]] = ByRelease(
    "launch-breakable-a2a-backends",
    (("0.5.1", ("none",)), ("0.5.17", ("deepep", "flashinfer", "megamoe", "none"))),
    "the --moe-a2a-backend values that keep the breakable prefill cuda graph",
    _HOOK,
)
#: up to 0.5.15 every multimodal model loses the breakable graph (no allow-list yet)
BREAKABLE_MULTIMODAL_ALLOW_LIST = ReleaseRule(
    "launch-breakable-multimodal-allow-list", span("0.5.16"),
    "allow-listed multimodal models keep the breakable prefill cuda graph", _HOOK, topic="launch",
)  # fmt: skip

#: a multimodal model on the piecewise allow-list (its rows' ``piecewise_multimodal``) moves from
#: the breakable prefill graph to ``tc_piecewise`` (its decoder prefill validated there), from 0.5.18
#: only when it is not on the breakable allow-list too (:data:`BREAKABLE_LIST_KEEPS_BREAKABLE`)
_COMPAT = "sglang.srt.server_args.ServerArgs._apply_cuda_graph_compatibility (0.5.19: arg_groups.cuda_graph_hook)"
TC_PIECEWISE_MOVE = ReleaseRule(
    "launch-tc-piecewise-move", span("0.5.16"),
    "piecewise-allow-listed multimodal models take the tc_piecewise prefill graph instead of breakable", _COMPAT,
    topic="launch",
)  # fmt: skip
BREAKABLE_LIST_KEEPS_BREAKABLE = ReleaseRule(
    "launch-breakable-list-keeps-breakable", span("0.5.18"),
    "a multimodal model on both allow-lists keeps the breakable prefill graph", _COMPAT, topic="launch",
)  # fmt: skip

#: up to 0.5.14 the prefill graph defaults to ``tc_piecewise`` (torch.compile, piecewise) and meets that
#: backend's incompatibility list; 0.5.15 makes ``breakable`` the CUDA default
PREFILL_DEFAULT_TC_PIECEWISE = ReleaseRule(
    "launch-prefill-default-tc-piecewise", span(last="0.5.14"),
    "the prefill cuda graph defaults to tc_piecewise (0.5.15: breakable on CUDA)",
    "sglang.srt.model_executor.cuda_graph_config.CudaGraphConfig (prefill default; 0.5.15: default_prefill_backend) "
    "and ServerArgs._disable_tc_piecewise_cudagraph_if_incompatible", topic="launch",
)  # fmt: skip

#: up to 0.5.12 the FlashInfer TRT-LLM / MXFP4 MoE runners (bypassed top-k) turn the tc_piecewise prefill graph off,
#: GPT-OSS excepted (its MoE block is one custom op)
PIECEWISE_OFF_FOR_TRTLLM_MOE = ReleaseRule(
    "launch-piecewise-off-for-trtllm-moe", span(last="0.5.12"),
    "the flashinfer_trtllm MoE runner disables the tc_piecewise prefill cuda graph (GPT-OSS excepted)",
    "sglang.srt.server_args.ServerArgs._handle_moe_kernel_config (bypassed top-k)", topic="launch",
)  # fmt: skip

#: in 0.5.10 any speculative algorithm turns the tc_piecewise prefill graph off (before the memory reserve)
PIECEWISE_OFF_FOR_SPECULATIVE = ReleaseRule(
    "launch-piecewise-off-for-speculative", span("0.5.10", "0.5.10"),
    "speculative decoding disables the tc_piecewise prefill cuda graph",
    "sglang.srt.server_args.ServerArgs._handle_piecewise_cuda_graph (condition 2, removed in 0.5.11)", topic="launch",
)  # fmt: skip

#: ServerArgs has the piecewise prefill graph (``--enable-piecewise-cuda-graph``, ``piecewise_cuda_graph_max_tokens``,
#: ``piecewise_cuda_graph_tokens``); before, no prefill graph at all
PIECEWISE_GRAPH_FIELDS = ReleaseRule(
    "launch-piecewise-graph-fields", span("0.5.4"),
    "ServerArgs has the piecewise prefill cuda graph and its token list (before: no prefill graph)",
    "sglang.srt.server_args.ServerArgs.piecewise_cuda_graph_max_tokens", topic="launch",
)  # fmt: skip

#: up to 0.5.9 the piecewise prefill graph is opt-in (``--enable-piecewise-cuda-graph``): off, and not reserved for,
#: by default
PIECEWISE_GRAPH_OPT_IN = ReleaseRule(
    "launch-piecewise-graph-opt-in", span(last="0.5.9"),
    "the tc_piecewise prefill cuda graph is opt-in (--enable-piecewise-cuda-graph): off by default, nothing reserved",
    "sglang.srt.server_args.ServerArgs.enable_piecewise_cuda_graph and _handle_gpu_memory_settings "
    "(0.5.10: disable_piecewise_cuda_graph, on by default)", topic="launch",
)  # fmt: skip

#: where the step-64 range of the piecewise prefill graph's token list starts (0.5.8: 640, so one size fewer)
PIECEWISE_TOKENS_64_FROM: ByRelease[int] = ByRelease(
    "launch-piecewise-tokens-64-from",
    (("0.5.1", 640), ("0.5.9", 576)),
    "the first size of the piecewise prefill graph's step-64 token range",
    "sglang.srt.server_args.ServerArgs._generate_piecewise_cuda_graph_tokens",
    topic="launch",
)
