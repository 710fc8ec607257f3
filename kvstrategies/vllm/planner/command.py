"""Read a pasted ``vllm serve MODEL ...`` command into ``kvstrategies plan --engine vllm`` flags.

``kvstrategies plan --gpu H100 -- vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4 ...``
(also ``python -m vllm.entrypoints.openai.api_server --model X ...``, a leading ``VAR=value``
environment, or the whole command as one quoted string). vLLM's argparse is followed where it
matters (``vllm/utils/argparse_utils.py FlexibleArgumentParser``): underscores in a flag's name
read as dashes (``--max_model_len``), ``--flag=value``, ``-O3`` is ``--optimization-level 3``,
``--section.key value`` sets one key of a JSON option (classified as ``--section``), a unique
prefix of a flag is that flag, and ``--model`` may stand for the positional model. Every flag is
in one class of :mod:`.flag_classes` (names from :mod:`kvstrategies.vllm.tables.flags`): planned,
refused by name, or listed as ignored. A flag vLLM does not have is an error naming it.

The environment: ``VLLM_*`` variables that change memory are refused by name (:data:`REFUSED_ENV`),
the reviewed harmless ones (:data:`HARMLESS_ENV`) and other variables are listed as ignored; a
``VLLM_*`` name in neither list is refused as not reviewed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.quantization_names import quantization_for
from ...core.releases import NEWEST_VLLM
from ...errors import KVCacheConfigError
from ...sglang.pasted_command import LaunchCommand, flag_values, next_option, split_command, strip_environment
from ..tables.flags import VLLM_SERVE_FLAGS
from .flag_classes import NO_EFFECT, PLANNED, REFUSED, REFUSED_UNLESS
from .values import human_readable_int

_PYTHON = re.compile(r"^(.*/)?python[\d.]*$")
_VLLM = re.compile(r"^(.*/)?vllm$")
_SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)

#: ``VLLM_*`` variables that change what the KV budget or cache is (refused: not modelled)
REFUSED_ENV: dict[str, str] = {
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "whether the CUDA-graph estimate is deducted from the budget",
    "VLLM_ENABLE_STARTUP_PLAN": "a persisted KV budget applied in place of profiling (vllm/v1/worker/startup_plan.py)",
    "VLLM_PP_LAYER_PARTITION": "the layers each pipeline stage holds",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "a max_model_len above the model's",
    "VLLM_ATTENTION_BACKEND": "the attention backend, hence the block size",
    "VLLM_USE_FLASHINFER_SAMPLER": "the sampler, whose buffers the profile run measures",
    "VLLM_USE_V2_MODEL_RUNNER": "the model runner (in-flight batches, profile run)",
}
#: ``VLLM_*`` variables reviewed as not changing the KV answer (logging, telemetry, networking, caches on disk)
HARMLESS_ENV = frozenset({
    "VLLM_USE_V1", "VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING", "VLLM_LOGGING_CONFIG_PATH", "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK", "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_HOST_IP", "VLLM_PORT", "VLLM_API_KEY", "VLLM_CACHE_ROOT",
    "VLLM_CONFIG_ROOT", "VLLM_USE_MODELSCOPE", "VLLM_RPC_TIMEOUT", "VLLM_ENGINE_ITERATION_TIMEOUT_S",
    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "VLLM_SERVER_DEV_MODE", "VLLM_DISABLE_COMPILE_CACHE", "VLLM_NCCL_SO_PATH",
})  # fmt: skip


#: planned flags whose values vLLM's argparse converts with ``int`` (``vllm/engine/arg_utils.py
#: EngineArgs.add_cli_args``; ``--kv-cache-memory-bytes`` and ``--max-num-batched-tokens`` take
#: ``human_readable_int``): the ``plan`` flags read more spellings (``40GiB``, ``1k``), which a pasted
#: command must not, since vLLM refuses them
_INT_VALUED = frozenset({"--max-num-seqs", "--block-size"})
_HUMAN_INT_VALUED = frozenset({"--kv-cache-memory-bytes", "--max-num-batched-tokens"})


def _check_value(canon: str, option: str, values: list[str]) -> None:
    """A planned flag's value as vLLM's argparse reads it: refused, naming the flag, when vLLM refuses it."""
    for value in values:
        if canon in _HUMAN_INT_VALUED:
            human_readable_int(value, option)
        elif canon in _INT_VALUED:
            try:
                int(value)
            except ValueError:
                raise KVCacheConfigError(
                    f"{option} takes an integer (vLLM's argparse: type=int), got {value!r:.40}; fix the value"
                ) from None


def _launcher_end(tokens: list[str]) -> int | None:
    """Where the server arguments start, when ``tokens`` launch vLLM's OpenAI server; else ``None``."""
    if len(tokens) >= 2 and _VLLM.match(tokens[0]) and tokens[1] == "serve":
        return 2
    if len(tokens) >= 3 and _PYTHON.match(tokens[0]) and tokens[1] == "-m" and tokens[2] in _SERVER_MODULES:
        return 3
    return None


def is_vllm_command(command: Sequence[str]) -> bool:
    """Whether a pasted command runs vLLM (``vllm ...`` or ``python -m vllm...``), not SGLang."""
    _, tokens = strip_environment(split_command(command))
    if not tokens:
        return False
    if _VLLM.match(tokens[0]):
        return True
    return len(tokens) >= 3 and _PYTHON.match(tokens[0]) is not None and tokens[1] == "-m" and (
        tokens[2] == "vllm" or tokens[2].startswith("vllm."))  # fmt: skip


