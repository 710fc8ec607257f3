"""vLLM's speculative decoding: the model's own MTP layers, an EAGLE / EAGLE3 head, a draft model or a DFlash draft.

``--speculative-config '{"method": "mtp"}'``: vLLM builds the draft (``vllm/config/speculative.py
SpeculativeConfig.hf_config_override``: the model's MTP architecture with ``n_predict`` layers) beside the target,
in the same worker, and its attention layers join the target's KV cache groups (``vllm/v1/spec_decode/
llm_base_proposer.py SpecDecodeBaseProposer.load_model``; 0.34.0: ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py
load_eagle_model``): a draft layer is one more layer of the kind the target's full layers are (MiMo-V2's: its
sliding-window kind), numbered after them (``num_hidden_layers + i``).

``{"method": "eagle" | "eagle3", "model": DRAFT}``: a separate draft head (``llama_eagle.py EagleLlamaForCausalLM``,
``llama_eagle3.py Eagle3LlamaForCausalLM``) whose decoder layers are plain full attention with the head's own KV
heads and head size, numbered after the target's (``start_layer_id = num_hidden_layers``); they join the target's
full-attention group, or, where their page differs (an MLA target), one ``UniformTypeKVCacheSpecs`` group. EAGLE3
reads the target's auxiliary hidden states, which only models implementing ``SupportsEagle3`` give
(:data:`~kvstrategies.vllm.strategies.eagle3_targets.EAGLE3_TARGETS`). Beside an MLA model without MTP layers, an
EAGLE head whose shape is not given is a DeepSeek MTP-style head (``deepseek_eagle.py EagleDeepseekV3ForCausalLM``):
its layers keep the target's latent and join its MLA group.

``{"method": "draft_model", "model": DRAFT}``: a separate, smaller language model (0.34.0:
``vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py StandaloneARSpeculator.load_draft_model``; 0.20.2 to
0.33.0: ``vllm/v1/spec_decode/draft_model.py DraftModelProposer._get_model``) built under the ``draft_model`` prefix
with the target's dtype and cache config and its own decoder layers, which join the KV cache groups as a head's do.

Either way the lookahead lengthens each Mamba layer's conv window by ``num_speculative_tokens`` and holds that many
more state blocks a request (``vllm/model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec``:
``num_speculative_blocks``).

SGLang's ``--speculative-algorithm EAGLE`` (or ``NEXTN``) with top-k 1 is the model's MTP where its config has
MTP layers (no draft checkpoint), else an EAGLE head of ``eagle_draft_num_layers`` layers (1 when not given);
``EAGLE3`` is an EAGLE3 head; ``STANDALONE`` is a draft model of ``eagle_draft_num_layers`` full-attention layers
(else the config's MTP layer count, as SGLang's ``_resolve_eagle_aux_hidden_state`` reads a path-less draft). A draft
whose attention is not given (``eagle_draft_num_kv_heads``, ``eagle_draft_head_dim``) is the target's: its total KV
heads and head size. ``DFLASH`` is a DFlash draft (``method`` ``dflash``: ``qwen3_dflash.py
DFlashQwen3ForCausalLM``) of such layers, which reads the target's auxiliary hidden states as EAGLE3 does. A tree
(top-k > 1) and the other algorithms (NGRAM) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...context import KVCacheContext, SpecAlgorithm
from ...core.dtypes import DType
from ...core.releases import VLLM, EngineRelease, ReleaseRule, parse_release, span
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import VLLM_AUX_HIDDEN_STATES_MODEL_TYPES, VLLM_MLA_WITHOUT_TP_SHARDS, vllm_model_rule
from .layers import pp_indices
from .specs import FullAttentionSpec, KVCacheSpec, MLAAttentionSpec, SlidingWindowSpec, SparseMLALayerSpec

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


#: DeepSeek-V4's MTP draft is planned from this release (recorded by 0.33.0 and 0.34.0 through the bridge): its
#: layer (``num_hidden_layers + i``, compressing as ``compress_ratios`` says past the decoder layers: 0, a sliding
#: cache only, in the published configs) joins the packed groups on the last stage
DSV4_MTP = ReleaseRule(
    "vllm-dsv4-mtp",
    span("0.33.0", engine=VLLM),
    "DeepSeek-V4's MTP layer is planned: one more sliding-window cache in the packed groups (older releases: "
    "refused, not recorded)",
    "vllm/models/deepseek_v4 (the MTP layer's attention); vllm/v1/core/kv_cache_planning.py "
    "_get_packed_kv_cache_groups",
    topic="sizing",
)
#: separate EAGLE / EAGLE3 draft heads are planned from this release (recorded by each release from it to 0.34.0
#: through the bridge, with no release difference in the head's layers; before 0.32.0 Falcon-H1 sizes its hybrid
#: block without the lookahead: ``vllm-hybrid-config-state-lookahead`` in strategies.py; 0.19.1's drafter is not
#: driven by the bridge, as for MTP_DRAFTS, so older releases were not recorded with a head)
EAGLE_HEADS = ReleaseRule(
    "vllm-eagle-heads",
    span("0.20.2", engine=VLLM),
    "speculative decoding with a separate EAGLE / EAGLE3 draft head is planned: its full-attention layers join the "
    "KV cache groups (older releases: refused, not modelled)",
    "vllm/model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.__init__ (start_layer_id); "
    "vllm/v1/worker/gpu/spec_decode/eagle/utils.py load_eagle_model",
    topic="sizing",
)

#: a separate draft model (``method`` ``draft_model``) is planned from this release (recorded by each release from it
#: to 0.34.0 through the bridge; its layers are a head's: full attention numbered after the target's, in the target's
#: groups; before 0.31.0 it runs on the V1 runner, ``launch.DRAFT_MODEL_RUNNER_V2``; 0.19.1's drafter is not driven
#: by the bridge, as for MTP_DRAFTS)
DRAFT_MODELS = ReleaseRule(
    "vllm-draft-models",
    span("0.20.2", engine=VLLM),
    "speculative decoding with a separate draft model (method draft_model) is planned: its full-attention layers "
    "join the KV cache groups (older releases: refused, not recorded)",
    "vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py StandaloneARSpeculator.load_draft_model; "
    "vllm/v1/spec_decode/draft_model.py DraftModelProposer._get_model (0.20.2 to 0.33.0)",
    topic="sizing",
)

#: an EAGLE head of MLA layers beside an MLA model without MTP layers is planned from this release (recorded by each
#: release from it to 0.34.0 through the bridge with a DeepSeek MTP-style head, ``deepseek_eagle.py
#: EagleDeepseekV3ForCausalLM``): its decoder layers keep the target's latent (``kv_lora_rank + qk_rope_head_dim``),
#: so they join its MLA group (0.31.0 beside Kimi-Linear: a bucket of their own, :data:`LATENT_HEAD_OWN_BUCKET`)
MLA_EAGLE_HEADS = ReleaseRule(
    "vllm-mla-eagle-heads",
    span("0.20.2", engine=VLLM),
    "an EAGLE head beside an MLA model whose head shape the case does not give is a DeepSeek MTP-style head of the "
    "target's latent attention, its layers in the target's MLA group (older releases: refused, not recorded)",
    "vllm/model_executor/models/deepseek_eagle.py EagleDeepseekV3ForCausalLM.__init__ (start_layer_id); "
    "vllm/transformers_utils/configs/eagle.py EAGLEConfig (Eagle{architecture})",
    topic="sizing",
)

#: a DFlash draft (``method`` ``dflash``) is planned from this release (recorded by each release from it to 0.34.0
#: through the bridge; 0.19.1 has no ``qwen3_dflash.py``): its decoder layers are full attention of its own heads,
#: numbered after the target's, which read the target's auxiliary hidden states as an EAGLE3 head does
DFLASH_DRAFTS = ReleaseRule(
    "vllm-dflash-drafts",
    span("0.20.2", engine=VLLM),
    "speculative decoding with a DFlash draft (method dflash) is planned: its full-attention layers join the KV cache "
    "groups (older releases: refused, not recorded)",
    "vllm/model_executor/models/qwen3_dflash.py DFlashQwen3Model.__init__ (start_layer_id); "
    "vllm/v1/worker/gpu/spec_decode/dflash/config.py DFlashSpeculatorConfig",
    topic="sizing",
)

#: n-gram drafting (``method`` ``ngram``) is planned from this release (recorded by 0.33.0 and 0.34.0 through the
#: bridge): no draft layers; its ``num_speculative_tokens`` lookahead is a Mamba layer's state blocks as any draft's
NGRAM_DRAFTS = ReleaseRule(
    "vllm-ngram-drafts",
    span("0.33.0", engine=VLLM),
    "speculative decoding by n-gram lookup (method ngram) is planned: no draft layer, the lookahead in the Mamba "
    "layers' state blocks (older releases: refused, not recorded)",
    "vllm/config/speculative.py SpeculativeConfig (method ngram, prompt_lookup_max); "
    "vllm/model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec (num_speculative_blocks)",
    topic="sizing",
)

#: vLLM 0.31.0's ``MLAAttention.get_kv_cache_spec`` (``vllm/model_executor/layers/attention/mla_attention.py``), which
#: builds a latent EAGLE head's layers, records ``max_tp_shards=1``, while Kimi-Linear's own MLA layers
#: (``vllm/models/kimi_k3/nvidia/mla.py``) record none; ``MLAAttentionSpec.merge`` asserts every ``AttentionSpec``
#: field equal, so the head's layers are a bucket of their own and the hybrid split takes the smaller count as the
#: group size (recorded by 0.31.0: Kimi-Linear + 1 head layer, one layer a group). 0.30.0 has no such field and
#: 0.32.0's Kimi-Linear layer records 1 too
LATENT_HEAD_OWN_BUCKET = ReleaseRule(
    "vllm-latent-head-own-bucket",
    span("0.31.0", "0.31.0", engine=VLLM),
    "a latent EAGLE head's layers beside Kimi-Linear form a bucket of their own (max_tp_shards 1 against the "
    "target's none), which sets the hybrid group size",
    "vllm/model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec; "
    "vllm/models/kimi_k3/nvidia/mla.py; vllm/v1/kv_cache_interface.py MLAAttentionSpec.merge",
    topic="sizing",
)

#: the separate drafts whose layer count the case gives: vLLM method -> (its rule, what SGLang calls it)
_COUNTED_DRAFTS = {"draft_model": (DRAFT_MODELS, "STANDALONE draft model"), "dflash": (DFLASH_DRAFTS, "DFLASH draft")}

#: the draft methods a separate draft runs as, by SGLang's algorithm name
_HEAD_METHODS = {SpecAlgorithm.EAGLE: "eagle", SpecAlgorithm.EAGLE3: "eagle3", SpecAlgorithm.STANDALONE: "draft_model",
                 SpecAlgorithm.DFLASH: "dflash"}


@dataclass(frozen=True)
class VLLMDraft:
    """A vLLM draft: ``method`` ``mtp`` (the model's own MTP layers), or ``eagle`` / ``eagle3`` / ``draft_model`` (a
    separate head or model of ``num_layers`` full-attention layers with ``num_kv_heads`` KV heads in all and
    ``head_dim`` a head), proposing ``num_speculative_tokens`` tokens a step. ``latent``: an EAGLE head of the
    target's MLA latent attention (:data:`MLA_EAGLE_HEADS`; no heads or head size of its own)."""

    method: str
    num_speculative_tokens: int
    num_layers: int
    num_kv_heads: int | None = None
    head_dim: int | None = None
    latent: bool = False

    @property
    def is_head(self) -> bool:
        """A separate draft of layers of its own (an EAGLE / EAGLE3 head, a draft model or a DFlash draft), not the
        model's MTP layers nor n-gram lookup."""
        return self.method not in ("mtp", "ngram")

    def speculative_config(self, model: str | None = None) -> dict[str, object]:
        """``--speculative-config``'s value; ``model``: the draft's folder (a head or draft model needs one)."""
        out: dict[str, object] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if model is not None:
            out["model"] = model
        return out


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


