/*
 * UMF's own pools over the KFD provider, through libkfd_umf.so and real libumf (UMF 1.2).
 *
 * For each kind (HOST, DEVICE, SHARED) and each pool (disjoint, proxy):
 *   - mixed allocations of 64 B .. 2 MiB, all live at once, written, read back, freed, and
 *     allocated again;
 *   - the allocation properties UMF asks the provider for (pointer type, GPU);
 *   - purges through the pool's provider: purge_force zero-fills exactly the purged page,
 *     purge_lazy succeeds, an unaligned pointer is INVALID_ALIGNMENT; then the pool's trim;
 *   - split and merge through umfMemoryProviderAllocationSplit/Merge, and UMF's merge rule;
 *   - a forked child (a new KFD process): the providers it inherited refuse to act, a provider
 *     and pool it creates work, and it opens the parent's IPC handle through its own pool's
 *     IPC handler, reads the parent's bytes and writes some back, which the parent then sees.
 *     SHARED (SVM) memory cannot be shared: umfGetIPCHandle says NOT_SUPPORTED.
 *
 * Each step prints one line of facts; any failed check prints where and exits with 1.
 * Runs under `kfd-emu run --check-leaks`, so nothing may be left behind in either process.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <umf/experimental/memory_properties.h>
#include <umf/ipc.h>
#include <umf/memory_pool.h>
#include <umf/memory_provider.h>
#include <umf/memory_provider_gpu.h>
#include <umf/pools/pool_disjoint.h>
#include <umf/pools/pool_proxy.h>

#include <kfd_umf.h>

static int checks;

/* The last native error of the last failed provider, for failure messages. */
static const char *native(void) {
    static char text[512];
    umf_memory_provider_handle_t failed = NULL;
    const char *message = NULL;
    int32_t code = 0;
    if (umfGetLastFailedMemoryProvider(&failed) != UMF_RESULT_SUCCESS || !failed ||
        umfMemoryProviderGetLastNativeError(failed, &message, &code) != UMF_RESULT_SUCCESS ||
        !message || !*message) {
        return "";
    }
    snprintf(text, sizeof text, " (native %d: %s)", code, message);
    return text;
}

#define REQUIRE(cond, ...)                                                                 \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "umf_pools[%d] %s:%d: check failed: %s: ", (int)getpid(),      \
                    __FILE__, __LINE__, #cond);                                            \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            fflush(stdout);                                                                \
            _exit(1);                                                                      \
        }                                                                                  \
    } while (0)

#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        umf_result_t r_ = (call);                                                          \
        REQUIRE(r_ == (want), "%s returned %d, expected %d%s", #call, (int)r_, (int)(want), \
                native());                                                                 \
    } while (0)

#define OK(call) EXPECT(call, UMF_RESULT_SUCCESS)

static const struct {
    kfd_umf_kind_t kind;
    const char *name;
} KINDS[] = {
    {KFD_UMF_KIND_HOST, "HOST"},
    {KFD_UMF_KIND_DEVICE, "DEVICE"},
    {KFD_UMF_KIND_SHARED, "SHARED"},
};

static const struct {
    int disjoint;
    const char *name;
} POOLS[] = {{1, "disjoint"}, {0, "proxy"}};

/* Mixed sizes from 64 B to 2 MiB, odd ones included. */
static const size_t SIZES[] = {64,     100,     256,       1000,            4096,   5000,
                               65536, 100000, 1u << 20, (1u << 20) + 3, 2u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define ROUNDS 3
#define NALLOCS (NSIZES * ROUNDS)

/* The bytes the parent shares, and the bytes the child writes back over the first page. */
#define IPC_SIZE ((size_t)300000)
#define IPC_SEED 17
#define CHILD_SEED 201
#define CHILD_BYTES ((size_t)4096)

static size_t page;

static uint8_t pattern(size_t i, unsigned seed) { return (uint8_t)(i * 131u + seed * 7u + (i >> 9)); }

static void fill(void *p, size_t len, unsigned seed) {
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++) b[i] = pattern(i, seed);
}

/* The first index in [from, to) where `p` differs from the pattern `fill` wrote, or `to`. */
static size_t mismatch(const void *p, size_t from, size_t to, unsigned seed) {
    const uint8_t *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i] != pattern(i, seed)) return i;
    return to;
}

