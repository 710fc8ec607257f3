"""The planner's launch defaults checked against an SGLang release's own launch resolution.

For each launch of a grid (:mod:`.launch_grid`): SGLang's answer is its launch resolution of
``ServerArgs(**fields)`` (``resolve_once()`` from 0.5.19, ``__post_init__`` before) run in a
forked child that believes it is on the GPU (:mod:`._launch_probe`, live, under the installed
release) or the answer recorded from it in ``golden/sglang-<release>-launch/resolutions.jsonl``
(no SGLang needed); the planner's answer is :func:`kvstrategies.sglang.launch.apply.resolve_launch`
on the same flags for the same release. Every field the planner reports
(:data:`COMPARED_FIELDS`) is compared; a launch SGLang refuses must be refused by the planner
with a :class:`~kvstrategies.errors.KVCacheConfigError`, and the other way round. Differences
listed in :data:`KNOWN_DIFFERENCES` (with their reason) do not fail the check.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ...core.releases import NEWEST_SGLANG, EngineRelease, parse_release, supported_releases
from ...errors import KVCacheConfigError
from ...planner.gpus import lookup_gpu
from ..launch.defaults import LaunchResolution
from ..server_arguments import RENAMED_SERVER_ARGUMENTS
from .launch_grid import DFLASH_DRAFT, DFLASH_DRAFT_CONFIG, LaunchSpec, launch_config, spec_from_dict

GOLDEN_ROOT = Path(__file__).resolve().parents[3] / "golden"
GOLDEN_FILE = "resolutions.jsonl"  # not *.json: the syrupy golden harness owns those


def golden_dir(release: EngineRelease = NEWEST_SGLANG) -> Path:
    """``golden/sglang-<release>-launch``: where one release's launch resolutions are recorded."""
    return GOLDEN_ROOT / f"sglang-{release.text}-launch"


#: the newest release's recording (what ``--recorded`` reads by default)
GOLDEN_DIR = golden_dir()


def recorded_releases(root: Path = GOLDEN_ROOT) -> tuple[EngineRelease, ...]:
    """The supported releases with a recording under ``root``, oldest first."""
    return tuple(r for r in supported_releases() if (root / f"sglang-{r.text}-launch" / GOLDEN_FILE).is_file())

# Planner-reported launch fields compared with SGLang's resolved ones (planner names).
COMPARED_FIELDS: tuple[str, ...] = (
    "mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens", "cuda_graph_max_bs",
    "decode_cuda_graph", "prefill_cuda_graph", "prefill_graph_max_bs", "prefill_graph_bs_count",
    "kv_cache_dtype", "page_size", "attention_backend", "prefill_attention_backend",
    "decode_attention_backend", "dsa_prefill_backend", "dsa_decode_backend", "dsv4_attn_backend",
    "swa_full_tokens_ratio", "swa_full_tokens_ratio_explicit", "disable_hybrid_swa_memory",
    "mamba_radix_cache_strategy", "disable_overlap_schedule", "disable_radix_cache",
    "max_running_requests", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "multimodal_reserve_mib",
)  # fmt: skip


