"""The bounds of the case, knob and release checks, each at its edge: the last value accepted and
the first refused (the minimums are SGLang's: a request cap, a context and a Mamba slot count of
at least 1, zero extra decode slots or prefix tails allowed; the rest are the project's own
limits on what a case may carry, ``kvstrategies.sglang.knobs`` and ``kvstrategies.core.releases``)."""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies.case import parse_case
from kvstrategies.core.releases import NEWEST_VLLM, OLDEST_SGLANG, SGLANG_RELEASES, ByRelease, all_rules, parse_release
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.sglang.knobs import MAX_CASE_KNOBS, MAX_KNOB_VALUE_CHARS, check_case_env, knob_value

BASE: dict[str, Any] = {"preset": "llama-3.1-8b", "available_bytes": 2**34}


def test_the_bounds_are_the_documented_numbers() -> None:
    assert (MAX_KNOB_VALUE_CHARS, MAX_CASE_KNOBS) == (4096, 64)
    assert OLDEST_SGLANG.text == "0.5.1" == SGLANG_RELEASES[0].text


@pytest.mark.parametrize(
    ("field", "lowest"),
    [("max_running_requests", 1), ("max_tokens", 1), ("context_length", 1), ("max_mamba_cache_size", 1),
     ("swa_prefix_tails", 0), ("disaggregation_decode_extra_slots", 0)],
)  # fmt: skip
def test_case_scheduling_minimums(field: str, lowest: int) -> None:
    """The smallest value each field takes is accepted and carried as given; one less is refused
    naming the field."""
    ctx = parse_case({**BASE, field: lowest}).settings
    name = {"max_tokens": "max_total_tokens"}.get(field, field)
    assert getattr(ctx.scheduling, name) == lowest
    with pytest.raises(KVCacheConfigError, match=field):
        parse_case({**BASE, field: lowest - 1})


