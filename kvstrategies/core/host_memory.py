"""How much host memory a ``build(plan, "cpu")`` may take, read before allocating.

A plan is sized for a GPU; built on the host it would allocate the same bytes there, and a
30 GiB plan on a 24 GiB host is ended by the kernel's OOM killer, not refused.
:func:`available_host_bytes` is the smallest of what Linux reports as available
(``/proc/meminfo`` ``MemAvailable``, else ``sysconf(SC_AVPHYS_PAGES) x SC_PAGE_SIZE``) and what the
process's cgroup (v2 ``memory.max - memory.current``, v1 ``memory.limit_in_bytes -
memory.usage_in_bytes``) still allows; ``None`` when none of them can be read.
"""

from __future__ import annotations

import os
from pathlib import Path

_MEMINFO = Path("/proc/meminfo")
_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")
_READ_BYTES = 1 << 16


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:  # procfs / sysfs files: small, regular
            return handle.read(_READ_BYTES).decode("ascii", errors="replace")
    except OSError:
        return None


def _meminfo_available() -> int | None:
    text = _read(_MEMINFO)
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # kB
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    for limit_name, usage_name, folder in (
        ("memory.max", "memory.current", _CGROUP_V2),
        ("memory.limit_in_bytes", "memory.usage_in_bytes", _CGROUP_V1),
    ):
        limit, usage = _read(folder / limit_name), _read(folder / usage_name)
        if limit is None or usage is None:
            continue
        limit, usage = limit.strip(), usage.strip()
        if limit.isdigit() and usage.isdigit() and int(limit) < 2**60:
            return max(0, int(limit) - int(usage))
    return None


def available_host_bytes() -> int | None:
    """Bytes this process may still allocate on the host (see the module doc), or None."""
    figures = [x for x in (_meminfo_available(), _cgroup_room()) if x is not None]
    return min(figures) if figures else None
