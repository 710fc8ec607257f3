"""What vLLM's memory profile measures besides the weights, as a small model fitted to public start-up logs.

``vllm/v1/worker/gpu_worker.py Worker.determine_available_memory`` takes from the requested memory
what the profile run (``vllm/utils/mem_utils.py memory_profiling``) measured: ``total_consumed``
(weights, the buffers allocated after them, and non-torch memory such as NCCL's) plus
``transient_peak_headroom`` (the torch peak of ``profile_run`` above what stays allocated), then
the CUDA-graph estimate (``profile_cudagraph_memory``). None of that can be measured without a
GPU, so the planner models each part (bytes per rank):

* **transient**: ``profile_run`` (``vllm/v1/worker/gpu/model_runner.py``) runs the model on
  ``max_num_batched_tokens`` tokens and keeps their hidden states (``tokens x hidden x dtype``)
  while ``_dummy_sampler_run`` samples ``R = min(max_num_seqs, max_num_batched_tokens)`` requests:
  logits and the sampler's float32 pipeline, ``SAMPLER_BYTES_PER_LOGIT x R x vocab``. The forward
  pass's own peak, the MLP's ``gate_up`` and activation outputs (``tokens x 3 x mlp width / TP x
  dtype``), is counted instead of the sampler when it is the larger (few requests). The sampler
  and the hidden states run on the last pipeline stage only;
* **resident**: what stays allocated after the weights, plus the CUDA-graph estimate where vLLM
  deducts it: :data:`RESIDENT_WITH_GRAPHS_BYTES` (CUDA graphs captured, vLLM >= 0.21 deducts the
  estimate: "CUDA graph memory profiling is enabled (default since v0.21.0)", the message
  ``determine_available_memory`` prints) or :data:`RESIDENT_NO_GRAPHS_BYTES` (``--enforce-eager``,
  or a release before 0.21); plus :data:`MULTI_GPU_EXTRA_BYTES` with more than one GPU (NCCL and
  custom all-reduce buffers).

Every constant is the median over the public logs in ``tests/fixtures/vllm_logs/`` named beside
it (``tools/fit_vllm_overhead.py`` recomputes them; ``tests/vllm/test_vllm_budget.py`` checks they are
the medians). The spread of those logs around the model is the tolerance
``tests/vllm/test_vllm_published_logs.py`` states.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...models.hf import text_config

#: bytes per (sampled request x vocabulary entry) at the sampler's peak: the median of
#: (logged peak activation - hidden states) / (R x vocab) over the logs that print the peak on its own
#: (releases before 0.21): llmd-h100-{llama-3.1-8b, qwen3-0.6b, qwen3-32b, gpt-oss-20b, llama-3.3-70b-fp8-tp2}
#: and l40s-tp8-ep-qwen3-235b-fp8-v0.10.2 (38.2 to 38.6 B over three vocabularies and four GPUs' worth of settings)
SAMPLER_BYTES_PER_LOGIT = 38.32
#: resident memory after the weights without CUDA graphs: the median residual (requested - logged weights -
#: logged KV - transient) of the one-GPU logs whose rule deducts no graphs: llmd-h100-{llama-3.1-8b,
#: qwen3-0.6b, qwen3-32b, gpt-oss-20b}, a100-40gb-llama-3.1-8b-v0.15.1-eager (0.04 to 0.15 GiB)
RESIDENT_NO_GRAPHS_BYTES = 133_041_226
#: the same with the CUDA-graph estimate deducted: the median residual of the one-GPU logs of vLLM >= 0.21
#: with graphs on: a100-80gb-llama-3.1-8b-v0.31, l40s-qwen3-14b-v0.28, l40s-qwen3-14b-awq-v0.28,
#: l40s-qwen3-14b-awq-tuned-v0.28 (0.37 to 0.86 GiB)
RESIDENT_WITH_GRAPHS_BYTES = 483_910_537
#: more than one GPU: the median of (persistent non-KV memory at TP > 1) - (the one-GPU figure of the same
#: rule) over llmd-h100-llama-3.3-70b-fp8-tp2, l40s-tp8-ep-qwen3-235b-fp8-v0.10.2, h200-tp8-glm-breakdown-only
#: (0.08 to 1.48 GiB)
MULTI_GPU_EXTRA_BYTES = 450_971_566
#: what a one-GPU process holds before vLLM's memory snapshot (CUDA context): the median of total - free at
#: start over the one-GPU logs that print both (llmd-h100-*, a100-80gb-llama-3.1-8b-v0.31); vLLM refuses a
#: utilization whose request exceeds the free memory (``vllm/v1/worker/utils.py request_memory``)
STARTUP_HELD_BYTES = 654_982_513


@dataclass(frozen=True)
class ProfileShape:
    """The model dimensions vLLM's profile run scales with (per rank where TP splits them)."""

    vocab_size: int
    hidden_size: int
    mlp_width: int  # the MLP's intermediate width of one token (experts: top-k x expert width, + shared)
    activation_bytes: int  # the serving dtype's bytes (bf16 / fp16: 2)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], activation_bytes: int) -> ProfileShape:
        """Read from a raw HF ``config.json`` (the text model's part of a multimodal one)."""
        t = text_config(config)

        def num(*keys: str) -> int:
            for key in keys:
                value = t.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                    return int(value)
            return 0

        hidden = num("hidden_size", "d_model")
        experts = num("num_experts_per_tok", "experts_per_token", "moe_topk")
        if experts:
            width = experts * num("moe_intermediate_size", "intermediate_size")
            width += num("shared_expert_intermediate_size") or num("n_shared_experts") * num("moe_intermediate_size")
        else:
            width = num("intermediate_size", "ffn_hidden_size") or 4 * hidden
        return cls(num("vocab_size", "padded_vocab_size"), hidden, width, activation_bytes)


