"""The values of a pasted launch command checked as SGLang's own argparse checks them.

SGLang's ``ServerArgs.add_cli_args`` gives each flag a ``type=`` converter and, for many, a
``choices=`` list (:data:`~kvstrategies.sglang.tables.flags.SGLANG_FLAG_VALUES`, generated from
SGLang). argparse converts a value with the converter, then requires it to be one of the choices;
anything else makes SGLang exit before it starts. :func:`check_flag_value` does the same, so a
command SGLang would refuse (``--kv-cache-dtype float32``, ``--tp-size two``) is refused here,
naming the flag and its choices, instead of being planned. It returns the value in the form
``plan`` reads (``human_readable_int``: ``128k`` -> ``128000``, as
``sglang.srt.utils.common.human_readable_int`` reads it).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation

from ..errors import KVCacheConfigError
from .tables.flags import SGLANG_FLAG_VALUES

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
#: the longest single value accepted (characters); real values are names, numbers and short JSON
MAX_VALUE_CHARS = 8192


def human_readable_int(text: str) -> int:
    """SGLang's ``human_readable_int``: ``1k`` = 1000, ``1Ki`` = 1024 (decimals with SI only), else ``int()``."""
    value = text.strip()
    match = _HUMAN.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise ValueError(f"decimals are not allowed with IEC suffixes like {suffix!r}")
            return int(number) * _IEC[suffix]
        try:
            return int(Decimal(number) * _SI[suffix])
        except InvalidOperation as exc:
            raise ValueError(str(exc)) from exc
    return int(value)


def _convert(kind: str, text: str) -> object:
    """``text`` through SGLang's converter ``kind`` (ValueError when SGLang's argparse refuses it)."""
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "human_readable_int":
        return human_readable_int(text)
    if kind in ("loads", "json_list_type", "parse_cuda_graph_config_arg"):
        try:
            parsed = json.loads(text)
        except RecursionError as exc:
            raise ValueError("JSON nested too deeply") from exc
        if kind == "parse_cuda_graph_config_arg" and not isinstance(parsed, dict):
            raise ValueError("a JSON object of phase -> settings is expected")
        return parsed
    if kind == "parse_cuda_graph_backend_arg" and text == "tc_piecewise":
        raise ValueError("tc_piecewise was removed; select breakable, full, or disabled")
    return text


def check_flag_value(canonical: str, option: str, text: str) -> str:
    """``text`` (one value of ``option``, whose canonical flag is ``canonical``) when SGLang's
    argparse accepts it, in the form ``plan`` reads; else an error naming the flag."""
    if len(text) > MAX_VALUE_CHARS:
        raise KVCacheConfigError(f"{option}: a value of {len(text):,} characters; SGLang's values are short")
    kind, choices = SGLANG_FLAG_VALUES.get(canonical, ("str", None))
    try:
        value = _convert(kind, text)
    except (ValueError, OverflowError) as exc:
        expected = {"int": "an integer", "float": "a number", "human_readable_int": "an integer (1k, 1Ki accepted)"}
        what = expected.get(kind, "JSON" if kind in ("loads", "json_list_type") else "a valid value")
        raise KVCacheConfigError(
            f"{option} {text!r:.60} is not {what}, so SGLang's argparse refuses it "
            f"(sglang.srt.server_args.ServerArgs.add_cli_args); fix the value"
        ) from exc
    if choices is not None and value not in choices:
        shown = ", ".join(str(c) for c in choices[:24]) + (", ..." if len(choices) > 24 else "")
        raise KVCacheConfigError(
            f"{option} {text!r:.60} is not one of SGLang's choices ({shown}), so SGLang's argparse refuses it "
            "(sglang.srt.server_args.ServerArgs.add_cli_args); use one of them"
        )
    return str(value) if kind == "human_readable_int" else text
