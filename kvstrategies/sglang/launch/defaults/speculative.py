"""Speculative decoding defaults and checks: the EAGLE family, NGRAM, DFLASH, DSPARK.

Mirrors ``sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding`` and its
``_handle_eagle_family`` (with ``_auto_choose_speculative_params``), ``_handle_ngram`` and
``_handle_dflash``.
"""

from __future__ import annotations

from ....core.releases import ByRelease, ReleaseRule, span
from ....models.architectures import (
    NARROW_SPECULATIVE_ADDED_0_5_7,
    NARROW_SPECULATIVE_ARCHITECTURES_0_5_7,
    names_holding,
    names_where,
)
from ...server_arguments import SERVER_ARGUMENT_VALUE_RULES
from .core import SPECULATIVE_HOOK, LaunchInputs, ResolutionDraft, _declare, _refuse

_SPEC_ALGORITHMS = frozenset({
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH", "DSPARK", "FROZEN_KV_MTP", "NGRAM",
})  # fmt: skip
_EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
_WIDE_SPEC_ARCHS = names_where(lambda r: r.wide_speculative_defaults)
_SPEC_V2_EAGLE_ARCHS = names_where(lambda r: r.eagle_spec_v2)


_SPEC_HOOK = "sglang.srt.arg_groups.speculative_hook"

#: the overlap scheduler stays on under NGRAM, DFLASH and FROZEN_KV_MTP (the spec-v2 worker), and NGRAM's steps are
#: derived from its draft tokens; before, those three turn the overlap scheduler off and NGRAM leaves the steps unset
SPEC_V2_OVERLAP = ReleaseRule(
    "launch-spec-v2-overlap",
    span("0.5.14"),
    "NGRAM / DFLASH / FROZEN_KV_MTP keep the overlap scheduler and NGRAM sets steps = draft tokens // topk; before: "
    "those three disable the overlap scheduler and NGRAM's speculative_num_steps stays None",
    "sglang.srt.arg_groups.speculative_hook (_handle_ngram, _handle_dflash, _handle_frozen_kv_mtp)",
    topic="launch",
)
#: EAGLE tree decoding (top-k > 1) runs on the overlap scheduler (spec v2); before, a given top-k > 1 turns it off
SPEC_V2_TREE = ReleaseRule(
    "launch-spec-v2-tree",
    span("0.5.13"),
    "EAGLE / EAGLE3 / STANDALONE with --speculative-eagle-topk > 1 keep the overlap scheduler (before: spec v2 "
    "supports topk 1 only, so a given topk > 1 disables it)",
    "sglang.srt.arg_groups.speculative_hook._handle_eagle_family (before: ServerArgs._handle_speculative_decoding)",
    topic="launch",
)
#: ``SGLANG_ENABLE_SPEC_V2`` defaults to on; before, off: EAGLE / EAGLE3 / STANDALONE run without the overlap
#: scheduler, except EAGLE on a model whose override turns spec v2 on (MiMo-V2-Flash, Step-3.5), where a given
#: top-k > 1 is refused
SPEC_V2_DEFAULT_ON = ReleaseRule(
    "launch-spec-v2-default-on",
    span("0.5.11"),
    "SGLANG_ENABLE_SPEC_V2 is on by default (before: off, so EAGLE / EAGLE3 / STANDALONE disable the overlap "
    "scheduler unless the model's override turns spec v2 on for EAGLE, which then refuses a given topk > 1)",
    "sglang.srt.environ.Envs.SGLANG_ENABLE_SPEC_V2; sglang.srt.server_args.ServerArgs._handle_speculative_decoding",
    topic="launch",
)
#: the EAGLE auto parameters default to (3, 1, 4) with a list of models taking (5, 4, 8); before, the other way round
SPEC_AUTO_NARROW_DEFAULT = ReleaseRule(
    "launch-spec-auto-narrow-default",
    span("0.5.8"),
    "EAGLE auto parameters: (3, 1, 4) unless the model is on the wide list (Llama, Grok); before: (5, 4, 8) unless "
    "it is on the narrow list (DeepSeek-V2 / V3 / V3.2, GPT-OSS, GLM-4 MoE, Mistral-Large-3, Pixtral, MiMo-V2-Flash)",
    "sglang.srt.server_args.auto_choose_speculative_params",
    topic="launch",
)
#: GLM-4 MoE, Mistral-Large-3, Pixtral and MiMo-V2-Flash take the narrow EAGLE auto parameters; before, the wide
SPEC_AUTO_NARROW_LIST_GROWN = ReleaseRule(
    "launch-spec-auto-narrow-list-grown",
    span("0.5.7"),
    "GLM-4 MoE, Mistral-Large-3, Pixtral and MiMo-V2-Flash are on the narrow EAGLE auto-parameter list (before: "
    "DeepSeek-V2 / V3 / V3.2, GPT-OSS and Bailing only)",
    "sglang.srt.server_args.auto_choose_speculative_params",
    topic="launch",
)
#: the backends an EAGLE tree (top-k > 1) at page > 1 runs on: flashinfer; fa3 from 0.5.6; triton from 0.5.13 (the
#: two-pass cascade draft decode)
SPEC_TREE_PAGED_BACKENDS: ByRelease[tuple[str, ...]] = ByRelease(
    "launch-spec-tree-paged-backends",
    (("0.5.1", ("flashinfer",)), ("0.5.6", ("flashinfer", "fa3")), ("0.5.13", ("flashinfer", "fa3", "triton"))),
    "the attention backends speculative_eagle_topk > 1 with page_size > 1 runs on",
    "sglang.srt.arg_groups.speculative_hook._handle_eagle_family (before: ServerArgs._handle_speculative_decoding)",
)
#: a top-k > 1 tree at page > 1 is checked against the backends it runs on; before, not checked at launch
SPEC_TREE_PAGED_CHECK = ReleaseRule(
    "launch-spec-tree-paged-check",
    span("0.5.2"),
    "speculative_eagle_topk > 1 with page_size > 1 is refused off its backends (before: not checked at launch)",
    "sglang.srt.server_args.ServerArgs.__post_init__",
    topic="launch",
)
_OVERLAP_OFF_BEFORE_V2 = frozenset({"NGRAM", "DFLASH", "FROZEN_KV_MTP"})
NGRAM_MAX_BFS_BREADTH = 10  # SGLang's --speculative-ngram-max-bfs-breadth default
DFLASH_DEFAULT_BLOCK_SIZE = 16  # used when the draft config names no block_size


