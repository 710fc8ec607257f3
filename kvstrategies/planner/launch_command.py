"""Read a pasted SGLang launch command into ``kvstrategies plan`` flags.

``kvstrategies plan [--gpu H100 ...] -- python -m sglang.launch_server --model-path X --tp-size 8 ...``
(also ``python3 -m sglang.launch_server``, ``sglang serve``, a leading ``VAR=value`` environment,
or the whole command as one quoted string). Every SGLang 0.5.23 server flag falls in one of
three classes (flag names from :mod:`.sglang_flags`, abbreviations resolved as SGLang's
argparse does):

* modelled (:data:`MODELLED`): passed on to ``plan`` in its SGLang spelling;
* not touching memory: ignored and listed in the report;
* touching memory but not modelled (:data:`NOT_MODELLED`): an error naming the flag.

A flag SGLang does not have is an error too (SGLang would refuse the command).
``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` in the environment becomes
``--allow-context-length-override``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import KVCacheConfigError
from ..quantization_names import QUANTIZATION
from .sglang_flags import SGLANG_SERVER_FLAGS

#: SGLang flags ``plan`` understands (canonical SGLang spelling; ``plan`` accepts them verbatim).
MODELLED = frozenset(
    {
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--dp-size",
        "--attn-dp-size",
        "--enable-dp-attention",
        "--dcp-size",
        "--dtype",
        "--quantization",
        "--device",
        "--mem-fraction-static",
        "--max-total-tokens",
        "--max-running-requests",
        "--max-prefill-tokens",
        "--context-length",
        "--kv-cache-dtype",
        "--page-size",
        "--chunked-prefill-size",
        "--attention-backend",
        "--prefill-attention-backend",
        "--decode-attention-backend",
        "--swa-full-tokens-ratio",
        "--disable-hybrid-swa-memory",
        "--mamba-radix-cache-strategy",
        "--disable-radix-cache",
        "--disable-cuda-graph",
        "--disable-prefill-cuda-graph",
        "--disable-overlap-schedule",
        "--cuda-graph-max-bs-decode",
        "--speculative-algorithm",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--moe-a2a-backend",
        "--disaggregation-mode",
        "--enable-multimodal",
        "--language-only",
        "--ep-size",
        "--moe-runner-backend",
    }
)

#: SGLang flags that change what a GPU holds but that the planner does not model: refused.
NOT_MODELLED: dict[str, str] = {
    "--cpu-offload-gb": "weights offloaded to the CPU",
    "--offload-group-size": "layer offloading",
    "--offload-mode": "layer offloading",
    "--offload-num-in-group": "layer offloading",
    "--offload-prefetch-step": "layer offloading",
    "--ple-offload-embedding": "embedding offloading",
    "--enable-lora": "LoRA adapter memory",
    "--lora-paths": "LoRA adapter memory",
    "--max-loras-per-batch": "LoRA adapter memory",
    "--max-lora-rank": "LoRA adapter memory",
    "--max-loaded-loras": "LoRA adapter memory",
    "--uno-lora-path": "LoRA adapter memory",
    "--enable-hierarchical-cache": "hierarchical cache layout",
    "--enable-unified-memory": "a unified KV memory pool",
    "--enable-kv-cache-sharding": "KV cache sharding",
    "--prefill-only-disable-kv-cache": "no KV cache allocation",
    "--json-model-override-args": "a rewritten model config",
    "--max-mamba-cache-size": "the Mamba state pool size",
    "--mamba-full-memory-ratio": "the Mamba / full-attention memory split",
    "--mamba-ssm-dtype": "the Mamba state dtype",
    "--speculative-draft-model-path": "a separate draft model's weights and KV pool",
    "--speculative-draft-kv-cache-dtype": "the draft model's KV dtype",
    "--speculative-draft-model-quantization": "the draft model's weights",
    "--moe-dense-tp-size": "dense-layer weight sharding",
    "--moe-dp-size": "MoE weight sharding",
    "--attn-cp-size": "context-parallel KV sharding",
    "--enable-paged-experts": "expert weights paged in and out",
    "--paged-experts-num-resident": "expert weights paged in and out",
    "--dsa-prefill-backend": "DSA backend-specific KV buffers",
    "--dsa-decode-backend": "DSA backend-specific KV buffers",
    "--dsv4-attn-backend": "DeepSeek-V4 backend-specific KV buffers",
    "--c128-page-size": "the NPU DeepSeek-V4 C128 page",
    "--quantize-and-serve": "weights quantized at load",
    "--modelopt-quant": "weights quantized at load",
}

#: CUDA-graph sizing flags: they change SGLang's default ``--mem-fraction-static`` (its graph
#: reserve) in ways not modelled, so they are refused unless the fraction is given.
GRAPH_RESERVE_FLAGS = frozenset(
    {
        "--cuda-graph-max-bs-prefill",
        "--cuda-graph-bs-decode",
        "--cuda-graph-bs-prefill",
        "--cuda-graph-config",
        "--cuda-graph-max-seq-len-prefill",
        "--cuda-graph-prefill-max-context",
        "--disable-decode-cuda-graph",
    }
)

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LAUNCHERS = ("sglang.launch_server", "sglang.launch_server.py")
OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
AITER_ENV = "SGLANG_USE_AITER"  # SGLang's ROCm images set it to 1; =0 turns the aiter MoE padding off


@dataclass(frozen=True)
class LaunchCommand:
    """A translated launch command: the ``plan`` arguments, what was ignored, and notes."""

    plan_args: tuple[str, ...]
    ignored: tuple[str, ...]
    notes: tuple[str, ...]


def _strip_launcher(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``(environment assignments, server arguments)`` of a launch command."""
    env = []
    while tokens and _ENV.match(tokens[0]):
        env.append(tokens.pop(0))
    if tokens and tokens[0] == "env":  # `env VAR=1 python -m ...`
        tokens.pop(0)
        while tokens and _ENV.match(tokens[0]):
            env.append(tokens.pop(0))
    if len(tokens) >= 3 and re.match(r"^(.*/)?python[\d.]*$", tokens[0]) and tokens[1] == "-m":
        if tokens[2] not in _LAUNCHERS:
            raise KVCacheConfigError(
                f"the pasted command runs `python -m {tokens[2]}`, not SGLang's server; paste a "
                "`python -m sglang.launch_server ...` or `sglang serve ...` command"
            )
        return env, tokens[3:]
    if len(tokens) >= 2 and re.match(r"^(.*/)?sglang$", tokens[0]) and tokens[1] == "serve":
        return env, tokens[2:]
    if tokens and re.match(r"^(.*/)?sglang$", tokens[0]):
        raise KVCacheConfigError("the pasted command runs `sglang` without `serve`; paste the server command")
    if tokens and not tokens[0].startswith("-"):
        raise KVCacheConfigError(
            f"the pasted command starts with {tokens[0]!r}; paste `python -m sglang.launch_server ...` or "
            "`sglang serve ...` (or only its flags)"
        )
    return env, tokens