@dataclass(frozen=True)
class LaunchOutcome:
    """One side's answer: the compared fields, or the refusal text (``fields`` empty then)."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    refused: str | None = None


@dataclass(frozen=True)
class KnownDifference:
    """A difference accepted with its reason: ``field`` differs on launches where ``applies``."""

    field: str
    reason: str
    applies: Callable[[LaunchSpec], bool]


# Every entry names why the planner does not (yet) follow SGLang there.
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = ()


@dataclass(frozen=True)
class FieldDiff:
    field: str
    sglang: Any
    planner: Any
    known: str | None = None  # the reason when listed in KNOWN_DIFFERENCES


@dataclass(frozen=True)
class LaunchComparison:
    """One launch compared: ``diffs`` over the compared fields, or a refusal mismatch."""

    spec: LaunchSpec
    sglang: LaunchOutcome
    planner: LaunchOutcome
    diffs: tuple[FieldDiff, ...] = ()

    @property
    def sglang_refuses_planner_plans(self) -> bool:
        return self.sglang.refused is not None and self.planner.refused is None

    @property
    def planner_refuses_sglang_plans(self) -> bool:
        return self.planner.refused is not None and self.sglang.refused is None

    @property
    def equal(self) -> bool:
        """Same outcome and, when both resolve, every compared field equal."""
        return not self.diffs and (self.sglang.refused is None) == (self.planner.refused is None)

    @property
    def unexplained(self) -> tuple[FieldDiff, ...]:
        return tuple(d for d in self.diffs if d.known is None)

    @property
    def failed(self) -> bool:
        return self.sglang_refuses_planner_plans or self.planner_refuses_sglang_plans or bool(self.unexplained)


# --- SGLang's resolved dict -> the planner's field names --------------------------------------


def sglang_fields(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The compared fields from ``ServerArgs.resolved_dict()`` (+ the explicit-ratio flag).

    Graph fields come from ``cuda_graph_config`` (decode ``max_bs``/``backend``; prefill
    ``backend``/``max_bs``/``len(bs)``); ``multimodal_reserve_mib`` is
    ``kv_cache_configurator.mm_runtime_reservation_gb`` (in MiB) after the resolution.
    """
    graphs = resolved.get("cuda_graph_config") or _flat_graph_config(resolved)
    decode, prefill = graphs.get("decode") or {}, graphs.get("prefill") or {}
    out = {name: resolved.get(name) for name in COMPARED_FIELDS}
    for new, old in RENAMED_SERVER_ARGUMENTS:  # a release before a rename: its old field
        if new not in resolved and old in resolved:
            out[new] = resolved[old]
    out.update(
        cuda_graph_max_bs=decode.get("max_bs"),
        decode_cuda_graph=decode.get("backend"),
        prefill_cuda_graph=prefill.get("backend"),
        prefill_graph_max_bs=prefill.get("max_bs"),
        prefill_graph_bs_count=len(prefill.get("bs") or ()),
        swa_full_tokens_ratio_explicit=bool(resolved.get("_swa_full_tokens_ratio_explicitly_set")),
        multimodal_reserve_mib=resolved.get("_multimodal_reserve_mib"),
    )
    return out


