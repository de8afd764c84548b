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

# Beyond the basics: other types and the kernels tinygrad makes of larger graphs.
big = rng.standard_normal(100_000).astype(np.float32)
check("sum 100000", Tensor(big, device="AMD").sum().numpy(), big.sum(dtype=np.float64), 1e-4, 1e-2)
check("argmax", Tensor(big, device="AMD").argmax().numpy(), big.argmax(), 0, 0)
s_np = rng.standard_normal((32, 48)).astype(np.float32)
check("softmax", Tensor(s_np, device="AMD").softmax(axis=1).numpy(),
      np.exp(s_np) / np.exp(s_np).sum(axis=1, keepdims=True), 1e-5, 1e-7)
check("sin", Tensor(big[:1000], device="AMD").sin().numpy(), np.sin(big[:1000]), 1e-5, 1e-6)
i_np = rng.integers(-1000, 1000, 4096).astype(np.int32)
j_np = rng.integers(1, 100, 4096).astype(np.int32)
i_t, j_t = Tensor(i_np, device="AMD"), Tensor(j_np, device="AMD")
check("int32 (i*3+j)//j", ((i_t * 3 + j_t) // j_t).numpy(), (i_np * 3 + j_np) // j_np, 0, 0)
check("int32 i%j", (i_t % j_t).numpy(), i_np % j_np, 0, 0)
check("int32 (i<<3)&0xff0", ((i_t << 3) & 0xFF0).numpy(), (i_np << 3) & 0xFF0, 0, 0)
h_np = rng.standard_normal(1024).astype(np.float16)
check("float16 h*h+1", (Tensor(h_np, device="AMD") * Tensor(h_np, device="AMD") + 1).numpy(),
      h_np * h_np + np.float16(1), 1e-3, 1e-3)
check("float64 exp", (Tensor(big[:100].astype(np.float64), device="AMD") * 2.5).exp().numpy(),
      np.exp(big[:100].astype(np.float64) * 2.5), 1e-12, 0)
check("uint8 +7", (Tensor(np.arange(256, dtype=np.uint8), device="AMD") + 7).numpy(),
      np.arange(256, dtype=np.uint8) + np.uint8(7), 0, 0)
check("cumsum", Tensor(big[:300], device="AMD").cumsum().numpy(),
      np.cumsum(big[:300].astype(np.float64)), 1e-4, 1e-4)
img = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
conv = np.array([[[(img[0, :, y:y + 3, x:x + 3] * w[o]).sum(dtype=np.float64) for x in range(14)]
                  for y in range(14)] for o in range(4)])[None]
check("conv2d 3x3", Tensor(img, device="AMD").conv2d(Tensor(w, device="AMD")).numpy(), conv,
      1e-4, 1e-4)
print(f"all ok in {time.time() - t0:.1f} s", flush=True)