def canonical_flag(option: str) -> tuple[str, str]:
    """``(canonical SGLang option, arity)`` for an option or a unique prefix of one."""
    if option in SGLANG_SERVER_FLAGS:
        return SGLANG_SERVER_FLAGS[option]
    matches = {SGLANG_SERVER_FLAGS[name] for name in SGLANG_SERVER_FLAGS if name.startswith(option)}
    if len(matches) == 1:
        return matches.pop()
    if matches:
        raise KVCacheConfigError(
            f"{option} is ambiguous among SGLang's flags ({', '.join(sorted(m[0] for m in matches)[:5])}); spell it out"
        )
    raise KVCacheConfigError(
        f"{option} is not an SGLang 0.5.23 server flag, so SGLang would refuse the command; kvstrategies' own flags "
        "(--gpu, --request-length, --json, ...) go before the `--`"
    )


def translate(command: Sequence[str]) -> LaunchCommand:
    """Translate a launch command (tokens, or one string) into ``plan`` arguments."""
    tokens = list(command)
    if len(tokens) == 1 and " " in tokens[0].strip():
        tokens = shlex.split(tokens[0])
    tokens = [t for t in tokens if t != "\\"]
    env, rest = _strip_launcher(tokens)
    out: list[str] = []
    ignored: list[str] = []
    notes: list[str] = []
    for assignment in env:
        name, _, value = assignment.partition("=")
        if name == OVERRIDE_ENV and value.strip().lower() in ("1", "true", "yes", "on"):
            out.append("--allow-context-length-override")
        elif name == AITER_ENV and value.strip().lower() in ("0", "false", "no", "off"):
            out.append("--no-rocm-aiter")
        else:
            ignored.append(assignment)
    given = {canonical_flag(t.split("=", 1)[0])[0] for t in rest if t.startswith("--")}
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not token.startswith("-"):
            raise KVCacheConfigError(f"unexpected {token!r} in the pasted command (a value without a flag)")
        option, eq, inline = token.partition("=")
        canon, arity = canonical_flag(option)
        values = [inline] if eq else []
        if not eq and arity != "0":
            while i < len(rest) and not rest[i].startswith("--"):
                values.append(rest[i])
                i += 1
                if arity in ("1", "?"):
                    break
            if arity in ("1", "+") and not values:
                raise KVCacheConfigError(f"{option} in the pasted command needs a value")
        if canon in NOT_MODELLED:
            hint = (
                "plan the target without it, with the draft's layers (--speculative-draft-layers, before `--`) "
                "and the draft's weights added to --weight-bytes"
                if canon.startswith("--speculative-draft")
                else "plan without it and allow for it, or give the KV budget directly with --available-bytes"
            )
            raise KVCacheConfigError(
                f"{option} changes GPU memory ({NOT_MODELLED[canon]}) in a way kvstrategies does not model; {hint}"
            )
        if canon in GRAPH_RESERVE_FLAGS and "--mem-fraction-static" not in given:
            raise KVCacheConfigError(
                f"{option} changes SGLang's default --mem-fraction-static (its CUDA-graph reserve) in a way "
                "kvstrategies does not model; add --mem-fraction-static (as SGLang logs it) to the command"
            )
        if canon not in MODELLED:
            ignored.append(option)
            continue
        if canon == "--quantization":
            value = values[0] if values else ""
            if value not in QUANTIZATION:
                raise KVCacheConfigError(
                    f"--quantization {value} is not modelled by the weight estimate; give --weight-bytes per rank "
                    f"instead (modelled: {', '.join(sorted(QUANTIZATION))})"
                )
            out += ["--weight-quantization", QUANTIZATION[value]]
            continue
        out += [canon, *values]
    if ignored:
        notes.append(f"ignored from the launch command (no effect on the memory plan): {', '.join(ignored)}")
    return LaunchCommand(tuple(out), tuple(ignored), tuple(notes))
