"""Write-path rules the mutation check (``tools/mutation_check.py``, group ``kernels``) found
unpinned, by hand: the same-dtype copy of every element size, the fit checks of the Triton path,
the DSA index page size default and an empty MLA rope part. Triton cases run in Triton's
interpreter (``TRITON_INTERPRET=1``) on tiny tensors and are skipped when triton does not import."""

from __future__ import annotations

import pytest
import torch

from kvstrategies import kernels as K
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.kernels import reference as R
from kvstrategies.pools.dsa import CUDA_INDEX_PAGE_SIZE

needs_triton = pytest.mark.skipif(not K.triton_available(), reason="triton is not installed")


@pytest.fixture
def interp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _bytes(t: torch.Tensor) -> list[int]:
    return [int(b) for b in t.contiguous().view(torch.uint8).reshape(-1).tolist()]


@needs_triton
@pytest.mark.parametrize("dtype", (torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.float64))
def test_triton_same_dtype_store_is_a_byte_copy_for_every_element_size(interp: None, dtype: torch.dtype) -> None:
    """MHATokenToKVPool.set_kv_buffer stores rows already in the pool dtype unconverted: the bytes of
    row ``i`` land in row ``loc[i]`` whatever the element size (1, 2, 4 or 8 bytes)."""
    rows = torch.tensor([[1.5, -2.0, 0.25, 3.0], [-0.5, 8.0, 6.0, -1.0]]).to(dtype)
    loc = torch.tensor([3, 1])
    buf = torch.zeros(5, 4, dtype=torch.uint8 if dtype.itemsize == 1 else dtype)
    K.store_rows(buf, loc, rows, use_triton=True)
    assert _bytes(buf[3]) == _bytes(rows[0]) and _bytes(buf[1]) == _bytes(rows[1])
    assert _bytes(buf[0]) == _bytes(buf[2]) == _bytes(buf[4]) == [0] * 4 * dtype.itemsize


@needs_triton
@pytest.mark.parametrize("triton", (True, False))
def test_rows_that_overrun_the_buffer_row_are_refused(interp: None, triton: bool) -> None:
    """A row of 6 elements at column 4 of an 8-element row would end at 10 > 8: refused before any
    write, on the Triton path and the reference alike (the rope part after the nope part of
    MLATokenToKVPool.set_mla_kv_buffer must fit the row)."""
    buf = torch.zeros(3, 8, dtype=torch.bfloat16)
    rows = torch.ones(1, 6, dtype=torch.bfloat16)
    with pytest.raises(KVCacheConfigError, match="fit"):
        K.store_rows(buf, torch.tensor([1]), rows, col_offset=4, use_triton=triton)
    assert not bool(buf.any())
    K.store_rows(buf, torch.tensor([1]), rows, col_offset=2, use_triton=triton)  # ends at 8: fits
    assert buf[1].tolist() == [0.0, 0.0] + [1.0] * 6


@needs_triton
@pytest.mark.parametrize("triton", (True, False))
@pytest.mark.parametrize("overrun", ("data", "scales"))
def test_fp4_values_or_scales_that_overrun_their_row_are_refused(interp: None, triton: bool, overrun: str) -> None:
    """MLATokenToKVPoolFP4.set_kv_buffer: 64 values need 64 / 2 = 32 data bytes and 64 / 16 = 4 scale
    bytes. At data column 10 of a 40-byte row they would end at 42 > 40; at scale column 2 of a
    5-byte scale row at 6 > 5: either is refused before anything is written."""
    data = torch.zeros(3, 40, dtype=torch.uint8)
    scales = torch.zeros(3, 5, dtype=torch.uint8)
    x = torch.ones(1, 64)
    bad = {"data_col_offset": 10} if overrun == "data" else {"scale_col_offset": 2}
    with pytest.raises(KVCacheConfigError, match="fit"):
        K.quantize_store_fp4_block16(data, scales, torch.tensor([1]), x, **bad, use_triton=triton)
    assert not bool(data.any()) and not bool(scales.any())
    K.quantize_store_fp4_block16(data, scales, torch.tensor([1]), x, data_col_offset=8, scale_col_offset=1,
                                 use_triton=triton)  # ends at 40 and 5: fits
    # amax 1 -> e = ceil(log2(1 / 6)) = -2, scale byte 125; q = 1 / 2^-2 = 4 -> code 6 (4 <= 4 < 5)
    assert scales[1].tolist() == [0, 125, 125, 125, 125] and data[1].tolist() == [0] * 8 + [0x66] * 32


@needs_triton
@pytest.mark.parametrize("fn", ("store_index_k_scale", "quantize_store_index_k"))
@pytest.mark.parametrize("triton", (True, False, None))
def test_index_k_page_size_defaults_to_sglang_s_64(interp: None, fn: str, triton: bool | None) -> None:
    """DSATokenToKVPool.__init__ requires 64-token physical pages on CUDA (CUDA_INDEX_PAGE_SIZE): the
    index stores default to P = 64. Location 65 -> page 1, offset 1: key bytes [1 * D, 2 * D), scale
    bytes at 64 * D + 1 * 4 (D = 16; one page is 64 * (16 + 4) = 1280 bytes)."""
    assert CUDA_INDEX_PAGE_SIZE == 64
    d = 16
    buf = torch.zeros(2, 64 * (d + 4), dtype=torch.uint8)
    loc = torch.tensor([65])
    key = torch.tensor([[448.0 * (i + 1) / d for i in range(d)]])  # amax 448 -> scale 1, keys as they are
    module = R if triton is None else K
    extra = {} if triton is None else {"use_triton": triton}
    if fn == "store_index_k_scale":
        getattr(module, fn)(buf, loc, key.to(torch.float8_e4m3fn), torch.tensor([1.0]), **extra)
    else:
        getattr(module, fn)(buf, loc, key, **extra)
    want = key.to(torch.float8_e4m3fn).view(torch.uint8)[0].tolist()
    assert buf[1, d : 2 * d].tolist() == want
    assert buf[1, 64 * d + 4 : 64 * d + 8].view(torch.float32).tolist() == [1.0]
    assert int(buf[0].sum()) == 0 and int(buf[1].sum()) == sum(want) + sum(_bytes(torch.tensor([1.0])))


@pytest.mark.parametrize("impl", (K, R))
def test_mla_store_with_an_empty_rope_part_writes_location_0(impl: object) -> None:
    """An empty rope tensor is no rope (MLATokenToKVPool.set_mla_kv_buffer without ``cache_k_rope``):
    only the nope columns are written and, by default, location 0 is not skipped (SGLang skips it only
    with rope present)."""
    buf = torch.zeros(3, 1, 6, dtype=torch.bfloat16)
    nope = torch.tensor([[[1.0, 2.0, 3.0, 4.0]], [[5.0, 6.0, 7.0, 8.0]]], dtype=torch.bfloat16)
    empty = torch.zeros(2, 1, 0, dtype=torch.bfloat16)
    impl.store_mla_kv(buf, torch.tensor([0, 2]), nope, empty)  # type: ignore[attr-defined]
    assert buf[0, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]
    assert buf[2, 0].tolist() == [5.0, 6.0, 7.0, 8.0, 0.0, 0.0]
