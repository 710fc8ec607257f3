"""SGLang's ``--quantization`` methods the weight estimate models, and the format each is priced as.

``kvstrategies plan --quantization METHOD`` (and a pasted launch command's ``--quantization``)
take SGLang's spelling (``sglang/srt/server_args.py``, ``ServerArgs.quantization``); the weight
estimate (:mod:`kvstrategies.planner.weight_quant`) prices ``--weight-quantization`` formats.
Kept apart from the planner so that building the command line reads no planner module.
"""

from __future__ import annotations

from ..errors import KVCacheConfigError

#: SGLang ``--quantization`` method -> ``--weight-quantization`` format
QUANTIZATION = {"fp8": "fp8", "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "awq": "w4a16", "gptq": "w4a16",
                "awq_marlin": "w4a16", "gptq_marlin": "w4a16"}  # fmt: skip


def quantization_for(method: str, where: str = "per rank") -> str:
    """The weight estimate's format (``--weight-quantization``) for an engine's ``--quantization method``."""
    if method not in QUANTIZATION:
        raise KVCacheConfigError(
            f"--quantization {method} is not modelled by the weight estimate; give --weight-bytes {where} instead "
            f"(modelled: {', '.join(sorted(QUANTIZATION))})"
        )
    return QUANTIZATION[method]
