"""Bytes per parameter from a checkpoint's ``quantization_config``, kind by kind and module by module.

:func:`quant_bytes` reads one ``quantization_config`` (``quant_method`` or the ``--quantization``
override) and says what one quantized parameter of the attention, dense-MLP and routed-expert
groups costs, scales and zero points included (``None``: left in the model dtype). Formats
(bytes per parameter):

* ``fp8`` with ``weight_block_size [b0, b1]``: ``1 + 4 / (b0 * b1)`` (fp32 ``weight_scale_inv``
  per block); per-tensor / per-channel fp8 (``fbgemm_fp8``, ``w8a8_fp8``, ModelOpt FP8):
  ``1`` (one scale per tensor or row, under a thousandth). ``--quantization fp8`` on a 16-bit
  checkpoint quantizes at load (``Fp8LinearMethod.process_weights_after_loading``: one fp8 value
  per weight and an fp32 scale per output channel; ``Fp8MoEMethod``: one scale per expert): ``1``;
* ``mxfp4`` (gpt-oss): routed experts only, ``0.5 + 1/32`` (one E8M0 byte per 32 values);
* NVFP4 (``modelopt_fp4``, ModelOpt ``quant_algo: NVFP4``, compressed-tensors
  ``nvfp4-pack-quantized``): ``0.5 + 1/16`` (one FP8 scale per 16 values);
* AWQ / GPTQ (``bits`` / ``w_bit``, ``group_size`` / ``q_group_size``):
  ``bits/8 + (2 + bits/8) / group`` (packed values, an fp16 scale and a packed zero per group);
  ``group_size: -1`` (per output channel) counts ``bits/8``;
* compressed-tensors (``config_groups``): integer weights as AWQ/GPTQ above (the zero point only
  when ``symmetric`` is false), 8-bit floats as fp8, 4-bit floats as NVFP4;
* ``w8a8_int8``: ``1`` (one scale per row).

Which modules a scheme quantizes is decided per module, by the rule of SGLang's own loader for
that scheme, against the module names SGLang builds (``model.layers.3.self_attn.qkv_proj``,
``model.layers.3.mlp.experts``; :class:`~kvstrategies.planner.weights.ParamGroup.module`):

* compressed-tensors ``ignore`` and ``targets``: ``re:`` entries are ``re.match`` regexes over
  the module name, plain entries the name or a dotted suffix of it; a fused layer is ignored
  when its checkpoint shards are (``q_proj``/``k_proj``/``v_proj`` of ``qkv_proj``), a fused MoE
  when its ``experts.0.gate_proj`` / ``up_proj`` / ``down_proj`` are
  (``sglang/srt/layers/quantization/compressed_tensors/utils.py``, ``should_ignore_layer`` and
  ``find_matched_target``; ``compressed_tensors.py``, ``CompressedTensorsConfig.get_moe_scheme``);
* ModelOpt ``exclude_modules`` / ``ignore``: glob patterns (``*`` any text) that match the whole
  module name or one dotted part of it (``modelopt_quant.py``, ``ModelOptQuantConfig.
  is_layer_excluded``), plus ``is_layer_skipped`` for linear layers. A ModelOpt NVFP4 config with
  no list at all is priced with ModelOpt's published default export (its default quantizer
  config leaves ``*lm_head*``, routers and MoE gates unquantized) and the answer says so;
* fp8 ``ignored_layers`` / ``modules_to_not_convert``: dotted-path matches
  (``sglang/srt/layers/quantization/utils.py``, ``is_layer_skipped`` / ``_module_path_match``);
* AWQ ``modules_to_not_convert``: substrings of the module name (``awq/awq.py``,
  ``is_layer_skipped_awq``).

Embeddings, routers, norms and biases are never quantized; lm_head only by ModelOpt when its list
leaves it out. Methods this module cannot price (bitsandbytes, GGUF, ...) raise
:class:`~kvstrategies.errors.KVCacheConfigError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KVCacheConfigError, UnsupportedConfigurationError

MXFP4 = 0.5 + 1.0 / 32
NVFP4 = 0.5 + 1.0 / 16
KINDS = ("attention", "dense", "expert")
UNQUANTIZED = -1.0  # a module rule's "left in the model dtype" (weights.UNQUANTIZED)

#: Fused SGLang linears and the checkpoint shards they load (``packed_modules_mapping`` of the
#: Llama/Qwen-style models; ``_FALLBACK_FUSED_SHARDS`` of ``quantization/utils.py``).
DEFAULT_FUSED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
    ("gate_up_proj", ("gate_proj", "up_proj")),
)
#: DeepSeek-style MLA models map only their fused q_a / kv_a projection
#: (``DeepseekV2ForCausalLM.__init__`` when ``q_lora_rank`` is set).
MLA_FUSED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fused_qkv_a_proj_with_mqa", ("q_a_proj", "kv_a_proj_with_mqa")),
)
#: NVIDIA ModelOpt's default export keeps these quantizers off
#: (``modelopt/torch/quantization/config.py``, ``_default_disabled_quantizer_cfg``).
MODELOPT_DEFAULT_EXCLUDES = (
    "*lm_head*",
    "*proj_out.*",
    "*block_sparse_moe.gate*",
    "*router*",
    "*mlp.gate.*",
    "*mlp.shared_expert_gate.*",
    "*linear_attn.conv1d*",
    "*mixer.conv1d*",
    "*output_layer*",
    "output.*",
)
_MODELOPT_FUSED_TAILS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")


@dataclass(frozen=True)
class QuantBytes:
    """Bytes per parameter of each quantizable kind (``None``: the model dtype), notes, and the
    per-module rule (``None`` when the scheme quantizes every module of a kind)."""

    name: str
    attention: float | None
    dense: float | None
    expert: float | None
    notes: tuple[str, ...] = ()
    modules: ModuleRules | None = None


def _int_group(bits: int, group: int, zero: bool = True) -> float:
    """Packed ``bits``-bit values + a 2-byte scale (+ a packed zero) per ``group`` values."""
    if not 1 <= bits <= 64:  # validation only: 0 bits would price every linear at 0 bytes
        raise KVCacheConfigError(f"quantization_config: {bits} bits per weight is not a format; fix config.json")
    if group <= 0:
        return bits / 8
    return bits / 8 + (2 + (bits / 8 if zero else 0.0)) / group


def _fp8(block: Any) -> float:
    if isinstance(block, (list, tuple)) and len(block) == 2 and all(int(b) > 0 for b in block):
        return 1.0 + 4.0 / (int(block[0]) * int(block[1]))
    return 1.0


# --- module matching --------------------------------------------------------------------------


def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def ct_name_match(name: str, target: str) -> bool:
    """compressed-tensors ``check_equal_or_regex_match``: ``re:`` -> ``re.match``; else the name
    or a dotted suffix of it."""
    if target.startswith("re:"):
        compiled = _regex(target[3:])
        return compiled is not None and compiled.match(name) is not None
    return target == name or name.endswith("." + target)


@functools.cache
def _ct_index(ignore: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """An ignore list split for matching: its literal names (a set) and its ``re:`` targets."""
    return frozenset(t for t in ignore if not t.startswith("re:")), tuple(t for t in ignore if t.startswith("re:"))


def _ct_any(name: str, ignore: tuple[str, ...]) -> bool:
    """``any(ct_name_match(name, t) for t in ignore)``: a literal target matches the name or one of its dotted
    suffixes (one set lookup), a ``re:`` target by :func:`ct_name_match`."""
    literal, patterns = _ct_index(ignore)
    parts = name.split(".")
    if not literal.isdisjoint(".".join(parts[i:]) for i in range(len(parts))):
        return True
    return any(ct_name_match(name, t) for t in patterns)


@functools.lru_cache(maxsize=1 << 16)  # the same names recur for every layout a model is planned in (fit, sweep)
def _ct_ignored(name: str, ignore: tuple[str, ...], fused_pairs: tuple[tuple[str, tuple[str, ...]], ...]) -> bool:
    """``should_ignore_layer``: a fused layer is ignored when its shards are, all alike."""
    fused = dict(fused_pairs)
    proj = name.rsplit(".", 1)[-1]
    if proj in fused and name not in ignore:
        verdicts = {_ct_any(name.replace(proj, shard), ignore) for shard in fused[proj]}
        if len(verdicts) > 1:
            raise UnsupportedConfigurationError(
                f"the compressed-tensors 'ignore' list ignores some but not all of {list(fused[proj])} in {name}; "
                "SGLang refuses it at weight load (compressed_tensors/utils.py, should_ignore_layer: all shards "
                "of a fused layer must use the same scheme). List every shard or none of them"
            )
        return verdicts.pop()
    return _ct_any(name, ignore)


#: characters that make a ModelOpt exclusion pattern more than a literal name
_PATTERN_SPECIAL = frozenset("*?+[](){}|^$\\")


@functools.cache
def _modelopt_index(patterns: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str] | None, tuple[str, ...]]:
    """ModelOpt's exclusion list split for matching: the literal names, the globs (:func:`_glob`)
    as one alternation (a name matches it whole when it matches one glob whole), and the last
    parts that are fused tails (``_MODELOPT_FUSED_TAILS``)."""
    literal = frozenset(p for p in patterns if not _PATTERN_SPECIAL.intersection(p))
    globs = [_glob(p).pattern for p in patterns if p not in literal]
    any_glob = re.compile("|".join(f"(?:{glob})" for glob in globs)) if globs else None
    tails = tuple(dict.fromkeys(last for p in patterns if (last := p.rsplit(".", 1)[-1]) in _MODELOPT_FUSED_TAILS))
    return literal, any_glob, tails


@functools.cache
def _glob(pattern: str) -> re.Pattern[str]:
    """ModelOpt's ``_compile_exclusion_pattern``: ``.`` literal, ``*`` any text."""
    return re.compile(pattern.replace(".", r"\.").replace("*", r".*"))


