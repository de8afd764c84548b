/*
 * The program supervisor_cas.rs runs compare-and-swaps in (kfd-emu's tracer, the CPU side of
 * GPU atomics on process memory): it maps a read-write page and a read-only one, sets the
 * page's second dword to 7 and its second quadword to 0x1122334455667788, counts the SIGUSR1s
 * it handles in the page's fifth dword (SA_RESTART), prints its pid and
 * both addresses, adds 1 to the page's first dword with a locked instruction CPU_N times,
 * (from each of argv[1] threads, 1 by default), then waits for a line on stdin (a read the test's compare-and-swaps interrupt and that
 * must restart), opens /emu-test/block (which the test's backend holds until it says so:
 * the thread cannot stop meanwhile) and prints the first and second dwords and the second
 * quadword.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CPU_N 20000000u

static uint32_t *page;

static void *adder(void *arg)
{
    uint32_t i;

    (void)arg;
    for (i = 0; i < CPU_N; i++)
        __atomic_fetch_add(&page[0], 1u, __ATOMIC_SEQ_CST);
    return NULL;
}

static void counted(int sig)
{
    (void)sig;
    __atomic_fetch_add(&page[4], 1u, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv)
{
    pthread_t extra[8];
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    int t;
    struct sigaction action;
    void *ro;
    char line[16];
    uint32_t i;

    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (page == MAP_FAILED || ro == MAP_FAILED)
        return 1;
    page[1] = 7;
    ((uint64_t *)page)[1] = 0x1122334455667788ull;
    memset(&action, 0, sizeof(action));
    action.sa_handler = counted;
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &action, NULL) != 0)
        return 1;
    printf("pid %d page %p ro %p\n", (int)getpid(), (void *)page, ro);
    fflush(stdout);
    if (threads < 1 || threads > 9)
        return 4;
    for (t = 0; t < threads - 1; t++)
        if (pthread_create(&extra[t], NULL, adder, NULL) != 0)
            return 5;
    for (i = 0; i < CPU_N; i++)
        __atomic_fetch_add(&page[0], 1u, __ATOMIC_SEQ_CST);
    for (t = 0; t < threads - 1; t++)
        pthread_join(extra[t], NULL);
    if (!fgets(line, sizeof(line), stdin))
        return 2;
    if (open("/emu-test/block", O_RDONLY) >= 0)
        return 3;
    printf("value %u %u %#" PRIx64 "\n", __atomic_load_n(&page[0], __ATOMIC_SEQ_CST), page[1],
           ((uint64_t *)page)[1]);
    return 0;
}
