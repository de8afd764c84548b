// Loads to LDS, compiled by gfx9/tests/corpus.rs (`lds_dma`): on gfx942, clang's
// __builtin_amdgcn_global_load_lds (LLVM's llvm.amdgcn.global.load.lds, selected as
// global_load_lds_dword with the LDS base in M0) copies each lane's dword from global memory
// to LDS without a VGPR: lane t of a wave whose LDS base is `base` writes base + offset + 4 t,
// the immediate offset applied to the global address too. Other targets copy through VGPRs,
// the same result. Built apart from corpus.cl: LLVM 19 crashes in its post-RA machine
// scheduler on this kernel for gfx942 unless `-mllvm -enable-post-misched=false`.

// 256 items a group, four waves: wave w's LDS base is tile + 64 w; with the 16-byte offset,
// item l's dword of in (+ 4 dwords) lands at tile[4 + l].
__kernel void lds_dma(__global uint *out, __global const uint *in, __local uint *tile) {
    uint l = __builtin_amdgcn_workitem_id_x();
    uint g = __builtin_amdgcn_workgroup_id_x() * 256;
#if defined(__gfx942__)
    uint w = l / 64 * 64;
    __builtin_amdgcn_global_load_lds(in + g + l, tile + w, 4, 16, 0);
    // The LDS write completes with VM_CNT: LLVM 19 waits only for LGKM_CNT before the
    // barrier (its memory model learnt direct loads to LDS later, llvm-project PR 142018),
    // so the other waves' copies are waited for here, as hardware needs.
    __builtin_amdgcn_s_waitcnt(0);
#else
    tile[4 + l] = in[g + l + 4];
#endif
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    out[g + l] = tile[4 + (l * 5) % 256] + l;
}
