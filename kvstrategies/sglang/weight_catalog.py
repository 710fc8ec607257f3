"""The weight catalog: real checkpoint deployments whose per-rank weights SGLang itself recorded.

Each ``cases/weights/<name>.json`` names a model (a preset, a shipped checkpoint's HF id, or a
config folder under ``cases/weights/configs/``), the GPU planned and the layout (``tp``, ``ep``,
``pp``, ``attn_dp``, ``quantization``: SGLang's ``--quantization``). ``tools/record_weights.py``
builds SGLang's own model for it on ``meta`` (:mod:`kvstrategies.sglang.bridge.model_on_meta`) and
writes ``golden/sglang-<v>-weights/<name>.json``: the bytes of every group of parameters and
buffers per recorded rank, or SGLang's refusal. :func:`planned` answers the same case with the
torch-free planner (:func:`kvstrategies.sglang.budget.weights_per_rank` and the launch / load
refusals), so a test holds the planner to the recording (docs/weights.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.jsonio import read_json_object
from ..errors import KVCacheConfigError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "cases" / "weights"
RECORDINGS = ROOT / "golden"

#: recorded groups that are not weights: buffers the planner counts apart (the RoPE cache) or not at all
BUFFER_GROUPS = ("other_buffers",)


#: case -> (bound on |planned / recorded - 1|, why the planner differs), for SGLang 0.5.23.
#: Every other case SGLang builds is planned exact to the byte.
WEIGHT_DIFFERENCES: dict[str, tuple[float, str]] = {
    # small, bounded: scales and buffers the estimate prices by the parameter, not by the tensor
    "deepseek-r1-b200-tp8": (1e-6, "7,808 B = 128 B in each of the 61 layers: small tensors the estimate "
                             "does not itemize (not traced further)"),
    "deepseek-v3-h200-tp8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-ep8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-dp8-ep8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "kimi-k2-h200-tp8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "llama-3.1-70b-fp8-modelopt-b200-tp1": (1e-6, "5,120 B = 64 B a layer: ModelOpt's per-tensor fp32 scales"),
    "llama-3.1-70b-fp8-modelopt-h100-tp2": (1e-6, "5,120 B = 64 B a layer: ModelOpt's per-tensor fp32 scales"),
    "llama-3.1-8b-online-fp8-h100-tp1": (1e-6, "768 B = 24 B a layer: the per-tensor fp32 scales online FP8 makes"),
    "llama-3.1-8b-ct-w4a16-h100-tp1": (1e-6, "2,048 B = 64 B a layer: compressed-tensors' int64 weight_shape tensors"),
    "minimax-m2.5-h200-tp4": (1e-6, "496 B = 8 B in each of the 62 layers (not traced further)"),
    "minimax-m2.7-h100-tp4": (1e-6, "496 B: as minimax-m2.5-h200-tp4"),
    "nemotron-h-8b-h100-tp1": (1e-6, "6,144 B of small Mamba2 tensors (not traced further)"),
    "qwen3-next-80b-a3b-h100-tp4": (1e-6, "7,488 B of small GDN tensors (not traced further)"),
    "deepseek-v3.1-nvfp4-b200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales of every linear and expert"),
    "kimi-k2.5-nvfp4-h200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "deepseek-v3.1-nvfp4-h200-tp8": (5e-4, "20 MB: NVFP4 global scales and scale padding (not traced further)"),
    "deepseek-v3.2-h200-tp8": (5e-4, "28 MB in the DSA indexer (the estimate approximates it; not traced further)"),
    "glm-5-fp8-h200-tp8": (1e-3, "77 MB in the DSA indexer (as deepseek-v3.2-h200-tp8)"),
    "qwen3.5-27b-h100-tp1": (5e-4, "the tower's norms, biases and position table (left out of vision_tower_params)"),
    "qwen3.5-35b-a3b-h100-tp2": (5e-4, "as qwen3.5-27b-h100-tp1"),
    "gemma-3-27b-h100-tp1": (5e-4, "the SigLIP tower's biases, norms and position table (left out of the estimate)"),
    "gemma-3-27b-h100-tp4": (1e-3, "as gemma-3-27b-h100-tp1, and the tower parts that stay whole on every rank"),
    "llama-3.1-8b-ct-fp8-h100-tp1": (1e-3, "compressed-tensors per-channel FP8: one fp32 scale per output channel, "
                                     "43,008 a layer x 32 layers x 4 B = 5,505,024 B, priced as none"),
    "qwen2.5-7b-gptq-h100-tp1": (1e-3, "3.3 MB of GPTQ side tensors (g_idx, qzeros) priced per parameter"),
    "mimo-v2-flash-h200-tp4": (1e-6, "960 B: attention-sink biases and fp32 k/v scales (not traced further)"),
    "mimo-v2-flash-h200-tp8": (1e-6, "3,456 B: as mimo-v2-flash-h200-tp4"),
    "qwen3.6-27b-nvfp4-b200-tp1": (2e-3, "24 MB: the estimate holds a GDN layer's in_proj_ba (2 x 48 heads x 5120, "
                                   "48 layers) in its one in_proj group, priced as the map's in_proj_qkv (FP8); "
                                   "SGLang keeps it in bf16 (the map does not name it)"),
    "qwen3.6-35b-a3b-nvfp4-b200-tp2": (1e-3, "as qwen3.6-27b-nvfp4-b200-tp1 (in_proj_ba), and the tower's norms"),
    # larger: what the estimate does not model yet
    "qwen3-vl-8b-h100-tp1": (5e-4, "the tower's norms and biases (left out of vision_tower_params)"),
    "qwen3-vl-8b-h100-tp2": (5e-4, "as qwen3-vl-8b-h100-tp1, and tower parts whole on every rank"),
    "qwen2.5-vl-7b-h100-tp1": (5e-4, "as qwen3-vl-8b-h100-tp1"),
    "deepseek-v4-flash-h200-tp4": (0.02, "DeepSeek-V4 is estimated approximately (weights.py, _dsv4_attention)"),
    "nemotron-3-nano-nvfp4-h100-tp1": (1e-5, "63,056 B: small tensors the estimate does not itemize (not traced "
                                       "further); the NVFP4 exclusion list is matched in SGLang's names (backbone. -> "
                                       "model., one mixer block per layer; was 665 MB)"),
    "qwen3.5-397b-a17b-nvfp4-h100-tp4": (0.04, "the exclusion list keeps linear_attn, shared experts and "
                                         "attention in bf16 (model.language_model.* names); the estimate prices NVFP4"),
    "gpt-oss-120b-h100-tp4": (0.07, "MXFP4 experts: Mxfp4MoEMethod.create_weights pads each rank's 720 columns to "
                              "768 (triton_kernels alignment 64: the recorder's triton_kernels "
                              "stand-in is found; a GPU install without triton_kernels would not pad); the planner "
                              "does not pad"),
    "gpt-oss-20b-b200-tp1": (0.07, "MXFP4 experts on SM100 (flashinfer_mxfp4): hidden and columns padded to 128 "
                             "(Mxfp4MoEMethod.create_weights); the planner does not pad"),
    "qwen3-30b-a3b-online-fp8-h100-tp1": (0.49, "recorded before Fp8MoEMethod.process_weights_after_loading, "
                                          "which quantizes the bf16 experts to fp8 with CUDA kernels (not run on "
                                          "meta); the planner prices them after it, as fp8"),
}

#: case -> why the planner's refusal differs from SGLang's
REFUSAL_DIFFERENCES: dict[str, str] = {}

#: why the NVFP4 B200 recordings of 0.5.5-0.5.12 hold the swizzled scale copies the served rank frees
_ALIASED = ("recorded before ModelOptNvFp4FusedMoEMethod.process_weights_after_loading (not plain torch: not run "
            "on meta), which under the TRT-LLM runner aliases the swizzled scale copies create_weights built to the "
            "weight scales and frees them; from 0.5.13 create_weights does not build them. The planner prices the "
            "rank after loading")
#: why the online-FP8 recordings up to 0.5.7 hold bf16 linears
_ONLINE_FP8 = ("recorded before Fp8LinearMethod.process_weights_after_loading, which quantizes the bf16 linears to fp8 "
               "with a Triton kernel up to 0.5.7 (not run on meta: 'libcuda.so cannot found'); the planner prices them "
               "as fp8, as SGLang serves them")
#: (case, first release, last release) -> (bound, why): how an older release's recording differs from the
#: planner, where that release differs from the entry of :data:`WEIGHT_DIFFERENCES` (which holds otherwise)
RELEASE_WEIGHT_DIFFERENCES: dict[tuple[str, str, str], tuple[float, str]] = {
    ("deepseek-v3.1-nvfp4-b200-tp8", "0.5.1", "0.5.1"): (
        0.03, "0.5.1's ModelOptFp4Config.is_layer_excluded matches the exclusion list against the full name only, so "
        "MLA's fused_qkv_a_proj_with_mqa, which the list keeps in bf16 as q_a_proj / kv_a_proj_with_mqa, is "
        "quantized to NVFP4 (1.39 GB less a rank); 0.5.2 matches the fused names, as the planner does"),
    ("deepseek-v3.1-nvfp4-b200-tp8", "0.5.2", "0.5.4"): (
        5e-4, "the auto MoE runner keeps the swizzled scale copy (planned); 20 MB of its padding and the global "
        "scales as these releases build them (not traced further)"),
    ("deepseek-v3.1-nvfp4-b200-tp8", "0.5.5", "0.5.12"): (0.1, _ALIASED),
    ("qwen3-235b-a22b-nvfp4-b200-tp2", "0.5.6", "0.5.12"): (0.1, _ALIASED),
    ("llama-3.1-8b-online-fp8-h100-tp1", "0.5.1", "0.5.7"): (0.5, _ONLINE_FP8),
    ("deepseek-v4-flash-h200-tp4", "0.5.12", "0.5.18"): (
        0.16, "these releases build DeepSeek-V4's routed experts with Fp8MoEMethod, whose float32 block scales hold "
        "6.49 GB more a rank at TP 4 than the MXFP4 method of later releases (Mxfp4FlashinferCutlassMoEMethod); the "
        "planner prices the later layout, approximately"),
    ("gpt-oss-20b-b200-tp1", "0.5.10", "0.5.16"): (
        0.1, "MXFP4 experts on SM100 (flashinfer_mxfp4): Mxfp4MoEMethod.create_weights pads the hidden size and "
        "each rank's columns to 256 in these releases (128 later); the planner does not pad"),
    ("llama-4-scout-h100-tp8", "0.5.6", "0.5.8"): (
        1e-6, "9,216 B: a norm these releases register as a parameter (later: a buffer the estimate leaves out)"),
    ("qwen3-vl-8b-h100-tp2", "0.5.3", "0.5.7"): (
        1e-3, "as qwen3-vl-8b-h100-tp1, and more of the tower whole on every rank in these releases"),
    ("deepseek-v3.2-h200-tp8", "0.5.6", "0.5.7"): (
        1e-3, "the DSA indexer as 0.5.6 and 0.5.7 build it (the estimate approximates it; not traced further)"),
}


def listed_difference(
    name: str,
    release: str,
    by_release: Mapping[tuple[str, str, str], tuple[float, str]],
    by_case: Mapping[str, tuple[float, str]],
    engine: str = "sglang",
) -> tuple[float, str]:
    """The bound on ``|planned / recorded - 1|`` for case ``name`` under ``engine``'s ``release``, and why: the
    ``by_release`` entry whose release range holds it, else ``by_case``'s (``(0.0, "")``: exact to the byte)."""
    from ..core.releases import parse_release

    version = parse_release(release, engine)
    for (case, first, last), known in by_release.items():
        if case == name and parse_release(first, engine) <= version <= parse_release(last, engine):
            return known
    return by_case.get(name, (0.0, ""))


