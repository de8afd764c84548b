/*
 * UMF's provider rules (shared/ref/anchors.md §1.1) and per-provider conformance cases (§1.2,
 * the umfProviderTest fixture) run against kfdMemoryProviderOps() through real libumf 1.2:
 * umfMemoryProviderCreate and the umfMemoryProvider* API, for each kind.
 *
 * Where the KFD provider answers differently from UMF's OS provider, the case says so:
 * purges of an unaligned pointer are INVALID_ALIGNMENT (the ops header's contract) rather
 * than the OS provider's madvise failure, and SHARED (SVM) memory has no IPC.
 *
 * Prints one line per group of cases; any failed check prints where and exits with 1.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <umf/experimental/ctl.h>
#include <umf/memory_provider.h>

#include <kfd_umf.h>

static int checks;

#define REQUIRE(cond, ...)                                                                 \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "umf_conformance %s:%d: check failed: %s: ", __FILE__,         \
                    __LINE__, #cond);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        umf_result_t r_ = (call);                                                          \
        REQUIRE(r_ == (want), "%s returned %d, expected %d", #call, (int)r_, (int)(want)); \
    } while (0)

#define OK(call) EXPECT(call, UMF_RESULT_SUCCESS)

static kfd_memory_provider_params_handle_t params_of(kfd_umf_kind_t kind) {
    kfd_memory_provider_params_handle_t params = NULL;
    OK(kfdMemoryProviderParamsCreate(&params));
    OK(kfdMemoryProviderParamsSetKind(params, kind));
    return params;
}

/* Creating with `ops` fails with INVALID_ARGUMENT and leaves the handle NULL. */
static void refused(const umf_memory_provider_ops_t *ops, const void *params, const char *what) {
    umf_memory_provider_handle_t provider = NULL;
    umf_result_t r = umfMemoryProviderCreate(ops, params, &provider);
    REQUIRE(r == UMF_RESULT_ERROR_INVALID_ARGUMENT && provider == NULL, "%s: create gave %d",
            what, (int)r);
}

