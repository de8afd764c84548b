"""tinygrad's AMD backend computes Tensor results on the emulated GPU; numpy checks them.

Run by kfd-emu/tests/tinygrad.rs under `kfd-emu run --machine mi300x` with tinygrad from PyPI
(unmodified, in the venv scripts/fetch-tinygrad.sh makes) and DEV=KFD+AMD:LLVM: tinygrad
opens /dev/kfd through its KFD interface, compiles each kernel for gfx942 with libLLVM 19,
copies through SDMA queues and dispatches on a compute queue (AQL with PM4 IBs, or PM4 with
AMD_AQL=0). Prints each result and `all ok`; exits non-zero at the first mismatch.
"""
import sys
import time

import numpy as np

t0 = time.time()
from tinygrad import Device, Tensor  # noqa: E402

dev = Device["AMD"]
print(f"device {Device.DEFAULT} {dev.arch} {type(dev.renderer).__name__} "
      f"xccs={dev.xccs} aql={dev.is_aql}", flush=True)

rng = np.random.default_rng(0)
a_np, b_np, c_np = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
a, b, c = (Tensor(x, device="AMD") for x in (a_np, b_np, c_np))


def check(name, got, want, rtol, atol):
    got = np.asarray(got)
    ok = got.shape == np.shape(want) and np.allclose(got, want, rtol=rtol, atol=atol)
    print(f"{name}: {'ok' if ok else 'MISMATCH'} {got.ravel()[:4]} want {np.ravel(want)[:4]}",
          flush=True)
    if not ok:
        err = np.max(np.abs(got - want)) if got.shape == np.shape(want) else "shape"
        sys.exit(f"{name}: mismatch ({err})")


# Elementwise. The transcendentals' tolerance: tinygrad computes exp and log from exp2/log2
# (v_exp_f32, v_log_f32: 1 ULP in the ISA guide) with a range reduction of its own.
check("a+b", (a + b).numpy(), a_np + b_np, 0, 0)
check("a*b+c", (a * b + c).numpy(), a_np * b_np + c_np, 1e-6, 1e-6)
check("exp", a.exp().numpy(), np.exp(a_np), 1e-5, 0)
check("log", (a.abs() + 0.5).log().numpy(), np.log(np.abs(a_np) + 0.5), 1e-5, 1e-6)
check("sqrt", a.abs().sqrt().numpy(), np.sqrt(np.abs(a_np)), 1e-6, 0)
# Reductions (tinygrad sums in its own order: a float32 sum's rounding differs from numpy's).
check("sum", a.sum().numpy(), a_np.sum(dtype=np.float64), 1e-5, 1e-5)
check("max", a.max().numpy(), a_np.max(), 0, 0)
m_np = rng.standard_normal((16, 32)).astype(np.float32)
check("sum(axis=1)", Tensor(m_np, device="AMD").sum(axis=1).numpy(),
      m_np.sum(axis=1, dtype=np.float64), 1e-5, 1e-5)
# A small matmul.
x_np, y_np = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
check("matmul 64x64", (Tensor(x_np, device="AMD") @ Tensor(y_np, device="AMD")).numpy(),
      x_np.astype(np.float64) @ y_np.astype(np.float64), 1e-4, 1e-4)
print(f"all ok in {time.time() - t0:.1f} s", flush=True)
