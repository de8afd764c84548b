; Loads to LDS from LLVM IR, compiled by gfx9/tests/corpus.rs (`lds_dma_ir`) for gfx906,
; gfx908, gfx90a and gfx942: clang 19 has no builtin for llvm.amdgcn.raw.buffer.load.lds, and
; its __builtin_amdgcn_global_load_lds is gfx940-only, so the intrinsics are called here.
; llvm.amdgcn.raw.buffer.load.lds selects buffer_load_dword ... lds (MUBUF's LDS bit) and
; llvm.amdgcn.global.load.lds with size 2 selects global_load_ushort ... lds before gfx942
; (global_load_lds_ushort on gfx942); M0 holds each wave's LDS base, the immediate offset is
; added to both addresses, and lane t's dword lands at M0 + offset + 4 t (a short
; zero-extended). 256 items a group, four waves:
;   tile[4 + l]   = in32[g + l + 4]                  (buffer, offset 16)
;   tile[301 + l] = zext(in16[g + l + 2])            (global, size 2, offset 4)
;   out[g + l]    = tile[4 + (5 l mod 256)] + 3 * tile[301 + (7 l mod 256)] + l
; Built with -mllvm -enable-post-misched=false: LLVM 19's post-RA scheduler crashes on it.

target triple = "amdgcn-amd-amdhsa"

declare void @llvm.amdgcn.raw.buffer.load.lds(<4 x i32>, ptr addrspace(3), i32, i32, i32, i32, i32)
declare void @llvm.amdgcn.global.load.lds(ptr addrspace(1), ptr addrspace(3), i32, i32, i32)
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare void @llvm.amdgcn.s.barrier()
declare void @llvm.amdgcn.s.waitcnt(i32)

define amdgpu_kernel void @lds_dma_ir(ptr addrspace(1) %out, ptr addrspace(1) %in, i32 %bytes, ptr addrspace(3) %tile) {
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %gid = call i32 @llvm.amdgcn.workgroup.id.x()
  %g = shl i32 %gid, 8
  %w = and i32 %l, -64
  %gl = add i32 %g, %l
  %addr = ptrtoint ptr addrspace(1) %in to i64
  %lo = trunc i64 %addr to i32
  %hi64 = lshr i64 %addr, 32
  %hi = trunc i64 %hi64 to i32
  %hi16 = and i32 %hi, 65535
  %r0 = insertelement <4 x i32> poison, i32 %lo, i32 0
  %r1 = insertelement <4 x i32> %r0, i32 %hi16, i32 1
  %r2 = insertelement <4 x i32> %r1, i32 %bytes, i32 2
  ; Word 3 as LLVM builds raw buffers for gfx9 (0x27000: 32 FLOAT, unused by untyped loads).
  %rsrc = insertelement <4 x i32> %r2, i32 159744, i32 3
  %base1 = getelementptr i32, ptr addrspace(3) %tile, i32 %w
  %voff = shl i32 %gl, 2
  call void @llvm.amdgcn.raw.buffer.load.lds(<4 x i32> %rsrc, ptr addrspace(3) %base1, i32 4, i32 %voff, i32 0, i32 16, i32 0)
  %w300 = add i32 %w, 300
  %base2 = getelementptr i32, ptr addrspace(3) %tile, i32 %w300
  %src = getelementptr i16, ptr addrspace(1) %in, i32 %gl
  call void @llvm.amdgcn.global.load.lds(ptr addrspace(1) %src, ptr addrspace(3) %base2, i32 2, i32 4, i32 0)
  ; The LDS writes complete with VM_CNT; LLVM 19 does not wait for them before a barrier.
  call void @llvm.amdgcn.s.waitcnt(i32 0)
  call void @llvm.amdgcn.s.barrier()
  %l5 = mul i32 %l, 5
  %i1 = and i32 %l5, 255
  %j1 = add i32 %i1, 4
  %p1 = getelementptr i32, ptr addrspace(3) %tile, i32 %j1
  %v1 = load i32, ptr addrspace(3) %p1
  %l7 = mul i32 %l, 7
  %i2 = and i32 %l7, 255
  %j2 = add i32 %i2, 301
  %p2 = getelementptr i32, ptr addrspace(3) %tile, i32 %j2
  %v2 = load i32, ptr addrspace(3) %p2
  %v2x3 = mul i32 %v2, 3
  %s1 = add i32 %v1, %v2x3
  %s = add i32 %s1, %l
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gl
  store i32 %s, ptr addrspace(1) %po
  ret void
}