def _eagle_family(inp: LaunchInputs, res: ResolutionDraft, algo: str) -> None:
    """EAGLE/EAGLE3/STANDALONE (``speculative_hook._handle_eagle_family``): auto (steps, topk,
    draft) only when steps are unset, and then topk/draft must be unset too; topk 1 forces
    draft = steps + 1; topk > 1 needs no trtllm_mha and, at page > 1, the release's backends
    (:data:`SPEC_TREE_PAGED_BACKENDS`)."""
    if algo == "STANDALONE" and inp.attn_dp_size > 1:
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "STANDALONE speculative decoding does not support "
                      "DP attention")  # fmt: skip
    if not SPEC_V2_DEFAULT_ON.holds(inp.release):
        _spec_v1_overlap(inp, res, algo)
    tree = res.speculative_eagle_topk is not None and res.speculative_eagle_topk > 1
    if tree and not res.disable_overlap_schedule and not SPEC_V2_TREE.holds(inp.release):
        _declare(res, "disable_overlap_schedule", True, "spec v2 supports topk 1 only "
                 "(sglang.srt.server_args.ServerArgs._handle_speculative_decoding)")  # fmt: skip
    mtp_paged = inp.model.has_arch(names_holding("mtp_paged_flashinfer_refused", inp.release))
    # up to 0.5.1 (the page is set by now: page_default_step)
    if mtp_paged and res.page_size != 1 and res.attention_backend == "flashinfer":
        raise _refuse("sglang.srt.server_args.ServerArgs.__post_init__",
                      "DeepSeek / GLM MTP speculative decoding with page_size != 1 is not supported on flashinfer")
    if res.speculative_num_steps is None:
        if res.speculative_eagle_topk is not None or res.speculative_num_draft_tokens is not None:
            raise _refuse(
                f"{_SPEC_HOOK}._handle_eagle_family",
                "--speculative-eagle-topk / --speculative-num-draft-tokens need --speculative-num-steps "
                "(SGLang chooses all three only when none is given)",
            )
        arch = inp.model.architectures[0]
        if SPEC_AUTO_NARROW_DEFAULT.holds(inp.release):
            listed = arch in _WIDE_SPEC_ARCHS
        else:  # up to 0.5.7: the wide set unless on the narrow list
            narrow = NARROW_SPECULATIVE_ARCHITECTURES_0_5_7
            if not SPEC_AUTO_NARROW_LIST_GROWN.holds(inp.release):
                narrow = narrow - NARROW_SPECULATIVE_ADDED_0_5_7
            listed = arch not in narrow
        wide = algo != "STANDALONE" and listed
        auto = (5, 4, 8) if wide else (3, 1, 4)
        why = f"auto params for {inp.model.architectures[0]} (speculative_hook._auto_choose_speculative_params)"
        _declare(res, "speculative_num_steps", auto[0], why)
        _declare(res, "speculative_eagle_topk", auto[1], why)
        _declare(res, "speculative_num_draft_tokens", auto[2], why)
    topk = res.speculative_eagle_topk
    if topk is None:  # SGLang compares None > 1 and fails with a TypeError
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "--speculative-num-steps needs --speculative-eagle-topk")
    if topk > 1 and "trtllm_mha" in (res.attention_backend, res.decode_attention_backend):
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "trtllm_mha backend only supports topk = 1")
    if topk == 1 and res.speculative_num_steps is not None:
        draft = res.speculative_num_steps + 1
        if res.speculative_num_draft_tokens != draft:
            why = "topk 1: steps + 1 (speculative_hook._handle_eagle_family)"
            _declare(res, "speculative_num_draft_tokens", draft, why)
    paged = SPEC_TREE_PAGED_BACKENDS.at(inp.release)
    checked = SPEC_TREE_PAGED_CHECK.holds(inp.release)
    if checked and topk > 1 and (res.page_size or 1) > 1 and res.attention_backend not in paged:
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", f"speculative_eagle_topk > 1 with page_size > 1 needs "
                      f"{' or '.join(paged)}, got {res.attention_backend}")  # fmt: skip


