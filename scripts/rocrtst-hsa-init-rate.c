/* How long rocrtst's rocrtstFunc.Max_Reference_Count takes on this machine: times hsa_init and
 * hsa_shut_down on an initialised runtime and scales to the test's 2^31 - 1 of each.
 *
 * The test (rocrtst/suites/functional/reference_count.cc, TestMaxReferenceCount, at ROCR-Runtime
 * 752cfd5) calls hsa_init until ROCr answers HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, which ROCr
 * 5.2.3 does at a reference count of INT32_MAX (Runtime::Acquire, src/core/runtime/runtime.cpp),
 * then hsa_shut_down as often. Past the first, each call only takes ROCr's bootstrap mutex and
 * moves the count (Runtime::Acquire / Runtime::Release): no system call, so the time is the
 * same under kfd-emu as on the hardware.
 *
 * Build: cc -O2 scripts/rocrtst-hsa-init-rate.c -o /tmp/refcount -lhsa-runtime64
 * Run under kfd-emu (ROCr needs a GPU): kfd-emu run --machine mi100 -- /tmp/refcount 20000000 */
#include <hsa/hsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 10000000;
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    puts("hsa_init failed");
    return 1;
  }
  double start = now();
  for (long i = 0; i < calls; i++) {
    if (hsa_init() != HSA_STATUS_SUCCESS) {
      puts("hsa_init failed");
      return 1;
    }
  }
  double inited = now();
  for (long i = 0; i < calls; i++) {
    if (hsa_shut_down() != HSA_STATUS_SUCCESS) {
      puts("hsa_shut_down failed");
      return 1;
    }
  }
  double done = now();
  double init_ns = (inited - start) / calls * 1e9, shut_ns = (done - inited) / calls * 1e9;
  printf("hsa_init %.1f ns, hsa_shut_down %.1f ns each (%ld calls); Max_Reference_Count's "
         "2^31 - 1 of each: %.0f s\n",
         init_ns, shut_ns, calls, 2147483647.0 * (init_ns + shut_ns) * 1e-9);
  hsa_shut_down();
  return 0;
}
