#!/usr/bin/env python3
"""Bytes moved per second by each KV write-path kernel, against a torch baseline and a bandwidth.

For every kernel a workload is sized so that it moves about ``--sizes-mib`` MiB (bytes read plus
bytes written, location indices included). Each row prints the dispatched path (Triton on CUDA,
the torch reference elsewhere), a plain torch baseline (``buf[loc] = x.to(dtype)`` index_put,
``buf[dst] = buf[src]`` for copies, the reference quantizer for quantized stores), and both as a
fraction of the device bandwidth: ``--bandwidth-gbps``, else a table of known GPUs, else a
measured ``copy_`` bandwidth.

    python tools/bench_kernels.py                       # CPU: reference vs torch, 1 and 16 MiB
    python tools/bench_kernels.py --sizes-mib 64 256 1024 --kernels store_kv move_kv_cache
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvstrategies import kernels as K  # noqa: E402
from kvstrategies.kernels import reference as R  # noqa: E402

MIB = 1 << 20
#: peak HBM bandwidth in GB/s (vendor figures), matched by substring of the device name.
KNOWN_GPU_GBPS = {
    "H200": 4800.0,
    "H100 PCIe": 2000.0,
    "H100": 3350.0,
    "H20": 4000.0,
    "B200": 8000.0,
    "GB200": 8000.0,
    "A100-SXM4-80GB": 2039.0,
    "A100 80GB PCIe": 1935.0,
    "A100": 1555.0,
    "L40S": 864.0,
    "L4": 300.0,
    "RTX 4090": 1008.0,
    "MI300X": 5300.0,
    "MI325X": 6000.0,
}


@dataclass
class Case:
    """One benchmark: ``run`` (dispatch) and ``baseline`` each move ``nbytes`` bytes."""

    name: str
    tokens: int
    nbytes: int
    run: Callable[[], None]
    baseline: Callable[[], None]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_it(fn: Callable[[], None], device: torch.device, iters: int) -> float:
    """Median seconds per call after two warm-up calls."""
    fn()
    fn()
    _sync(device)
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measured_copy_gbps(device: torch.device, mib: int = 256) -> float:
    src = torch.empty(mib * MIB, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    def copy() -> None:
        dst.copy_(src)

    sec = time_it(copy, device, 10)
    return 2 * src.numel() / sec / 1e9


def device_gbps(device: torch.device, override: float | None) -> tuple[float, str]:
    if override is not None:
        return override, "--bandwidth-gbps"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, gbps in KNOWN_GPU_GBPS.items():
            if key in name:
                return gbps, f"table ({name})"
    return measured_copy_gbps(device), "measured copy_"


def _tokens(target_bytes: int, bytes_per_token: int) -> int:
    return max(1, target_bytes // bytes_per_token)


def make_cases(target: int, rows_factor: int, device: torch.device, use_triton: bool | None) -> list[Case]:
    """Workloads of about ``target`` bytes moved each; buffers hold ``rows_factor`` x the tokens."""
    bf16, fp8 = torch.bfloat16, torch.float8_e4m3fn
    cases: list[Case] = []

    def locs(n: int, rows: int) -> torch.Tensor:
        return torch.randperm(rows, device=device)[:n]

    # MHA store, bf16 -> bf16 and bf16 -> fp8 (H=8, D=128)
    h, d = 8, 128
    for out, tag in ((bf16, "bf16"), (fp8, "fp8")):
        per_tok = 2 * h * d * (2 + out.itemsize) + 8
        n = _tokens(target, per_tok)
        rows = n * rows_factor + 1
        kb = torch.zeros(rows, h, d, dtype=torch.uint8 if out == fp8 else bf16, device=device)
        vb = torch.zeros_like(kb)
        x = torch.randn(n, h, d, dtype=bf16, device=device)
        loc = locs(n, rows)

        def run(kb: torch.Tensor = kb, vb: torch.Tensor = vb, x: torch.Tensor = x, loc: torch.Tensor = loc,
                out: torch.dtype = out) -> None:
            K.store_kv(kb, vb, loc, x, x, kv_dtype=out, use_triton=use_triton)

        def base(kb: torch.Tensor = kb, vb: torch.Tensor = vb, x: torch.Tensor = x, loc: torch.Tensor = loc,
                 out: torch.dtype = out) -> None:
            y = x.to(out).view(kb.dtype)
            kb[loc] = y
            vb[loc] = y

        cases.append(Case(f"store_kv {tag}", n, n * per_tok, run, base))

    # MLA store: nope 512 + rope 64, bf16
    per_tok = 2 * 576 * 2 + 8
    n = _tokens(target, per_tok)
    rows = n * rows_factor + 1
    kvb = torch.zeros(rows, 1, 576, dtype=bf16, device=device)
    nope = torch.randn(n, 1, 512, dtype=bf16, device=device)
    rope = torch.randn(n, 1, 64, dtype=bf16, device=device)
    mloc = locs(n, rows)
    cases.append(Case(
        "store_mla_kv bf16", n, n * per_tok,
        lambda: K.store_mla_kv(kvb, mloc, nope, rope, use_triton=use_triton),
        lambda: kvb.__setitem__(mloc, torch.cat((nope, rope), dim=-1)),
    ))

    # move_kv_cache over 8 layers of K and V (H=8, D=128, bf16)
    layers = 8
    per_tok = 2 * layers * 2 * h * d * 2 + 16
    n = _tokens(target, per_tok)
    rows = 2 * n * rows_factor + 1
    bufs = [torch.randn(rows, h, d, device=device).to(bf16) for _ in range(2 * layers)]
    perm = torch.randperm(rows, device=device)
    src, dst = perm[:n], perm[n : 2 * n]

    def move_base() -> None:
        for b in bufs:
            b[dst] = b[src]

    cases.append(Case(f"move_kv_cache {2 * layers} bufs", n, n * per_tok,
                      lambda: K.move_kv_cache(bufs, dst, src, use_triton=use_triton), move_base))

    # DSA indexer: fused quantize + page-major store (D=128, page 64)
    per_tok = 128 * 2 + 132 + 8
    n = _tokens(target, per_tok)
    pages = n * rows_factor // 64 + 2
    ibuf = torch.zeros(pages, 64 * 132, dtype=torch.uint8, device=device)
    ik = torch.randn(n, 128, dtype=bf16, device=device)
    iloc = locs(n, pages * 64)
    cases.append(Case(
        "quantize_store_index_k", n, n * per_tok,
        lambda: K.quantize_store_index_k(ibuf, iloc, ik, use_triton=use_triton),
        lambda: R.quantize_store_index_k(ibuf, iloc, ik),
    ))

    # MXFP8 (H=8, D=128, interleaved page-128 scales)
    per_tok = h * d * 2 + h * d + h * d // 32 + 8
    n = _tokens(target, per_tok)
    pages = n * rows_factor // 128 + 2
    mdata = torch.zeros(pages * 128, h, d, dtype=fp8, device=device)
    mscale = torch.zeros(pages, h, 32, 4, d // 32, dtype=torch.uint8, device=device)
    mx = torch.randn(n, h, d, dtype=bf16, device=device)
    mxloc = locs(n, pages * 128)
    cases.append(Case(
        "quantize_store_mxfp8", n, n * per_tok,
        lambda: K.quantize_store_mxfp8(mdata, mscale, mxloc, mx, use_triton=use_triton),
        lambda: R.quantize_store_mxfp8(mdata, mscale, mxloc, mx),
    ))

    # FP4 block16 and NVFP4 (H=8, D=128)
    per_tok = h * d * 2 + h * d // 2 + h * d // 16 + 8
    n = _tokens(target, per_tok)
    rows = n * rows_factor + 1
    fdata = torch.zeros(rows, h, d // 2, dtype=torch.uint8, device=device)
    fscale = torch.zeros(rows, h * d // 16, dtype=torch.uint8, device=device)
    fx = torch.randn(n, h, d, dtype=bf16, device=device)
    floc = locs(n, rows)
    cases.append(Case(
        "quantize_store_fp4_block16", n, n * per_tok,
        lambda: K.quantize_store_fp4_block16(fdata, fscale, floc, fx, use_triton=use_triton),
        lambda: R.quantize_store_fp4_block16(fdata, fscale, floc, fx),
    ))
    nscale = fscale.view(rows, h, d // 16)
    cases.append(Case(
        "quantize_store_nvfp4", n, n * per_tok,
        lambda: K.quantize_store_nvfp4(fdata, floc, fx, 1.0, scale_buffer=nscale, use_triton=use_triton),
        lambda: R.quantize_store_nvfp4(fdata, floc, fx, 1.0, scale_buffer=nscale),
    ))
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sizes-mib", type=int, nargs="+", default=None,
                    help="bytes moved per call, MiB (default: 16 64 256 on GPU, 1 16 on CPU; >= 64 for GPU numbers)")
    ap.add_argument("--bandwidth-gbps", type=float, default=None, help="device bandwidth for the %% columns")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rows-factor", type=int, default=4, help="buffer rows per written token (scatter sparsity)")
    ap.add_argument("--kernels", nargs="*", default=None, help="substrings of kernel names to run")
    ap.add_argument("--use-triton", choices=("auto", "on", "off"), default="auto")
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    sizes = args.sizes_mib or ([16, 64, 256] if device.type == "cuda" else [1, 16])
    use_triton = {"auto": None, "on": True, "off": False}[args.use_triton]
    gbps, source = device_gbps(device, args.bandwidth_gbps)
    path = "triton" if (device.type == "cuda" and use_triton is not False) or use_triton else "torch reference"
    print(f"device {device} | bandwidth {gbps:.0f} GB/s ({source}) | dispatch path: {path}")
    header = (f"{'kernel':30} {'MiB':>7} {'tokens':>9} {'dispatch GB/s':>14} {'torch GB/s':>11} "
              f"{'disp %bw':>9} {'torch %bw':>10}")
    print(header)
    print("-" * len(header))
    for mib in sizes:
        torch.manual_seed(0)
        for case in make_cases(mib * MIB, args.rows_factor, device, use_triton):
            if args.kernels and not any(k in case.name for k in args.kernels):
                continue
            t_run = time_it(case.run, device, args.iters)
            t_base = time_it(case.baseline, device, args.iters)
            r, b = case.nbytes / t_run / 1e9, case.nbytes / t_base / 1e9
            print(f"{case.name:30} {case.nbytes / MIB:7.1f} {case.tokens:9d} {r:14.1f} {b:11.1f} "
                  f"{100 * r / gbps:8.1f}% {100 * b / gbps:9.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
