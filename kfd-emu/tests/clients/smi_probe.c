/* What a C program sees of an SMI event fd (kfd_smi_events.c) of the first GPU: its number,
 * poll, short and long writes, writev, pwrite, and a read of an empty FIFO. One line each:
 * "<what> <return value> <errno name or 0>". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/* From linux/kfd_ioctl.h, which needs drm/drm.h: SMI_EVENTS and its argument. */
struct kfd_ioctl_smi_events_args {
    uint32_t gpuid;
    uint32_t anon_fd;
};
#define AMDKFD_IOC_SMI_EVENTS _IOWR('K', 0x1F, struct kfd_ioctl_smi_events_args)

static const char *name(int e)
{
    switch (e) {
    case 0: return "0";
    case EFAULT: return "EFAULT";
    case EAGAIN: return "EAGAIN";
    case ESPIPE: return "ESPIPE";
    case EBADF: return "EBADF";
    default: return "other";
    }
}

static void show(const char *what, long ret)
{
    printf("%s %ld %s\n", what, ret, name(ret < 0 ? errno : 0));
}

static int first_gpu_id(void)
{
    char path[128];
    for (int node = 0; node < 64; node++) {
        snprintf(path, sizeof(path), "/sys/class/kfd/kfd/topology/nodes/%d/gpu_id", node);
        FILE *f = fopen(path, "r");
        if (!f)
            return -1;
        int id = 0;
        int got = fscanf(f, "%d", &id);
        fclose(f);
        if (got == 1 && id != 0)
            return id;
    }
    return -1;
}

int main(void)
{
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    int gpu = first_gpu_id();
    if (kfd < 0 || gpu < 0) {
        fprintf(stderr, "no /dev/kfd or GPU\n");
        return 1;
    }
    struct kfd_ioctl_smi_events_args args = { .gpuid = (uint32_t)gpu };
    if (ioctl(kfd, AMDKFD_IOC_SMI_EVENTS, &args) != 0) {
        perror("AMDKFD_IOC_SMI_EVENTS");
        return 1;
    }
    int smi = (int)args.anon_fd;
    printf("fd %d\n", smi);
    struct pollfd p = { .fd = smi, .events = POLLIN | POLLOUT };
    show("poll", poll(&p, 1, 0));
    printf("revents %#x\n", p.revents);
    uint64_t mask[2] = { 1u << 4, ~0ull };
    show("write4", write(smi, mask, 4));
    show("write16", write(smi, mask, 16));
    struct iovec iov[2] = { { mask, 8 }, { mask, 8 } };
    show("writev", writev(smi, iov, 2));
    show("pwrite", pwrite(smi, mask, 8, 0));
    char buf[64];
    show("read", read(smi, buf, sizeof(buf)));
    return 0;
}