@dataclass(frozen=True)
class ProfileSettings:
    """The launch settings the profile run reads (vLLM's resolved values)."""

    max_num_batched_tokens: int
    max_num_seqs: int
    tp_size: int = 1
    world_size: int = 1
    cuda_graphs: bool = True  # False: --enforce-eager (cudagraph_mode NONE)
    graphs_deducted: bool = True  # False: a release before 0.21 (no CUDA-graph deduction)
    last_stage: bool = True  # the pipeline stage that samples


@dataclass(frozen=True)
class ProfileOverhead:
    """The modelled non-KV, non-weight memory of one rank (bytes), part by part."""

    hidden_states: int
    sampler: int
    forward: int
    resident: int
    multi_gpu: int

    @property
    def transient(self) -> int:
        """The profile run's transient peak: hidden states plus the larger of the sampler and the forward MLP."""
        return self.hidden_states + max(self.sampler, self.forward)

    @property
    def total(self) -> int:
        return self.transient + self.resident + self.multi_gpu


def profile_overhead(shape: ProfileShape, settings: ProfileSettings) -> ProfileOverhead:
    """The model of the module doc for one rank."""
    tokens = settings.max_num_batched_tokens
    requests = min(settings.max_num_seqs, tokens)
    last = settings.last_stage
    hidden = tokens * shape.hidden_size * shape.activation_bytes if last else 0
    sampler = int(SAMPLER_BYTES_PER_LOGIT * requests * shape.vocab_size) if last else 0
    forward = tokens * 3 * (shape.mlp_width // max(1, settings.tp_size)) * shape.activation_bytes
    with_graphs = settings.cuda_graphs and settings.graphs_deducted
    resident = RESIDENT_WITH_GRAPHS_BYTES if with_graphs else RESIDENT_NO_GRAPHS_BYTES
    multi = MULTI_GPU_EXTRA_BYTES if settings.world_size > 1 else 0
    return ProfileOverhead(hidden, sampler, forward, resident, multi)
