/* The loop of rocrtst's rocrtstStress.Queue_CAS_Write_Index_ConcurrentTest on plain memory:
 * no GPU, no ROCr, no kfd-emu. Measures how fast this machine's cores can run it.
 *
 * The test (rocrtst/suites/stress/queue_write_index_concurrent_tests.cc,
 * thread_proc_write_index_cas_atomic, at ROCR-Runtime 752cfd5) starts 4 threads; thread k spins
 * on hsa_queue_cas_write_index_*(queue, ii, ii + 1) for ii = k, k + 4, ... below 1 Mi, so the
 * write index is handed from thread to thread in strict turn, 1 Mi hand-overs per memory order,
 * four memory orders. ROCr 5.2.3's CAS is one atomic compare-and-swap on the queue's
 * write_dispatch_id (AqlQueue::CasWriteIndexAcqRel & co., src/core/runtime/amd_aql_queue.cpp:
 * atomic::Cas), a host-memory word no kernel or emulator sees. With fewer cores than 4 threads,
 * each hand-over waits for the scheduler to run the one thread whose turn it is.
 *
 * Build and run: cc -O2 -pthread scripts/rocrtst-cas-handover.c -o /tmp/cas && /tmp/cas 20
 * (the argument: seconds to measure; it prints hand-overs per second and the test's time). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 4
#define TERMINATION (1u << 20)

static uint64_t write_index;
static volatile int stop;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *hand_over(void *arg) {
  uint64_t k = (uintptr_t)arg;
  for (uint64_t ii = k; ii < TERMINATION && !stop; ii += THREADS) {
    for (;;) {
      uint64_t expected = ii;
      __atomic_compare_exchange_n(&write_index, &expected, ii + 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE);
      if (expected == ii || stop) break;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  double limit = argc > 1 ? atof(argv[1]) : 20;
  pthread_t threads[THREADS];
  double start = now();
  for (uintptr_t k = 0; k < THREADS; k++) pthread_create(&threads[k], NULL, hand_over, (void *)k);
  while (now() - start < limit && __atomic_load_n(&write_index, __ATOMIC_RELAXED) < TERMINATION) {
    struct timespec tick = {0, 10000000};
    nanosleep(&tick, NULL);
  }
  stop = 1;
  for (int k = 0; k < THREADS; k++) pthread_join(threads[k], NULL);
  double seconds = now() - start;
  double rate = write_index / seconds;
  printf("%llu of %u hand-overs in %.1f s: %.0f per s; one memory order %.0f s, the test's four %.0f s\n",
         (unsigned long long)write_index, TERMINATION, seconds, rate, TERMINATION / rate,
         4 * TERMINATION / rate);
  return 0;
}