def weight_difference(name: str, release: str) -> tuple[float, str]:
    """:func:`listed_difference` with SGLang's lists (:data:`RELEASE_WEIGHT_DIFFERENCES`,
    :data:`WEIGHT_DIFFERENCES`)."""
    return listed_difference(name, release, RELEASE_WEIGHT_DIFFERENCES, WEIGHT_DIFFERENCES)


@dataclass(frozen=True)
class WeightCase:
    """One catalog deployment."""

    name: str
    model: str
    gpu: str
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attn_dp: int = 1
    quantization: str | None = None
    why: str = ""

    @classmethod
    def read(cls, path: Path) -> WeightCase:
        raw = read_json_object(path, "a weight case")
        known = {"model", "gpu", "tp", "ep", "pp", "attn_dp", "quantization", "why"}
        unknown = set(raw) - known
        if unknown:
            raise KVCacheConfigError(
                f"{path.name}: unknown field(s) {sorted(unknown)}; a weight case has {sorted(known)}"
            )
        return cls(name=path.stem, **raw)

    def model_ref(self) -> str:
        """The model argument the planner resolves (a catalog config folder as an absolute path)."""
        if self.model.startswith("cases/"):
            return str(ROOT / self.model)
        return self.model


def catalog(folder: Path = CATALOG) -> tuple[WeightCase, ...]:
    """Every weight case, by name."""
    return tuple(WeightCase.read(p) for p in sorted(folder.glob("*.json")))


