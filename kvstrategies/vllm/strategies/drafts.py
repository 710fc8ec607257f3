"""vLLM's speculative decoding with a model's own MTP layers (``--speculative-config '{"method": "mtp"}'``).

vLLM builds the draft (``vllm/config/speculative.py SpeculativeConfig.hf_config_override``: the model's
MTP architecture with ``n_predict`` layers) beside the target, in the same worker, and its attention layers
join the target's KV cache groups (``vllm/v1/spec_decode/llm_base_proposer.py
SpecDecodeBaseProposer.load_model``): a draft layer is one more layer of the kind the target's full layers
are (MiMo-V2's: its sliding-window kind), numbered after them (``num_hidden_layers + i``). The lookahead
also lengthens each Mamba layer's conv window by ``num_speculative_tokens`` and holds that many more state
blocks a request (``vllm/model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec``:
``num_speculative_blocks``).

SGLang's ``--speculative-algorithm EAGLE`` (or ``NEXTN``) with top-k 1 and no draft checkpoint is that
deployment: ``speculative_num_steps`` draft tokens a step. A tree (top-k > 1), a separate draft checkpoint
(EAGLE3, STANDALONE), the other algorithms and the model types whose MTP draft is not modelled
(``VLLMModelRule.mtp_draft``) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...context import KVCacheContext, SpecAlgorithm
from ...core.releases import VLLM, EngineRelease, ReleaseRule, parse_release, span
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import vllm_model_rule
from .specs import FullAttentionSpec, KVCacheSpec, SlidingWindowSpec, SparseMLALayerSpec

#: the releases whose MTP drafts the strategies model (recorded by each of them; 0.19.1's drafter is not driven by
#: the bridge: it has no ``llm_base_proposer``)
MTP_DRAFTS = ReleaseRule(
    "vllm-mtp-drafts",
    span("0.20.2", engine=VLLM),
    "speculative decoding with the model's MTP layers is planned: the draft's layers join the KV cache groups "
    "and Mamba layers hold the lookahead (older releases: refused, not modelled)",
    "vllm/v1/spec_decode/llm_base_proposer.py SpecDecodeBaseProposer.load_model; vllm/config/speculative.py "
    "SpeculativeConfig.hf_config_override",
    topic="sizing",
)

#: from this release the draft's ``ParallelConfig`` takes ``pipeline_parallel_size`` 1
#: (``vllm/config/speculative.py SpeculativeConfig.create_draft_parallel_config``), so the drafter runs beside
#: any PP layout on the last stage; before, it takes the target's, and the draft's
#: ``ModelConfig.verify_with_parallel_config`` refuses PP > 1: none of these MTP draft classes implements
#: ``SupportsPP`` there
DRAFT_PIPELINE_ONE = ReleaseRule(
    "vllm-draft-pipeline-parallel-1",
    span("0.30.0", engine=VLLM),
    "the MTP draft's parallel config has PP 1, so MTP runs at PP > 1 (before: refused, the draft classes do not "
    "implement SupportsPP)",
    "vllm/config/speculative.py SpeculativeConfig.create_draft_parallel_config; vllm/config/model.py "
    "ModelConfig.verify_with_parallel_config",
    topic="launch",
)


@dataclass(frozen=True)
class MTPDraft:
    """A vLLM MTP draft: ``num_speculative_tokens`` proposed a step by ``num_layers`` draft layers."""

    num_speculative_tokens: int
    num_layers: int

    def speculative_config(self) -> dict[str, object]:
        """``--speculative-config``'s value."""
        return {"method": "mtp", "num_speculative_tokens": self.num_speculative_tokens}


