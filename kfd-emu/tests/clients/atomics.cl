/*
 * The kernel rocr_atomics.c loads: every work-item adds 1 to *counter `times` times with a
 * device-wide atomic (global_atomic_add on gfx9), built by clang-19 for one gfx9 target
 * (-nogpulib) and linked into a shared object by ld.lld-19.
 */
kernel void gpu_inc(global uint *counter, uint times)
{
    for (uint i = 0; i < times; i++)
        __atomic_fetch_add(counter, 1u, __ATOMIC_RELAXED);
}