def module_path_match(ignored: str, prefix: str) -> bool:
    """``quantization/utils.py`` ``_module_path_match``: equal, a dotted prefix, or a dotted part run."""
    ignored, prefix = ignored.rstrip("."), prefix.rstrip(".")
    return ignored == prefix or prefix.startswith(ignored + ".") or ("." + ignored + ".") in ("." + prefix + ".")


def dotted_runs(prefix: str) -> frozenset[str]:
    """Every run of consecutive dotted parts of ``prefix`` (``a.b.c``: a, b, c, a.b, b.c, a.b.c)."""
    parts = prefix.rstrip(".").split(".")
    return frozenset(".".join(parts[a:b]) for a in range(len(parts)) for b in range(a + 1, len(parts) + 1))


@functools.cache
def _normalised(ignored: tuple[str, ...]) -> frozenset[str]:
    return frozenset(i.rstrip(".") for i in ignored)


def any_path_match(ignored: tuple[str, ...], prefix: str) -> bool:
    """``any(module_path_match(i, prefix) for i in ignored)`` in one set lookup: each of
    :func:`module_path_match`'s three tests holds exactly when ``i`` (without trailing dots) is
    a run of consecutive dotted parts of ``prefix`` (``".i."`` inside ``".prefix."``)."""
    return not _normalised(ignored).isdisjoint(dotted_runs(prefix))