def mtp_tokens(speculative_config: object) -> int:
    """``num_speculative_tokens`` of vLLM's ``--speculative-config`` JSON (a mapping) for the model's own MTP
    layers (``method`` ``mtp``, or a model's ``*_mtp`` name, which vLLM reads as ``mtp``); a
    :class:`ValueError` naming the field otherwise."""
    if not isinstance(speculative_config, Mapping):
        raise ValueError("--speculative-config must be a JSON object, e.g. '{\"method\": \"mtp\", "
                         "\"num_speculative_tokens\": 3}'")  # fmt: skip
    method = speculative_config.get("method")
    if not isinstance(method, str) or not (method == "mtp" or method.endswith("_mtp")):
        raise ValueError(f"--speculative-config method {method!r}: only the model's own MTP layers (method mtp) "
                         "are modelled for vLLM (vllm/config/speculative.py SpeculativeConfig)")  # fmt: skip
    tokens = speculative_config.get("num_speculative_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 64:
        raise ValueError(f"--speculative-config num_speculative_tokens must be an integer in [1, 64], got {tokens!r}")
    other = sorted(set(speculative_config) - {"method", "num_speculative_tokens"})
    if other:
        raise ValueError(f"--speculative-config key {other[0]!r} is not modelled (method and "
                         "num_speculative_tokens are)")  # fmt: skip
    return tokens


def mtp_layer_count(geometry: ModelGeometry) -> int:
    """``n_predict``: the config's ``num_nextn_predict_layers`` (Qwen3.5's ``mtp_num_hidden_layers``), 1 when
    it names none (Qwen3-Next's ``Qwen3NextMTP`` builds one layer)."""
    return geometry.num_nextn_predict_layers or 1


def mtp_draft(ctx: KVCacheContext) -> MTPDraft | None:
    """The MTP draft ``ctx`` asks for (``None``: no speculative decoding); :class:`ValueError` with the reason
    when vLLM's MTP is not what ``ctx`` stands for, or the release's is not modelled."""
    spec = ctx.speculative
    if not spec.enabled:
        return None
    if spec.algorithm is not SpecAlgorithm.EAGLE:
        raise ValueError("only the model's own MTP layers are modelled (EAGLE or NEXTN, no draft checkpoint)")
    if not MTP_DRAFTS.holds(ctx.release):
        raise ValueError(f"MTP drafts are modelled for vLLM {MTP_DRAFTS.span.describe()}")
    geometry = ctx.geometry
    if not vllm_model_rule(geometry.model_type).mtp_draft:
        raise ValueError(f"model type {geometry.model_type!r}: its vLLM MTP draft is not modelled")
    if (spec.eagle_topk or 1) != 1:
        raise ValueError(f"speculative_eagle_topk {spec.eagle_topk}: vLLM's MTP proposes a chain (top-k 1)")
    tokens = spec.num_steps or ((spec.num_draft_tokens or 1) - 1)
    if tokens < 1:
        raise ValueError("give speculative_num_steps (the tokens proposed a step)")
    return MTPDraft(num_speculative_tokens=tokens, num_layers=mtp_layer_count(geometry))


def draft_layer_specs(
    geometry: ModelGeometry, specs: Mapping[int, KVCacheSpec], draft: MTPDraft | None
) -> dict[int, KVCacheSpec]:
    """The draft's layers (global index -> spec): ``num_hidden_layers + i`` for each of its ``num_layers``, each
    the spec of the target's last full-attention layer (an MLA latent; a sparse-attention layer with its own
    indexer keys, which an MTP layer always computes: ``DeepseekV32IndexerCache`` in ``deepseek_mtp.py``)."""
    if draft is None:
        return {}
    if vllm_model_rule(geometry.model_type).mtp_draft == "sliding":  # MiMo-V2's MTP layers are local attention
        kinds: tuple[type, ...] = (SlidingWindowSpec,)
    else:
        kinds = (FullAttentionSpec, SparseMLALayerSpec)
    template = next((spec for spec in reversed(list(specs.values())) if isinstance(spec, kinds)
                     and (not isinstance(spec, SparseMLALayerSpec) or spec.indexer is not None)), None)  # fmt: skip
    if template is None:
        raise UnsupportedConfigurationError(
            f"speculative decoding: {geometry.model_type}'s MTP layer is of the {kinds[0].__name__} kind, which this "
            "config has no layer of to model it on; plan it without the draft"
        )
    first = geometry.num_hidden_layers
    return {first + i: template for i in range(draft.num_layers)}


def check_draft_pipeline(draft: MTPDraft | None, pp: int, release: EngineRelease) -> None:
    """vLLM's refusal of an MTP draft at PP > 1 before :data:`DRAFT_PIPELINE_ONE`, in its words."""
    if draft is not None and pp > 1 and not DRAFT_PIPELINE_ONE.holds(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Pipeline parallelism is not supported for this model. Supported models "
            "implement the `SupportsPP` interface. (the MTP draft's ModelConfig.verify_with_parallel_config in "
            "vllm/config/model.py, with the target's pipeline_parallel_size: "
            f"SpeculativeConfig.create_draft_parallel_config before {DRAFT_PIPELINE_ONE.span.describe()}); "
            "plan PP 1, or a later vLLM"
        )


def check_draft_model(geometry: ModelGeometry, draft: MTPDraft | None, release: EngineRelease) -> None:
    """vLLM's refusal of an MTP draft its release does not map the model type to (``VLLMModelRule.mtp_draft_from``:
    ``SpeculativeConfig.hf_config_override`` names no MTP architecture for it, so the method stays unknown)."""
    first = vllm_model_rule(geometry.model_type).mtp_draft_from
    if draft is not None and first is not None and release < parse_release(first, VLLM, field="mtp_draft_from"):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Unsupported speculative method: 'mtp' (vllm/config/speculative.py "
            f"SpeculativeConfig: no MTP draft of {geometry.model_type} before vLLM {first}); plan it for vLLM {first} "
            "or later, or without --speculative-config"
        )