def speculative_request(speculative_config: object) -> tuple[str, int, str | None]:
    """``(method, num_speculative_tokens, model)`` of vLLM's ``--speculative-config`` JSON: the model's MTP layers
    (as :func:`mtp_tokens` reads them; ``model`` ``None``), n-gram lookup (``ngram``, no model), an ``eagle`` /
    ``eagle3`` head, a ``draft_model`` or a ``dflash`` draft, whose ``model`` (its folder or config.json) is
    required; a :class:`ValueError` naming the field otherwise."""
    if isinstance(speculative_config, Mapping) and speculative_config.get("method") == "ngram":
        return "ngram", _ngram_tokens(speculative_config), None
    if not isinstance(speculative_config, Mapping) or speculative_config.get("method") not in _HEAD_METHODS.values():
        return "mtp", mtp_tokens(speculative_config), None
    method = str(speculative_config["method"])
    model = speculative_config.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"--speculative-config method {method!r} needs the draft: \"model\": its folder or "
                         "config.json (vllm/config/speculative.py SpeculativeConfig.model)")  # fmt: skip
    other = sorted(set(speculative_config) - {"method", "model", "num_speculative_tokens"})
    if other:
        raise ValueError(f"--speculative-config key {other[0]!r} is not modelled (method, model and "
                         "num_speculative_tokens are)")  # fmt: skip
    tokens = speculative_config.get("num_speculative_tokens")
    return method, mtp_tokens({"method": "mtp", "num_speculative_tokens": tokens}), model