def _flat_graph_config(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """Before ``cuda_graph_config`` (0.5.14), the graphs are flat fields: the decode graph ``cuda_graph_max_bs`` /
    ``cuda_graph_bs`` (off with ``disable_cuda_graph``), the piecewise prefill graph (``tc_piecewise``)
    ``piecewise_cuda_graph_max_tokens`` / ``piecewise_cuda_graph_tokens`` (off with
    ``disable_piecewise_cuda_graph``)."""
    if "cuda_graph_max_bs" not in resolved:
        return {}
    off = bool(resolved.get("disable_cuda_graph"))
    decode = {"max_bs": resolved.get("cuda_graph_max_bs"), "backend": "disabled" if off else "full"}
    if "disable_piecewise_cuda_graph" not in resolved and "enable_piecewise_cuda_graph" not in resolved:
        return {"decode": decode, "prefill": {"backend": "disabled", "max_bs": None, "bs": None}}  # 0.5.3: none
    if "disable_piecewise_cuda_graph" not in resolved:
        prefill_off = off or not resolved["enable_piecewise_cuda_graph"]  # opt-in up to 0.5.9
    else:
        prefill_off = off or bool(resolved.get("disable_piecewise_cuda_graph"))
    return {
        "decode": decode,
        "prefill": {"backend": "disabled" if prefill_off else "tc_piecewise",
                    "max_bs": resolved.get("piecewise_cuda_graph_max_tokens"),
                    "bs": resolved.get("piecewise_cuda_graph_tokens")},
    }  # fmt: skip


def planner_fields(res: LaunchResolution, release: EngineRelease = NEWEST_SGLANG) -> dict[str, Any]:
    """The compared fields of a planner resolution, in SGLang's spelling for ``release``:
    ``dsv4_attn_backend`` left unset is the field default ``auto`` where the release has the
    field; the explicit-ratio record is False where the release keeps none; the Mamba strategy is None where the
    release has no such field."""
    from ..launch.defaults.deepseek import DSV4_ATTN_BACKEND_FIELD
    from ..launch.defaults.model_overrides import SWA_RATIO_EXPLICIT_FLAG
    from ..server_arguments import SERVER_ARGUMENT_RULES

    out = {name: getattr(res, name) for name in COMPARED_FIELDS}
    if out["dsv4_attn_backend"] is None and DSV4_ATTN_BACKEND_FIELD.holds(release):
        out["dsv4_attn_backend"] = "auto"
    if not SWA_RATIO_EXPLICIT_FLAG.holds(release):
        out["swa_full_tokens_ratio_explicit"] = False
    if not SERVER_ARGUMENT_RULES["mamba_radix_cache_strategy"].holds(release):
        out["mamba_radix_cache_strategy"] = None  # 0.5.6 has no such field: its radix cache is the no_buffer one
    return out


# --- the planner's side ---------------------------------------------------------------------


def _flag_value(value: Any, draft_dir: Path) -> Any:
    return str(draft_dir) if value == DFLASH_DRAFT else value


def _request_fields() -> frozenset[str]:

    from ...planner import DeploymentRequest

    return frozenset(f.name for f in fields(DeploymentRequest))


_REQUEST_FIELDS = _request_fields()


def planner_outcome(spec: LaunchSpec, draft_dir: Path, release: EngineRelease = NEWEST_SGLANG) -> LaunchOutcome:
    """The planner's launch resolution of ``spec`` for ``release`` (a refusal is its
    KVCacheConfigError text)."""
    from ...planner import DeploymentRequest
    from ..launch.apply import resolve_launch

    flags = {k: _flag_value(v, draft_dir) for k, v in spec.flags.items()}
    extras = {k: flags.pop(k) for k in list(flags) if k not in _REQUEST_FIELDS}  # LaunchSettings-only flags
    try:
        req = DeploymentRequest(
            model=spec.preset,
            source={"hf_config": launch_config(spec.preset)},
            tp_size=spec.tp_size,
            pp_size=spec.pp_size,
            dcp_size=spec.dcp_size,
            attn_dp_size=spec.attn_dp_size,
            gpu=lookup_gpu(spec.gpu),
            release=release,
            launch_extras=extras,
            **flags,
        )
        res = resolve_launch(req, req.hf_config())
    except KVCacheConfigError as exc:
        return LaunchOutcome(refused=str(exc))
    assert res is not None  # a GPU is always named
    return LaunchOutcome(fields=planner_fields(res, release))


# --- SGLang's side (live) -------------------------------------------------------------------


def _server_fields(spec: LaunchSpec, model_dir: Path, draft_dir: Path) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "model_path": str(model_dir), "tokenizer_path": str(model_dir), "skip_tokenizer_init": True,
        "device": "cuda", "tp_size": spec.tp_size, "pp_size": spec.pp_size,
        "attn_dp_size": spec.attn_dp_size,
    }  # fmt: skip
    if spec.dcp_size != 1:  # 0.5.14's ServerArgs has no dcp_size; later releases default it to 1
        fields["dcp_size"] = spec.dcp_size
    fields.update({k: _flag_value(v, draft_dir) for k, v in spec.flags.items()})
    return fields


