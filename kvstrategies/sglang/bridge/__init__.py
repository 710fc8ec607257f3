"""SGLang as a second engine behind the same case files (install the ``sglang`` extra).

* :mod:`.runtime`: importing SGLang on a CPU host (version check, torchvision stub, platform facts);
* :mod:`.bridge`: one case through SGLang's own sizing and pool builders -> a plan document;
* :mod:`.engine`: many cases, one import (cases with their own ``env`` in child processes);
* :mod:`.compare`: field/buffer differences and the known, deliberate ones;
* :mod:`.verify`: ``kvstrategies verify --against sglang``;
* :mod:`.snapshots`: SGLang's answers in the golden format (``golden/sglang-<version>/``);
* :mod:`.launch`: ``verify --against sglang --launch``, the launch defaults against SGLang's own resolution.

Nothing here imports SGLang (or torch) until a function that needs it is called.
"""

from .runtime import SUPPORTED_VERSIONS, check_version, import_sglang, platform_override

__all__ = ["SUPPORTED_VERSIONS", "check_version", "import_sglang", "platform_override"]
