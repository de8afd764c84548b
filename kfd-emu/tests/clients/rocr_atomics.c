/*
 * GPU atomics on process memory racing the CPU's locked instructions, through unmodified
 * ROCr (Debian's libhsa-runtime64, 5.2.3), as kfdtest's KFDQMTest.Atomics races them: on the
 * first GPU agent it loads the code object named by argv[1] (`gpu_inc`, atomics.cl) and, for
 * each kind of process memory,
 *  - "userptr": a page of malloc'd memory locked with hsa_amd_memory_lock (a USERPTR BO:
 *    libhsakmt's hsaKmtRegisterMemoryToNodes);
 *  - "svm": a page of malloc'd memory made accessible in place to the GPU with
 *    hsa_amd_svm_attributes_set (an SVM range left in system memory),
 * starts a CPU thread that adds 1 to the page's first dword with a locked instruction
 * (`lock add`/`lock xadd`) until told to stop, waits until it has done so 1000 times, then
 * dispatches 1024 work-items that each add 1 to the same dword TIMES times with
 * `global_atomic_add`, waits for the dispatch, stops the thread and checks that the dword
 * is exactly every CPU increment plus every GPU increment (on the hardware a GPU atomic on
 * system memory is a PCIe/xGMI atomic, atomic with the CPU's: none is lost).
 * Prints one line per kind for the Rust test; exits non-zero at the first failure.
 */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <pthread.h>
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

#define ITEMS 1024u
#define GROUP 64u
#ifndef TIMES
#define TIMES 64u
#endif
/* Sixty seconds: a hint to ROCr's wait, in ns. */
#define LONG_WAIT 60000000000ull

static hsa_agent_t gpu;
static int have_gpu;
static hsa_amd_memory_pool_t kernarg_pool;
static int have_kernarg;

struct cpu_thread {
    uint32_t *counter;
    volatile uint32_t count;
    volatile int run;
};

static void *cpu_inc(void *data)
{
    struct cpu_thread *t = data;
    while (t->run) {
        __atomic_fetch_add(t->counter, 1u, __ATOMIC_SEQ_CST);
        t->count++;
    }
    return NULL;
}

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

/* Races the CPU thread and the kernel on `cpu_ptr` (the GPU's address: `gpu_ptr`). */
static int race(const char *kind, uint32_t *cpu_ptr, void *gpu_ptr, hsa_queue_t *q,
                uint64_t kernel_object, uint8_t *args, uint32_t kernarg_size)
{
    struct cpu_thread t;
    pthread_t thread;
    hsa_signal_t done;
    hsa_kernel_dispatch_packet_t *p;
    uint64_t index;
    uint16_t header;
    uint32_t times = TIMES, value, expected;

    *cpu_ptr = 0;
    memset(args, 0, kernarg_size);
    memcpy(args, &gpu_ptr, 8);
    memcpy(args + 8, &times, 4);
    t.counter = cpu_ptr;
    t.count = 0;
    t.run = 1;
    if (pthread_create(&thread, NULL, cpu_inc, &t) != 0) {
        fprintf(stderr, "FAILED: pthread_create\n");
        return 1;
    }
    while (t.count < 1000)
        ;
    CHECK(hsa_signal_create(1, 0, NULL, &done));
    index = hsa_queue_add_write_index_relaxed(q, 1);
    p = (hsa_kernel_dispatch_packet_t *)q->base_address + (index & (q->size - 1));
    memset((uint8_t *)p + 4, 0, 60);
    p->setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    p->workgroup_size_x = GROUP;
    p->workgroup_size_y = 1;
    p->workgroup_size_z = 1;
    p->grid_size_x = ITEMS;
    p->grid_size_y = 1;
    p->grid_size_z = 1;
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
        fprintf(stderr, "FAILED: the %s dispatch did not complete\n", kind);
        return 1;
    }
    t.run = 0;
    pthread_join(thread, NULL);
    CHECK(hsa_signal_destroy(done));
    value = __atomic_load_n(cpu_ptr, __ATOMIC_SEQ_CST);
    expected = ITEMS * TIMES + t.count;
    printf("atomics %s gpu=%u cpu=%u value=%u expected=%u\n", kind, ITEMS * TIMES, t.count,
           value, expected);
    if (value != expected) {
        fprintf(stderr, "FAILED: %s: %d increments lost\n", kind, (int)(expected - value));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    hsa_file_t file;
    hsa_code_object_reader_t reader;
    hsa_executable_t exe;
    hsa_executable_symbol_t sym;
    uint64_t kernel_object;
    uint32_t kernarg_size;
    hsa_queue_t *q;
    uint8_t *args = NULL;
    uint32_t *locked, *svm;
    void *locked_gpu = NULL;
    hsa_amd_svm_attribute_pair_t access;
    FILE *f;

    if (argc != 2) {
        fprintf(stderr, "usage: rocr_atomics CODE_OBJECT\n");
        return 2;
    }
    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(find_gpu, NULL));
    CHECK(hsa_iterate_agents(find_cpu_pools, NULL));
    if (!have_gpu || !have_kernarg) {
        fprintf(stderr, "FAILED: gpu %d kernarg pool %d\n", have_gpu, have_kernarg);
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
    CHECK(hsa_executable_get_symbol_by_name(exe, "gpu_inc.kd", &gpu, &sym));
    CHECK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                         &kernel_object));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg_size));
    if (kernarg_size < 16)
        kernarg_size = 16;
    CHECK(hsa_amd_memory_pool_allocate(kernarg_pool, kernarg_size, 0, (void **)&args));
    CHECK(hsa_amd_agents_allow_access(1, &gpu, NULL, args));
    CHECK(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX,
                           &q));

    locked = aligned_alloc(4096, 4096);
    svm = aligned_alloc(4096, 4096);
    if (!locked || !svm) {
        fprintf(stderr, "FAILED: aligned_alloc\n");
        return 1;
    }
    memset(locked, 0, 4096);
    memset(svm, 0, 4096);
    CHECK(hsa_amd_memory_lock(locked, 4096, &gpu, 1, &locked_gpu));
    if (race("userptr", locked, locked_gpu, q, kernel_object, args, kernarg_size))
        return 1;
    access.attribute = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE;
    access.value = gpu.handle;
    CHECK(hsa_amd_svm_attributes_set(svm, 4096, &access, 1));
    if (race("svm", svm, svm, q, kernel_object, args, kernarg_size))
        return 1;

    CHECK(hsa_amd_memory_unlock(locked));
    CHECK(hsa_queue_destroy(q));
    CHECK(hsa_executable_destroy(exe));
    CHECK(hsa_code_object_reader_destroy(reader));
    hsa_amd_memory_pool_free(args);
    fclose(f);
    CHECK(hsa_shut_down());
    free(locked);
    free(svm);
    printf("done\n");
    return 0;
}