def _spec_v1_overlap(inp: LaunchInputs, res: ResolutionDraft, algo: str) -> None:
    """Up to 0.5.10 (:data:`SPEC_V2_DEFAULT_ON`), ``ServerArgs._handle_speculative_decoding``: spec v2 is off
    unless the model's override turned it on for EAGLE; with it the overlap scheduler is on and a given
    top-k > 1 refused, without it the overlap scheduler is off."""
    check = "sglang.srt.server_args.ServerArgs._handle_speculative_decoding"
    if algo == "EAGLE" and inp.model.has_arch(_SPEC_V2_EAGLE_ARCHS):
        if res.speculative_eagle_topk is not None and res.speculative_eagle_topk > 1:
            raise _refuse(check, "Spec v2 currently only supports topk = 1 for speculative decoding.")
        if res.disable_overlap_schedule:
            _declare(res, "disable_overlap_schedule", False, f"spec v2 is on for {algo} ({check})")
    elif not res.disable_overlap_schedule:
        _declare(res, "disable_overlap_schedule", True, f"spec v2 is off by default ({check})")


def _ngram(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """NGRAM (``speculative_hook._handle_ngram``): topk = the BFS breadth (10), draft tokens 12,
    steps = draft // topk; topk > 1 at page > 1 needs flashinfer; no DP attention."""
    why = "NGRAM default (speculative_hook._handle_ngram)"
    _declare(res, "speculative_eagle_topk", NGRAM_MAX_BFS_BREADTH, why)
    if res.speculative_num_draft_tokens is None:
        _declare(res, "speculative_num_draft_tokens", 12, why)
    if res.speculative_num_steps is None and SPEC_V2_OVERLAP.holds(inp.release):
        draft = res.speculative_num_draft_tokens or 12
        _declare(res, "speculative_num_steps", draft // NGRAM_MAX_BFS_BREADTH, why)
    if (res.page_size or 1) > 1 and res.attention_backend != "flashinfer":
        raise _refuse(f"{_SPEC_HOOK}._handle_ngram", f"NGRAM's topk {NGRAM_MAX_BFS_BREADTH} with page_size "
                      f"{res.page_size} > 1 is only supported on the flashinfer backend, got {res.attention_backend}")
    if inp.attn_dp_size > 1:
        raise _refuse(f"{_SPEC_HOOK}._handle_ngram", "ngram speculative decoding does not support DP attention")


def _dflash(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """DFLASH (``speculative_hook._handle_dflash``): PP 1, a draft model, no DP attention (it
    needs --enable-dp-lm-head); steps 1, topk 1; draft tokens = the draft's block size (16)."""
    s, check = inp.settings, f"{_SPEC_HOOK}._handle_dflash"
    if inp.attn_dp_size > 1:
        raise _refuse(check, "DFLASH with DP attention requires --enable-dp-lm-head")
    if inp.pp_size != 1:
        raise _refuse(check, "DFLASH speculative decoding only supports pp_size == 1")
    if s.speculative_draft_model_path is None:
        raise _refuse(check, "DFLASH speculative decoding requires --speculative-draft-model-path")
    _declare(res, "speculative_num_steps", 1, "DFLASH: one step (speculative_hook._handle_dflash)")
    _declare(res, "speculative_eagle_topk", 1, "DFLASH: topk 1 (speculative_hook._handle_dflash)")
    if res.speculative_num_draft_tokens is None:
        block = s.speculative_dflash_block_size or DFLASH_DEFAULT_BLOCK_SIZE
        _declare(res, "speculative_num_draft_tokens", block, "DFLASH: the draft model's block size")


def _known_to_release(algo: str, inp: LaunchInputs) -> bool:
    """Whether the release's ``SpeculativeAlgorithm`` has ``algo``
    (:data:`kvstrategies.sglang.server_arguments.SERVER_ARGUMENT_VALUE_RULES`)."""
    rule = SERVER_ARGUMENT_VALUE_RULES.get(("speculative_algorithm", algo))
    return rule is None or rule.holds(inp.release)


def speculative_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Speculative defaults (speculative_hook.handle_speculative_decoding):
    upper-case, NEXTN -> EAGLE, 48 requests, then the algorithm's own defaults and checks."""
    algo = res.speculative_algorithm
    if algo is None:
        return
    algo = algo.upper()
    res.speculative_algorithm = algo  # SGLang's enum is upper case
    if algo == "NEXTN":
        why = "NEXTN is EAGLE (speculative_hook.handle_speculative_decoding)"
        _declare(res, "speculative_algorithm", "EAGLE", why)
        algo = "EAGLE"
    if not _known_to_release(algo, inp):
        return  # ServerArgs leaves it alone; the scheduler's SpeculativeAlgorithm.from_string refuses it
    if algo == "DFLASH":
        _dflash(inp, res)
    if res.max_running_requests is None:
        _declare(res, "max_running_requests", 48, f"{algo} default (speculative_hook)")
    if algo in _OVERLAP_OFF_BEFORE_V2 and not SPEC_V2_OVERLAP.holds(inp.release) and not res.disable_overlap_schedule:
        _declare(res, "disable_overlap_schedule", True, f"{algo} runs without the overlap scheduler "
                 f"({SPECULATIVE_HOOK.at(inp.release)})")  # fmt: skip
    if algo in _EAGLE_FAMILY:
        _eagle_family(inp, res, algo)
    elif algo == "NGRAM":
        _ngram(inp, res)
    elif algo == "DSPARK":
        _declare(res, "speculative_num_steps", 1, f"{algo} forces one step ({SPECULATIVE_HOOK.at(inp.release)})")
        _declare(res, "speculative_eagle_topk", 1, f"{algo} forces topk 1 ({SPECULATIVE_HOOK.at(inp.release)})")
