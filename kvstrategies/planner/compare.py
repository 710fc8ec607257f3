"""``kvstrategies compare``: one deployment, its KV budget, answered for SGLang and for vLLM side by side.

SGLang's side is the planner's whole answer (launch defaults, budget, pools, concurrency per request
length). vLLM's side plans the same model, GPU, TP/PP and KV dtype with the vLLM strategies on the
same KV budget (``--kv-cache-memory-bytes`` = SGLang's budget), once per request length: vLLM's
concurrency for requests of ``L`` tokens is ``num_blocks / sum over groups of blocks_per_request(L)``
at ``--max-model-len L`` and its "GPU KV cache size" is that concurrency times ``L``. The reason the
two differ is said per model family (:func:`why_they_differ`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..api import plan
from ..case import parse_case
from ..context import KVCacheSettings
from ..core.releases import VLLM, EngineRelease
from ..errors import KVCacheConfigError
from ..models import ModelGeometry
from .deployment import DeploymentPlan


@dataclass(frozen=True)
class EngineRow:
    """One request length: each engine's tokens and concurrent requests of that length."""

    request_length: int
    sglang_tokens: int
    sglang_requests: int
    sglang_limited_by: str
    vllm_tokens: int | None
    vllm_concurrency: float | None
    vllm_blocks: int | None
    vllm_error: str | None = None


@dataclass(frozen=True)
class EngineComparison:
    budget_bytes: int
    gpu: str
    rows: tuple[EngineRow, ...]
    reasons: tuple[str, ...]
    vllm_block_size: int | None = None
    #: SGLang's token pools' share of the budget when its Mamba slot pool takes the rest first (None: all of it)
    sglang_token_bytes: int | None = None


def why_they_differ(geometry: ModelGeometry) -> tuple[str, ...]:
    """Why SGLang's and vLLM's answers differ for this model family (the same budget given to both)."""
    if geometry.dsv4 is not None:
        return (
            "DeepSeek-V4: vLLM packs every layer's caches (sliding window, compressed KV, indexer keys, compressor "
            "states) into one block pool whose block strides the widest cache group, and a request takes "
            "cdiv(L, block) blocks of the compressed group plus each window group's blocks "
            "(kvstrategies/vllm/strategies/dsv4.py); SGLang sizes its compressed pools in full-attention tokens "
            "and caps requests by its state rows.",
            "vLLM's 'GPU KV cache size' is concurrency x L, so it changes with L at the same number of blocks; "
            "SGLang's token count is its full-attention pool.",
        )
    if geometry.mamba is not None:
        return (
            "Mamba hybrid: vLLM takes each request's recurrent states from the KV block pool (3 pages a "
            "Mamba group with prefix caching) and enlarges the attention block until a page holds a state; "
            "SGLang keeps a fixed Mamba slot pool (its size caps max_running_requests) beside a token pool.",
        )
    if geometry.hybrid_swa is not None or geometry.config_sliding_window is not None:
        return (
            "sliding window: vLLM's groups share one block pool and a window group holds "
            "cdiv(min(W - 1 + in-flight tokens, L), block) + 1 blocks a request (no saving while L is under "
            "the window plus vLLM's 2 x max_num_batched_tokens in flight), with padding layers when the "
            "layer counts do not divide; SGLang splits fixed full and SWA pools (swa_full_tokens_ratio).",
            "vLLM's 'GPU KV cache size' is concurrency x L, so for hybrid models it changes with L at the same "
            "number of blocks; SGLang's token count is its full-attention pool.",
        )
    return (
        "uniform attention (one spec for every layer): both divide the budget by the same bytes per token "
        "and layer, so the token counts agree to the page; vLLM holds back one null block and counts whole "
        "blocks a request, SGLang caps requests at max_running_requests.",
    )


