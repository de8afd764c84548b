// The kernel corpus of gfx9/tests/corpus.rs: OpenCL C compiled by clang-19 for gfx906, gfx908,
// gfx90a and gfx942 (`-nogpulib`: no device library, so work-item ids and sizes come from the
// __builtin_amdgcn_* builtins). Each kernel's result is computed again on the host by the test.

#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// The dispatch packet's work-group size in dimension d (hsa_kernel_dispatch_packet_t's
// workgroup_size_x/y/z at bytes 4, 6, 8). __builtin_amdgcn_workgroup_size_x is this group's
// own size (the remainder for the last, partial group), not the stride of group ids.
static inline uint wg_stride(int d) {
    __constant ushort *p = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    return p[2 + d];
}
static inline uint gx(void) {
    return __builtin_amdgcn_workgroup_id_x() * wg_stride(0) + __builtin_amdgcn_workitem_id_x();
}
static inline uint gy(void) {
    return __builtin_amdgcn_workgroup_id_y() * wg_stride(1) + __builtin_amdgcn_workitem_id_y();
}
static inline void wg_barrier(void) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// f32 elementwise: saxpy, and a correctly rounded division and square root.
__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
    uint i = gx();
    if (i < n) {
        float v = a * x[i] + y[i];
        y[i] = v + x[i] / (y[i] + 3.0f) + __builtin_sqrtf(__builtin_fabsf(v));
    }
}

// f64 elementwise: fma, division, square root, min/max.
__kernel void dmath(__global double *out, __global const double *x, __global const double *y,
                    uint n) {
    uint i = gx();
    if (i < n) {
        double a = x[i], b = y[i];
        out[4 * i] = __builtin_fma(a, b, 1.5);
        out[4 * i + 1] = a / b;
        out[4 * i + 2] = __builtin_sqrt(__builtin_fabs(a));
        out[4 * i + 3] = __builtin_fmax(a, b) - __builtin_fmin(a, b) * 0.25;
    }
}

// f16: arithmetic in half, widened and narrowed.
__kernel void hmath(__global half *out, __global const half *x, __global const half *y,
                    uint n) {
    uint i = gx();
    if (i < n) {
        half a = x[i], b = y[i];
        out[3 * i] = a * b + a;
        out[3 * i + 1] = a - b;
        out[3 * i + 2] = (half)((float)a * 0.5f) * (half)2.0f;
    }
}

// Integer division and remainder: the u32/i32 expansions and the 64-bit ones.
__kernel void intdiv(__global uint *out32, __global ulong *out64, __global const uint *a,
                     __global const uint *b, __global const ulong *c, __global const ulong *d,
                     uint n) {
    uint i = gx();
    if (i < n) {
        out32[4 * i] = a[i] / b[i];
        out32[4 * i + 1] = a[i] % b[i];
        out32[4 * i + 2] = (uint)((int)a[i] / (int)b[i]);
        out32[4 * i + 3] = (uint)((int)a[i] % (int)b[i]);
        out64[4 * i] = c[i] / d[i];
        out64[4 * i + 1] = c[i] % d[i];
        out64[4 * i + 2] = (ulong)((long)c[i] / (long)d[i]);
        out64[4 * i + 3] = (ulong)((long)c[i] % (long)d[i]);
    }
}

// Bit operations.
__kernel void bitops(__global uint *out, __global const uint *a, __global const ulong *b,
                     uint n) {
    uint i = gx();
    if (i < n) {
        uint v = a[i];
        ulong w = b[i];
        out[8 * i] = __builtin_popcount(v) + __builtin_popcountl(w);
        out[8 * i + 1] = v ? __builtin_clz(v) : 32;
        out[8 * i + 2] = v ? __builtin_ctz(v) : 32;
        out[8 * i + 3] = (v << (i & 31)) | (v >> ((32 - (i & 31)) & 31));
        out[8 * i + 4] = (v >> 5) & 0x3ff;
        out[8 * i + 5] = __builtin_bswap32(v) ^ (uint)(w >> 13);
        out[8 * i + 6] = (uint)(w ? __builtin_clzl(w) : 64) + ((int)v >> (i & 31));
        out[8 * i + 7] = __builtin_bitreverse32(v) & ~(uint)w;
    }
}