static size_t first_mismatch(const void *p, size_t len, unsigned seed) {
    return mismatch(p, 0, len, seed);
}

static int all_bytes(const void *p, size_t len, uint8_t value) {
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != value) return 0;
    return 1;
}

static umf_memory_provider_handle_t make_provider(kfd_umf_kind_t kind) {
    kfd_memory_provider_params_handle_t params = NULL;
    OK(kfdMemoryProviderParamsCreate(&params));
    OK(kfdMemoryProviderParamsSetKind(params, kind));
    OK(kfdMemoryProviderParamsSetGpuId(params, 0));
    umf_memory_provider_handle_t provider = NULL;
    OK(umfMemoryProviderCreate(kfdMemoryProviderOps(), params, &provider));
    OK(kfdMemoryProviderParamsDestroy(params));
    return provider;
}

static umf_memory_pool_handle_t make_pool(int disjoint, umf_memory_provider_handle_t provider) {
    umf_memory_pool_handle_t pool = NULL;
    if (disjoint) {
        umf_disjoint_pool_params_handle_t params = NULL;
        OK(umfDisjointPoolParamsCreate(&params));
        OK(umfPoolCreate(umfDisjointPoolOps(), provider, params, UMF_POOL_CREATE_FLAG_NONE,
                         &pool));
        OK(umfDisjointPoolParamsDestroy(params));
    } else {
        OK(umfPoolCreate(umfProxyPoolOps(), provider, NULL, UMF_POOL_CREATE_FLAG_NONE, &pool));
    }
    return pool;
}

static void mixed_allocations(const char *label, umf_memory_pool_handle_t pool) {
    void *ptrs[NALLOCS];
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < NALLOCS; i++) {
            size_t size = SIZES[i % NSIZES];
            ptrs[i] = umfPoolMalloc(pool, size);
            REQUIRE(ptrs[i] != NULL, "umfPoolMalloc(%zu) failed: %d%s", size,
                    (int)umfPoolGetLastAllocationError(pool), native());
            umf_memory_pool_handle_t owner = NULL;
            OK(umfPoolByPtr(ptrs[i], &owner));
            REQUIRE(owner == pool, "umfPoolByPtr names another pool");
            fill(ptrs[i], size, (unsigned)i);
            if (pass == 0) total += size;
        }
        /* All live at once: no block overlaps another. */
        for (size_t i = 0; i < NALLOCS; i++) {
            size_t size = SIZES[i % NSIZES];
            size_t bad = first_mismatch(ptrs[i], size, (unsigned)i);
            REQUIRE(bad == size, "allocation %zu (%zu B) differs at byte %zu", i, size, bad);
        }
        /* Odd ones first, then even ones: the pools see holes. */
        for (size_t i = 1; i < NALLOCS; i += 2) OK(umfPoolFree(pool, ptrs[i]));
        for (size_t i = 0; i < NALLOCS; i += 2) OK(umfFree(ptrs[i]));
    }
    printf("%s: %zu allocations of 64 B - 2 MiB (%zu bytes) written, read back and freed, "
           "twice\n",
           label, (size_t)NALLOCS, total);
}