def recording_dir(version: str) -> Path:
    """``golden/sglang-<version>-weights``."""
    return RECORDINGS / f"sglang-{version}-weights"


def weight_releases() -> tuple[str, ...]:
    """The SGLang releases whose weights are recorded (``golden/sglang-<v>-weights``), oldest first."""
    from ..core.releases import parse_release

    names = [p.name.removeprefix("sglang-").removesuffix("-weights") for p in RECORDINGS.glob("sglang-*-weights")]
    return tuple(sorted(names, key=parse_release))


def recorded(case: WeightCase, version: str) -> dict[str, Any]:
    """The recording of ``case`` under SGLang ``version``."""
    return read_json_object(recording_dir(version) / f"{case.name}.json", f"the weight recording of {case.name}")


def recorded_weight_bytes(rank: Mapping[str, Any]) -> int:
    """The weight bytes of one recorded rank: every group but the buffers the planner counts apart."""
    groups: Mapping[str, int] = rank["groups"]
    return sum(int(v) for k, v in groups.items() if k not in BUFFER_GROUPS)


@dataclass(frozen=True)
class PlannedWeights:
    """The planner's answer for a case: bytes of the fullest rank, or its refusal."""

    weight_bytes: int | None
    refusal: str | None
    source: str = ""


def planned(case: WeightCase, version: str | None = None) -> PlannedWeights:
    """The torch-free planner's weights per rank (the fullest) for ``case`` under SGLang ``version``
    (default the newest), or its refusal: the steps ``plan --gpu`` takes before the budget (launch
    refusals, launch resolution, weight-load refusals), as SGLang builds the model after ``ServerArgs``."""
    from ..core.releases import NEWEST_SGLANG, parse_release
    from ..planner.deployment import launched_request
    from ..planner.gpus import lookup_gpu
    from ..planner.model_lookup import resolve_for_planning
    from ..planner.model_reading import ModelReading
    from ..planner.request import DeploymentRequest
    from .budget import weights_per_rank
    from .launch.apply import resolve_launch
    from .launch_refusals import admit

    source = resolve_for_planning(case.model_ref())
    req = DeploymentRequest(
        model=case.model,
        source=source.request_source(),
        tp_size=case.tp,
        pp_size=case.pp,
        ep_size=case.ep,
        attn_dp_size=case.attn_dp,
        gpu=lookup_gpu(case.gpu),
        weight_quantization=case.quantization,
        model_folder=source.folder,
        release=NEWEST_SGLANG if version is None else parse_release(version),
    )
    model = ModelReading(req.hf_config())
    try:  # the launch refusals, the launch resolution (and its refusals), then the weight-load refusals
        req, model, _ = admit(req, model)
        req = launched_request(req, resolve_launch(req, model.config))
    except KVCacheConfigError as exc:  # UnsupportedConfigurationError, or a launch refusal
        return PlannedWeights(None, str(exc))
    nbytes, text = weights_per_rank(req, model)
    return PlannedWeights(nbytes, None, text)


