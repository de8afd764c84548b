/* The clock a program sees through GET_CLOCK_COUNTERS (kfd_ioctl_get_clock_counters), around
 * nothing and around a WAIT_EVENTS that times out after 10 ms. One line each:
 * "idle <ns between two samples>", "wait <wait_result> <ns across the wait>",
 * "freq <system_clock_freq>". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* From linux/kfd_ioctl.h, which needs drm/drm.h. */
struct kfd_ioctl_get_clock_counters_args {
    uint64_t gpu_clock_counter;
    uint64_t cpu_clock_counter;
    uint64_t system_clock_counter;
    uint64_t system_clock_freq;
    uint32_t gpu_id;
    uint32_t pad;
};
struct kfd_ioctl_create_event_args {
    uint64_t event_page_offset;
    uint32_t event_trigger_data;
    uint32_t event_type;
    uint32_t auto_reset;
    uint32_t node_id;
    uint32_t event_id;
    uint32_t event_slot_index;
};
struct kfd_event_data {
    uint8_t exception_data[32];
    uint64_t kfd_event_data_ext;
    uint32_t event_id;
    uint32_t pad;
};
struct kfd_ioctl_wait_events_args {
    uint64_t events_ptr;
    uint32_t num_events;
    uint32_t wait_for_all;
    uint32_t timeout;
    uint32_t wait_result;
};
#define AMDKFD_IOC_GET_CLOCK_COUNTERS _IOWR('K', 0x05, struct kfd_ioctl_get_clock_counters_args)
#define AMDKFD_IOC_CREATE_EVENT _IOWR('K', 0x08, struct kfd_ioctl_create_event_args)
#define AMDKFD_IOC_WAIT_EVENTS _IOWR('K', 0x0C, struct kfd_ioctl_wait_events_args)

static int sample(int kfd, struct kfd_ioctl_get_clock_counters_args *c)
{
    memset(c, 0, sizeof(*c));
    return ioctl(kfd, AMDKFD_IOC_GET_CLOCK_COUNTERS, c);
}

int main(void)
{
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (kfd < 0) {
        fprintf(stderr, "no /dev/kfd\n");
        return 1;
    }
    struct kfd_ioctl_get_clock_counters_args a, b, c;
    if (sample(kfd, &a) || sample(kfd, &b)) {
        perror("GET_CLOCK_COUNTERS");
        return 1;
    }
    printf("idle %llu\n", (unsigned long long)(b.system_clock_counter - a.system_clock_counter));
    struct kfd_ioctl_create_event_args ev = {.event_type = 0, .auto_reset = 1};
    if (ioctl(kfd, AMDKFD_IOC_CREATE_EVENT, &ev)) {
        perror("CREATE_EVENT");
        return 1;
    }
    struct kfd_event_data data = {.event_id = ev.event_id};
    struct kfd_ioctl_wait_events_args w = {
        .events_ptr = (uint64_t)(uintptr_t)&data,
        .num_events = 1,
        .timeout = 10,
    };
    if (ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &w) || sample(kfd, &c)) {
        perror("WAIT_EVENTS");
        return 1;
    }
    printf("wait %u %llu\n", w.wait_result,
           (unsigned long long)(c.system_clock_counter - b.system_clock_counter));
    printf("freq %llu\n", (unsigned long long)c.system_clock_freq);
    return 0;
}