def canonical_flag(option: str) -> tuple[str, str]:
    """``(canonical vLLM option, arity)`` of an option (underscores read as dashes) or a unique prefix."""
    name = option.replace("_", "-") if option.startswith("--") else option
    if name in VLLM_SERVE_FLAGS:
        return VLLM_SERVE_FLAGS[name]
    matches = {VLLM_SERVE_FLAGS[f] for f in VLLM_SERVE_FLAGS if f.startswith(name) and f.startswith("--")}
    if len(matches) == 1:
        return matches.pop()
    if matches:
        shown = ", ".join(sorted(m[0] for m in matches)[:5])
        raise KVCacheConfigError(f"{option} is ambiguous among vLLM's flags ({shown}); spell it out")
    import difflib

    close = difflib.get_close_matches(name, [f for f in VLLM_SERVE_FLAGS if f.startswith("--")], n=1, cutoff=0.8)
    guess = f" (did you mean {close[0]}?)" if close else ""
    raise KVCacheConfigError(
        f"{option} is not a {NEWEST_VLLM.label} `vllm serve` flag, so vLLM would refuse the command{guess}; "
        "kvstrategies' own flags (--gpu, --request-length, --json, ...) go before the `--`"
    )


def _normalize(args: list[str]) -> list[str]:
    """``-O3`` / ``-O=3`` as ``--optimization-level 3`` (vLLM's parse_args)."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("-O") and not arg.startswith("--") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        elif arg == "-O":
            out.append("--optimization-level")
        else:
            out.append(arg)
    return out


def _check_refusals(canon: str, option: str, values: list[str]) -> None:
    if canon in REFUSED:
        raise KVCacheConfigError(
            f"{option} changes {REFUSED[canon]}, which the vLLM plan does not model; plan without it and allow for it, "
            "or give the KV budget directly with --kv-cache-memory-bytes"
        )
    if canon in REFUSED_UNLESS:
        what, harmless = REFUSED_UNLESS[canon]
        if any(value not in harmless for value in values):
            raise KVCacheConfigError(
                f"{option} {' '.join(values)} changes {what}, which the vLLM plan does not model "
                f"({' / '.join(harmless)} change nothing); plan without it, or give the KV budget directly with "
                "--kv-cache-memory-bytes"
            )


def _environment(env: list[str], ignored: list[str]) -> None:
    for assignment in env:
        name = assignment.partition("=")[0]
        if name in REFUSED_ENV:
            raise KVCacheConfigError(
                f"{name} in front of the command changes {REFUSED_ENV[name]}, which the vLLM plan does not model; "
                "plan without it"
            )
        if name.startswith("VLLM_") and name not in HARMLESS_ENV:
            raise KVCacheConfigError(
                f"{name} in front of the command is not reviewed for its effect on vLLM's memory; plan without it"
            )
        ignored.append(assignment)


def translate_vllm(command: Sequence[str]) -> LaunchCommand:
    """Translate a pasted ``vllm serve`` command into ``plan --engine vllm`` arguments (module doc)."""
    env, tokens = strip_environment(split_command(command))
    start = _launcher_end(tokens)
    if start is None:
        shown = " ".join(tokens[:3])
        raise KVCacheConfigError(
            f"the pasted command runs `{shown:.60}`, not vLLM's server; paste `vllm serve MODEL ...` or "
            "`python -m vllm.entrypoints.openai.api_server --model MODEL ...`"
        )
    rest = _normalize(tokens[start:])
    out: list[str] = ["--engine", "vllm"]
    ignored: list[str] = []
    _environment(env, ignored)
    model: str | None = None
    if start == 2 and rest and not rest[0].startswith("-"):
        model = rest.pop(0)  # vllm serve MODEL
    i = 0
    while i < len(rest):
        option, inline, i = next_option(rest, i)
        base = option.split(".", 1)[0] if option.startswith("--") else option  # --compilation-config.mode 3
        canon, arity = canonical_flag(base)
        if base != option and canon == "--speculative-config":
            raise KVCacheConfigError(f"{option}: give --speculative-config as one JSON object (method, "
                                     "num_speculative_tokens) to plan it")  # fmt: skip
        if base != option:
            arity = "1"
        values, i = flag_values(rest, i, option, arity, inline, engine="vLLM")
        _check_refusals(canon, option, values)
        if canon in NO_EFFECT or canon in REFUSED_UNLESS:  # harmless as given
            ignored.append(option)
            continue
        target = PLANNED[canon]  # every flag is classified (tests/vllm/test_vllm_command.py)
        _check_value(canon, option, values)
        if target == "MODEL":
            if model is not None and values and values[0] != model:
                raise KVCacheConfigError(f"two models in the pasted command: {model!r} and --model {values[0]!r}")
            model = values[0] if values else model
            continue
        if canon == "--quantization":
            out += ["--weight-quantization", quantization_for(values[0] if values else "", "per GPU")]
            continue
        out += [target, *values]
    if model is None or not model.strip():
        raise KVCacheConfigError("the pasted vLLM command names no model (vllm serve MODEL ...)")
    notes = []
    if ignored:
        notes.append(f"ignored from the vLLM command (no effect on the KV answer): {', '.join(ignored)}")
    return LaunchCommand(("--model-path", model, *out), tuple(ignored), tuple(notes))
