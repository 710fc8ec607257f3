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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.jsonio import read_json_object
from ..errors import KVCacheConfigError, UnsupportedConfigurationError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "cases" / "weights"
RECORDINGS = ROOT / "golden"

#: recorded groups that are not weights: buffers the planner counts apart (the RoPE cache) or not at all
BUFFER_GROUPS = ("other_buffers",)


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


def planned(case: WeightCase) -> PlannedWeights:
    """The torch-free planner's weights per rank (the fullest) for ``case``, or its refusal
    (the launch and weight-load refusals it runs before planning)."""
    from ..planner.gpus import lookup_gpu
    from ..planner.model_lookup import resolve_for_planning
    from ..planner.model_reading import ModelReading
    from ..planner.request import DeploymentRequest
    from .budget import weights_per_rank
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
    )
    model = ModelReading(req.hf_config())
    try:
        req, model, _ = admit(req, model)
    except UnsupportedConfigurationError as exc:
        return PlannedWeights(None, str(exc))
    nbytes, text = weights_per_rank(req, model)
    return PlannedWeights(nbytes, None, text)


@dataclass(frozen=True)
class Comparison:
    """One case: SGLang's recorded weights of the fullest rank (or refusal) beside the planner's."""

    case: WeightCase
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
    plan = planned(case)
    if refusal is not None:
        return Comparison(case, None, f"{refusal['type']}: {refusal['message']}", plan, environment)
    return Comparison(case, max(recorded_weight_bytes(r) for r in ranks), None, plan, environment)
