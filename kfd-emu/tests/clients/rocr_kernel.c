/*
 * An unmodified ROCr client (Debian's libhsa-runtime64, 5.2.3) that runs a kernel: on the
 * first GPU agent,
 *  - loads the code object named by argv[1] (a shared object clang-19 and ld.lld-19 built
 *    for the agent's ISA, holding `vadd`: out[i] = a[i] + b[i] for i < n) with
 *    hsa_code_object_reader_create_from_file and an hsa_executable (loading copies its
 *    segments to the GPU: ROCr's own blit kernel runs first);
 *  - finds `vadd.kd` and its kernarg segment size, fills the kernargs in kernarg-pool memory,
 *    and dispatches 1000 work-items in groups of 64 (the last group partial) on an AQL queue,
 *    with a completion signal;
 *  - checks every out[i] (fine-grained system memory the agent was allowed to access).
 * Prints one line for the Rust test; exits non-zero at the first failure, naming it.
 */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        hsa_status_t status_ = (call);                                                   \
        if (status_ != HSA_STATUS_SUCCESS) {                                             \
            const char *why_ = "?";                                                      \
            hsa_status_string(status_, &why_);                                           \
            fprintf(stderr, "FAILED %s = %#x %s (line %d)\n", #call, (unsigned)status_, \
                    why_, __LINE__);                                                     \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

#define N 1000u
#define GROUP 64u
/* Ten seconds: a hint to ROCr's wait, in ns. */
#define LONG_WAIT 10000000000ull

static hsa_agent_t gpu;
static int have_gpu;
static hsa_amd_memory_pool_t system_pool, kernarg_pool;
static int have_system, have_kernarg;

static hsa_status_t find_gpu(hsa_agent_t agent, void *data)
{
    hsa_device_type_t type;
    (void)data;
    if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS)
        return HSA_STATUS_ERROR;
    if (type == HSA_DEVICE_TYPE_GPU && !have_gpu) {
        gpu = agent;
        have_gpu = 1;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_pools(hsa_amd_memory_pool_t pool, void *data)
{
    hsa_amd_segment_t segment;
    uint32_t flags;
    (void)data;
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
    if (segment != HSA_AMD_SEGMENT_GLOBAL)
        return HSA_STATUS_SUCCESS;
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
    if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && !have_kernarg) {
        kernarg_pool = pool;
        have_kernarg = 1;
    }
    if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) && !have_system) {
        system_pool = pool;
        have_system = 1;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_cpu_pools(hsa_agent_t agent, void *data)
{
    hsa_device_type_t type;
    hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
    if (type == HSA_DEVICE_TYPE_CPU)
        return hsa_amd_agent_iterate_memory_pools(agent, find_pools, data);
    return HSA_STATUS_SUCCESS;
}

static void *alloc(hsa_amd_memory_pool_t pool, size_t bytes)
{
    void *p = NULL;
    if (hsa_amd_memory_pool_allocate(pool, bytes, 0, &p) != HSA_STATUS_SUCCESS)
        return NULL;
    if (hsa_amd_agents_allow_access(1, &gpu, NULL, p) != HSA_STATUS_SUCCESS)
        return NULL;
    return p;
}

int main(int argc, char **argv)
{
    hsa_file_t file;
    hsa_code_object_reader_t reader;
    hsa_executable_t exe;
    hsa_executable_symbol_t sym;
    uint64_t kernel_object;
    uint32_t kernarg_size, group_size, private_size;
    hsa_queue_t *q;
    hsa_signal_t done;
    int32_t *a, *b, *out;
    uint8_t *args;
    uint64_t index;
    hsa_kernel_dispatch_packet_t *p;
    uint16_t header;
    unsigned bad = 0, i;
    FILE *f;

    if (argc != 2) {
        fprintf(stderr, "usage: rocr_kernel CODE_OBJECT\n");
        return 2;
    }
    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(find_gpu, NULL));
    CHECK(hsa_iterate_agents(find_cpu_pools, NULL));
    if (!have_gpu || !have_system || !have_kernarg) {
        fprintf(stderr, "FAILED: gpu %d system pool %d kernarg pool %d\n", have_gpu,
                have_system, have_kernarg);
        return 1;
    }
    f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "FAILED: cannot open %s\n", argv[1]);
        return 1;
    }
    file = fileno(f);
    CHECK(hsa_code_object_reader_create_from_file(file, &reader));
    CHECK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                    NULL, &exe));
    CHECK(hsa_executable_load_agent_code_object(exe, gpu, reader, NULL, NULL));
    CHECK(hsa_executable_freeze(exe, NULL));
    CHECK(hsa_executable_get_symbol_by_name(exe, "vadd.kd", &gpu, &sym));
    CHECK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                         &kernel_object));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg_size));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &group_size));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &private_size));

    a = alloc(system_pool, N * 4);
    b = alloc(system_pool, N * 4);
    out = alloc(system_pool, N * 4);
    args = alloc(kernarg_pool, kernarg_size < 32 ? 32 : kernarg_size);
    if (!a || !b || !out || !args) {
        fprintf(stderr, "FAILED: allocations\n");
        return 1;
    }
    for (i = 0; i < N; i++) {
        a[i] = (int32_t)i;
        b[i] = 1000000 * (int32_t)(i % 7);
        out[i] = -1;
    }
    memset(args, 0, kernarg_size);
    memcpy(args, &a, 8);
    memcpy(args + 8, &b, 8);
    memcpy(args + 16, &out, 8);
    {
        uint32_t n = N;
        memcpy(args + 24, &n, 4);
    }

    CHECK(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX,
                           &q));
    CHECK(hsa_signal_create(1, 0, NULL, &done));
    index = hsa_queue_add_write_index_relaxed(q, 1);
    p = (hsa_kernel_dispatch_packet_t *)q->base_address + (index & (q->size - 1));
    memset((uint8_t *)p + 4, 0, 60);
    p->setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    p->workgroup_size_x = GROUP;
    p->workgroup_size_y = 1;
    p->workgroup_size_z = 1;
    p->grid_size_x = N;
    p->grid_size_y = 1;
    p->grid_size_z = 1;
    p->private_segment_size = private_size;
    p->group_segment_size = group_size;
    p->kernel_object = kernel_object;
    p->kernarg_address = args;
    p->completion_signal = done;
    header = HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE |
             1 << HSA_PACKET_HEADER_BARRIER |
             HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
             HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
    __atomic_store_n((uint32_t *)p, header | (uint32_t)p->setup << 16, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)index);
    if (hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, LONG_WAIT,
                                  HSA_WAIT_STATE_BLOCKED) != 0) {
        fprintf(stderr, "FAILED: the dispatch did not complete\n");
        return 1;
    }
    for (i = 0; i < N; i++)
        if (out[i] != (int32_t)i + 1000000 * (int32_t)(i % 7))
            bad++;
    printf("vadd n=%u group=%u kernarg=%u bad=%u out[999]=%d\n", N, GROUP, kernarg_size, bad,
           out[N - 1]);
    CHECK(hsa_signal_destroy(done));
    CHECK(hsa_queue_destroy(q));
    CHECK(hsa_executable_destroy(exe));
    CHECK(hsa_code_object_reader_destroy(reader));
    hsa_amd_memory_pool_free(a);
    hsa_amd_memory_pool_free(b);
    hsa_amd_memory_pool_free(out);
    hsa_amd_memory_pool_free(args);
    fclose(f);
    CHECK(hsa_shut_down());
    printf("done\n");
    return bad != 0;
}