@dataclass(frozen=True)
class Comparison:
    """One case: SGLang's recorded weights of the fullest rank (or refusal) beside the planner's."""

    case: WeightCase
    release: str
    recorded_bytes: int | None
    recorded_refusal: str | None
    planned: PlannedWeights
    environment: str | None = None  # why the recording is not SGLang's answer on a GPU (then skipped)

    @property
    def error(self) -> float | None:
        """``planned / recorded - 1`` (None unless both planned)."""
        if self.recorded_bytes is None or self.planned.weight_bytes is None:
            return None
        return self.planned.weight_bytes / self.recorded_bytes - 1

    @property
    def refusals_agree(self) -> bool:
        return (self.recorded_refusal is None) == (self.planned.refusal is None)


def compare(case: WeightCase, version: str) -> Comparison:
    """The recording of ``case`` beside the planner's answer."""
    document = recorded(case, version)
    ranks = document["ranks"]
    refusal = next((r["refusal"] for r in ranks if "refusal" in r), None)
    environment = document.get("environment")
    plan = planned(case, version)
    if refusal is not None:
        return Comparison(case, version, None, f"{refusal['type']}: {refusal['message']}", plan, environment)
    return Comparison(case, version, max(recorded_weight_bytes(r) for r in ranks), None, plan, environment)


