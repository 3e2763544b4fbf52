"""Fingerprints of array contents, for the host-write guard where arrays have
no read-only flag (CuPy; docs/programs.md).

A fingerprint is the sum, modulo 2**64, of a bijective 64-bit mix (the
splitmix64 finaliser) of each word plus its position. Changing any one word
always changes the sum (the mix is a bijection and the others' terms stay);
changes to several words cancel only if their mixed differences sum to zero,
about 2**-64 for any fixed change. Positions enter the mix, so moving values
around changes it too. On NumPy the mix runs as array operations in chunks, so
that the temporaries stay small. On CuPy it is one fused kernel (`_KERNELS`:
the same mix, the sum by warps, blocks and 64-bit atomics, which wrap as the
NumPy sum does) whose result stays on the device: `device_print` launches it
without waiting, reading a C-contiguous array where it lies (no view made),
into a slot of 1024 device words shared by the prints (`_Slots`), so a
program's guard reads many launches' prints back in one synchronisation
(guard.py; the session-54 GPU check measured ~10 CuPy launches and a
synchronisation per print, 3.7 ms per step of a 2-launch program; since
session 55 a print is one kernel launch, docs/programs.md "On a GPU: no
synchronisation per step").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.arrays import module_of

_CHUNK = 1 << 21  # words per pass: 16 MB of uint64 temporaries
_MASK = (1 << 64) - 1
_C1, _C2, _C3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _words(a: Any, xp: Any) -> Any:
    """`a`'s bytes as the widest unsigned words that tile them, flat."""
    flat = xp.ascontiguousarray(a).reshape(-1)
    raw = flat.view(xp.uint8)
    for width in (np.uint64, np.uint32, np.uint16):
        if raw.size % np.dtype(width).itemsize == 0:
            return raw.view(width)
    return raw


def fingerprint(a: Any) -> int:
    """A 64-bit fingerprint of `a`'s contents (and shape and dtype)."""
    xp = module_of(a)
    if xp is not np:
        return settle(device_print(a))
    words = _words(a, xp)
    h = _header(a)
    for start in range(0, words.size, _CHUNK):
        x = words[start:start + _CHUNK].astype(np.uint64)
        x += xp.arange(start, start + x.size, dtype=np.uint64) * _C1
        x ^= x >> _S30
        x *= _C2
        x ^= x >> _S27
        x *= _C3
        x ^= x >> _S31
        h = (h + int(x.sum(dtype=np.uint64))) & _MASK
    return h




def _header(a: Any) -> int:
    return hash((tuple(a.shape), str(a.dtype))) & _MASK


# the mix above, per word width; one block's sum by warp shuffles, the blocks' by one 64-bit atomic each (NVRTC
# defines __CUDACC__; the host branch is for the tests' CuPy stand-in, docs/hostcuda.md "CuPy's paths on a stand-in")
_SOURCE = r"""
template <typename W>
__device__ void gk_print(const W* __restrict__ w, long long n, unsigned long long* out) {  // out: its slot
    unsigned long long s = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        unsigned long long x = (unsigned long long)w[i] + (unsigned long long)i * 0x9E3779B97F4A7C15ULL;
        x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ULL;
        x ^= x >> 27; x *= 0x94D049BB133111EBULL;
        x ^= x >> 31;
        s += x;
    }
#if defined(__CUDACC__)
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    __shared__ unsigned long long part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0ULL;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (lane == 0) atomicAdd(out, s);
    }
#else  // the host (tests/support/fakecupy.py: g++, a block's threads one after another): each adds its own sum
    atomicAdd(out, s);
#endif
}
""" + "".join(f'extern "C" __global__ void gk_print{k}(const {t}* w, long long n, unsigned long long* out, '
                  "long long slot) { gk_print(w, n, out + slot); }\n"
                  for k, t in ((8, "unsigned long long"), (4, "unsigned int"), (2, "unsigned short"),
                               (1, "unsigned char")))
_KERNELS: dict = {}  # word size -> the compiled kernel (CuPy caches the module on disk too)
_BLOCK = 256


def _kernel(cupy: Any, size: int) -> Any:
    k = _KERNELS.get(size)
    if k is None:
        module = cupy.RawModule(code=_SOURCE, options=("-std=c++11",))
        for width in (8, 4, 2, 1):
            _KERNELS[width] = module.get_function(f"gk_print{width}")
        _KERNELS["blocks"] = cupy.cuda.Device().attributes["MultiProcessorCount"] * 8
        k = _KERNELS[size]
    return k


_SLOT_COUNT = 1024
# (device, stream) -> the _Slots prints land in now (a program's prints are taken on its current stream)
_SLABS: dict = {}


class _Slots:
    """Device words that 1024 prints' sums land in: one allocation, zeroed once, for 1024 prints (a print was a
    1-element array each, allocated and zeroed: two CuPy operations more per print), read back once for all of
    them (`settle_all`); sealed once read, so that a later print never lands in words already read."""

    __slots__ = ("out", "stream", "used", "values")

    def __init__(self, cupy: Any, stream: Any):
        self.out, self.stream, self.used, self.values = cupy.zeros(_SLOT_COUNT, np.uint64), stream, 0, None

    def value(self, k: int) -> int:
        if self.values is None:
            self.values = self.out[:self.used].get(stream=self.stream).tolist()  # one synchronisation
        return self.values[k]


def _slot(cupy: Any) -> tuple[_Slots, int]:
    stream = cupy.cuda.get_current_stream()
    key = (cupy.cuda.runtime.getDevice(), stream.ptr)
    slots = _SLABS.get(key)
    if slots is None or slots.values is not None or slots.used == _SLOT_COUNT:
        slots = _SLABS[key] = _Slots(cupy, stream)
    k = slots.used
    slots.used = k + 1
    return slots, k


def device_print(a: Any) -> tuple[int, _Slots, int]:
    """The fingerprint of CuPy array `a` launched on the current stream, not waited for: (header, the slots
    and the slot its sum lands in); `settle` reads it as `fingerprint` returns it. A C-contiguous array is
    read as it lies, its words the widest that tile its bytes (as `_words` makes them), with no view made."""
    import cupy
    if a.flags.c_contiguous:
        n = a.nbytes
        width = 8 if n % 8 == 0 else 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
        words, n = a, n // width
    else:
        words = _words(a, cupy)
        n, width = words.size, words.dtype.itemsize
    slots, k = _slot(cupy)
    if n:
        kernel = _kernel(cupy, width)
        grid = min(-(-n // _BLOCK), _KERNELS["blocks"])
        kernel((grid,), (_BLOCK,), (words, np.int64(n), slots.out, np.int64(k)))
    return _header(a), slots, k


def settle(p: tuple[int, _Slots, int]) -> int:
    """A `device_print`'s value (waits for it)."""
    return (p[0] + p[1].value(p[2])) & _MASK


def settle_all(prints: list) -> list[int]:
    """The values of several `device_print`s: one synchronisation for each set of slots they land in (one,
    mostly)."""
    return [(h + slots.value(k)) & _MASK for h, slots, k in prints]