// A work-group sum through LDS, tree-reduced with barriers.
__kernel void wg_sum(__global uint *out, __global const uint *in) {
    __local uint buf[256];
    uint l = __builtin_amdgcn_workitem_id_x();
    buf[l] = in[gx()];
    wg_barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (l < s)
            buf[l] += buf[l + s];
        wg_barrier();
    }
    if (l == 0)
        out[__builtin_amdgcn_workgroup_id_x()] = buf[0];
}

// Global atomics: add, a compare-and-swap loop (a multiply), max.
__kernel void gatomics(__global uint *acc, __global const uint *in) {
    uint v = in[gx()];
    __atomic_fetch_add(&acc[0], v, __ATOMIC_RELAXED);
    __atomic_fetch_max(&acc[1], v, __ATOMIC_RELAXED);
    __atomic_fetch_xor(&acc[2], v, __ATOMIC_RELAXED);
    uint old = __atomic_load_n(&acc[3], __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&acc[3], &old, old * (v | 1), 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
    __global ulong *acc64 = (__global ulong *)(acc + 4);
    __atomic_fetch_add(acc64, (ulong)v << 20, __ATOMIC_RELAXED);
}

// LDS atomics: a 16-bin histogram and 16 maxima per work-group, added to the global ones.
__kernel void lds_hist(__global uint *hist, __global const uint *in) {
    __local uint bins[32];
    uint l = __builtin_amdgcn_workitem_id_x();
    if (l < 32)
        bins[l] = 0;
    wg_barrier();
    uint v = in[gx()];
    __atomic_fetch_add(&bins[v & 15], 1u, __ATOMIC_RELAXED);
    __atomic_fetch_max(&bins[16 + ((v >> 4) & 15)], v, __ATOMIC_RELAXED);
    wg_barrier();
    if (l < 32)
        __atomic_fetch_add(&hist[l], bins[l], __ATOMIC_RELAXED);
}

// A 2D 5-point stencil over a w×h grid (edges copied).
__kernel void stencil(__global float *out, __global const float *in, uint w, uint h) {
    uint x = gx(), y = gy();
    if (x >= w || y >= h)
        return;
    uint i = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

// A private array indexed by data: scratch.
__kernel void scratch(__global uint *out, __global const uint *in, uint n) {
    uint i = gx();
    if (i >= n)
        return;
    uint arr[40];
    for (uint k = 0; k < 40; k++)
        arr[k] = in[i] * (k + 1) ^ k;
    uint s = 0;
    for (uint k = 0; k < 40; k++)
        s += arr[(in[i] + 7 * k) % 40] * (k + 3);
    arr[in[i] % 40] = s;
    out[i] = s + arr[(i * 3) % 40];
}

// A call to a function that is not inlined.
__attribute__((noinline)) float poly(float x, __global const float *c, int n) {
    float r = 0.0f;
    for (int k = n - 1; k >= 0; k--)
        r = __builtin_fmaf(r, x, c[k]);
    return r;
}
__kernel void call(__global float *out, __global const float *x, __global const float *c,
                   uint n) {
    uint i = gx();
    if (i < n)
        out[i] = poly(x[i], c, 5) + poly(x[i] * 0.5f, c + 1, 3);
}

// Divergence: if/else per lane, loops with per-lane trip counts (Collatz steps).
__kernel void diverge(__global uint *out, __global const uint *in, uint n) {
    uint i = gx();
    if (i >= n)
        return;
    uint v = in[i];
    uint r;
    if (v & 1) {
        r = v * 3;
        if (v & 2)
            r += 7;
    } else {
        r = v / 3;
    }
    uint steps = 0;
    ulong c = (v % 1000) + 1;
    while (c != 1 && steps < 500) {
        c = (c & 1) ? 3 * c + 1 : c / 2;
        steps++;
    }
    for (uint k = 0; k < (i % 9); k++)
        r ^= r << 3 | k;
    out[2 * i] = r;
    out[2 * i + 1] = steps;
}

// Wave-level operations: DPP row shifts, ds_swizzle, ds_bpermute, readfirstlane, ballot.
__kernel void waveops(__global uint *out, __global const uint *in) {
    uint i = gx();
    uint l = __builtin_amdgcn_workitem_id_x() & 63;
    int v = (int)in[i];
    // row_shr:1 (0x111), bound_ctrl: lanes with no source read 0.
    out[8 * i] = (uint)__builtin_amdgcn_mov_dpp(v, 0x111, 0xf, 0xf, true);
    // quad_perm [3,2,1,0] (0x1b).
    out[8 * i + 1] = (uint)__builtin_amdgcn_mov_dpp(v, 0x1b, 0xf, 0xf, false);
    // ds_swizzle: bitmask mode, xor 1 (offset = and 0x1f, or 0, xor 1).
    out[8 * i + 2] = (uint)__builtin_amdgcn_ds_swizzle(v, 0x041f);
    // ds_bpermute: read lane (l + 5) % 64.
    out[8 * i + 3] = (uint)__builtin_amdgcn_ds_bpermute((int)(((l + 5) & 63) * 4), v);
    out[8 * i + 4] = (uint)__builtin_amdgcn_readfirstlane(v);
    ulong b = __builtin_amdgcn_ballot_w64(v & 1);
    out[8 * i + 5] = (uint)b ^ (uint)(b >> 32);
    // A wave sum by DPP row_shr 1, 2, 4, 8 (within rows of 16) then a readlane per row.
    int s = v;
    s += __builtin_amdgcn_update_dpp(0, s, 0x111, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0, s, 0x112, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0, s, 0x114, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0, s, 0x118, 0xf, 0xf, false);
    out[8 * i + 6] = (uint)(__builtin_amdgcn_readlane(s, 15) + __builtin_amdgcn_readlane(s, 31) +
                            __builtin_amdgcn_readlane(s, 47) + __builtin_amdgcn_readlane(s, 63));
    out[8 * i + 7] = (uint)s;
}

// Math: fma, the hardware's exp2/log2/rcp/rsq/sin/cos (accuracy per the guide), min/max.
__kernel void fmath(__global float *out, __global const float *x, uint n) {
    uint i = gx();
    if (i < n) {
        float a = x[i];
        out[8 * i] = __builtin_fmaf(a, a, -2.0f);
        out[8 * i + 1] = __builtin_amdgcn_exp2f(a);
        out[8 * i + 2] = __builtin_amdgcn_logf(__builtin_fabsf(a) + 0.5f);
        out[8 * i + 3] = __builtin_amdgcn_rcpf(a);
        out[8 * i + 4] = __builtin_amdgcn_rsqf(__builtin_fabsf(a) + 1.0f);
        out[8 * i + 5] = __builtin_amdgcn_sinf(a * 0.1f);
        out[8 * i + 6] = __builtin_amdgcn_cosf(a * 0.1f);
        out[8 * i + 7] = __builtin_fminf(a, 1.0f) + __builtin_fmaxf(a, -1.0f) +
                         __builtin_floorf(a) + __builtin_truncf(a * 1.5f);
    }
}

// Conversions between the integer and float types.
__kernel void convert(__global uint *out, __global const float *x, __global const long *y,
                      uint n) {
    uint i = gx();
    if (i < n) {
        float a = x[i];
        long b = y[i];
        out[8 * i] = (uint)(int)a;
        out[8 * i + 1] = (uint)(__builtin_fabsf(a) < 4e9f ? (uint)__builtin_fabsf(a) : 7u);
        out[8 * i + 2] = __builtin_bit_cast(uint, (float)(int)(b >> 16));
        out[8 * i + 3] = __builtin_bit_cast(uint, (float)(ulong)b);
        double d = (double)b;
        out[8 * i + 4] = (uint)__builtin_bit_cast(ulong, d) ^ (uint)(__builtin_bit_cast(ulong, d) >> 32);
        out[8 * i + 5] = __builtin_bit_cast(uint, (float)((double)a * 3.0));
        half h = (half)(a * 0.001f);
        out[8 * i + 6] = (uint)__builtin_bit_cast(ushort, h) | (uint)(int)(float)h << 16;
        out[8 * i + 7] = (uint)(long)((double)a * 1e6);
    }
}

// IEEE special values in f32: NaN, infinities, signed zeros, denormals (the descriptor keeps
// f32 denormals, LLVM's default for gfx9).
__kernel void fspecial(__global float *out, __global const float *x, __global const float *y,
                       uint n) {
    uint i = gx();
    if (i < n) {
        float a = x[i], b = y[i];
        out[8 * i] = a + b;
        out[8 * i + 1] = a * b;
        out[8 * i + 2] = a / b;
        out[8 * i + 3] = __builtin_sqrtf(a);
        out[8 * i + 4] = __builtin_fminf(a, b);
        out[8 * i + 5] = __builtin_fmaxf(a, b);
        out[8 * i + 6] = __builtin_fmaf(a, b, a);
        out[8 * i + 7] = a < b ? a - b : (a == b ? 1.0f : __builtin_copysignf(2.0f, b));
    }
}

// The same in f64.
__kernel void dspecial(__global double *out, __global const double *x,
                       __global const double *y, uint n) {
    uint i = gx();
    if (i < n) {
        double a = x[i], b = y[i];
        out[8 * i] = a + b;
        out[8 * i + 1] = a * b;
        out[8 * i + 2] = a / b;
        out[8 * i + 3] = __builtin_sqrt(a);
        out[8 * i + 4] = __builtin_fmin(a, b);
        out[8 * i + 5] = __builtin_fmax(a, b);
        out[8 * i + 6] = __builtin_fma(a, b, a);
        out[8 * i + 7] = a < b ? a - b : (a == b ? 1.0 : __builtin_copysign(2.0, b));
    }
}

// Vector types: packed f32 (v_pk_* on gfx90a/gfx942) and packed f16 math.
__kernel void packed(__global float2 *out, __global half2 *hout, __global const float2 *x,
                     __global const half2 *h, uint n) {
    uint i = gx();
    if (i < n) {
        float2 a = x[i], b = x[(i + 1) % n];
        out[2 * i] = a * b + a;
        out[2 * i + 1] = a - b * 0.5f;
        half2 p = h[i], q = h[(i + 3) % n];
        hout[2 * i] = p * q - p;
        hout[2 * i + 1] = (half2)(p.y, p.x) + q * (half)0.25f;
    }
}

// A 1024-item work-group (16 waves): an inclusive scan in LDS (Hillis-Steele, two barriers a
// step), stored through bytes and shorts too. (Without the attribute LLVM assumes at most 256
// work-items per group, AMDGPU's default, and compiles address arithmetic that relies on it.)
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void scan1024(__global uint *out, __global uchar *bytes, __global ushort *shorts,
                       __global const uint *in) {
    __local uint buf[1024];
    uint l = __builtin_amdgcn_workitem_id_x();
    uint i = gx();
    buf[l] = in[i];
    wg_barrier();
    for (uint s = 1; s < 1024; s <<= 1) {
        uint v = l >= s ? buf[l - s] : 0;
        wg_barrier();
        buf[l] += v;
        wg_barrier();
    }
    out[i] = buf[l];
    bytes[i] = (uchar)(buf[1023 - l] >> 3);
    shorts[i] = (ushort)(buf[l] >> 7);
}

// More atomics: f32 add (global and LDS), wrapping increment, exchange, signed min, a 64-bit
// compare-and-swap loop.
__kernel void atomics2(__global uint *acc, __global float *facc, __global const uint *in) {
    __local float lsum;
    uint l = __builtin_amdgcn_workitem_id_x();
    if (l == 0)
        lsum = 0.0f;
    wg_barrier();
    uint v = in[gx()];
    float f = (float)(v & 255);
    __atomic_fetch_add(&lsum, f, __ATOMIC_RELAXED);
    __atomic_fetch_add(&facc[0], f * 0.5f, __ATOMIC_RELAXED);
    __builtin_amdgcn_atomic_inc32((volatile __global uint *)&acc[0], 99u, __ATOMIC_RELAXED,
                                  "agent");
    __builtin_amdgcn_atomic_dec32((volatile __global uint *)&acc[1], 1000u, __ATOMIC_RELAXED,
                                  "agent");
    __atomic_fetch_min((__global int *)&acc[2], (int)v, __ATOMIC_RELAXED);
    __atomic_exchange_n(&acc[3], 7u, __ATOMIC_RELAXED);
    __global ulong *p = (__global ulong *)(acc + 4);
    ulong old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, old + ((ulong)v << 16) + 1, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    wg_barrier();
    if (l == 0)
        facc[1 + __builtin_amdgcn_workgroup_id_x()] = lsum;
}

// Wide LDS accesses: 64- and 128-bit, indexed by data.
__kernel void lds_wide(__global uint4 *out, __global const uint4 *in) {
    __local uint4 q[256];
    __local ulong d[256];
    uint l = __builtin_amdgcn_workitem_id_x();
    uint4 v = in[gx()];
    q[l] = v;
    d[255 - l] = ((ulong)v.x << 32) | v.w;
    wg_barrier();
    uint4 a = q[v.y & 255];
    ulong b = d[v.z & 255];
    out[gx()] = (uint4)(a.x + (uint)b, a.y ^ (uint)(b >> 32), a.z, a.w + l);
}

// A 3D grid with partial work-groups in every dimension.
__kernel void grid3d(__global uint *out, uint w, uint h) {
    uint x = gx(), y = gy();
    uint z = __builtin_amdgcn_workgroup_id_z() * wg_stride(2) + __builtin_amdgcn_workitem_id_z();
    out[(z * h + y) * w + x] = x | y << 8 | z << 16 | __builtin_amdgcn_workitem_id_z() << 24;
}

// 64-bit integer arithmetic: multiplies, variable shifts, compares, min/max.
__kernel void i64ops(__global ulong *out, __global const ulong *a, __global const ulong *b,
                     uint n) {
    uint i = gx();
    if (i < n) {
        ulong x = a[i], y = b[i];
        long sx = (long)x, sy = (long)y;
        out[8 * i] = x * y;
        out[8 * i + 1] = (ulong)(uint)x * (ulong)(uint)y;
        out[8 * i + 2] = (x << (y & 63)) ^ (x >> (y >> 58));
        out[8 * i + 3] = (ulong)(sx >> (y & 63));
        out[8 * i + 4] = sx < sy ? (ulong)sx : (ulong)sy;
        out[8 * i + 5] = x > y ? x - y : y - x;
        out[8 * i + 6] = (ulong)((long)(int)x * (long)(int)(y >> 32));
        out[8 * i + 7] = (ulong)((x & 0xffffff) * (y & 0xffffff));
    }
}

// 8- and 16-bit integer vectors (SDWA on gfx9), with saturation-free wrapping arithmetic.
__kernel void narrow(__global uchar4 *out, __global short2 *sout, __global const uchar4 *a,
                     __global const short2 *b, uint n) {
    uint i = gx();
    if (i < n) {
        uchar4 x = a[i], y = a[(i + 7) % n];
        out[i] = (uchar4)((uchar)(x.x + y.y), (uchar)(x.y * y.x), x.z > y.w ? x.z : y.w,
                          (uchar)(x.w ^ y.z));
        short2 p = b[i], q = b[(i + 3) % n];
        sout[i] = (short2)((short)(p.x * q.y), (short)((p.y >> 3) - q.x));
    }
}

// Bytes and shorts in LDS, indexed by data.
__kernel void lds_bytes(__global uint *out, __global const uint *in) {
    __local uchar b[256];
    __local ushort h[256];
    uint l = __builtin_amdgcn_workitem_id_x();
    uint v = in[gx()];
    b[l] = (uchar)v;
    h[255 - l] = (ushort)(v >> 8);
    wg_barrier();
    out[gx()] = (uint)b[(v >> 16) & 255] | (uint)h[(v >> 24) & 255] << 8;
}

// Cross-lane moves by data: readlane with a uniform lane from the kernarg, ds_permute
// (a push to lane (l * 7) % 64).
__kernel void permute(__global uint *out, __global const uint *in, uint lane) {
    uint i = gx();
    uint l = __builtin_amdgcn_workitem_id_x() & 63;
    int v = (int)in[i];
    out[2 * i] = (uint)__builtin_amdgcn_readlane(v, lane);
    out[2 * i + 1] = (uint)__builtin_amdgcn_ds_permute((int)(((l * 7) & 63) * 4), v);
}

// A trap: the dispatch stops with it.
__kernel void trap(__global uint *out, __global const uint *in) {
    uint i = gx();
    if (in[i] == 7)
        __builtin_trap();
    out[i] = in[i];
}

#if defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx942__)
typedef float float4_t __attribute__((ext_vector_type(4)));
// A matrix multiply-accumulate per wave: D (16×16) = A (16×4) · B (4×16) + C with
// v_mfma_f32_16x16x4f32 (A[i][k] in lane 16k + i, B[k][j] in lane 16k + j, D[i][j] in
// register i % 4 of lane 16 (i / 4) + j). No MFMA on gfx906.
__kernel void mfma(__global float4_t *d, __global const float *a, __global const float *b,
                   __global const float4_t *c) {
    uint i = gx();
    d[i] = __builtin_amdgcn_mfma_f32_16x16x4f32(a[i], b[i], c[i], 0, 0, 0);
}

typedef half half4_t __attribute__((ext_vector_type(4)));
// v_mfma_f32_16x16x16f16: A[i][k] is element k % 4 of lane 16 (k / 4) + i (B alike), D as
// in `mfma`.
__kernel void mfma_f16(__global float4_t *d, __global const half4_t *a,
                       __global const half4_t *b, __global const float4_t *c) {
    uint i = gx();
    d[i] = __builtin_amdgcn_mfma_f32_16x16x16f16(a[i], b[i], c[i], 0, 0, 0);
}
#endif

#if defined(__gfx90a__) || defined(__gfx942__)
typedef double double4_t __attribute__((ext_vector_type(4)));
// v_mfma_f64_16x16x4f64: A[i][k] in lane 16k + i (B alike), D[i][j] in register pair i / 4
// of lane 16 (i % 4) + j.
__kernel void mfma_f64(__global double4_t *d, __global const double *a,
                       __global const double *b, __global const double4_t *c) {
    uint i = gx();
    d[i] = __builtin_amdgcn_mfma_f64_16x16x4f64(a[i], b[i], c[i], 0, 0, 0);
}
#endif

// Dynamic LDS: a __local pointer argument (the runtime passes its LDS offset, past the
// kernel's static LDS, and adds its size to the packet's group segment size).
__kernel void dyn_lds(__global uint *out, __global const uint *in, __local uint *dyn) {
    __local uint fixed[64];
    uint l = __builtin_amdgcn_workitem_id_x();
    uint v = in[gx()];
    dyn[l] = v;
    if (l < 64)
        fixed[l] = v ^ 0x55;
    wg_barrier();
    out[gx()] = dyn[(l * 5) % __builtin_amdgcn_workgroup_size_x()] + fixed[l % 64];
}

// Float-to-integer conversions of out-of-range values and NaN (undefined in C; LLVM emits the
// hardware's v_cvt_{i32,u32}_{f32,f64}, which saturate and turn NaN into 0).
__kernel void cvt_special(__global uint *out, __global const float *x, __global const double *d,
                          uint n) {
    uint i = gx();
    if (i < n) {
        out[4 * i] = (uint)(int)x[i];
        out[4 * i + 1] = (uint)x[i];
        out[4 * i + 2] = (uint)(int)d[i];
        out[4 * i + 3] = (uint)d[i];
    }
}

// MODE.FP_ROUND from compiled code: clang lowers __builtin_set_flt_rounds (llvm.set.rounding,
// FLT_ROUNDS numbering: 0 toward zero, 1 nearest, 2 upward, 3 downward) to an s_setreg of
// MODE's FP_ROUND fields through its own table. OpenCL has no FENV_ACCESS on this target, so
// empty volatile asm pins the arithmetic between the two mode switches.
__kernel void fp_round(__global float *out, __global double *dout, __global const float *x,
                       __global const double *dx, uint mode) {
    uint i = gx();
    float a = x[2 * i], b = x[2 * i + 1];
    double c = dx[2 * i], d = dx[2 * i + 1];
    __builtin_set_flt_rounds((int)mode);
    __asm__ volatile("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d));
    float s = a + b, p = a * b, f = __builtin_fmaf(a, b, 0.75f), q = a / b;
    double ds = c + d, dp = c * d, dq = c / d;
    __asm__ volatile("" : "+v"(s), "+v"(p), "+v"(f), "+v"(q), "+v"(ds), "+v"(dp), "+v"(dq));
    __builtin_set_flt_rounds(1);
    out[4 * i] = s;
    out[4 * i + 1] = p;
    out[4 * i + 2] = f;
    out[4 * i + 3] = q;
    dout[3 * i] = ds;
    dout[3 * i + 1] = dp;
    dout[3 * i + 2] = dq;
}