#: ``(case name, release) -> (bound, why)``: an engine's listed weight differences
DifferenceOf = Callable[[str, str], tuple[float, str]]


def judge(comparison: Comparison, difference: DifferenceOf, refusals: Mapping[str, str],
          engine: str) -> tuple[bool, str]:  # fmt: skip
    """``(as expected, what it says)`` for one case against ``engine``'s recording: a recording of the host's
    answer is not compared; refusals agree (or differ as ``refusals`` says); weights byte-exact or within the
    bound ``difference`` states for the case and release, with its reason."""
    name = comparison.case.name
    if comparison.environment is not None and comparison.recorded_bytes is None:
        return True, f"not built on this host, not compared ({comparison.environment})"
    if not comparison.refusals_agree:
        known = refusals.get(name)
        side = f"{engine} refuses, the planner plans" if comparison.recorded_refusal else "the planner refuses"
        return known is not None, f"refusal differs ({side}){': known: ' + known if known else ''}"
    if comparison.error is None:
        return True, "both refuse"
    bound, why = difference(name, comparison.release)
    if comparison.planned.weight_bytes == comparison.recorded_bytes:
        return True, "equal"
    text = f"{comparison.error:+.3%}" + (f" (known: {why})" if why else "")
    return abs(comparison.error) <= bound and bool(why), text


def verdict(comparison: Comparison) -> tuple[bool, str]:
    """:func:`judge` with SGLang's lists (:data:`REFUSAL_DIFFERENCES`, :func:`weight_difference`)."""
    return judge(comparison, weight_difference, REFUSAL_DIFFERENCES, "SGLang")


def report_lines(comparisons: Iterable[Comparison], judged: Callable[[Comparison], tuple[bool, str]], engine: str,
                 folder: Path) -> tuple[bool, list[str]]:  # fmt: skip
    """One line a case (recorded and planned bytes of the fullest rank, the verdict) and the summary."""
    lines, ok = [], True
    for comparison in comparisons:
        good, text = judged(comparison)
        ok &= good
        lines.append(f"{'ok  ' if good else 'FAIL'} {comparison.case.name:44s} {engine} "
                     f"{_gib(comparison.recorded_bytes):>12s}  planner {_gib(comparison.planned.weight_bytes):>12s}  "
                     f"{text}")  # fmt: skip
    release = folder.name.split("-")[1]  # golden/<engine>-<release>-weights
    lines.append(f"{'all' if ok else 'NOT all'} {len(lines)} weight cases as {engine} {release} records them "
                 f"({folder.relative_to(ROOT)})")  # fmt: skip
    return ok, lines


def verify_lines(version: str) -> tuple[bool, list[str]]:
    """``kvstrategies verify --against sglang --weights``: every catalog case against its recording."""
    if not recording_dir(version).is_dir():
        releases = ", ".join(weight_releases()) or "none"
        raise KVCacheConfigError(
            f"no weight recordings for SGLang {version} (recorded: {releases}); record them in that release's "
            "environment with tools/record_weights.py (docs/weights.md), or give --sglang-version one of those"
        )
    return report_lines((compare(case, version) for case in catalog()), verdict, "SGLang", recording_dir(version))


def _gib(nbytes: int | None) -> str:
    return "refused" if nbytes is None else f"{nbytes / 2**30:.3f} GiB"