def _ngram_tokens(speculative_config: Mapping[str, object]) -> int:
    """``num_speculative_tokens`` of an n-gram ``--speculative-config``; its ``prompt_lookup_max`` /
    ``prompt_lookup_min`` (the n-gram lengths, positive integers) change no cache."""
    other = sorted(set(speculative_config) - {"method", "num_speculative_tokens", "prompt_lookup_max",
                                              "prompt_lookup_min"})  # fmt: skip
    if other:
        raise ValueError(f"--speculative-config key {other[0]!r} is not modelled for method ngram "
                         "(num_speculative_tokens, prompt_lookup_max and prompt_lookup_min are)")  # fmt: skip
    for key in ("prompt_lookup_max", "prompt_lookup_min"):
        value = speculative_config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"--speculative-config {key} must be a positive integer, got {value!r:.40}")
    return mtp_tokens({"method": "mtp", "num_speculative_tokens": speculative_config.get("num_speculative_tokens")})


def mtp_layer_count(geometry: ModelGeometry) -> int:
    """``n_predict``: the config's ``num_nextn_predict_layers`` (Qwen3.5's ``mtp_num_hidden_layers``), 1 when
    it names none (Qwen3-Next's ``Qwen3NextMTP`` builds one layer)."""
    return geometry.num_nextn_predict_layers or 1


