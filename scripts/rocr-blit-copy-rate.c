/* How fast ROCr's blit kernels run under kfd-emu: times hsa_amd_memory_fill of a VRAM buffer
 * (twice: the second on pages already touched) and hsa_amd_memory_async_copy of it into a
 * second VRAM buffer, or (third argument "h") from a buffer of the CPU agent's first global
 * pool (system memory, as rocrtst's Memory_Async_Copy Host-To-Device copies it).
 *
 * ROCr 5.2.3 runs a copy of 1 MiB or more whose two agents are GPUs with its blit kernel
 * (GpuAgent::GetBlitObject, src/core/runtime/amd_gpu_agent.cpp; the kernels are
 * kBlitKernelSource in amd_blit_kernel.cpp), and every fill with its fill kernel: both run on
 * kfd-emu's interpreter. The copy's agents are the GPU on both sides, as rocrtst's test passes
 * them (memory_async_copy.cc, AcquireAsyncCopyAccess).
 *
 * Build: cc -O2 scripts/rocr-blit-copy-rate.c -o /tmp/blit-copy -lhsa-runtime64
 * Run:   kfd-emu run --machine radeon-vii -- /tmp/blit-copy 64 3      (VRAM -> VRAM, 64 MiB, 3 times)
 *        kfd-emu run --machine radeon-vii -- /tmp/blit-copy 64 3 h    (system memory -> VRAM) */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static hsa_agent_t gpu, cpu;
static int have_gpu, have_sys;
static hsa_amd_memory_pool_t vram, sys;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The GPU's coarse-grained global pool (VRAM). */
static hsa_status_t gpu_pool(hsa_amd_memory_pool_t p, void *data) {
  hsa_amd_segment_t segment;
  uint32_t flags;
  hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
  hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  if (segment == HSA_AMD_SEGMENT_GLOBAL && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)) {
    vram = p;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

/* The CPU's first global pool (system memory), as rocrtst's FindGlobalPool takes it. */
static hsa_status_t cpu_pool(hsa_amd_memory_pool_t p, void *data) {
  hsa_amd_segment_t segment;
  hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
  if (segment == HSA_AMD_SEGMENT_GLOBAL && !have_sys) {
    sys = p;
    have_sys = 1;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t agents(hsa_agent_t a, void *data) {
  hsa_device_type_t type;
  hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &type);
  if (type == HSA_DEVICE_TYPE_GPU && !have_gpu) {
    gpu = a;
    have_gpu = 1;
  }
  if (type == HSA_DEVICE_TYPE_CPU)
    cpu = a;
  return HSA_STATUS_SUCCESS;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? atol(argv[1]) : 64, n = mib << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 1, h2d = argc > 3 && argv[3][0] == 'h';
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    puts("hsa_init failed");
    return 1;
  }
  hsa_iterate_agents(agents, NULL);
  if (!have_gpu) {
    puts("no GPU agent");
    return 1;
  }
  hsa_amd_agent_iterate_memory_pools(gpu, gpu_pool, NULL);
  hsa_amd_agent_iterate_memory_pools(cpu, cpu_pool, NULL);
  void *src, *dst;
  if (hsa_amd_memory_pool_allocate(h2d ? sys : vram, n, 0, &src) ||
      hsa_amd_memory_pool_allocate(vram, n, 0, &dst)) {
    puts("allocation failed");
    return 1;
  }
  if (h2d) {
    if (hsa_amd_agents_allow_access(1, &gpu, NULL, src)) {
      puts("hsa_amd_agents_allow_access failed");
      return 1;
    }
    memset(src, 0x5a, n);
  } else {
    for (int i = 0; i < 2; i++) {
      double t = now();
      if (hsa_amd_memory_fill(src, 0x5a5a5a5a, n / 4)) {
        puts("hsa_amd_memory_fill failed");
        return 1;
      }
      printf("fill %zu MiB%s: %.3f s\n", mib, i ? " again" : "", now() - t);
    }
  }
  hsa_signal_t signal;
  hsa_signal_create(1, 0, NULL, &signal);
  for (int r = 0; r < reps; r++) {
    hsa_signal_store_relaxed(signal, 1);
    double t = now();
    if (hsa_amd_memory_async_copy(dst, gpu, src, gpu, n, 0, NULL, signal)) {
      puts("hsa_amd_memory_async_copy failed");
      return 1;
    }
    while (hsa_signal_wait_scacquire(signal, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX,
                                     HSA_WAIT_STATE_BLOCKED))
      ;
    double s = now() - t;
    printf("copy %zu MiB: %.3f s (%.1f MB/s)\n", mib, s, n / s / 1e6);
  }
  uint32_t last = 0;
  hsa_memory_copy(&last, (char *)dst + n - 4, 4);
  printf("last dword %#x (0x5a5a5a5a when copied)\n", last);
  hsa_signal_destroy(signal);
  hsa_shut_down();
  return last == 0x5a5a5a5a ? 0 : 1;
}
