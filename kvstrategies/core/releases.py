"""Which engine release an answer is for, and the rules that hold only for some releases.

An answer (a plan, a launch resolution, a bridge document) is always for one
:class:`EngineRelease`: an engine (``"sglang"``; ``"vllm"`` joins the same axis) and a release
line. A ``.postN`` build is the same release line (``0.5.15.post1`` answers as ``0.5.15``).

What changed between releases is data on the thing that changed, never a version check in the
middle of a strategy:

* :class:`ReleaseRule` -- a named behaviour with the first (and, if it was removed, the last)
  release that has it, the engine's source that shows it, and a one-line summary. Code asks
  ``RULE.holds(release)``; creating a rule registers it, so :func:`rules_differing` lists every
  rule that differs between two releases from the code alone (``kvstrategies releases A B``).
* :class:`ByRelease` -- a value that changed between releases (a default, a constant): the value
  from each release on, looked up with ``.at(release)``; it registers its change points as rules.

Nothing here imports torch or an engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..errors import KVCacheConfigError

SGLANG = "sglang"
VLLM = "vllm"
#: the engines a release can name (the engine axis); display names for messages
ENGINE_NAMES: Mapping[str, str] = {SGLANG: "SGLang", VLLM: "vLLM"}
#: the article each name takes when read aloud ("an ess-GLang release", "a vee-LLM release")
_ARTICLES: Mapping[str, str] = {SGLANG: "an", VLLM: "a"}
#: every SGLang release line the project models, oldest first. 0.5.15 is the last release with
#: the ModelRunner KV-cache mixin; 0.5.16 the first with ``KVCacheConfigurator``.
SGLANG_RELEASE_LINES: tuple[str, ...] = (
    "0.5.1",
    "0.5.2",
    "0.5.3",
    "0.5.4",
    "0.5.5",
    "0.5.6",
    "0.5.7",
    "0.5.8",
    "0.5.9",
    "0.5.10",
    "0.5.11",
    "0.5.12",
    "0.5.13",
    "0.5.14",
    "0.5.15",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
)
#: every vLLM release line the project models, oldest first (its KV-cache sizing: the vllm strategies)
VLLM_RELEASE_LINES: tuple[str, ...] = (
    "0.11.0",
    "0.12.0",
    "0.13.0",
    "0.14.1",
    "0.15.1",
    "0.16.0",
    "0.17.1",
    "0.18.1",
    "0.19.1",
    "0.20.2",
    "0.21.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.1",
    "0.26.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
)
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?\s*$")


def _parts(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


@dataclass(frozen=True, order=True)
class EngineRelease:
    """One release line of one engine, ordered by version within the engine."""

    engine: str
    version: tuple[int, int, int]

    @property
    def text(self) -> str:
        """``"0.5.20"``."""
        return ".".join(str(p) for p in self.version)

    @property
    def label(self) -> str:
        """``"SGLang 0.5.20"`` (what every answer names)."""
        return f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.text}"

    def __str__(self) -> str:
        return self.label


def _release(engine: str, text: str) -> EngineRelease:
    parts = _parts(text)
    if parts is None:  # pragma: no cover - the tables above are well-formed
        raise ValueError(text)
    return EngineRelease(engine, parts)


SGLANG_RELEASES: tuple[EngineRelease, ...] = tuple(_release(SGLANG, v) for v in SGLANG_RELEASE_LINES)
#: what an answer is for when nobody names a release
NEWEST_SGLANG: EngineRelease = SGLANG_RELEASES[-1]
OLDEST_SGLANG: EngineRelease = SGLANG_RELEASES[0]
VLLM_RELEASES: tuple[EngineRelease, ...] = tuple(_release(VLLM, v) for v in VLLM_RELEASE_LINES)
NEWEST_VLLM: EngineRelease = VLLM_RELEASES[-1]
_SUPPORTED: Mapping[str, tuple[EngineRelease, ...]] = {SGLANG: SGLANG_RELEASES, VLLM: VLLM_RELEASES}


def supported_releases(engine: str = SGLANG) -> tuple[EngineRelease, ...]:
    """The release lines the project models for ``engine``, oldest first."""
    return _SUPPORTED.get(engine, ())


def newest_release(engine: str = SGLANG) -> EngineRelease:
    return supported_releases(engine)[-1]


def parse_release(value: object, engine: str = SGLANG, *, field: str | None = None) -> EngineRelease:
    """A supported release from ``"0.5.20"``, ``"0.5.15.post1"``, ``"v0.5.20"`` or an :class:`EngineRelease`.

    ``None`` is the newest supported release. Anything else -- an unknown release, a malformed
    string, another type -- is a :class:`KVCacheConfigError` naming the supported releases and
    ``field`` (default: the engine's flag, ``--sglang-version`` or ``--vllm-version``).
    """
    field = field or f"--{engine}-version"
    if value is None:
        return newest_release(engine)
    if isinstance(value, EngineRelease):
        if value in supported_releases(value.engine):
            return value
        text = value.text
    elif isinstance(value, str) and len(value) <= 40:
        text = value
    else:
        raise KVCacheConfigError(
            f"{field} must be a release string such as {newest_release(engine).text!r}, got {value!r:.60}"
        )
    parts = _parts(text)
    known = supported_releases(engine)
    for release in known:
        if release.version == parts:
            return release
    names = ", ".join(r.text for r in known)
    display = ENGINE_NAMES.get(engine, engine)
    raise KVCacheConfigError(
        f"{field} {text!r:.40} is not {_ARTICLES.get(engine, 'a')} {display} release kvstrategies models; "
        f"supported: {names} "
        f"(a .postN build is its release line)"
    )


# ---- rules and values that hold for a span of releases ------------------------------------------


@dataclass(frozen=True)
class ReleaseSpan:
    """Releases ``first`` through ``last`` (both inclusive; ``None`` = unbounded) of one engine."""

    engine: str = SGLANG
    first: EngineRelease | None = None
    last: EngineRelease | None = None

    def __contains__(self, release: object) -> bool:
        if not isinstance(release, EngineRelease) or release.engine != self.engine:
            return False
        if self.first is not None and release < self.first:
            return False
        return not (self.last is not None and release > self.last)

    def describe(self) -> str:
        if self.first is not None and self.last is not None:
            return f"{self.first.text} to {self.last.text}" if self.first != self.last else self.first.text
        if self.first is not None:
            return f"{self.first.text} and later"
        if self.last is not None:
            return f"up to {self.last.text}"
        return "every release"


def span(first: str | None = None, last: str | None = None, engine: str = SGLANG) -> ReleaseSpan:
    """``span("0.5.20")``: from 0.5.20 on; ``span(last="0.5.17")``: up to 0.5.17."""
    return ReleaseSpan(
        engine,
        None if first is None else parse_release(first, engine, field="a rule's first release"),
        None if last is None else parse_release(last, engine, field="a rule's last release"),
    )


_RULES: dict[str, ReleaseRule] = {}


@dataclass(frozen=True)
class ReleaseRule:
    """A behaviour only some releases have: where it holds, what it does, where the engine shows it.

    ``source`` names the engine's module and function (and the pull request that changed it,
    where known); ``summary`` says what the rule does in one line. Creating a rule registers it.
    """

    key: str
    span: ReleaseSpan
    summary: str
    source: str
    topic: str = "sizing"

    def __post_init__(self) -> None:
        if self.key in _RULES and _RULES[self.key] != self:
            raise ValueError(f"release rule {self.key!r} is defined twice")
        _RULES[self.key] = self

    def holds(self, release: EngineRelease) -> bool:
        """Whether ``release`` has this behaviour."""
        return release in self.span


T = TypeVar("T")


@dataclass(frozen=True)
class ByRelease(Generic[T]):
    """A value that changed between releases: ``steps`` is ``((first release, value), ...)``, oldest first.

    ``.at(release)`` is the value of the last step at or before ``release``; each change point is
    registered as a :class:`ReleaseRule` named ``key`` (so release listings show it).
    """

    key: str
    steps: tuple[tuple[str, T], ...]
    summary: str
    source: str
    topic: str = "launch"
    engine: str = SGLANG
    _rules: tuple[ReleaseRule, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        firsts = [parse_release(first, self.engine, field=f"{self.key} step") for first, _ in self.steps]
        if not firsts or firsts != sorted(firsts) or firsts[0] != supported_releases(self.engine)[0]:
            raise ValueError(f"{self.key}: steps must start at the oldest release and ascend")
        rules = []
        for index, (_first, value) in enumerate(self.steps):
            nxt = firsts[index + 1] if index + 1 < len(firsts) else None
            last = None if nxt is None else _previous(nxt)
            rules.append(ReleaseRule(f"{self.key}={value!r}", ReleaseSpan(self.engine, firsts[index], last),
                                     f"{self.summary}: {value!r}", self.source, self.topic))  # fmt: skip
        object.__setattr__(self, "_rules", tuple(rules))

    def at(self, release: EngineRelease) -> T:
        """The value of the step whose rule holds for ``release`` (the last one if several do); a
        release of another engine is a :class:`KVCacheConfigError`."""
        held = [value for rule, (_first, value) in zip(self._rules, self.steps, strict=True) if rule.holds(release)]
        if not held:
            raise KVCacheConfigError(f"{self.key} is a value of {self.engine} releases; {release} is not one")
        return held[-1]


def _previous(release: EngineRelease) -> EngineRelease:
    known = supported_releases(release.engine)
    return known[known.index(release) - 1]


#: the transformers release each SGLang release pins (its wheel's requirements): configs parse with it
SGLANG_TRANSFORMERS: ByRelease[str] = ByRelease(
    "transformers-pin",
    (("0.5.1", "4.55.2"), ("0.5.2", "4.56.1"), ("0.5.3", "4.57.0"), ("0.5.4", "4.57.1"), ("0.5.10", "5.3.0"),
     ("0.5.11", "5.6.0"), ("0.5.13", "5.8.1"), ("0.5.15", "5.12.1"), ("0.5.22", "5.19.0")),
    "the transformers release SGLang pins",
    "SGLang's package requirements (transformers==...)",
    topic="environment",
)


def all_rules() -> tuple[ReleaseRule, ...]:
    """Every registered rule (import the modules that define them first: :func:`load_rule_modules`)."""
    return tuple(sorted(_RULES.values(), key=lambda r: (r.topic, r.key)))


def rules_differing(a: EngineRelease, b: EngineRelease) -> list[ReleaseRule]:
    """The rules that hold in exactly one of ``a`` and ``b``."""
    return [rule for rule in all_rules() if rule.holds(a) != rule.holds(b)]


def releases_between(a: EngineRelease, b: EngineRelease) -> Iterator[EngineRelease]:
    low, high = min(a, b), max(a, b)
    return (r for r in supported_releases(a.engine) if low <= r <= high)


def release_labels(releases: Iterable[EngineRelease]) -> str:
    return ", ".join(r.text for r in releases)