def write_model_dirs(specs: Iterable[LaunchSpec], root: Path) -> tuple[dict[str, Path], Path]:
    """One folder per preset with its ``config.json`` (``auto_map`` dropped: transformers would
    fetch remote code), and the DFLASH draft folder."""
    dirs: dict[str, Path] = {}
    for spec in specs:
        if spec.preset not in dirs:
            config = launch_config(spec.preset)
            config.pop("auto_map", None)
            folder = root / spec.preset
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
            dirs[spec.preset] = folder
    draft = root / "dflash-draft"
    draft.mkdir(parents=True, exist_ok=True)
    (draft / "config.json").write_text(json.dumps(dict(DFLASH_DRAFT_CONFIG)), encoding="utf-8")
    return dirs, draft


#: the most resolution workers ``--jobs`` may start (each is a forked process holding SGLang)
MAX_JOBS = 64


def default_workers() -> int:
    """Resolution workers: the CPUs this process may use, at most 8."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cpus))


def installed_sglang_release() -> EngineRelease:
    """The release of the SGLang this process imports (an unsupported one is refused)."""
    from ._launch_probe import import_for_launch

    return import_for_launch().release


def sglang_live_outcomes(
    specs: Sequence[LaunchSpec], workers: int | None = None
) -> tuple[dict[str, LaunchOutcome], float]:
    """Resolve every launch with the installed SGLang: one import here, then one fresh forked
    child per launch (spread over ``workers`` forked workers, :func:`default_workers` by default).

    Returns the outcomes by launch name and the wall time in seconds (import included).
    """
    start = time.perf_counter()
    from . import _launch_probe as probe

    row = probe.preload_resolution_modules()
    with tempfile.TemporaryDirectory(prefix="kvstrategies-launch-") as tmp:
        dirs, draft = write_model_dirs(specs, Path(tmp))
        jobs = []
        for spec in specs:
            gpu = lookup_gpu(spec.gpu)
            if gpu.compute_capability is None or gpu.capacity_mib is None:
                raise KVCacheConfigError(f"launch {spec.name!r}: the SGLang check runs CUDA GPUs only, got {gpu.name}")
            facts = probe.GpuFacts(*gpu.compute_capability, capacity_mib=gpu.capacity_mib)
            jobs.append((facts, _server_fields(spec, dirs[spec.preset], draft)))
        answers = probe.resolve_many_forked(row, jobs, default_workers() if workers is None else workers)
    out: dict[str, LaunchOutcome] = {}
    for spec, answer in zip(specs, answers, strict=True):
        if "ok" in answer:
            out[spec.name] = LaunchOutcome(fields=sglang_fields(answer["ok"]))
        else:
            out[spec.name] = LaunchOutcome(refused=str(answer["refused"]))
    return out, time.perf_counter() - start


# --- recorded answers -------------------------------------------------------------------------


def save_golden(
    specs: Sequence[LaunchSpec],
    outcomes: Mapping[str, LaunchOutcome],
    folder: Path,
    release: EngineRelease = NEWEST_SGLANG,
) -> Path:
    """Write ``resolutions.jsonl``: a header line (SGLang release, field names), then one line
    per launch: its spec and SGLang's outcome (the fields as a list in the header's order, or
    the refusal). JSON Lines, so git diffs show one launch per line."""
    folder.mkdir(parents=True, exist_ok=True)
    header = {"sglang_version": release.text, "launches": len(specs), "fields": list(COMPARED_FIELDS)}
    lines = [json.dumps(header)]
    for spec in specs:
        outcome = outcomes[spec.name]
        answer: dict[str, Any] = (
            {"refused": outcome.refused}
            if outcome.refused is not None
            else {"fields": [outcome.fields.get(name) for name in COMPARED_FIELDS]}
        )
        lines.append(json.dumps({"spec": spec.to_dict(), "sglang": answer}, sort_keys=True))
    path = folder / GOLDEN_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load_golden(
    folder: Path | None = None, release: EngineRelease = NEWEST_SGLANG
) -> tuple[tuple[LaunchSpec, ...], dict[str, LaunchOutcome]]:
    """``release``'s recorded launches and SGLang's outcomes (see :func:`save_golden`); ``folder``
    defaults to :func:`golden_dir` of the release."""
    path = (golden_dir(release) if folder is None else folder) / GOLDEN_FILE
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise KVCacheConfigError(f"cannot read the recorded SGLang launches {path}: {exc}") from exc
    header, records = lines[0], lines[1:]
    if header.get("sglang_version") != release.text or len(records) != header.get("launches"):
        raise KVCacheConfigError(
            f"{path} records SGLang {header.get('sglang_version')} with {len(records)} launches; expected "
            f"{release.label} and the header's count {header.get('launches')}"
        )
    names = list(header["fields"])
    specs = tuple(spec_from_dict(r["spec"]) for r in records)
    outcomes: dict[str, LaunchOutcome] = {}
    for spec, record in zip(specs, records, strict=True):
        answer = record["sglang"]
        if answer.get("refused") is not None:
            outcomes[spec.name] = LaunchOutcome(refused=str(answer["refused"]))
        else:
            outcomes[spec.name] = LaunchOutcome(fields=dict(zip(names, answer["fields"], strict=True)))
    return specs, outcomes


# --- comparison -----------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def compare_launch(spec: LaunchSpec, sglang: LaunchOutcome, planner: LaunchOutcome) -> LaunchComparison:
    """Field-by-field comparison (only when both resolved); known differences carry their reason."""
    if sglang.refused is not None or planner.refused is not None:
        return LaunchComparison(spec, sglang, planner)
    diffs = []
    for name in COMPARED_FIELDS:
        s, p = sglang.fields.get(name), planner.fields.get(name)
        if not _same(s, p):
            known = next((k.reason for k in KNOWN_DIFFERENCES if k.field == name and k.applies(spec)), None)
            diffs.append(FieldDiff(name, s, p, known))
    return LaunchComparison(spec, sglang, planner, tuple(diffs))


@dataclass(frozen=True)
class VerifySummary:
    """The must-show numbers of one check."""

    launches: int
    equal: int
    both_refused: int
    sglang_refuses_planner_plans: int
    planner_refuses_sglang_plans: int
    unexplained: int
    known: int
    field_matches: int
    field_total: int
    per_field: Mapping[str, tuple[int, int]]  # field -> (matches, compared)

    @property
    def field_match_rate(self) -> float:
        return self.field_matches / self.field_total if self.field_total else 1.0


def summarize(comparisons: Sequence[LaunchComparison]) -> VerifySummary:
    per: dict[str, list[int]] = {name: [0, 0] for name in COMPARED_FIELDS}
    for c in comparisons:
        if c.sglang.refused is None and c.planner.refused is None:
            differing = {d.field for d in c.diffs}
            for name in COMPARED_FIELDS:
                per[name][1] += 1
                per[name][0] += name not in differing
    return VerifySummary(
        launches=len(comparisons),
        equal=sum(c.equal for c in comparisons),
        both_refused=sum(c.sglang.refused is not None and c.planner.refused is not None for c in comparisons),
        sglang_refuses_planner_plans=sum(c.sglang_refuses_planner_plans for c in comparisons),
        planner_refuses_sglang_plans=sum(c.planner_refuses_sglang_plans for c in comparisons),
        unexplained=sum(bool(c.unexplained) for c in comparisons),
        known=sum(bool(c.diffs) and not c.unexplained for c in comparisons),
        field_matches=sum(m for m, _ in per.values()),
        field_total=sum(t for _, t in per.values()),
        per_field={k: (v[0], v[1]) for k, v in per.items()},
    )


def compare_all(
    specs: Sequence[LaunchSpec], sglang: Mapping[str, LaunchOutcome], release: EngineRelease = NEWEST_SGLANG
) -> list[LaunchComparison]:
    """The planner for ``release`` against that release's SGLang outcomes for every launch."""
    with tempfile.TemporaryDirectory(prefix="kvstrategies-draft-") as tmp:
        _, draft = write_model_dirs((), Path(tmp))
        return [compare_launch(s, sglang[s.name], planner_outcome(s, draft, release)) for s in specs]