def vllm_draft(ctx: KVCacheContext) -> VLLMDraft | None:
    """The draft ``ctx`` asks for (``None``: no speculative decoding; module doc); :class:`ValueError` with the
    reason when it is not one vLLM runs as modelled here, or the release's is not modelled."""
    spec = ctx.speculative
    if not spec.enabled:
        return None
    method = _HEAD_METHODS.get(spec.algorithm)
    if method is None and spec.algorithm is SpecAlgorithm.NGRAM:  # no draft layer: the lookahead alone
        if not NGRAM_DRAFTS.holds(ctx.release):
            raise ValueError(f"NGRAM drafting is modelled for vLLM {NGRAM_DRAFTS.span.describe()}")
        tokens = spec.num_steps or ((spec.num_draft_tokens or 1) - 1)
        if tokens < 1:
            raise ValueError("give speculative_num_draft_tokens (the tokens proposed a step, plus one)")
        return VLLMDraft("ngram", tokens, 0)
    if method is None:
        raise ValueError("only the model's own MTP layers (EAGLE or NEXTN), EAGLE / EAGLE3 draft heads, "
                         "STANDALONE and DFLASH drafts and NGRAM lookup are modelled")  # fmt: skip
    if (spec.eagle_topk or 1) != 1:
        raise ValueError(f"speculative_eagle_topk {spec.eagle_topk}: vLLM's drafts propose a chain (top-k 1)")
    tokens = spec.num_steps or ((spec.num_draft_tokens or 1) - 1)
    if tokens < 1:
        raise ValueError("give speculative_num_steps (the tokens proposed a step)")
    geometry = ctx.geometry
    heads, head_dim = spec.draft_num_kv_heads, spec.draft_head_dim
    own_mtp = geometry.num_nextn_predict_layers or vllm_model_rule(geometry.model_type).mtp_draft
    if method == "eagle" and heads is None and own_mtp:  # no head of its own: the model's MTP layers
        if not MTP_DRAFTS.holds(ctx.release):
            raise ValueError(f"MTP drafts are modelled for vLLM {MTP_DRAFTS.span.describe()}")
        if not vllm_model_rule(geometry.model_type).mtp_draft:
            raise ValueError(f"model type {geometry.model_type!r}: its vLLM MTP draft is not modelled")
        if geometry.dsv4 is not None and not DSV4_MTP.holds(ctx.release):
            raise ValueError(f"DeepSeek-V4's MTP draft is modelled for vLLM {DSV4_MTP.span.describe()}")
        return VLLMDraft("mtp", tokens, mtp_layer_count(geometry))
    layers = spec.eagle_draft_num_layers or 1
    if method in _COUNTED_DRAFTS:
        rule, name = _COUNTED_DRAFTS[method]
        if not rule.holds(ctx.release):
            raise ValueError(f"{name}s are modelled for vLLM {rule.span.describe()}")
        # DFLASH: its own count, else the draft layers; STANDALONE: the draft layers, else (a path-less draft, as
        # SGLang reads one) the model's MTP layers
        counts = (spec.dflash_draft_num_layers, spec.eagle_draft_num_layers) if method == "dflash" \
            else (spec.eagle_draft_num_layers, geometry.num_nextn_predict_layers)
        layers = next((count for count in counts if count), 0)
        if layers < 1:
            raise ValueError(f"a {name}'s layers are not given (eagle_draft_num_layers)")
    elif not EAGLE_HEADS.holds(ctx.release):
        raise ValueError(f"EAGLE / EAGLE3 draft heads are modelled for vLLM {EAGLE_HEADS.span.describe()}")
    latent = (heads is None or head_dim is None) and (geometry.use_mla or geometry.dsv4 is not None)
    # an EAGLE head of the target's own latent attention (MLA_EAGLE_HEADS; not beside DeepSeek sparse attention)
    mla_head = latent and method == "eagle" and geometry.use_mla and geometry.dsa is None \
        and MLA_EAGLE_HEADS.holds(ctx.release)  # fmt: skip
    if latent and not mla_head:
        raise ValueError("a draft beside an MLA model has attention of its own, which the case does not give "
                         "(eagle_draft_num_kv_heads, eagle_draft_head_dim; a draft modelled on the target's "
                         "attention needs softmax attention)")  # fmt: skip
    if ctx.parallel.pp_size > 1 and method != "draft_model":
        raise ValueError("an EAGLE / EAGLE3 head at pipeline parallel size > 1 is not modelled (its auxiliary hidden "
                         "states cross the stages)")  # fmt: skip
    if mla_head:
        return VLLMDraft(method, tokens, layers, latent=True)
    draft = VLLMDraft(method, tokens, layers, heads or geometry.total_num_kv_heads, head_dim or geometry.head_dim)
    cell = spec.dflash_draft_cell_size_per_token
    if method == "dflash" and cell is not None and cell != draft_cell_bytes(draft, ctx.parallel.tp_size,
                                                                          ctx.kv_cache_dtype.itemsize):  # fmt: skip
        raise ValueError(f"dflash_draft_cell_size_per_token {cell} is not the cell of {layers} layers of "
                         f"{draft.num_kv_heads} KV heads of {draft.head_dim} (give the draft's "
                         "eagle_draft_num_kv_heads and eagle_draft_head_dim)")  # fmt: skip
    return draft


