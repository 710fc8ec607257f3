"""Error wording for the command line: the library names settings by their field (``case field
'max_tokens'``, ``tp_size``), the CLI user typed flags (``--max-total-tokens``, ``--tp``).

:func:`flag_wording` rewrites a message from planning flags so that it names the flags. A case
file's errors keep the field names (the user wrote fields there).
"""

from __future__ import annotations

import re

#: case field -> the ``plan`` flag that sets it
FIELD_FLAGS = {
    "max_tokens": "--max-total-tokens",
    "max_running_requests": "--max-running-requests",
    "context_length": "--context-length",
    "page_size": "--page-size",
    "chunked_prefill_size": "--chunked-prefill-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "swa_full_tokens_ratio": "--swa-full-tokens-ratio",
    "speculative_algorithm": "--speculative-algorithm",
    "speculative_num_draft_tokens": "--speculative-num-draft-tokens",
    "speculative_num_steps": "--speculative-num-steps",
    "speculative_eagle_topk": "--speculative-eagle-topk",
    "eagle_draft_num_layers": "--speculative-draft-layers",
    "attention_backend": "--attention-backend",
    "disaggregation_mode": "--disaggregation-mode",
    "mamba_radix_cache_strategy": "--mamba-radix-cache-strategy",
    "tp_size": "--tp",
    "pp_size": "--pp-size",
    "pp_rank": "--pp-rank",
    "dcp_size": "--dcp",
    "attn_dp_size": "--attn-dp",
    "mem_fraction_static": "--mem-fraction-static",
    "model_dtype": "--model-dtype",
    "available_bytes": "--available-bytes",
}
_CASE_FIELD = re.compile(r"case field '(\w+)'")
_FIELD = re.compile(
    r"(?<![\w'\"-])(" + "|".join(sorted(FIELD_FLAGS, key=len, reverse=True))
    + r")(=| (?=[\d'-])|(?= must| is| divisible)|(?=$|[;:,)]))"
)


def flag_wording(message: str) -> str:
    """``message`` with the case fields it names replaced by their ``plan`` flags."""
    message = _CASE_FIELD.sub(lambda m: FIELD_FLAGS.get(m.group(1), m.group(0)), message)
    message = message.replace("pass quantization= one of", "pass --weight-quantization one of")
    return _FIELD.sub(lambda m: FIELD_FLAGS[m.group(1)] + (" " if m.group(2) else ""), message)
