"""Server arguments that exist only from some SGLang release on.

A release without the flag cannot be launched with it (its argparse refuses it), so a case field or
planner setting naming it is refused for that release. Each entry is a
:class:`~kvstrategies.core.releases.ReleaseRule` keyed by the ``ServerArgs`` field; the value that
means "not set" is the field's default (``None``, or ``1`` for ``dcp_size``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.releases import EngineRelease, ReleaseRule, span
from ..errors import UnsupportedConfigurationError

_SOURCE = "sglang.srt.server_args.ServerArgs"

#: ``ServerArgs`` field -> the releases that have it
SERVER_ARGUMENT_RULES: Mapping[str, ReleaseRule] = {
    # 0.5.21 added it with DeepSeek-V4's cap mode (field from sglang.srt.arg_groups.fields.schedule, read by
    # pool_configurator.DSV4PoolConfigurator._resolve_swa_prefix_tails)
    "swa_prefix_tails": ReleaseRule(
        "server-arg-swa-prefix-tails", span("0.5.21"), "--swa-prefix-tails exists", _SOURCE
    ),
    "dsv4_attn_backend": ReleaseRule(
        "server-arg-dsv4-attn-backend", span("0.5.20"), "--dsv4-attn-backend exists", _SOURCE
    ),
    # 0.5.14 added the flag (and the launch default ServerArgs fills in); 0.5.13 sizes the rows itself
    "disaggregation_decode_extra_slots": ReleaseRule(
        "server-arg-decode-extra-slots", span("0.5.14"), "--disaggregation-decode-extra-slots exists", _SOURCE
    ),
    # decode context parallelism arrived in 0.5.15; 0.5.14's argparse has no --dcp-size
    "dcp_size": ReleaseRule("server-arg-dcp-size", span("0.5.15"), "--dcp-size exists", _SOURCE),
    # 0.5.2 added Qwen3-Next and with it the Mamba slot count and state dtype
    "max_mamba_cache_size": ReleaseRule(
        "server-arg-max-mamba-cache-size", span("0.5.2"), "--max-mamba-cache-size exists", _SOURCE
    ),
    "mamba_ssm_dtype": ReleaseRule("server-arg-mamba-ssm-dtype", span("0.5.2"), "--mamba-ssm-dtype exists", _SOURCE),
    # 0.5.4 added the ratio of Mamba state to full KV memory (ModelRunner.handle_max_mamba_cache); 0.5.3 reserves
    # max_mamba_cache_size slots (default 512) whatever the budget
    "mamba_full_memory_ratio": ReleaseRule(
        "server-arg-mamba-full-memory-ratio", span("0.5.4"), "--mamba-full-memory-ratio exists", _SOURCE
    ),
    # 0.5.7 added the Mamba radix strategies (--mamba-scheduler-strategy, renamed in 0.5.14); 0.5.6 has no extra buffer
    "mamba_radix_cache_strategy": ReleaseRule(
        "server-arg-mamba-strategy", span("0.5.7"), "--mamba-scheduler-strategy exists", _SOURCE
    ),
}
#: ``(ServerArgs field, value)`` -> the releases whose argparse ``choices`` hold the value
SERVER_ARGUMENT_VALUE_RULES: Mapping[tuple[str, str], ReleaseRule] = {
    # 0.5.13 added the lazy extra buffer to MAMBA_SCHEDULER_STRATEGY_CHOICES
    ("mamba_radix_cache_strategy", "extra_buffer_lazy"): ReleaseRule(
        "server-arg-extra-buffer-lazy", span("0.5.13"), "--mamba-radix-cache-strategy extra_buffer_lazy exists",
        _SOURCE + " (MAMBA_SCHEDULER_STRATEGY_CHOICES)",
    ),
    # 0.5.9 added trtllm to the NSA (DSA) backend choices (NSA_CHOICES)
    ("dsa_prefill_backend", "trtllm"): ReleaseRule(
        "server-arg-dsa-prefill-trtllm", span("0.5.9"), "--nsa-prefill-backend trtllm exists",
        _SOURCE + " (NSA_CHOICES)",
    ),
    ("dsa_decode_backend", "trtllm"): ReleaseRule(
        "server-arg-dsa-decode-trtllm", span("0.5.9"), "--nsa-decode-backend trtllm exists", _SOURCE + " (NSA_CHOICES)",
    ),
    # 0.5.2 added STANDALONE to SpeculativeAlgorithm; 0.5.1's from_string has no such name (KeyError: 'STANDALONE')
    ("speculative_algorithm", "STANDALONE"): ReleaseRule(
        "server-arg-speculative-standalone", span("0.5.2"), "--speculative-algorithm STANDALONE exists",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.from_string",
    ),
    # 0.5.3 added NGRAM to SpeculativeAlgorithm; 0.5.2's from_string has no such name (KeyError: 'NGRAM')
    ("speculative_algorithm", "NGRAM"): ReleaseRule(
        "server-arg-speculative-ngram", span("0.5.3"), "--speculative-algorithm NGRAM exists",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.from_string",
    ),
    # 0.5.11 added DFLASH to SpeculativeAlgorithm; 0.5.10's from_string raises "Unknown speculative algorithm name"
    ("speculative_algorithm", "DFLASH"): ReleaseRule(
        "server-arg-speculative-dflash", span("0.5.11"), "--speculative-algorithm DFLASH exists",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.from_string",
    ),
}
#: ServerArgs fields renamed between releases, as ``(new name, old name)``, newest rename first: a caller takes the old
#: name only where the release it speaks to has it and lacks the new one (``mamba_scheduler_strategy`` until 0.5.13;
#: ``nsa_*_backend`` until 0.5.12, ``nsa_prefill`` / ``nsa_decode`` in 0.5.3)
RENAMED_SERVER_ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("mamba_radix_cache_strategy", "mamba_scheduler_strategy"),
    ("dsa_prefill_backend", "nsa_prefill_backend"),
    ("dsa_decode_backend", "nsa_decode_backend"),
    ("dsa_prefill_backend", "nsa_prefill"),
    ("dsa_decode_backend", "nsa_decode"),
)
#: fields whose value SGLang reads case-blind (``SpeculativeAlgorithm.from_string`` upper-cases the name)
_UPPER_CASED = frozenset({"speculative_algorithm"})
#: the value of a field that means "not given"
_UNSET: Mapping[str, object] = {"dcp_size": 1, "mamba_radix_cache_strategy": "auto", "mamba_full_memory_ratio": 0.9}


def is_unset(key: str, value: object) -> bool:
    """``value`` of ServerArgs field ``key`` means "not given" (its default), so a release without the field takes
    the launch as well."""
    return value is None or (key in _UNSET and value == _UNSET[key])


def _choice(key: str, value: str) -> str:
    return value.strip().upper() if key in _UPPER_CASED else value


def require_server_argument(key: str, value: object, release: EngineRelease, *, what: str) -> None:
    """Refuse ``value`` of ServerArgs field ``key`` if ``release`` has no such argument (``what``: the input)."""
    valued = SERVER_ARGUMENT_VALUE_RULES.get((key, _choice(key, value))) if isinstance(value, str) else None
    if valued is not None and not valued.holds(release):
        raise UnsupportedConfigurationError(
            f"{what}: {release.label}'s --{key.replace('_', '-')} has no choice {value!r} ({valued.source}; it exists "
            f"in {valued.span.describe()}); pick another value or a later release (--sglang-version)"
        )
    rule = SERVER_ARGUMENT_RULES.get(key)
    if rule is None or value is None or value == _UNSET.get(key) or rule.holds(release):
        return
    raise UnsupportedConfigurationError(
        f"{what}: {release.label} has no --{key.replace('_', '-')} server argument ({_SOURCE}; it exists in "
        f"{rule.span.describe()}); drop it or pick a later release (--sglang-version)"
    )