def diff_text(c: LaunchComparison) -> list[str]:
    """A readable diff of one launch (empty when equal)."""
    if c.sglang_refuses_planner_plans:
        return [f"{c.spec.name}: SGLang refuses ({c.sglang.refused}); the planner plans it"]
    if c.planner_refuses_sglang_plans:
        return [f"{c.spec.name}: the planner refuses ({c.planner.refused}); SGLang resolves it"]
    if not c.diffs:
        return []
    lines = [f"{c.spec.name}:"]
    for d in c.diffs:
        tail = f"   (known: {d.known})" if d.known else ""
        lines.append(f"  {d.field:<32} sglang={d.sglang!r:<20} planner={d.planner!r}{tail}")
    return lines


def summary_text(s: VerifySummary, live_seconds: float | None, source: str) -> list[str]:
    lines = [
        f"launches compared             {s.launches} ({source})",
        f"equal on every field          {s.equal} ({s.both_refused} refused by both)",
        f"field match rate              {s.field_matches}/{s.field_total} = {100 * s.field_match_rate:.2f}%",
        f"SGLang refuses, planner plans {s.sglang_refuses_planner_plans}",
        f"planner refuses, SGLang plans {s.planner_refuses_sglang_plans}",
        f"launches with known diffs     {s.known}",
        f"launches with unexplained     {s.unexplained}",
    ]
    if live_seconds is not None:
        lines.append(f"live SGLang run               {live_seconds:.1f} s")
    differing = [(name, m, t) for name, (m, t) in s.per_field.items() if m != t]
    tail = "; those that differ (matches/compared):" if differing else "; all match where both resolve"
    lines.append(f"fields compared per launch    {len(s.per_field)}{tail}")
    lines.extend(f"  {name:<32}{m}/{t}" for name, m, t in differing)
    return lines