def compare_engines(
    sglang: DeploymentPlan, lengths: tuple[int, ...], gpu: str | None, vllm_release: EngineRelease | None = None
) -> EngineComparison:
    """vLLM's answer (``vllm_release``, default the newest) beside SGLang's planned deployment, at each of
    ``lengths`` (the same KV budget)."""
    case = sglang.case
    # SGLang's whole KV budget: for a Mamba hybrid its case holds only what is left after the Mamba slot
    # pool, while vLLM draws the states from the same block pool, so vLLM gets the whole budget
    budget = sglang.budget.available_bytes
    fields: dict[str, Any] = {k: v for k, v in case.raw.items() if k not in ("name", "description")}
    fields.update(engine=VLLM, available_bytes=budget, gpu=gpu, page_size=1, max_tokens=None,
                  max_running_requests=None, chunked_prefill_size=None,
                  vllm_version=None if vllm_release is None else vllm_release.text)  # fmt: skip
    by_length = {fit.request_length: fit for fit in sglang.fit.lengths}
    rows = []
    block_size = None
    for length in lengths:
        fit = by_length.get(length)
        tokens = sglang.sizes.max_total_num_tokens
        requests, limit = (fit.requests, fit.limited_by) if fit is not None else (0, "not planned")
        try:
            planned = plan(parse_case({**fields, "context_length": length}).settings, budget)
        except KVCacheConfigError as exc:
            rows.append(EngineRow(length, tokens, requests, limit, None, None, None, str(exc)))
            continue
        answer = planned.vllm
        assert answer is not None
        block_size = answer.block_size
        rows.append(EngineRow(length, tokens, requests, limit, answer.capacity.tokens,
                              answer.capacity.max_concurrency, answer.num_gpu_blocks))  # fmt: skip
    tokens_share = case.available_bytes if case.available_bytes != budget else None
    reasons = why_they_differ(case.settings.geometry) + _draft_reason(case.settings)
    return EngineComparison(budget, gpu or "H200", tuple(rows), reasons, block_size, tokens_share)


def _draft_reason(settings: KVCacheSettings) -> tuple[str, ...]:
    """Why a speculative draft changes the two answers differently (none without one)."""
    spec = settings.speculative
    if not spec.enabled:
        return ()
    draft = "EAGLE head's" if spec.draft_num_kv_heads is not None or spec.algorithm.value == "EAGLE3" else "MTP draft"
    return (
        f"speculative decoding ({spec.algorithm.value}): vLLM's {draft} layers join its KV cache groups "
        "(one more page a block each) and each Mamba group holds one more state block a request per speculative "
        "token (kvstrategies/vllm/strategies/drafts.py); kvstrategies plan shows how SGLang prices its draft.",
    )


def comparison_text(comparison: EngineComparison) -> list[str]:
    """The table ``kvstrategies compare`` prints."""
    out = [
        f"KV budget per rank: {comparison.budget_bytes:,} bytes ({comparison.budget_bytes / 2**30:.2f} GiB), "
        f"the same for both engines (vLLM: --kv-cache-memory-bytes), vLLM on {comparison.gpu}",
        f"{'request length':>14}  {'SGLang tokens':>13}  {'SGLang requests':>15}  {'vLLM KV cache size':>18}  "
        f"{'vLLM concurrency':>16}  {'vLLM blocks':>11}",
    ]
    if comparison.sglang_token_bytes is not None:
        states = comparison.budget_bytes - comparison.sglang_token_bytes
        out.insert(1, f"SGLang splits it: {states / 2**30:.2f} GiB for its Mamba slot pool, "
                      f"{comparison.sglang_token_bytes / 2**30:.2f} GiB for its token pool")  # fmt: skip
    for row in comparison.rows:
        if row.vllm_error is not None:
            out.append(f"{row.request_length:>14,}  {row.sglang_tokens:>13,}  {row.sglang_requests:>15,}  "
                       f"vLLM refuses: {row.vllm_error}")  # fmt: skip
            continue
        out.append(
            f"{row.request_length:>14,}  {row.sglang_tokens:>13,}  {row.sglang_requests:>15,}  "
            f"{row.vllm_tokens:>18,}  {row.vllm_concurrency:>15.2f}x  {row.vllm_blocks:>11,}"
        )
    if comparison.vllm_block_size is not None:
        out.append(f"vLLM block size: {comparison.vllm_block_size} tokens")
    out.append("why they differ:")
    out.extend(f"  - {reason}" for reason in comparison.reasons)
    return out