/* §1.1 creation rules, with the KFD ops as the complete set. */
static void creation_rules(void) {
    const umf_memory_provider_ops_t *kfd = kfdMemoryProviderOps();
    kfd_memory_provider_params_handle_t params = params_of(KFD_UMF_KIND_HOST);
    REQUIRE(kfd->version == UMF_PROVIDER_OPS_VERSION_CURRENT, "ops version %#x", kfd->version);
    umf_memory_provider_handle_t provider = NULL;
    EXPECT(umfMemoryProviderCreate(NULL, params, &provider), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(umfMemoryProviderCreate(kfd, params, NULL), UMF_RESULT_ERROR_INVALID_ARGUMENT);

    int mandatory = 0;
#define WITHOUT(member)                                                                    \
    do {                                                                                   \
        umf_memory_provider_ops_t ops = *kfd;                                              \
        ops.member = NULL;                                                                 \
        refused(&ops, params, "without " #member);                                         \
        mandatory++;                                                                       \
    } while (0)
    WITHOUT(alloc);
    WITHOUT(free);
    WITHOUT(get_recommended_page_size);
    WITHOUT(get_min_page_size);
    WITHOUT(get_cache_line_size);
    WITHOUT(initialize);
    WITHOUT(finalize);
    WITHOUT(get_last_native_error);
    WITHOUT(get_name);
    /* One of a pair or of the IPC five alone. */
    WITHOUT(ext_allocation_split);
    WITHOUT(ext_allocation_merge);
    WITHOUT(ext_get_ipc_handle_size);
    WITHOUT(ext_get_ipc_handle);
    WITHOUT(ext_put_ipc_handle);
    WITHOUT(ext_open_ipc_handle);
    WITHOUT(ext_close_ipc_handle);
    WITHOUT(ext_get_allocation_properties);
    WITHOUT(ext_get_allocation_properties_size);
#undef WITHOUT

    /* Without a whole optional group: created, and UMF's defaults answer NOT_SUPPORTED. */
    umf_memory_provider_ops_t ops = *kfd;
    ops.ext_allocation_split = NULL;
    ops.ext_allocation_merge = NULL;
    ops.ext_get_ipc_handle_size = NULL;
    ops.ext_get_ipc_handle = NULL;
    ops.ext_put_ipc_handle = NULL;
    ops.ext_open_ipc_handle = NULL;
    ops.ext_close_ipc_handle = NULL;
    ops.ext_purge_lazy = NULL;
    ops.ext_purge_force = NULL;
    OK(umfMemoryProviderCreate(&ops, params, &provider));
    void *p = NULL;
    size_t page = 0, size = 0;
    OK(umfMemoryProviderGetMinPageSize(provider, NULL, &page));
    OK(umfMemoryProviderAlloc(provider, 2 * page, 0, &p));
    EXPECT(umfMemoryProviderAllocationSplit(provider, p, 2 * page, page),
           UMF_RESULT_ERROR_NOT_SUPPORTED);
    EXPECT(umfMemoryProviderGetIPCHandleSize(provider, &size), UMF_RESULT_ERROR_NOT_SUPPORTED);
    EXPECT(umfMemoryProviderPurgeLazy(provider, p, page), UMF_RESULT_ERROR_NOT_SUPPORTED);
    OK(umfMemoryProviderFree(provider, p, 2 * page));
    OK(umfMemoryProviderDestroy(provider));

    /* initialize's errors come back unchanged, with a NULL handle. */
    provider = NULL;
    EXPECT(umfMemoryProviderCreate(kfd, NULL, &provider), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    REQUIRE(provider == NULL, "a handle after a failed create");
    OK(kfdMemoryProviderParamsSetGpuId(params, 0xdead));
    refused(kfd, params, "an unknown gpu_id");
    OK(kfdMemoryProviderParamsSetGpuId(params, 0));
    EXPECT(kfdMemoryProviderParamsSetKind(params, (kfd_umf_kind_t)7),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    OK(umfMemoryProviderDestroy(NULL));

    /* providerHandleCheck: the ops called directly with NULL or zero arguments. */
    EXPECT(kfd->alloc(NULL, page, 0, &p), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->free(NULL, p, page), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->get_recommended_page_size(NULL, page, &size), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->get_min_page_size(NULL, NULL, &size), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->get_cache_line_size(NULL, &size), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->ext_purge_lazy(NULL, p, page), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(kfd->ext_purge_force(NULL, p, page), UMF_RESULT_ERROR_INVALID_ARGUMENT);
    const char *name = NULL;
    OK(kfd->get_name(NULL, &name));
    REQUIRE(name && strcmp(name, "KFD") == 0, "default name %s", name ? name : "(null)");
    OK(kfdMemoryProviderParamsDestroy(params));
    printf("creation rules: %d single missing ops refused, optional groups defaulted to "
           "NOT_SUPPORTED, initialize errors propagated, NULL-provider ops refused, default "
           "name %s\n",
           mandatory, name);
}

/* The last native error of `provider` on this thread. */
static int32_t native_code(umf_memory_provider_handle_t provider, const char **message) {
    int32_t code = 0;
    OK(umfMemoryProviderGetLastNativeError(provider, message, &code));
    return code;
}

static size_t ctl_stat(umf_memory_provider_handle_t provider, const char *stat) {
    char path[128];
    size_t value = (size_t)-1;
    snprintf(path, sizeof path, "umf.provider.by_handle.{}.stats.%s", stat);
    OK(umfCtlGet(path, &value, sizeof value, provider));
    return value;
}

/* §1.2: the umfProviderTest cases, for one kind. */
static void provider_cases(kfd_umf_kind_t kind, const char *label) {
    kfd_memory_provider_params_handle_t params = params_of(kind);
    umf_memory_provider_handle_t provider = NULL;
    OK(umfMemoryProviderCreate(kfdMemoryProviderOps(), params, &provider));
    size_t page = 0, recommended = 0, line = 0;
    OK(umfMemoryProviderGetMinPageSize(provider, NULL, &page));
    OK(umfMemoryProviderGetRecommendedPageSize(provider, page, &recommended));
    OK(umfMemoryProviderGetCacheLineSize(provider, &line));
    REQUIRE(page == (size_t)sysconf(_SC_PAGESIZE) && recommended >= page && line == 64,
            "page %zu, recommended %zu, cache line %zu", page, recommended, line);
    const size_t page_plus_64 = page + 64;
    void *p = NULL;

    /* Allocation with each alignment the rule allows, then memset(0xFF) and free. */
    const size_t good[][2] = {{page_plus_64, 0},
                              {page_plus_64, page / 2},
                              {page_plus_64, page},
                              {page_plus_64, 3 * page},
                              {3 * page, 3 * page}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        OK(umfMemoryProviderAlloc(provider, good[i][0], good[i][1], &p));
        REQUIRE(p != NULL && (good[i][1] == 0 || (uintptr_t)p % good[i][1] == 0),
                "alloc %zu aligned %zu gave %p", good[i][0], good[i][1], p);
        memset(p, 0xFF, good[i][0]);
        OK(umfMemoryProviderFree(provider, p, good[i][0]));
    }
    /* Neither 0, a divisor nor a multiple of the page size. */
    EXPECT(umfMemoryProviderAlloc(provider, page_plus_64, page - 1, &p),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(umfMemoryProviderAlloc(provider, page_plus_64, page + page / 2, &p),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(umfMemoryProviderAlloc(provider, page, 0, NULL), UMF_RESULT_ERROR_INVALID_ARGUMENT);

    /* WRONG_SIZE and MAX_SIZE: provider-specific, ALLOC_FAILED, and the failed provider. */
    const char *message = NULL;
    EXPECT(umfMemoryProviderAlloc(provider, (size_t)-1, 0, &p),
           UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC);
    umf_memory_provider_handle_t failed = NULL;
    OK(umfGetLastFailedMemoryProvider(&failed));
    REQUIRE(failed == provider, "the last failed provider is another");
    int32_t code = native_code(provider, &message);
    REQUIRE(code == KFD_UMF_RESULT_ALLOC_FAILED && message && strstr(message, "alloc"),
            "native %d: %s", code, message ? message : "(null)");

    /* Purges of page + 64 bytes: the allocation's end, so the partial page is its own. */
    OK(umfMemoryProviderAlloc(provider, page_plus_64, 0, &p));
    memset(p, 0xAA, page_plus_64);
    OK(umfMemoryProviderPurgeLazy(provider, p, page_plus_64));
    memset(p, 0xAA, page_plus_64);
    OK(umfMemoryProviderPurgeForce(provider, p, page_plus_64));
    size_t nonzero = 0;
    while (nonzero < page_plus_64 && ((unsigned char *)p)[nonzero] == 0) nonzero++;
    REQUIRE(nonzero == page_plus_64, "byte %zu is not zero after purge_force", nonzero);
    OK(umfMemoryProviderFree(provider, p, page_plus_64));
    /* INVALID_POINTER purges: unaligned, so INVALID_ALIGNMENT as the ops header says. */
    EXPECT(umfMemoryProviderPurgeLazy(provider, (void *)0x01, 1),
           UMF_RESULT_ERROR_INVALID_ALIGNMENT);
    EXPECT(umfMemoryProviderPurgeForce(provider, (void *)0x01, 1),
           UMF_RESULT_ERROR_INVALID_ALIGNMENT);

    /* Frees: NULL is fine; a pointer that is not ours is FREE_FAILED. */
    OK(umfMemoryProviderFree(provider, NULL, 0));
    EXPECT(umfMemoryProviderFree(provider, (void *)0x01, 0),
           UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC);
    EXPECT(umfMemoryProviderFree(provider, (void *)0x01, page),
           UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC);
    code = native_code(provider, &message);
    REQUIRE(code == KFD_UMF_RESULT_FREE_FAILED, "native %d: %s", code, message);

    /* Names: the default, one from the params, and the default for a NULL provider. */
    const char *name = NULL;
    OK(umfMemoryProviderGetName(provider, &name));
    REQUIRE(strcmp(name, "KFD") == 0, "name %s", name);
    OK(kfdMemoryProviderParamsSetName(params, "kfd-vram_0"));
    umf_memory_provider_handle_t named = NULL;
    OK(umfMemoryProviderCreate(kfdMemoryProviderOps(), params, &named));
    OK(umfMemoryProviderGetName(named, &name));
    REQUIRE(strcmp(name, "kfd-vram_0") == 0, "name %s", name);
    OK(umfMemoryProviderDestroy(named));
    EXPECT(kfdMemoryProviderParamsSetName(params, "not a ctl name"),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);

    /* ctl_stats: allocated and peak memory through UMF's CTL, 0 at start. */
    size_t allocated0 = ctl_stat(provider, "allocated_memory");
    REQUIRE(allocated0 == 0, "allocated_memory %zu at start", allocated0);
    void *a = NULL, *b = NULL;
    OK(umfMemoryProviderAlloc(provider, 3 * page, 0, &a));
    OK(umfMemoryProviderAlloc(provider, page, 0, &b));
    REQUIRE(ctl_stat(provider, "allocated_memory") == 4 * page, "allocated after allocs");
    OK(umfMemoryProviderFree(provider, b, page));
    REQUIRE(ctl_stat(provider, "allocated_memory") == 3 * page, "allocated after a free");
    REQUIRE(ctl_stat(provider, "peak_memory") >= 4 * page, "peak");

    /* Split (FixedProviderTest.split) and merge rules on the API layer and the provider. */
    OK(umfMemoryProviderAllocationSplit(provider, a, 3 * page, page));
    EXPECT(umfMemoryProviderAllocationSplit(provider, a, 3 * page, 0),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(umfMemoryProviderAllocationSplit(provider, a, page, page),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT(umfMemoryProviderAllocationMerge(provider, a, (char *)a + 2 * page, page),
           UMF_RESULT_ERROR_INVALID_ARGUMENT);
    OK(umfMemoryProviderAllocationMerge(provider, a, (char *)a + page, 3 * page));
    OK(umfMemoryProviderAllocationSplit(provider, a, 3 * page, 2 * page));
    OK(umfMemoryProviderFree(provider, (char *)a + 2 * page, page));
    OK(umfMemoryProviderFree(provider, a, 2 * page));
    REQUIRE(ctl_stat(provider, "allocated_memory") == 0, "allocated at the end");

    /* IPC: handle size and the API layer's checks; SHARED memory has none. */
    size_t ipc_size = 0;
    umf_result_t ipc = umfMemoryProviderGetIPCHandleSize(provider, &ipc_size);
    if (kind == KFD_UMF_KIND_SHARED) {
        REQUIRE(ipc == UMF_RESULT_SUCCESS || ipc == UMF_RESULT_ERROR_NOT_SUPPORTED, "%d", ipc);
        OK(umfMemoryProviderAlloc(provider, page, 0, &p));
        char data[256];
        EXPECT(umfMemoryProviderGetIPCHandle(provider, p, page, data),
               UMF_RESULT_ERROR_NOT_SUPPORTED);
        OK(umfMemoryProviderFree(provider, p, page));
    } else {
        OK(ipc);
        REQUIRE(ipc_size == 64, "IPC handle size %zu", ipc_size);
        EXPECT(umfMemoryProviderGetIPCHandle(provider, NULL, page, &ipc_size),
               UMF_RESULT_ERROR_INVALID_ARGUMENT);
        char data[64];
        OK(umfMemoryProviderAlloc(provider, page, 0, &p));
        EXPECT(umfMemoryProviderGetIPCHandle(provider, (char *)p + page, page, data),
               UMF_RESULT_ERROR_INVALID_ARGUMENT);
        OK(umfMemoryProviderGetIPCHandle(provider, p, page, data));
        OK(umfMemoryProviderPutIPCHandle(provider, data));
        OK(umfMemoryProviderFree(provider, p, page));
        /* Put after the allocation was freed still succeeds. */
        OK(umfMemoryProviderPutIPCHandle(provider, data));
        int stack = 0;
        EXPECT(umfMemoryProviderCloseIPCHandle(provider, &stack, sizeof stack),
               UMF_RESULT_ERROR_INVALID_ARGUMENT);
        memset(data, 0, sizeof data);
        EXPECT(umfMemoryProviderOpenIPCHandle(provider, data, &p),
               UMF_RESULT_ERROR_INVALID_ARGUMENT);
    }

    OK(umfMemoryProviderDestroy(provider));
    OK(kfdMemoryProviderParamsDestroy(params));
    printf("%s: alignments, WRONG_ALIGNMENT, MAX_SIZE (native %d), purges of page+64 "
           "(zero-filled), INVALID_POINTER purges and frees, names, ctl stats, split/merge, "
           "IPC %s: all as expected\n",
           label, KFD_UMF_RESULT_ALLOC_FAILED,
           kind == KFD_UMF_KIND_SHARED ? "NOT_SUPPORTED" : "argument checks");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    creation_rules();
    provider_cases(KFD_UMF_KIND_HOST, "HOST");
    provider_cases(KFD_UMF_KIND_DEVICE, "DEVICE");
    provider_cases(KFD_UMF_KIND_SHARED, "SHARED");
    printf("umf_conformance: all cases passed (%d checks)\n", checks);
    return 0;
}
