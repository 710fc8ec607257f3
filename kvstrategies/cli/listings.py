"""The listings: ``presets``, ``checkpoints``, ``architectures`` and ``gpus``.

Each prints one row per entry of a shipped table (aligned columns, or ``--json`` rows) and reads
only that table: ``gpus`` the GPU table, ``presets`` the presets without the planner.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..errors import KVCacheConfigError

#: each listing's one-line help (``kvstrategies --help``); a callable is worked out only when the parser is built
HELP: dict[str, str | Callable[[], str]] = {
    "presets": "list the shipped model presets and the strategy that sizes each",
    "checkpoints": "list the shipped HF checkpoints (planned offline by their HF id) and their sources",
    "architectures": lambda: f"list the architectures {_newest_label()} serves that the planner knows",
    "gpus": "list the GPU table: capacity as SGLang reads it and where it was checked",
}


def _newest_label() -> str:
    from ..core.releases import NEWEST_SGLANG

    return NEWEST_SGLANG.label


def add_parser(sub: Any, command: str) -> None:
    """The subparser of the listing ``command`` (its only flag: ``--json``)."""
    text = HELP[command]
    sub.add_parser(command, help=text if isinstance(text, str) else text()).add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Print the listing ``args.command``."""
    listings: dict[str, Callable[[argparse.Namespace], int]] = {
        "presets": _presets, "checkpoints": _checkpoints, "architectures": _architectures, "gpus": _gpus,
    }  # fmt: skip
    return listings[args.command](args)


def _presets(args: argparse.Namespace) -> int:
    """``kvstrategies presets``: every shipped preset, its family, the strategy that sizes it and its HF id."""
    from ..presets import preset_index

    rows = []
    for short, hf_id in sorted(preset_index().items()):
        family, strategy = _family_and_strategy({"preset": short})
        rows.append({"name": short, "hf_id": hf_id, "family": family, "strategy": strategy})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<24}{row['family']:<16}{row['strategy']:<32}{row['hf_id']}")
    return 0


def _family_and_strategy(source: dict[str, Any]) -> tuple[str, str]:
    """A model's family and the strategy that sizes it in a default context (``none (why)``)."""
    from ..case import parse_case
    from ..strategies.registry import select_configurator

    settings = parse_case({**source, "available_bytes": 1}).settings
    try:
        return settings.geometry.family, type(select_configurator(settings)).__name__
    except KVCacheConfigError as exc:
        return settings.geometry.family, f"none ({exc})"


def _checkpoints(args: argparse.Namespace) -> int:
    """``kvstrategies checkpoints``: every shipped checkpoint, its strategy, quantization and sources."""
    from ..checkpoints import shipped_checkpoints
    from ..planner.known_models import shipped_model

    rows = []
    for hf_id, ckpt in sorted(shipped_checkpoints().items(), key=lambda item: item[0].lower()):
        model = shipped_model(hf_id)
        assert model is not None  # every index entry resolves to itself
        family, strategy = _family_and_strategy({"hf_config": dict(model.config)})
        quant = model.config.get("quantization_config")
        method = str(quant.get("quant_method", "?")) if isinstance(quant, dict) else "none"
        rows.append({"hf_id": hf_id, "family": family, "strategy": strategy, "quantization": method,
                     "files": dict(ckpt.sources)})  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['hf_id']:<48}{row['family']:<16}{row['quantization']:<20}{row['strategy']}")
    return 0


def _architectures(args: argparse.Namespace) -> int:
    """``kvstrategies architectures``: the served architectures the model table knows (docs/adding-a-model.md)."""
    from ..models.architectures import served_listing

    rows = served_listing()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<44}{row['family']:<28}{row['sglang_model']}{' (draft)' if row['draft'] else ''}")
    return 0


def _sm(cc: tuple[int, int] | None) -> str | None:
    return None if cc is None else f"sm{cc[0]}{cc[1]}"


def _gpus(args: argparse.Namespace) -> int:
    """``kvstrategies gpus``: every accelerator, its capacity in MiB and the listing it was checked against."""
    from ..planner.gpus import GPUS

    rows = [
        {
            "name": g.name,
            "capacity_mib": g.capacity_mib,
            "platform": g.platform,
            "arch": g.gfx_arch if g.is_hip else _sm(g.compute_capability),
            "source": g.source,
            "note": g.note,
        }
        for g in GPUS
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        where = row["source"] or f"UNCONFIRMED: {row['note']}"
        print(f"{row['name']:<14}{row['capacity_mib']:>9g} MiB  {row['platform']:<5}{row['arch'] or '':<8}{where}")
    return 0