def draft_cell_bytes(draft: VLLMDraft, tp: int, itemsize: int) -> int:
    """A draft's KV bytes a token on one rank: ``layers x 2 x max(1, H / tp) x head_dim x itemsize`` (K and V)."""
    return draft.num_layers * 2 * max(1, (draft.num_kv_heads or 1) // tp) * (draft.head_dim or 0) * itemsize


def head_layer_spec(
    draft: VLLMDraft, tp: int, kv_dtype: DType, block_size: int, kv_quant_mode: str | None
) -> FullAttentionSpec:
    """A draft head's (or draft model's) decoder layer: full attention with ``max(1, H / tp)`` of its KV heads, K and
    V of its head size, in the cache dtype (``llama_eagle3.py LlamaDecoderLayer``: ``LlamaAttention`` with the cache
    config)."""
    if draft.num_kv_heads is None or draft.head_dim is None:
        raise ValueError(f"the {draft.method} draft names no head geometry (a head's KV heads and head size)")
    return FullAttentionSpec(block_size=block_size, num_kv_heads=max(1, draft.num_kv_heads // tp),
                             head_size=draft.head_dim, head_size_v=draft.head_dim, dtype=kv_dtype,
                             kv_quant_mode=kv_quant_mode)  # fmt: skip


def draft_layer_specs(
    geometry: ModelGeometry, specs: Mapping[int, KVCacheSpec], draft: VLLMDraft | None,
    head: KVCacheSpec | None = None, pp: int = 1, release: EngineRelease | None = None,
) -> dict[int, KVCacheSpec]:
    """The draft's layers (global index -> spec): ``n + i`` for each of its ``num_layers``, ``n`` the index after the
    target's last (``num_hidden_layers`` but where Mamba layers are numbered after the attention ones). A head's
    are ``head`` (:func:`head_layer_spec`). A draft model at ``pp`` stages holds only the last stage's share of its
    layers, ``get_pp_indices(num_layers, pp - 1, pp)``: its ``make_layers`` splits them over the target's pipeline
    group, though it runs on the last stage alone (recorded by 0.20.2 to 0.34.0: 2 layers at PP 2 keep layer 1, at
    PP 3 none). An MTP layer is the spec of the target's last full-attention layer (an
    MLA latent; a sparse-attention layer with its own indexer keys, which an MTP layer always computes:
    ``DeepseekV32IndexerCache`` in ``deepseek_mtp.py``)."""
    if draft is None or draft.num_layers == 0:  # n-gram lookup: no draft layer
        return {}
    # after every target index: Falcon-H1's Mamba layers take num_hidden_layers + i (falcon_h1.py ssm_layer_idx)
    first = max((k + 1 for k in specs), default=geometry.num_hidden_layers)
    if draft.is_head:
        if draft.latent:  # the target's MLA latent, as an MTP layer's
            latent = _template_layers(geometry, specs, range(first, first + draft.num_layers), (FullAttentionSpec,))
            if release is not None and LATENT_HEAD_OWN_BUCKET.holds(release) \
                    and geometry.model_type in VLLM_MLA_WITHOUT_TP_SHARDS:  # fmt: skip
                return {k: replace(s, max_tp_shards=1) if isinstance(s, MLAAttentionSpec) else s
                        for k, s in latent.items()}  # fmt: skip
            return latent
        if head is None:
            raise ValueError("a draft head's layer spec is required (head_layer_spec)")
        held = range(*pp_indices(draft.num_layers, pp - 1, pp)) if draft.method == "draft_model" \
            else range(draft.num_layers)
        return {first + i: head for i in held}
    if vllm_model_rule(geometry.model_type).mtp_draft == "sliding":  # MiMo-V2's MTP layers are local attention
        kinds: tuple[type, ...] = (SlidingWindowSpec,)
    else:
        kinds = (FullAttentionSpec, SparseMLALayerSpec)
    return _template_layers(geometry, specs, range(first, first + draft.num_layers), kinds)


def _template_layers(
    geometry: ModelGeometry, specs: Mapping[int, KVCacheSpec], layers: range, kinds: tuple[type, ...]
) -> dict[int, KVCacheSpec]:
    """``layers``, each the spec of the target's last layer of ``kinds`` (a sparse-attention one with its indexer)."""
    template = next((spec for spec in reversed(list(specs.values())) if isinstance(spec, kinds)
                     and (not isinstance(spec, SparseMLALayerSpec) or spec.indexer is not None)), None)  # fmt: skip
    if template is None:
        raise UnsupportedConfigurationError(
            f"speculative decoding: {geometry.model_type}'s MTP layer is of the {kinds[0].__name__} kind, which this "
            "config has no layer of to model it on; plan it without the draft"
        )
    return dict.fromkeys(layers, template)


#: up to vLLM 0.21.0 ``SpeculativeConfig`` (its after-validator) takes an EAGLE3 or DFlash draft only beside a target
#: whose text model type contains one of these names (``aux_hidden_states_supported``; 0.21.0 adds laguna); 0.22.1
#: leaves the check to the model runner's ``SupportsEagle3`` (recorded by 0.21.0: Mixtral with a DFlash draft; read
#: from 0.20.2, the first release whose drafts are modelled)
AUX_HIDDEN_STATES_MODEL_TYPES = ReleaseRule(
    "vllm-aux-hidden-states-model-types",
    span("0.20.2", "0.21.0", engine=VLLM),
    "an EAGLE3 or DFlash draft is refused beside a target whose model type is not on SpeculativeConfig's list of "
    "those with auxiliary hidden states (llama, qwen, minicpm, gpt_oss, deepseek_v2, ...)",
    "vllm/config/speculative.py SpeculativeConfig (aux_hidden_states_supported)",
    topic="launch",
)


def check_eagle3_target(geometry: ModelGeometry, draft: VLLMDraft | None, release: EngineRelease) -> None:
    """vLLM's refusal of an EAGLE3 head beside a model that gives no auxiliary hidden states (its class does not
    implement ``SupportsEagle3``), in its words."""
    if draft is None or draft.method not in ("eagle3", "dflash"):  # a DFlash draft reads the same hidden states
        return
    set_by = [r for r in VLLM_AUX_HIDDEN_STATES_MODEL_TYPES if parse_release(r, VLLM, field="aux list") <= release]
    if set_by and AUX_HIDDEN_STATES_MODEL_TYPES.holds(release):
        listed = VLLM_AUX_HIDDEN_STATES_MODEL_TYPES[max(set_by, key=lambda r: parse_release(r, VLLM, field="aux list"))]
        if not any(name in geometry.model_type for name in listed):
            raise UnsupportedConfigurationError(
                f"vLLM {release.text} refuses: {draft.method} is only supported for {list(listed)} models. Got "
                f"self.target_model_config.hf_text_config.model_type={geometry.model_type!r} (vllm/config/"
                "speculative.py SpeculativeConfig); use an EAGLE head (method eagle), or vLLM 0.22.1 or later"
            )
    from .eagle3_targets import EAGLE3_TARGETS

    recorded = [r for r in EAGLE3_TARGETS if parse_release(r, VLLM, field="eagle3 table") <= release]
    row = EAGLE3_TARGETS[max(recorded, key=lambda r: parse_release(r, VLLM, field="eagle3 table"))] if recorded \
        else frozenset()
    architecture = geometry.architectures[0] if geometry.architectures else geometry.model_type
    if architecture not in row:
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Model does not support EAGLE3 interface ({architecture} does not implement "
            "SupportsEagle3: vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
            "set_eagle3_aux_hidden_state_layers, GPUModelRunner.load_model before 0.34.0); use an EAGLE head "
            "(method eagle) or the model's MTP layers"
        )


def check_draft_pipeline(draft: VLLMDraft | None, pp: int, release: EngineRelease) -> None:
    """vLLM's refusal of an MTP draft at PP > 1 before :data:`DRAFT_PIPELINE_ONE`, in its words. A draft model
    (a language model's class, which implements ``SupportsPP``) passes the check with the target's PP (recorded by
    0.29.0: the same layers as 0.30.0 on)."""
    if draft is not None and draft.method != "draft_model" and pp > 1 and not DRAFT_PIPELINE_ONE.holds(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Pipeline parallelism is not supported for this model. Supported models "
            "implement the `SupportsPP` interface. (the MTP draft's ModelConfig.verify_with_parallel_config in "
            "vllm/config/model.py, with the target's pipeline_parallel_size: "
            f"SpeculativeConfig.create_draft_parallel_config before {DRAFT_PIPELINE_ONE.span.describe()}); "
            "plan PP 1, or a later vLLM"
        )


def check_draft_model(geometry: ModelGeometry, draft: VLLMDraft | None, release: EngineRelease) -> None:
    """vLLM's refusal of an MTP draft its release does not map the model type to (``VLLMModelRule.mtp_draft_from``:
    ``SpeculativeConfig.hf_config_override`` names no MTP architecture for it, so the method stays unknown)."""
    first = vllm_model_rule(geometry.model_type).mtp_draft_from
    if draft is None or draft.method != "mtp" or first is None:
        return
    if release < parse_release(first, VLLM, field="mtp_draft_from"):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Unsupported speculative method: 'mtp' (vllm/config/speculative.py "
            f"SpeculativeConfig: no MTP draft of {geometry.model_type} before vLLM {first}); plan it for vLLM {first} "
            "or later, or without --speculative-config"
        )