static void properties(const char *label, umf_memory_pool_handle_t pool, kfd_umf_kind_t kind) {
    void *p = umfPoolMalloc(pool, 1000);
    REQUIRE(p != NULL, "umfPoolMalloc(1000)");
    umf_memory_properties_handle_t props = NULL;
    OK(umfGetMemoryPropertiesHandle(p, &props));
    umf_usm_memory_type_t type = UMF_MEMORY_TYPE_UNKNOWN;
    OK(umfGetMemoryProperty(props, UMF_MEMORY_PROPERTY_POINTER_TYPE, &type, sizeof type));
    REQUIRE((int)type == (int)kind, "pointer type %d for kind %d", (int)type, (int)kind);
    uint32_t gpu_id = 0;
    OK(umfGetMemoryProperty(props, UMF_MEMORY_PROPERTY_DEVICE, &gpu_id, sizeof gpu_id));
    REQUIRE(gpu_id != 0, "no gpu_id");
    EXPECT(umfGetMemoryProperty(props, UMF_MEMORY_PROPERTY_CONTEXT, &gpu_id, sizeof gpu_id),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    OK(umfPoolFree(pool, p));
    printf("%s: properties: pointer type %d, gpu_id %#x\n", label, (int)type, gpu_id);
}

static void purges(const char *label, umf_memory_pool_handle_t pool,
                   umf_memory_provider_handle_t provider) {
    void *q = NULL;
    OK(umfMemoryProviderAlloc(provider, 3 * page, 0, &q));
    uint8_t *b = q;
    memset(b, 0xAB, 3 * page);
    OK(umfMemoryProviderPurgeForce(provider, b + page, page));
    REQUIRE(all_bytes(b + page, page, 0), "the force-purged page is not zero");
    REQUIRE(all_bytes(b, page, 0xAB) && all_bytes(b + 2 * page, page, 0xAB),
            "purge_force touched the pages around");
    OK(umfMemoryProviderPurgeLazy(provider, b, page));
    EXPECT(umfMemoryProviderPurgeForce(provider, b + 1, page), UMF_RESULT_ERROR_INVALID_ALIGNMENT);
    EXPECT(umfMemoryProviderPurgeLazy(provider, NULL, page), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    OK(umfMemoryProviderFree(provider, q, 3 * page));
    umf_result_t trim = umfPoolTrimMemory(pool, 0);
    REQUIRE(trim == UMF_RESULT_SUCCESS || trim == UMF_RESULT_ERROR_NOT_SUPPORTED, "trim: %d",
            (int)trim);
    printf("%s: purge_force zero-filled 1 page of 3, purge_lazy ok, unaligned purge "
           "INVALID_ALIGNMENT; pool trim %s\n",
           label, trim == UMF_RESULT_SUCCESS ? "SUCCESS" : "NOT_SUPPORTED");
}

static void split_merge(const char *label, umf_memory_provider_handle_t provider) {
    void *s = NULL;
    OK(umfMemoryProviderAlloc(provider, 4 * page, 0, &s));
    uint8_t *b = s;
    fill(b, 4 * page, 3);
    OK(umfMemoryProviderAllocationSplit(provider, b, 4 * page, page));
    OK(umfMemoryProviderAllocationMerge(provider, b, b + page, 4 * page));
    OK(umfMemoryProviderAllocationSplit(provider, b, 4 * page, 3 * page));
    /* UMF's own example: the high pointer past the total size. */
    EXPECT(umfMemoryProviderAllocationMerge(provider, b, b + 2 * page, page),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    /* The provider's rule: the sizes must add up. */
    EXPECT(umfMemoryProviderAllocationMerge(provider, b, b + 3 * page, 5 * page),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    REQUIRE(first_mismatch(b, 4 * page, 3) == 4 * page, "split/merge changed the bytes");
    OK(umfMemoryProviderFree(provider, b + 3 * page, page));
    OK(umfMemoryProviderFree(provider, b, 3 * page));
    printf("%s: split/merge: 4 pages split at 1, merged back, split at 3, the pieces freed "
           "apart; bad merges INVALID_ARGUMENT\n",
           label);
}

/* The forked child: a new KFD process. Returns its exit code. */
static int child(const char *label, kfd_umf_kind_t kind, int disjoint,
                 umf_memory_provider_handle_t inherited, umf_ipc_handle_t handle) {
    void *z = NULL;
    EXPECT(umfMemoryProviderAlloc(inherited, page, 0, &z),
           UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC);
    const char *message = NULL;
    int32_t code = 0;
    OK(umfMemoryProviderGetLastNativeError(inherited, &message, &code));
    REQUIRE(code == KFD_UMF_RESULT_WRONG_PROCESS, "native %d: %s", code, message);

    umf_memory_provider_handle_t provider = make_provider(kind);
    umf_memory_pool_handle_t pool = make_pool(disjoint, provider);
    void *own = umfPoolMalloc(pool, 5000);
    REQUIRE(own != NULL, "the child's own pool cannot allocate%s", native());
    fill(own, 5000, 9);
    REQUIRE(first_mismatch(own, 5000, 9) == 5000, "the child's own memory");
    OK(umfPoolFree(pool, own));
    char ipc[160] = "";
    if (handle) {
        umf_ipc_handler_handle_t handler = NULL;
        OK(umfPoolGetIPCHandler(pool, &handler));
        void *opened = NULL;
        OK(umfOpenIPCHandle(handler, handle, &opened));
        size_t bad = first_mismatch(opened, IPC_SIZE, IPC_SEED);
        REQUIRE(bad == IPC_SIZE, "the parent's bytes differ at %zu", bad);
        fill(opened, CHILD_BYTES, CHILD_SEED);
        OK(umfCloseIPCHandle(opened));
        snprintf(ipc, sizeof ipc, "; opened the parent's IPC handle: read %zu bytes, wrote %zu",
                 IPC_SIZE, CHILD_BYTES);
    }
    OK(umfPoolDestroy(pool));
    OK(umfMemoryProviderDestroy(provider));
    printf("%s: forked child %d: inherited provider refused (native %d), own provider and "
           "pool work%s\n",
           label, (int)getpid(), code, ipc);
    fflush(stdout);
    return 0;
}

static void fork_and_ipc(const char *label, kfd_umf_kind_t kind, int disjoint,
                         umf_memory_pool_handle_t pool, umf_memory_provider_handle_t provider) {
    uint8_t *x = umfPoolMalloc(pool, IPC_SIZE);
    REQUIRE(x != NULL, "umfPoolMalloc(%zu)", IPC_SIZE);
    fill(x, IPC_SIZE, IPC_SEED);
    umf_ipc_handle_t handle = NULL;
    size_t handle_size = 0;
    umf_result_t got = umfGetIPCHandle(x, &handle, &handle_size);
    if (kind == KFD_UMF_KIND_SHARED) {
        REQUIRE(got == UMF_RESULT_ERROR_NOT_SUPPORTED, "SHARED IPC gave %d", (int)got);
        handle = NULL;
    } else {
        REQUIRE(got == UMF_RESULT_SUCCESS, "umfGetIPCHandle: %d%s", (int)got, native());
        REQUIRE(handle_size > 64, "handle of %zu bytes", handle_size);
    }
    /* The child takes the producer's fd with pidfd_getfd: allow it under Yama. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) _exit(child(label, kind, disjoint, provider, handle));
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %#x",
            status);
    if (handle) {
        size_t bad = first_mismatch(x, CHILD_BYTES, CHILD_SEED);
        REQUIRE(bad == CHILD_BYTES, "the child's bytes differ at %zu", bad);
        bad = mismatch(x, CHILD_BYTES, IPC_SIZE, IPC_SEED);
        REQUIRE(bad == IPC_SIZE, "the parent's own bytes changed at %zu", bad);
        OK(umfPutIPCHandle(handle));
        printf("%s: IPC: the parent sees the child's %zu bytes and keeps its own; handle of %zu "
               "bytes put\n",
               label, CHILD_BYTES, handle_size);
    } else {
        printf("%s: IPC: umfGetIPCHandle NOT_SUPPORTED (SVM memory is private)\n", label);
    }
    OK(umfPoolFree(pool, x));
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int combinations = 0;
    for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
        for (size_t p = 0; p < sizeof POOLS / sizeof POOLS[0]; p++) {
            char label[64];
            snprintf(label, sizeof label, "%s %s", KINDS[k].name, POOLS[p].name);
            umf_memory_provider_handle_t provider = make_provider(KINDS[k].kind);
            OK(umfMemoryProviderGetMinPageSize(provider, NULL, &page));
            umf_memory_pool_handle_t pool = make_pool(POOLS[p].disjoint, provider);
            mixed_allocations(label, pool);
            properties(label, pool, KINDS[k].kind);
            purges(label, pool, provider);
            split_merge(label, provider);
            fork_and_ipc(label, KINDS[k].kind, POOLS[p].disjoint, pool, provider);
            OK(umfPoolDestroy(pool));
            OK(umfMemoryProviderDestroy(provider));
            combinations++;
        }
    }
    printf("umf_pools: all %d kind/pool combinations passed (%d checks)\n", combinations,
           checks);
    return 0;
}
