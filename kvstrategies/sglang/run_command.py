"""The SGLang launch command that realizes a plan: what to paste to get the answer.

:func:`sglang_command` writes ``python -m sglang.launch_server --model-path M --tp-size N ...``
from a :class:`~.request.DeploymentRequest`: every setting the user gave (or a fix changed) in
SGLang's own spelling, and nothing SGLang would choose the same way itself on that GPU (its
launch defaults are what the plan already applied). Pasting the command back
(``kvstrategies plan --gpu G -- <command>``) plans the same deployment
(``tests/sglang/test_run_command.py``, ``tests/sglang/test_printed_command.py``); for a release
other than the newest a note says how (``plan it again: kvstrategies plan --gpu G --sglang-version V
-- <this command>``), as a launch command cannot name its release. What a launch command cannot
say -- the GPU itself, a KV budget or weights given by hand, a draft's layer count -- is listed in
:attr:`SGLangCommand.notes`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.releases import NEWEST_SGLANG
from ..planner.request import DeploymentRequest
from .server_arguments import RENAMED_SERVER_ARGUMENTS

LAUNCHER = ("python", "-m", "sglang.launch_server")
OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
#: request field -> SGLang flag, for values printed as given (``None`` / ``False`` = left out)
_FLAGS: tuple[tuple[str, str], ...] = (
    ("pp_size", "--pp-size"),
    ("dcp_size", "--dcp-size"),
    ("attn_dp_size", "--attn-dp-size"),
    ("ep_size", "--ep-size"),
    ("moe_runner_backend", "--moe-runner-backend"),
    ("dp_replicas", "--dp-size"),
    ("model_dtype", "--dtype"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("page_size", "--page-size"),
    ("context_length", "--context-length"),
    ("mem_fraction_static", "--mem-fraction-static"),
    ("max_total_tokens", "--max-total-tokens"),
    ("max_running_requests", "--max-running-requests"),
    ("chunked_prefill_size", "--chunked-prefill-size"),
    ("attention_backend", "--attention-backend"),
    ("mamba_ssm_dtype", "--mamba-ssm-dtype"),
    ("swa_full_tokens_ratio", "--swa-full-tokens-ratio"),
    ("speculative_algorithm", "--speculative-algorithm"),
    ("speculative_draft_model_path", "--speculative-draft-model-path"),
    ("speculative_num_steps", "--speculative-num-steps"),
    ("speculative_eagle_topk", "--speculative-eagle-topk"),
    ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
    ("disable_radix_cache", "--disable-radix-cache"),
)
#: fields whose default is 1 (printed only above it)
_ONE_DEFAULT = frozenset({"pp_size", "dcp_size", "attn_dp_size", "dp_replicas", "ep_size"})
#: fields whose SGLang default is a word (printed only when another one was planned)
_WORD_DEFAULT = {"moe_runner_backend": "auto"}
#: launch-extras fields whose flag is not ``--`` + the field name
_EXTRA_FLAG = {"cuda_graph_max_bs": "--cuda-graph-max-bs-decode"}
#: ``--weight-quantization`` -> SGLang's ``--quantization`` (the reverse of launch_command.QUANTIZATION)
SGLANG_QUANTIZATION = {"fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "modelopt_fp4", "w4a16": "awq"}


@dataclass(frozen=True)
class SGLangCommand:
    """A launch command: environment assignments, the argument vector, and what it cannot say."""

    env: tuple[str, ...]
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """One shell line, quoted for pasting."""
        return " ".join([*self.env, *(shlex.quote(arg) for arg in self.argv)])

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "env": list(self.env), "argv": list(self.argv), "notes": list(self.notes)}


def model_path(req: DeploymentRequest) -> str:
    """What SGLang's ``--model-path`` takes: a preset's or shipped checkpoint's HF id, a
    ``config.json`` file's folder (SGLang loads a folder or an HF id), else MODEL as given. An
    ``-Instruct`` id planned from its shipped base (:func:`~kvstrategies.planner.known_models.tuned_base`)
    is the id asked, with the base's organisation when none was given: it is what the user serves."""
    from pathlib import Path

    from ..checkpoints import find_shipped
    from ..planner.known_models import tuned_base
    from ..presets import preset_index

    shipped = find_shipped(req.model)
    if shipped is not None:
        return shipped.hf_id
    base = tuned_base(req.model)
    if base is not None and not Path(req.model).exists():
        asked = req.model.strip()
        return asked if "/" in asked else f"{base.hf_id.split('/', 1)[0]}/{asked}"
    preset = req.source.get("preset") if "hf_config" not in req.source else None
    if preset is not None:
        return preset_index()[str(preset)]
    given = Path(req.model)
    if given.name == "config.json" and given.is_file():
        return str(given.parent)
    return req.model