@pytest.mark.parametrize("field", ["eagle_draft_num_layers", "eagle_draft_swa_num_layers"])
def test_draft_layer_counts_may_be_zero(field: str) -> None:
    ctx = parse_case({**BASE, "speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4, field: 0}).settings
    assert getattr(ctx.speculative, field) == 0
    with pytest.raises(KVCacheConfigError, match=field):
        parse_case({**BASE, "speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4, field: -1})


def test_swa_eviction_interval_bound() -> None:
    """SGLANG_SWA_EVICTION_INTERVAL up to 2**20 tokens is carried; 2**20 + 1 is refused as absurd."""
    ok = parse_case({**BASE, "env": {"SGLANG_SWA_EVICTION_INTERVAL": str(2**20)}}).settings
    assert ok.knobs.swa_eviction_interval == 2**20
    with pytest.raises(KVCacheConfigError, match="SGLANG_SWA_EVICTION_INTERVAL=1048577 is absurd"):
        parse_case({**BASE, "env": {"SGLANG_SWA_EVICTION_INTERVAL": str(2**20 + 1)}})


def test_knob_value_length_bound() -> None:
    assert knob_value("SGLANG_X", "a" * 4096, "env") == "a" * 4096
    with pytest.raises(KVCacheConfigError, match="at most 4096 characters"):
        knob_value("SGLANG_X", "a" * 4097, "env")


def test_case_env_knob_count_bound() -> None:
    """64 entries reach the per-name checks (the first unknown name is refused); 65 are refused by count."""
    with pytest.raises(KVCacheConfigError) as at_limit:
        check_case_env({f"NOT_A_KNOB_{i}": "1" for i in range(64)})
    assert "more than 64" not in str(at_limit.value) and "NOT_A_KNOB_" in str(at_limit.value)
    with pytest.raises(KVCacheConfigError, match="sets 65 knobs, more than 64"):
        check_case_env({f"NOT_A_KNOB_{i}": "1" for i in range(65)})


def test_release_string_length_bound() -> None:
    """Surrounding spaces are allowed up to 40 characters in all; 41 is refused before any parse."""
    assert parse_release("0.5.20".ljust(40)).text == "0.5.20"
    with pytest.raises(KVCacheConfigError, match="must be a release string"):
        parse_release("0.5.20".ljust(41))


def test_an_unknown_release_names_its_engine_s_flag() -> None:
    """A vLLM release the project does not model names --vllm-version (not SGLang's flag); a field given wins."""
    with pytest.raises(KVCacheConfigError, match=r"^--vllm-version '0.27.0' is not a vLLM release"):
        parse_release("0.27.0", "vllm")
    with pytest.raises(KVCacheConfigError, match=r"^--sglang-version '0.4.0' is not an SGLang release"):
        parse_release("0.4.0")
    with pytest.raises(KVCacheConfigError, match=r"^vllm_version '0.27.0' is not"):
        parse_release("0.27.0", "vllm", field="vllm_version")


def test_a_three_step_value_takes_each_step_over_its_own_releases() -> None:
    """Steps at 0.5.11, 0.5.17 and 0.5.21: the rule of each step ends the release before the next."""
    value = ByRelease("test-three-steps", (("0.5.1", "a"), ("0.5.17", "b"), ("0.5.21", "c")), "a test value",
                      "nowhere", topic="test")  # fmt: skip
    seen = {release.text: value.at(release) for release in SGLANG_RELEASES}
    assert seen == {"0.5.1": "a", "0.5.2": "a", "0.5.3": "a",
                    "0.5.4": "a", "0.5.5": "a", "0.5.6": "a", "0.5.7": "a", "0.5.8": "a", "0.5.9": "a",
                    "0.5.10": "a", "0.5.11": "a", "0.5.12": "a", "0.5.13": "a", "0.5.14": "a", "0.5.15": "a",
                    "0.5.16": "a",
                    "0.5.17": "b", "0.5.18": "b", "0.5.19": "b", "0.5.20": "b", "0.5.21": "c", "0.5.22": "c",
                    "0.5.23": "c"}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="test-three-steps is a value of sglang releases"):
        value.at(NEWEST_VLLM)
    spans = {rule.key: rule.span.describe() for rule in all_rules() if rule.key.startswith("test-three-steps=")}
    assert spans == {"test-three-steps='a'": "0.5.1 to 0.5.16", "test-three-steps='b'": "0.5.17 to 0.5.20",
                     "test-three-steps='c'": "0.5.21 and later"}  # fmt: skip


def test_shown_describes_integers_past_256_bits_by_their_size() -> None:
    """2**256 - 1 has 256 bits and is printed (cut to the width); 2**256 has 257 and is described:
    int(257 * 0.30103) + 1 = 78 digits."""
    from kvstrategies.core.validate import shown

    assert shown(2**256 - 1, width=200) == str(2**256 - 1)
    assert shown(2**256) == "<an integer of about 78 digits>"
    assert shown(-(2**256)) == "-<an integer of about 78 digits>"


def test_shown_cuts_at_the_width() -> None:
    """repr of 78 letters is 80 characters: printed whole; of 79 letters, 81: cut to 77 + '...'."""
    from kvstrategies.core.validate import shown

    assert shown("x" * 78) == repr("x" * 78)
    assert shown("x" * 79) == repr("x" * 79)[:77] + "..."
    assert len(shown("x" * 79)) == 80


def test_integers_of_up_to_1024_bits_pass_the_scan() -> None:
    from kvstrategies.core.validate import check_sane_ints

    check_sane_ints({"a": [2**1024 - 1]}, "case")  # 1,024 bits: accepted
    with pytest.raises(KVCacheConfigError, match=r"case field 'a\[0\]' is <an integer of about 309 digits>"):
        check_sane_ints({"a": [2**1024]}, "case")  # 1,025 bits: int(1025 * 0.30103) + 1 = 309 digits


def test_check_int_takes_zero_by_default() -> None:
    from kvstrategies.core.validate import check_int

    assert check_int(0, "x") == 0
    with pytest.raises(KVCacheConfigError, match="x"):
        check_int(-1, "x")


def test_pool_request_count_minimum() -> None:
    assert parse_case({**BASE, "pool_max_running_requests": 1}).pool_max_running_requests == 1
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests"):
        parse_case({**BASE, "pool_max_running_requests": 0})


def test_pool_mamba_slot_minimum() -> None:
    assert parse_case({**BASE, "pool_max_mamba_cache_size": 1}).pool_max_mamba_cache_size == 1
    with pytest.raises(KVCacheConfigError, match="pool_max_mamba_cache_size"):
        parse_case({**BASE, "pool_max_mamba_cache_size": 0})


def test_the_huge_int_scan_looks_at_a_bounded_number_of_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan counts the values it pops, the container itself included, and stops at the bound
    (a config has a few thousand values; a hostile one cannot make a scan loop forever). The
    stack pops the last element first: in ``[huge, 0]`` the list, ``0`` and then ``huge`` are the
    values 1, 2 and 3."""
    from kvstrategies.core import validate
    from kvstrategies.core.validate import check_sane_ints

    monkeypatch.setattr(validate, "_MAX_SCANNED", 3)
    with pytest.raises(KVCacheConfigError, match=r"case field '\[0\]' is <an integer of about"):
        check_sane_ints([2**1024, 0], "case")  # the third value: scanned, and its place named
    check_sane_ints([2**1024, 0, 0], "case")  # the fourth value: past the bound, not scanned
    monkeypatch.setattr(validate, "_MAX_SCANNED", 4)
    with pytest.raises(KVCacheConfigError, match=r"case field '\[0\]'"):
        check_sane_ints([2**1024, 0, 0], "case")


def test_a_run_reads_at_most_the_documented_number_of_case_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate_case_files`` takes 100,000 files and refuses the 100,001st before reading it
    (the files themselves stubbed: only the count is under test)."""
    from kvstrategies import case_validation

    read: list[object] = []
    monkeypatch.setattr(case_validation, "read_json_object", lambda path, what: read.append(path) or {})
    monkeypatch.setattr(case_validation, "validate_case_document", lambda data, where: data)
    paths: Any = [f"case-{i}.json" for i in range(100_001)]  # names only: nothing is read
    assert len(case_validation.validate_case_files(paths[:100_000])) == 100_000
    read.clear()
    with pytest.raises(KVCacheConfigError, match="more than 100,000 case files; run them in batches"):
        case_validation.validate_case_files(paths)
    assert len(read) == 100_000  # the 100,001st is refused unread


@pytest.mark.parametrize(("raw", "interval"), [("1", 1), ("0", 1), ("-5", 1), ("2", 2)])
def test_swa_eviction_interval_is_at_least_one(raw: str, interval: int) -> None:
    """``max(1, SGLANG_SWA_EVICTION_INTERVAL)`` (sglang.srt.model_executor.pool_configurator,
    the SWA request cap; sglang.srt.managers.schedule_batch): 0 or less evicts every step."""
    settings = parse_case({**BASE, "env": {"SGLANG_SWA_EVICTION_INTERVAL": raw}}).settings
    assert settings.knobs.swa_eviction_interval == interval


def test_swa_full_tokens_ratio_is_in_zero_to_one() -> None:
    """``swa_full_tokens_ratio`` in (0, 1]: 1.0 is taken, anything above (1.5) or at 0 is refused."""
    for ratio in (1.0, 1, 0.25):
        assert parse_case({**BASE, "swa_full_tokens_ratio": ratio}).settings.scheduling.swa_full_tokens_ratio == ratio
    for ratio in (1.5, 1.0000001, 0, -0.5):
        with pytest.raises(KVCacheConfigError, match=r"swa_full_tokens_ratio must be in \(0, 1\]"):
            parse_case({**BASE, "swa_full_tokens_ratio": ratio})


def test_the_scan_bound_is_two_million_values() -> None:
    """A value past the 2,000,000th is not looked at (the list itself is the first, its last element
    the second, its first element the 2,000,001st here): that scan ends without a refusal."""
    from kvstrategies.core.validate import check_sane_ints

    check_sane_ints([2**1024] + [0] * 1_999_999, "case")


def test_an_int_subclass_is_held_to_the_same_1024_bits() -> None:
    """An ``int`` subclass (an ``IntEnum`` value, a numpy-like wrapper) is scanned like an ``int``."""
    from kvstrategies.core.validate import check_sane_ints

    class Count(int):
        pass

    check_sane_ints({"a": [Count(2**1024 - 1)]}, "case")
    with pytest.raises(KVCacheConfigError, match=r"case field 'a\[0\]'"):
        check_sane_ints({"a": [Count(2**1024)]}, "case")


def test_check_float_takes_its_interval_exactly() -> None:
    """``(low, high]`` by default, ``[low, high]`` with ``low_inclusive``: each edge is taken or
    refused as written, and the message says the interval."""
    from kvstrategies.core.validate import check_float

    assert check_float(1.0, "x", low=0.0, high=1.0) == 1.0  # high is included
    assert check_float(0.0, "x", low=0.0, high=1.0, low_inclusive=True) == 0.0
    with pytest.raises(KVCacheConfigError, match=r"x must be a finite number in \(0.0, 1.0\], got 0.0"):
        check_float(0.0, "x", low=0.0, high=1.0)  # low is excluded
    with pytest.raises(KVCacheConfigError, match=r"in \[0.0, 1.0\], got -0.5"):
        check_float(-0.5, "x", low=0.0, high=1.0, low_inclusive=True)
    with pytest.raises(KVCacheConfigError, match=r"in \(0.0, 1.0\], got 1.5"):
        check_float(1.5, "x", low=0.0, high=1.0)


def test_a_trusted_container_is_skipped_only_inside_the_with() -> None:
    # fit checks a config once and plans it in every layout: inside trusted(config) the scans skip it (a huge int
    # put there afterwards goes unseen, which is why only an unchanged, already checked object may be trusted);
    # outside, every scan reads it again
    from kvstrategies.core.validate import check_sane_ints, is_trusted, trusted
    from kvstrategies.errors import KVCacheConfigError

    config = {"a": [1, {"b": 10**5000}]}
    with trusted(config):
        assert is_trusted(config) and not is_trusted(dict(config))
        check_sane_ints({"hf_config": config}, "case")
    assert not is_trusted(config)
    with pytest.raises(KVCacheConfigError, match=r"case field 'hf_config.a\[1\].b'"):
        check_sane_ints({"hf_config": config}, "case")


@pytest.mark.parametrize("name", ["model.layers.0.mlp.down_proj", "lm_head", "model.layers.10.self_attn.q_proj", "a."])
def test_the_ignore_list_index_matches_as_compressed_tensors_does(name: str) -> None:
    # _ct_any (a set of literal names and dotted suffixes, then the re: targets) equals check_equal_or_regex_match
    # over the whole list, for literal names, dotted suffixes, regexes and the empty tail
    from kvstrategies.planner.weight_quant import _ct_any, ct_name_match

    lists = [("lm_head",), ("down_proj",), ("mlp.down_proj",), ("re:.*self_attn.*",), ("re:^model\\.layers\\.1\\.",),
             ("layers.0",), ("",), ("q_proj", "re:.*gate.*")]  # fmt: skip
    for ignore in lists:
        assert _ct_any(name, ignore) == any(ct_name_match(name, t) for t in ignore), ignore
