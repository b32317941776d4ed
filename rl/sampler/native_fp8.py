"""A one-pass C kernel for the run-time FP8 E4M3 quantizers (W8A8 activations, FP8 KV cache).

Owns: the C source, its build with the system's C compiler into a cached shared object, the
ctypes binding, and two functions with the torch fast path's signature:

    act(x)  per token (last dim) s = amax / 448, value = E4M3(x / s) * s   (all-zero token: 0)
    kv(x)   E4M3(clamp(x, -448, 448))                                       (scale 1.0)

Why: the torch version of `act` is eight elementwise kernels (abs, amax, div, compare, fill,
cast, table lookup, mul), each a pass over the tensor and a dispatch. Measured here with torch's 2
threads: 45 us at 8 x 576 (decode) and 1.33 ms at 384 x 1,536 (prefill), against 70 us and 2.5 ms
for the Linear that follows, which is why a W8A8 group cost +19.5% over BF16. This kernel reads the
row twice (amax, then round) and writes it once.

Rounding, exactly as E4M3 (4 exponent bits, bias 7, 3 mantissa bits, subnormals of 2^-9,
max 448, round half to even), done on float32 bits so the compiler can vectorize it:
- |v| >= 2^-6 (normal): add 0x7FFFF plus the lowest kept bit, clear the 20 dropped mantissa bits
  (round half to even on 3 mantissa bits; a carry into the exponent is the correct result);
- |v| <  2^-6 (subnormal): (|v| + 2^14) - 2^14, whose float32 ulp is 2^-9: the nearest multiple
  of 2^-9, ties to even (built without -ffast-math, so the compiler keeps the two operations);
- then min(., 448) and the sign of v.
Not covered: NaN and Inf (the callers never pass them; `rl.quant` is the checked path).

`load()` returns None when no compiler is found or the build fails (the torch path is used), and
`fp8_runtime.runtime_quantizers` accepts this kernel only if it equals `rl.quant` on a probe of edge
values, as it does for the torch path. The shared object is cached under
$PATCHGYM_HOME/native/ by the hash of the source and the compiler flags.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable

import torch

_SOURCE = r"""
#include <stdint.h>
#include <string.h>

/* branch-free so that the loops vectorize: both roundings are computed and one is kept */
static inline float e4m3(float v) {
    uint32_t bits, mag;
    memcpy(&bits, &v, 4);
    mag = bits & 0x7FFFFFFFu;
    float a;
    memcpy(&a, &mag, 4);
    uint32_t up = (mag + 0x7FFFFu + ((mag >> 20) & 1u)) & 0xFFF00000u;
    float normal;
    memcpy(&normal, &up, 4);
    normal = normal < 448.0f ? normal : 448.0f;
    float sub = (a + 16384.0f) - 16384.0f;       /* float32 ulp of 2^14 is 2^-9 */
    float r = a >= 0.015625f ? normal : sub;     /* 2^-6: E4M3's smallest normal */
    uint32_t rb;
    memcpy(&rb, &r, 4);
    rb |= bits & 0x80000000u;
    memcpy(&r, &rb, 4);
    return r;
}

void pg_fp8_act(const float *restrict x, float *restrict out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; i++) {
        const float *row = x + i * cols;
        float *o = out + i * cols;
        const int32_t *ib = (const int32_t *)row;
        int32_t top = 0;                          /* |x| as bits: ordered like the magnitudes */
        for (int64_t j = 0; j < cols; j++) {
            int32_t m = ib[j] & 0x7FFFFFFF;
            top = m > top ? m : top;
        }
        float amax;
        memcpy(&amax, &top, 4);
        float scale = amax / 448.0f;
        float safe = scale == 0.0f ? 1.0f : scale;
        for (int64_t j = 0; j < cols; j++) o[j] = e4m3(row[j] / safe) * scale;
    }
}

void pg_fp8_kv(const float *restrict x, float *restrict out, int64_t n) {
    for (int64_t j = 0; j < n; j++) out[j] = e4m3(x[j]);
}
"""
# -fno-trapping-math lets the compiler turn the float selects into blends (vectorized); it changes
# no result, only whether FP exception flags may be raised. -ffp-contract=off: no fused
# multiply-adds, each operation rounds as torch's does.
_FLAGS = ["-O3", "-fPIC", "-shared", "-fno-fast-math", "-fno-trapping-math", "-ffp-contract=off"]


def _cpu_flags() -> list[str]:
    """-mavx2 where this CPU has it (the object is cached per flag set, so never run elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return ["-mavx2"] if "avx2" in flags else []

_lock = threading.Lock()
_loaded: dict[str, object] = {}


def _home() -> Path:
    from patchgym.rl.models import patchgym_home  # stdlib-only at import; lazy like sglang.py's

    return patchgym_home() / "native"


def _build(compiler: str) -> Path | None:
    flags = _FLAGS + _cpu_flags()
    digest = hashlib.sha256((_SOURCE + " ".join(flags) + compiler).encode()).hexdigest()[:16]
    target = _home() / f"fp8-{digest}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "fp8.c"
        src.write_text(_SOURCE)
        out = Path(tmp) / "fp8.so"
        done = subprocess.run([compiler, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, timeout=120)
        if done.returncode != 0:
            return None
        os.replace(out, target)  # atomic: a concurrent builder sees the whole file or none
    return target


def load() -> object | None:
    """The compiled library (ctypes), or None when it cannot be built here."""
    with _lock:
        if "lib" in _loaded:
            return _loaded["lib"]
        lib = None
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if compiler and os.environ.get("PATCHGYM_NO_NATIVE") != "1":
            try:
                path = _build(compiler)
                if path is not None:
                    lib = ctypes.CDLL(str(path))  # CDLL releases the GIL during each call
                    for name, n in (("pg_fp8_act", 4), ("pg_fp8_kv", 3)):
                        fn = getattr(lib, name)
                        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * (n - 2)
                        fn.restype = None
            except (OSError, subprocess.SubprocessError):
                lib = None
        _loaded["lib"] = lib
        return lib


def quantizers() -> tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]] | None:
    """(kv, act) through the C kernel, or None when it is not available. Inputs of another dtype
    or layout go through a float32 contiguous copy; outputs have the input's shape and dtype."""
    lib = load()
    if lib is None:
        return None
    act_fn, kv_fn = lib.pg_fp8_act, lib.pg_fp8_kv

    def prepared(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.device.type != "cpu":
            raise ValueError("the native fp8 kernel runs on CPU tensors only")
        src = x.detach()
        if src.dtype != torch.float32 or not src.is_contiguous():
            src = src.to(torch.float32).contiguous()
        return src, torch.empty_like(src)

    def act(x: torch.Tensor) -> torch.Tensor:
        src, out = prepared(x)
        cols = src.shape[-1] if src.dim() else 1
        if src.numel():
            act_fn(src.data_ptr(), out.data_ptr(), src.numel() // cols, cols)
        return out if out.dtype == x.dtype else out.to(x.dtype)

    def kv(x: torch.Tensor) -> torch.Tensor:
        src, out = prepared(x)
        if src.numel():
            kv_fn(src.data_ptr(), out.data_ptr(), src.numel())
        return out if out.dtype == x.dtype else out.to(x.dtype)

    return kv, act