def is_layer_skipped(prefix: str, ignored: tuple[str, ...], fused: Mapping[str, tuple[str, ...]]) -> bool:
    """``quantization/utils.py`` ``is_layer_skipped``: shards of a fused layer (the config's
    mapping, else qkv/gate_up) must agree; an expert module also matches listed expert names."""
    proj = prefix.rsplit(".", 1)[-1]
    shards = fused if proj in fused else dict(DEFAULT_FUSED)
    if proj in shards:
        verdicts = {any_path_match(ignored, prefix.replace(proj, s)) for s in shards[proj]}
        if len(verdicts) > 1:
            raise UnsupportedConfigurationError(
                f"the exclusion list skips some but not all shards of {prefix}; SGLang refuses it at weight load "
                "(sglang/srt/layers/quantization/utils.py, is_layer_skipped: all shards of a fused layer must "
                "have the same precision). List every shard or none of them"
            )
        return verdicts.pop()
    skipped = any_path_match(ignored, prefix)
    if "gate_up_proj" in prefix:
        gate, up = prefix.replace("gate_up_proj", "gate_proj"), prefix.replace("gate_up_proj", "up_proj")
        skipped = skipped or (gate in ignored and up in ignored)
    elif "experts" in prefix:
        skipped = skipped or any(prefix in i for i in ignored if "experts" in i)
    return skipped