def gpu_count(count: int, name: str) -> str:
    """``"one H100-80GB"``, ``"4 x H100-80GB (one node)"``, ``"16 x H100-80GB (2 nodes of 8)"``."""
    if count == 1:
        return f"one {name}"
    return f"{count} x {name}" + (" (one node)" if count <= 8 else f" ({-(-count // 8)} nodes of 8)")


def _value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _extras(extras: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for field, value in extras.items():
        flag = _EXTRA_FLAG.get(field, "--" + field.replace("_", "-"))
        if value is True:
            out.append(flag)
        elif value is not None and value is not False:
            out += [flag, _value(value)]
    return out


def _notes(req: DeploymentRequest) -> list[str]:
    notes = []
    if req.gpu is not None:
        notes.append(f"on {gpu_count(req.tp_size * req.pp_size * req.dp_replicas, req.gpu.name)}")
    for present, text in (
        (req.available_bytes is not None, "the KV budget was given (--available-bytes): SGLang measures its own"),
        (req.weight_bytes is not None, "the weights were given (--weight-bytes): SGLang loads the checkpoint's"),
        (req.overhead_bytes is not None, "the memory held before loading was given (--gpu-overhead)"),
        (req.weight_dtype is not None, "--weight-dtype only changes the estimate; SGLang loads the checkpoint's"),
        (req.assume_architecture is not None, "the architecture was assumed (--assume-architecture): SGLang "
         "serves the config's own"),
        (req.speculative_draft_layers is not None, "the draft's layer count (--speculative-draft-layers) comes "
         "from the draft checkpoint SGLang loads"),
    ):  # fmt: skip
        if present:
            notes.append(text)
    quant = req.weight_quantization
    if quant is not None and quant != "fp8":
        notes.append(f"--quantization {SGLANG_QUANTIZATION.get(quant, quant)} needs a checkpoint stored in that "
                     "format (SGLang quantizes a 16-bit checkpoint at load only to fp8)")  # fmt: skip
    return notes


def sglang_command(req: DeploymentRequest) -> SGLangCommand:
    """The launch command for ``req`` (see the module doc)."""
    argv = [*LAUNCHER, "--model-path", model_path(req), "--tp-size", str(req.tp_size)]
    for field, flag in _FLAGS:
        value = getattr(req, field)
        if value is None or value is False or (field in _ONE_DEFAULT and value == 1):
            continue
        if _WORD_DEFAULT.get(field) == value:
            continue
        argv += [flag] if value is True else [flag, _value(value)]
    if req.device != "cuda":
        argv += ["--device", req.device]
    if req.weight_quantization is not None:
        argv += ["--quantization", SGLANG_QUANTIZATION.get(req.weight_quantization, req.weight_quantization)]
    argv += _extras(req.launch_extras)
    env = (f"{OVERRIDE_ENV}=1",) if req.allow_context_length_override else ()
    argv, missing = _release_spelling(req, argv)
    notes = _notes(req)
    if missing:
        notes.append(f"{req.release.label} has no {', '.join(missing)} (a later release's flag)")
    if req.release != NEWEST_SGLANG:
        notes.append(plan_again(req))
    return SGLangCommand(env, tuple(argv), tuple(notes))


def plan_again(req: DeploymentRequest) -> str:
    """How to plan the command again for the request's release (not the newest, whose launch
    rules a bare ``kvstrategies plan -- <command>`` applies): ``plan it again: kvstrategies plan
    --gpu G --sglang-version V -- <this command>``."""
    gpu = [] if req.gpu is None else ["--gpu", req.gpu.name]
    words = ["plan", *gpu, "--sglang-version", req.release.text, "--"]
    return f"plan it again: kvstrategies {' '.join(shlex.quote(word) for word in words)} <this command>"


def _release_spelling(req: DeploymentRequest, argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` in the flags of the request's release: before ``--attn-dp-size`` existed (0.5.22)
    attention DP is ``--dp-size N --enable-dp-attention``; any other flag the release lacks is
    returned to be noted (:func:`.launch_command.release_flags`). The newest release has every flag
    the planner writes (its flag table is the one they are written from), so its table is not loaded."""
    if req.release == NEWEST_SGLANG:
        return argv, []
    from .pasted_command import release_flags

    flags = release_flags(req.release)
    out = list(argv)
    for new, old in RENAMED_SERVER_ARGUMENTS:  # a release before a rename spells the old flag
        new_flag, old_flag = "--" + new.replace("_", "-"), "--" + old.replace("_", "-")
        if new_flag in out and new_flag not in flags and old_flag in flags:
            out[out.index(new_flag)] = old_flag
    if "--attn-dp-size" in out and "--attn-dp-size" not in flags and req.dp_replicas == 1:
        at = out.index("--attn-dp-size")
        out[at : at + 2] = ["--dp-size", out[at + 1], "--enable-dp-attention"]
    return out, [arg for arg in out if arg.startswith("--") and arg not in flags]
