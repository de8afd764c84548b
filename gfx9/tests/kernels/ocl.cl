// The OpenCL kernels of gfx9/tests/corpus.rs that use the OpenCL library itself: built by
// clang-19 against Debian's ROCm 5.2 device libraries (opencl, ocml, ockl bitcode), so the
// work-item functions read the dispatch packet and code object v5's hidden arguments as
// ockl does, the math functions are ocml's, and the sub-group functions are ockl's DPP
// sequences.

__kernel void ocl_ids(__global uint *out) {
    size_t x = get_global_id(0), y = get_global_id(1);
    size_t i = y * get_global_size(0) + x;
    out[8 * i] = (uint)get_local_id(0) | (uint)get_local_id(1) << 16;
    out[8 * i + 1] = (uint)get_group_id(0) | (uint)get_group_id(1) << 16;
    out[8 * i + 2] = (uint)get_local_size(0) | (uint)get_local_size(1) << 16;
    out[8 * i + 3] = (uint)get_num_groups(0) | (uint)get_num_groups(1) << 16;
    out[8 * i + 4] = (uint)get_global_size(0) | (uint)get_global_size(1) << 16;
    out[8 * i + 5] = get_work_dim();
    out[8 * i + 6] = (uint)get_enqueued_local_size(0) | (uint)get_enqueued_local_size(1) << 16;
    out[8 * i + 7] = (uint)get_local_linear_id();
}

__kernel void ocl_math(__global float *out, __global const float *x, uint n) {
    size_t i = get_global_id(0);
    if (i < n) {
        float a = x[i];
        out[8 * i] = exp(a);
        out[8 * i + 1] = log(fabs(a) + 0.5f);
        out[8 * i + 2] = sin(a);
        out[8 * i + 3] = cos(a);
        out[8 * i + 4] = pow(fabs(a) + 0.25f, 1.5f);
        out[8 * i + 5] = tanh(a * 0.25f);
        out[8 * i + 6] = atan2(a, 3.0f);
        out[8 * i + 7] = cbrt(a);
    }
}

__kernel void ocl_dmath(__global double *out, __global const double *x, uint n) {
    size_t i = get_global_id(0);
    if (i < n) {
        double a = x[i];
        out[4 * i] = exp(a);
        out[4 * i + 1] = log(fabs(a) + 0.5);
        out[4 * i + 2] = sin(a);
        out[4 * i + 3] = sqrt(fabs(a));
    }
}

__kernel void ocl_subgroup(__global int *out, __global const int *in) {
    size_t i = get_global_id(0);
    int v = in[i];
    out[6 * i] = sub_group_reduce_add(v);
    out[6 * i + 1] = sub_group_scan_inclusive_add(v);
    out[6 * i + 2] = sub_group_reduce_max(v);
    out[6 * i + 3] = sub_group_broadcast(v, 5);
    out[6 * i + 4] = (int)get_sub_group_id() << 8 | (int)get_sub_group_local_id();
    out[6 * i + 5] = sub_group_any(v > 1000000000) | sub_group_all(v > -2000000000) << 1;
}
