// gfx11 (RDNA3) kernels for tests/gfx11.rs: compiled by clang-19 for gfx1100 (wave32, its
// default), with the VOPD dual issue, VOP3 literals and s_delay_alu LLVM emits for it. Each
// kernel's result is computed again on the host by the test.

static inline uint gx(void) {
    // hidden_group_size_x (code object v5): the dispatch's workgroup size.
    return __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
}

// f32 arithmetic the compiler pairs into VOPD: y = a * x + y, plus a second expression.
__kernel void axpy2(__global float *y, __global const float *x, float a, uint n) {
    uint i = gx();
    if (i < n) {
        float xi = x[i], yi = y[i];
        float u = a * xi + yi;
        float v = xi * 3.0f - yi * 0.5f;
        y[i] = u * v + (u - v) * 2.0f;
    }
}

// Integers: shifts, masks, multiplies, divides and a data-dependent loop.
__kernel void ints(__global uint *out, __global const uint *in, uint n) {
    uint i = gx();
    if (i < n) {
        uint v = in[i];
        uint s = 0;
        for (uint k = 0; k < (v & 7); k++) {
            s += (v >> k) ^ (k * 0x9e3779b9u);
        }
        out[i] = s + v / 7u + (v % 13u) * (v & 0xff) + (v << 3);
    }
}

// A workgroup sum through LDS with barriers (64 work-items: two wave32 waves).
__kernel void wg_sum(__global uint *out, __global const uint *in) {
    __local uint buf[64];
    uint l = __builtin_amdgcn_workitem_id_x();
    buf[l] = in[gx()];
    for (uint s = 32; s > 0; s >>= 1) {
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
        __builtin_amdgcn_s_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
        if (l < s) {
            buf[l] += buf[l + s];
        }
    }
    if (l == 0) {
        out[__builtin_amdgcn_workgroup_id_x()] = buf[0];
    }
}

// Divergence and the wave32 ballot: odd and even lanes take different paths, and each lane
// records its wave's ballot of (v & 1).
__kernel void diverge(__global uint *out, __global const uint *in) {
    uint i = gx();
    uint v = in[i];
    uint r;
    if (v & 1) {
        r = v * 3 + 1;
    } else {
        r = v / 2;
    }
    out[2 * i] = r;
    out[2 * i + 1] = __builtin_amdgcn_ballot_w32((v & 1) != 0);
}

// Global atomics from every work-item.
__kernel void atomics(__global uint *acc, __global const uint *in) {
    uint v = in[gx()];
    __atomic_fetch_add(&acc[0], v, __ATOMIC_RELAXED);
    __atomic_fetch_max(&acc[1], v, __ATOMIC_RELAXED);
    __atomic_fetch_min(&acc[2], v, __ATOMIC_RELAXED);
}

// Private memory indexed by data: the array lives in scratch (scratch_* instructions from
// FLAT_SCRATCH, which the prolog sets with s_setreg), swizzled across the wave32's lanes.
__kernel void priv(__global uint *out, __global const uint *in) {
    uint i = gx();
    volatile uint a[40];
    for (uint k = 0; k < 40; k++) {
        a[k] = in[i] * k + k;
    }
    uint idx = in[i] % 40;
    out[i] = a[idx] + a[(idx + 7) % 40];
}