# --- the command: kvstrategies verify --against sglang --launch [GRID] --------------------------


def load_grid(path: Path | None) -> tuple[LaunchSpec, ...]:
    """The launches of a grid file (a JSON list), or the shipped default grid."""
    from .launch_grid import default_grid, grid_from_json

    if path is None:
        return default_grid()
    from ...core.jsonio import read_json_file

    specs = grid_from_json(read_json_file(path))  # bounded, regular files only (never /dev/zero or a FIFO)
    if not specs:
        raise KVCacheConfigError(f"the launch grid {path} holds no launches; give a JSON list of launch objects")
    return specs


def run_verify_launch(
    grid: Path | None,
    *,
    recorded: bool = False,
    record: Path | None = None,
    workers: int | None = None,
    as_json: bool = False,
    show_equal: bool = False,
    sglang_version: str | None = None,
    out: Callable[[str], None] = print,
) -> int:
    """Compare the planner with SGLang on every launch of ``grid``; 0 when every difference is
    known, 1 otherwise. ``recorded`` reads the answers recorded for ``sglang_version`` (default:
    the newest release; no SGLang needed; the grid must be the recorded one's subset); else the
    installed SGLang runs live (``sglang_version``, if given, must be it), and ``record`` writes
    its answers there: a recording that differs from the one it replaces is reported stale (1)."""
    if workers is not None and not 1 <= workers <= MAX_JOBS:
        raise KVCacheConfigError(
            f"verify: --jobs must be an integer in [1, {MAX_JOBS}] (resolution workers, one forked process each), "
            f"got {workers}"
        )
    if recorded and record is not None:
        raise KVCacheConfigError(
            "verify: --record writes SGLang's live answers, and --recorded uses the recorded ones instead of running "
            "SGLang; pass one of them"
        )
    specs = load_grid(grid)
    seconds: float | None = None
    stale: list[str] = []
    if recorded:
        release = parse_release(sglang_version)
        recorded_specs, answers = load_golden(release=release)
        by_name = {spec.name: spec for spec in recorded_specs}
        missing = [s.name for s in specs if s.name not in answers]
        if missing:
            raise KVCacheConfigError(
                f"{len(missing)} launches are not recorded for {release.label} (first: {missing[0]}); run "
                "without --recorded (needs SGLang) or record them with --record"
            )
        changed = [s.name for s in specs if by_name[s.name].to_dict() != s.to_dict()]
        if changed:  # a launch is matched by its whole content, not its name
            raise KVCacheConfigError(
                f"{len(changed)} launches differ from the recorded launch of the same name (first: {changed[0]}); "
                "SGLang's recorded answer is for the recorded launch: rename the launch, or run without --recorded "
                "(needs SGLang)"
            )
        source = f"{release.label} answers recorded in golden/sglang-{release.text}-launch"
    else:
        try:
            release = installed_sglang_release()
            answers, seconds = sglang_live_outcomes(specs, workers)
        except ImportError as exc:
            raise KVCacheConfigError(
                f"SGLang is not importable ({exc}); install the 'sglang' extra or pass --recorded"
            ) from exc
        except RuntimeError as exc:  # unsupported SGLang version
            raise KVCacheConfigError(str(exc)) from exc
        if sglang_version is not None and parse_release(sglang_version) != release:
            raise KVCacheConfigError(
                f"--sglang-version {sglang_version} but {release.label} is installed: the live check runs the "
                f"installed release (python tools/sglang_env.py {sglang_version} DIR makes an environment for "
                "it), or pass --recorded"
            )
        source = f"live {release.label}, one forked process per launch"
        if record is not None:
            stale = stale_launches(specs, answers, record, release)
            save_golden(specs, answers, record, release)
    comparisons = compare_all(specs, answers, release)
    summary = summarize(comparisons)
    if as_json:
        out(json.dumps({
            "source": source, "live_seconds": seconds, "launches": summary.launches, "equal": summary.equal,
            "both_refused": summary.both_refused, "field_matches": summary.field_matches,
            "field_total": summary.field_total,
            "sglang_refuses_planner_plans": summary.sglang_refuses_planner_plans,
            "planner_refuses_sglang_plans": summary.planner_refuses_sglang_plans,
            "unexplained": summary.unexplained, "known": summary.known,
            "per_field": {k: list(v) for k, v in summary.per_field.items()},
            "diffs": ["\n".join(diff_text(c)) for c in comparisons if diff_text(c)],
        }, indent=2))  # fmt: skip
    else:
        for c in comparisons:
            for line in diff_text(c):
                out(line)
            if show_equal and c.equal:
                out(f"{c.spec.name}: equal" + (" (both refuse)" if c.sglang.refused else ""))
        for line in summary_text(summary, seconds, source):
            out(line)
    for line in stale[:20]:
        out(f"stale recording: {line}")
    if stale:
        out(f"{record}: the recording was stale ({len(stale)} launches differ); it is refreshed now")
    failed = any(c.failed for c in comparisons) or bool(stale)
    return 1 if failed else 0


def stale_launches(
    specs: Sequence[LaunchSpec], answers: Mapping[str, LaunchOutcome], folder: Path, release: EngineRelease
) -> list[str]:
    """What differs between the recording in ``folder`` and the fresh ``answers`` (empty when
    the recording is current; a missing recording is stale as a whole)."""
    if not (folder / GOLDEN_FILE).is_file():
        return [f"no recording in {folder}"]
    try:
        old_specs, old = load_golden(folder, release)
    except KVCacheConfigError as exc:
        return [str(exc)]
    out = []
    if [s.to_dict() for s in old_specs] != [s.to_dict() for s in specs]:
        out.append(f"the grid changed: {len(old_specs)} recorded launches, {len(specs)} now")
    for spec in specs:
        before, now = old.get(spec.name), answers[spec.name]
        if before is None or before.refused != now.refused or not all(
            _same(before.fields.get(k), now.fields.get(k)) for k in COMPARED_FIELDS
        ):
            out.append(spec.name)
    return out
