/*
 * The kernel rocr_kernel.c loads: out[i] = a[i] + b[i] for i < n, built by clang-19 for one
 * gfx9 target (-nogpulib: no device libraries, the work-item builtins only) and linked into
 * a shared object by ld.lld-19 (what hsa_code_object_reader loads).
 */
kernel void vadd(global const int *a, global const int *b, global int *out, uint n)
{
    uint i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
             __builtin_amdgcn_workitem_id_x();
    if (i < n)
        out[i] = a[i] + b[i];
}