@dataclass(frozen=True)
class ModuleRules:
    """Which modules a scheme leaves in the model dtype, and what the rest cost.

    ``rule``: ``compressed-tensors``, ``modelopt``, ``fp8`` or ``awq`` (module doc).
    ``patterns``: the exclusion list as SGLang normalizes it. ``fused``: the model's fused
    linears and their shards. ``targets``: compressed-tensors config groups in config order,
    ``(targets, bytes)``. ``quantized``: bytes of a quantized module per kind.
    """

    rule: str
    patterns: tuple[str, ...]
    fused: tuple[tuple[str, tuple[str, ...]], ...] = DEFAULT_FUSED
    targets: tuple[tuple[tuple[str, ...], float], ...] = ()
    quantized: tuple[tuple[str, float], ...] = ()
    layers: tuple[tuple[str, float], ...] = ()

    def bytes_for(self, module: str, kind: str) -> float | None:
        """See :class:`~kvstrategies.planner.weights.ModulePricer`."""
        if not module or kind not in (*KINDS, "lm_head"):
            return None
        if self.rule == "compressed-tensors":
            return self._compressed_tensors(module, kind)
        if self.rule == "modelopt-mixed":
            return self._modelopt_mixed(module, kind)
        if kind == "lm_head" and self.rule != "modelopt":
            return None  # only ModelOpt quantizes a head its list leaves out
        if self._skipped(module, kind):
            return UNQUANTIZED
        return dict(self.quantized).get("expert" if kind == "lm_head" else kind)

    def _skipped(self, module: str, kind: str) -> bool:
        fused = dict(self.fused)
        if self.rule == "awq":
            return any(p in module for p in self.patterns)
        if self.rule == "fp8":
            return is_layer_skipped(module, self.patterns, fused)
        excluded = self._modelopt_excluded(module)  # ModelOpt
        return excluded if kind == "expert" else excluded or is_layer_skipped(module, self.patterns, fused)

    def _modelopt_excluded(self, prefix: str) -> bool:
        """``ModelOptQuantConfig.is_layer_excluded``: a pattern (a glob) matches the whole name or
        one dotted part of it, or names a fused tail the last part contains. A pattern without
        wildcards or regex characters matches exactly when it equals a name or part (one set lookup)."""
        variants = [prefix] + ([prefix.removeprefix("language_model.")] if prefix.startswith("language_model.") else [])
        literal, any_glob, tails = _modelopt_index(self.patterns)
        pieces = {*variants, *(part for name in variants for part in name.split("."))}
        if not literal.isdisjoint(pieces):
            return True
        if any_glob is not None and any(any_glob.fullmatch(piece) for piece in pieces):
            return True
        lasts = [name.rsplit(".", 1)[-1] for name in variants]
        return any(tail in last for tail in tails for last in lasts)

    def _modelopt_mixed(self, module: str, kind: str) -> float:
        """``ModelOptMixedPrecisionConfig.get_quant_method``: the exclusion list first (a routed-expert
        layer by ``is_layer_excluded`` only), then the module's own ``quant_algo``; a module the map
        does not name stays in the model dtype."""
        excluded = self._modelopt_excluded(module)
        if kind != "expert":
            excluded = excluded or is_layer_skipped(module, self.patterns, dict(self.fused))
        if excluded:
            return UNQUANTIZED
        per = self._mixed_layer(module)
        return UNQUANTIZED if per is None else per

    def _mixed_layer(self, prefix: str) -> float | None:
        """``ModelOptMixedPrecisionConfig._resolve_quant_algo``: the name (or its other spellings), then
        the shards of a fused layer (all alike), then the first entry under the name."""
        table = dict(self.layers)
        candidates = mixed_candidates(prefix)
        for candidate in candidates:
            if candidate in table:
                return table[candidate]
        proj = prefix.rsplit(".", 1)[-1]
        shards = dict(self.fused).get(proj)
        if shards:
            base = prefix.rsplit(".", 1)[0]
            found = {table[f"{b}.{s}"] for b in mixed_candidates(base) for s in shards if f"{b}.{s}" in table}
            if len(found) > 1:
                raise UnsupportedConfigurationError(
                    f"the MIXED_PRECISION map quantizes the shards of {prefix} differently; SGLang refuses it at "
                    "weight load (modelopt_quant.py, ModelOptMixedPrecisionConfig._resolve_quant_algo: 'Mixed "
                    "quant_algo within fused layer'). Give every shard the same quant_algo"
                )
            if found:
                return found.pop()
        for candidate in candidates:
            under = candidate + "."
            match = next((per for name, per in self.layers if name.startswith(under)), None)
            if match is not None:
                return match
        return None

    def _compressed_tensors(self, module: str, kind: str) -> float | None:
        if kind == "expert":
            names = [f"{module}.0.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
            ignored = {_ct_ignored(n, self.patterns, self.fused) for n in names}
            if len(ignored) > 1:
                raise UnsupportedConfigurationError(
                    f"the compressed-tensors 'ignore' list covers some but not all projections of {module}; SGLang "
                    "refuses it at weight load (compressed_tensors.py, CompressedTensorsConfig.get_moe_scheme: all "
                    "MoE projections need the same quantization scheme)"
                )
            if ignored.pop():
                return UNQUANTIZED
            return self._target(names[0], moe=True)
        if _ct_ignored(module, self.patterns, self.fused):
            return UNQUANTIZED
        if kind == "lm_head":  # quantized only when a target names the head (get_lm_head_scheme)
            return next((per for targets, per in self.targets if any(ct_name_match(module, t) for t in targets)), None)
        return self._target(module, moe=False)

    def _target(self, name: str, *, moe: bool) -> float | None:
        """``find_matched_target``: a name match first, then the layer class (``Linear`` /
        ``FusedMoE``, contained in the class name), else the kind's default."""
        def named(layer: str, t: str) -> bool:
            return ct_name_match(layer, t) if t.startswith("re:") else t == layer

        for targets, per in self.targets:
            if any(named(name, t) for t in targets):
                return per
        for targets, per in self.targets:  # the layer class: "Linear" in QKVParallelLinear, FusedMoE
            if any(t.lower() in ("linear", "fusedmoe" if moe else "linear") for t in targets):
                return per
        proj = name.rsplit(".", 1)[-1]
        shards = dict(self.fused).get(proj, ())
        for targets, per in self.targets:  # _match_fused_layer: every shard named by the group
            if shards and all(any(named(name.replace(proj, s), t) for t in targets) for s in shards):
                return per
        return None


# --- schemes ---------------------------------------------------------------------------------


def _method(qcfg: Mapping[str, Any], override: str | None) -> str:
    method = override if override is not None else str(qcfg.get("quant_method") or "none")
    return method.lower().replace("-", "_")


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


def quant_bytes(
    qcfg: Mapping[str, Any],
    *,
    override: str | None = None,
    expert_dtype: str = "",
    fused: tuple[tuple[str, tuple[str, ...]], ...] = DEFAULT_FUSED,
) -> QuantBytes:
    """What one parameter of each quantizable kind costs under ``qcfg`` (see the module doc).

    ``override`` (``fp8``, ``mxfp4``, ``nvfp4``, ``w4a16``) replaces the checkpoint's scheme and
    ignores its lists, unless it names the checkpoint's own method (``--quantization fp8`` on an
    FP8 checkpoint loads it as stored); ``expert_dtype: fp4`` (DeepSeek-V4) stores routed experts
    as MXFP4. ``fused``: the model's fused linears (:data:`DEFAULT_FUSED`, :data:`MLA_FUSED`).
    """
    if override is not None and _method(qcfg, None) == _method({}, override):
        override = None  # the checkpoint already is in that format
    q: Mapping[str, Any] = {} if override is not None else qcfg
    method = _method(qcfg, override)
    result = _scheme(method, q, expert_dtype, online=override is not None, fused=fused)
    if method == "compressed_tensors" or result.modules is not None:
        return result
    rules, notes = _exclusions(method, q, result, fused)
    return QuantBytes(result.name, result.attention, result.dense, result.expert, result.notes + notes, rules)


def _exclusions(
    method: str, q: Mapping[str, Any], result: QuantBytes, fused: tuple[tuple[str, tuple[str, ...]], ...]
) -> tuple[ModuleRules | None, tuple[str, ...]]:
    """The per-module rule of a non-compressed-tensors scheme, and what the answer must say."""
    quantized = tuple((k, v) for k, v in (("attention", result.attention), ("dense", result.dense),
                                          ("expert", result.expert)) if v is not None)  # fmt: skip
    if _is_modelopt(method, q):
        listed = next((q[k] for k in ("exclude_modules", "ignore", "modules_to_not_convert") if k in q), None)
        patterns = _strings(listed)
        notes: tuple[str, ...] = ()
        if listed is None:
            patterns = MODELOPT_DEFAULT_EXCLUDES
            notes = (
                "the ModelOpt quantization config lists no exclude_modules: priced with ModelOpt's default export "
                "(lm_head, routers and MoE gates unquantized, every other linear quantized)",
            )
        expanded = tuple(dict.fromkeys(v for p in patterns for v in (p, p.removeprefix("language_model."))))
        if result.name == "nvfp4":
            quantized += (("lm_head", NVFP4),)
        return ModuleRules("modelopt", expanded, fused, quantized=quantized), notes
    if method == "fp8":
        listed = _strings(q.get("ignored_layers") or q.get("modules_to_not_convert"))
        config_fused = q.get("packed_modules_mapping")
        mapping = (
            tuple((str(k), _strings(v)) for k, v in config_fused.items()) if isinstance(config_fused, Mapping) else ()
        )
        # Fp8Config.from_config keeps both the "model." and the bare spelling of every entry
        patterns = tuple(v for p in listed for v in (p.removeprefix("model."), "model." + p.removeprefix("model.")))
        return (ModuleRules("fp8", patterns, mapping, quantized=quantized) if patterns else None), ()
    if method in ("awq", "awq_marlin"):
        listed = _strings(q.get("modules_to_not_convert"))
        return (ModuleRules("awq", listed, fused, quantized=quantized) if listed else None), ()
    return None, ()


def _is_modelopt(method: str, q: Mapping[str, Any]) -> bool:
    return method in ("modelopt", "modelopt_fp4", "modelopt_fp8") or "quant_algo" in q


def _scheme(
    method: str,
    q: Mapping[str, Any],
    expert_dtype: str,
    *,
    online: bool = False,
    fused: tuple[tuple[str, tuple[str, ...]], ...] = DEFAULT_FUSED,
) -> QuantBytes:
    if method == "fp8":
        if online:  # Fp8Config(is_checkpoint_fp8_serialized=False): quantized at load, per channel
            return QuantBytes("fp8 (quantized at load)", 1.0, 1.0, 1.0)
        per = _fp8(q.get("weight_block_size"))
        expert = MXFP4 if expert_dtype.lower() == "fp4" else per
        label = "fp8" + ("-block" if per != 1.0 else "") + ("+fp4-experts" if expert != per else "")
        return QuantBytes(label, per, per, expert)
    if method in ("fbgemm_fp8", "w8a8_fp8", "modelopt_fp8"):
        return QuantBytes("fp8", 1.0, 1.0, 1.0)
    if method == "w8a8_int8":
        return QuantBytes("int8", 1.0, 1.0, 1.0)
    if method == "mxfp4":
        return QuantBytes("mxfp4-experts", None, None, MXFP4)  # gpt-oss: only the routed experts
    if method in ("nvfp4", "modelopt_fp4") or (method == "modelopt" and "FP4" in str(q.get("quant_algo", "")).upper()):
        return QuantBytes("nvfp4", NVFP4, NVFP4, NVFP4)
    if method in ("modelopt", "modelopt_mixed") and str(q.get("quant_algo", "")).upper() == "MIXED_PRECISION":
        # "modelopt_mixed": the method SGLang names a MIXED_PRECISION hf_quant_config.json with NVFP4 layers
        # (hf_quant.modelopt_method; Nemotron-3.5-Lightning's W4A16_NVFP4 experts)
        return _modelopt_mixed(q, fused)
    if method == "modelopt":
        algo = str(q.get("quant_algo", "FP8")).upper()
        if algo != "FP8":
            raise KVCacheConfigError(
                f"unsupported ModelOpt quant_algo {algo!r} for the weight estimate; give --weight-bytes"
            )
        return QuantBytes("fp8", 1.0, 1.0, 1.0)
    if method in ("w4a16", "awq", "gptq", "awq_marlin", "gptq_marlin", "moe_wna16"):
        bits = int(q.get("bits", q.get("w_bit", 4)))
        group = int(q.get("group_size", q.get("q_group_size", 128)) or 128) if q else 128
        per = _int_group(bits, group)
        notes = ("GPTQ 'dynamic' per-module overrides are not priced",) if q.get("dynamic") else ()
        return QuantBytes(f"int{bits}-g{group}", per, per, per, notes)
    if method == "compressed_tensors":
        return _compressed_tensors(q, fused)
    raise KVCacheConfigError(
        f"unsupported quantization {method!r} for the weight estimate; pass a checkpoint folder (its safetensors "
        "headers give exact bytes), --weight-bytes, or --weight-quantization one of none, fp8, mxfp4, nvfp4, w4a16"
    )


#: ModelOpt MIXED_PRECISION algorithms and their bytes per parameter (``group``: the entry's ``group_size``):
#: per-tensor FP8, block FP8 (``FP8_PB_WO`` / ``FP8_BLOCK_SCALES``, ``group`` x ``group`` blocks, default 128),
#: MXFP8 (a scale per 32), NVFP4 with or without FP4 activations (a scale per ``group``, default 16)
_MIXED_ALGOS = ("FP8", "FP8_PB_WO", "FP8_BLOCK_SCALES", "MXFP8", "NVFP4", "W4A16_NVFP4")
#: the planner's one ``in_proj`` group of a Gated-DeltaNet layer holds SGLang's ``in_proj_qkvz`` (the map's
#: ``in_proj_qkv`` / ``in_proj_z``) and its small ``in_proj_ba``
MIXED_FUSED = (("in_proj", ("in_proj_qkv", "in_proj_z")),)
#: the weight-format name of a MIXED_PRECISION checkpoint (its algorithms follow)
MIXED_PRECISION_LABEL = "modelopt mixed"


def _mixed_bytes(name: str, info: Any) -> float:
    algo = str(info.get("quant_algo", "")).upper() if isinstance(info, Mapping) else ""
    if algo not in _MIXED_ALGOS:
        raise KVCacheConfigError(
            f"quantization_config.quantized_layers[{name!r}]: unsupported MIXED_PRECISION quant_algo {algo!r} "
            f"(SGLang's ModelOptMixedPrecisionConfig takes {', '.join(_MIXED_ALGOS)}); give --weight-bytes"
        )
    if algo == "FP8":
        return 1.0
    if algo == "MXFP8":
        return 1.0 + 1.0 / 32
    default = 16 if "NVFP4" in algo else 128
    raw = info.get("group_size") or default
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise KVCacheConfigError(
            f"quantization_config.quantized_layers[{name!r}]: group_size {raw!r} is not a size (a positive integer); "
            "fix the checkpoint's quantization config"
        )
    group = raw
    return 0.5 + 1.0 / group if "NVFP4" in algo else _fp8([group, group])


def _modelopt_mixed(q: Mapping[str, Any], fused: tuple[tuple[str, tuple[str, ...]], ...]) -> QuantBytes:
    """ModelOpt ``MIXED_PRECISION``: each module's ``quant_algo`` from ``quantized_layers``
    (``modelopt_quant.py``, ``ModelOptMixedPrecisionConfig``); modules it does not name stay 16-bit."""
    layers = q.get("quantized_layers")
    if not isinstance(layers, Mapping) or not layers:
        raise KVCacheConfigError(
            "quantization_config: MIXED_PRECISION needs a non-empty quantized_layers map (SGLang refuses it: "
            "ModelOptMixedPrecisionConfig.from_config); fix the checkpoint's quantization config"
        )
    priced = tuple((str(name), _mixed_bytes(str(name), info)) for name, info in layers.items())
    patterns = _strings(q.get("ignore", q.get("exclude_modules")) or ())
    expanded = tuple(dict.fromkeys(v for p in patterns for v in (p, p.removeprefix("language_model."))))
    algos = sorted({str(info.get("quant_algo", "")).lower() for info in layers.values() if isinstance(info, Mapping)})
    rules = ModuleRules("modelopt-mixed", expanded, (*fused, *MIXED_FUSED), layers=priced)
    return QuantBytes(f"{MIXED_PRECISION_LABEL} " + "+".join(algos), None, None, None, (), rules)


def mixed_candidates(prefix: str) -> tuple[str, ...]:
    """``ModelOptMixedPrecisionConfig._quantized_layer_prefix_candidates``: the name, ``lm_head`` for a
    head, and the text stack's other spellings (``model.`` / ``model.language_model.`` /
    ``language_model.model.``)."""
    candidates = [prefix]
    if prefix.endswith(".lm_head"):
        candidates.append("lm_head")
    if prefix.startswith("language_model.model."):
        candidates.append("model.language_model." + prefix.removeprefix("language_model.model."))
    elif prefix.startswith("model.language_model."):
        rest = prefix.removeprefix("model.language_model.")
        candidates += ["language_model.model." + rest, "model." + rest]
    elif prefix.startswith("model."):
        candidates.append("model.language_model." + prefix.removeprefix("model."))
    return tuple(dict.fromkeys(candidates))


def _ct_group_bytes(weights: Mapping[str, Any], fmt: str) -> tuple[str, float]:
    bits = int(weights.get("num_bits", 8))
    wtype = str(weights.get("type", "int")).lower()
    strategy = str(weights.get("strategy", "tensor")).lower()
    group = int(weights.get("group_size") or 0) if strategy in ("group", "tensor_group") else 0
    if wtype == "float" and bits == 4:
        return "nvfp4", NVFP4
    if wtype == "float" and bits == 8:
        return "fp8" + ("-block" if strategy == "block" else ""), _fp8(
            weights.get("block_structure")
        ) if strategy == "block" else 1.0
    if wtype == "int":
        zero = not bool(weights.get("symmetric", True))
        return f"int{bits}" + (f"-g{group}" if group else ""), _int_group(bits, group, zero)
    raise KVCacheConfigError(
        f"unsupported compressed-tensors weights {dict(weights)!r} (format {fmt!r}); give --weight-bytes"
    )


_EXPERT_TARGET = re.compile(r"experts(?!\w)")
_ATTN_TARGET = re.compile(r"self_attn|attention|\battn\b|q_proj|k_proj|v_proj|o_proj|qkv|linear_attn|mixer")
_DENSE_TARGET = re.compile(r"shared_expert|\bmlp\b|gate_proj|up_proj|down_proj|feed_forward|ffn")


def _ct_kinds(targets: Iterable[str]) -> set[str]:
    """The kinds a group's targets name (for the per-kind summary; modules are priced exactly)."""
    kinds: set[str] = set()
    for raw in targets:
        t = raw.removeprefix("re:")
        if t.lower() in ("linear", "fusedmoe"):
            return set(KINDS)
        for kind, pattern in (("expert", _EXPERT_TARGET), ("attention", _ATTN_TARGET), ("dense", _DENSE_TARGET)):
            if pattern.search(t) and not (kind == "dense" and _EXPERT_TARGET.search(t)):
                kinds.add(kind)
    return kinds


def _compressed_tensors(q: Mapping[str, Any], fused: tuple[tuple[str, tuple[str, ...]], ...]) -> QuantBytes:
    groups = q.get("config_groups") or {}
    if not isinstance(groups, Mapping) or not groups:
        raise KVCacheConfigError("compressed-tensors quantization_config has no config_groups; give --weight-bytes")
    fmt = str(q.get("format", ""))
    per_kind: dict[str, float] = {}
    names: list[str] = []
    targets: list[tuple[tuple[str, ...], float]] = []
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue  # activation-only groups do not change weight bytes
        name, per = _ct_group_bytes(weights, fmt)
        names.append(name)
        group_targets = _strings(group.get("targets")) or ("Linear",)
        targets.append((group_targets, per))
        for kind in _ct_kinds(group_targets):
            per_kind.setdefault(kind, per)
    label = "compressed-tensors " + "+".join(dict.fromkeys(names))
    rules = ModuleRules("compressed-tensors", _strings(q.get("ignore")), fused, tuple(targets))
    return QuantBytes(label, per_kind.get("attention"), per_kind.get("dense"), per_kind.get("expert"), (), rules)
