/* A program that ptraces another process of its own, under kfd-emu run (which traces every
 * process of the program): a child PTRACE_ATTACHes its parent, reads a value with PEEKDATA and
 * detaches, as kfdtest's KFDMemoryTest.PtraceAccess does; a refused PTRACE_SEIZE changes
 * nothing; a child that PTRACE_TRACEMEs is stopped, read and detached by its parent. Around
 * each, the traced process uses /dev/kfd and maps a file (a file mmap is one the emulator's
 * supervisor serves). A last child maps a file and its KFD signal page while its parent
 * traces it (PTRACE_TRACEME, stopped, PTRACE_CONT), as kfdtest's
 * KFDDBGTest.HitMemoryViolation's debuggee creates its queue while traced.
 * Prints one line per step; exits 0 when every step gave what Linux gives. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

/* AMDKFD_IOC_GET_VERSION: _IOR('K', 0x01, struct kfd_ioctl_get_version_args) (8 bytes). */
#define KFD_GET_VERSION 0x80084b01UL

/* struct kfd_ioctl_create_event_args (include/uapi/linux/kfd_ioctl.h). */
struct create_event_args {
    uint64_t event_page_offset;
    uint32_t event_trigger_data;
    uint32_t event_type;
    uint32_t auto_reset;
    uint32_t node_id;
    uint32_t event_id;
    uint32_t event_slot_index;
};
/* AMDKFD_IOC_CREATE_EVENT: _IOWR('K', 0x08, struct kfd_ioctl_create_event_args). */
#define KFD_CREATE_EVENT _IOWR('K', 0x08, struct create_event_args)
/* AMDKFD_IOC_DESTROY_EVENT: _IOW('K', 0x09, struct kfd_ioctl_destroy_event_args) (8 bytes). */
#define KFD_DESTROY_EVENT _IOW('K', 0x09, uint64_t)
/* KFD_SIGNAL_EVENT_LIMIT slots of 8 bytes: the length libhsakmt maps. */
#define EVENT_PAGE_BYTES (4096 * 8)

static volatile uint64_t secret = 0x6b66642d70747261ULL;

static int kfd_version(void) {
    int fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    uint32_t v[2] = {0, 0};
    int r = ioctl(fd, KFD_GET_VERSION, v);
    close(fd);
    return r == 0 ? (int)v[0] : -1;
}

/* Maps the program's own file and checks its ELF magic: 1 when it worked. */
static int file_map(void) {
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        printf("mmap errno %s\n", strerrorname_np(errno));
        return 0;
    }
    int ok = memcmp(p, ELFMAG, SELFMAG) == 0;
    munmap(p, 4096);
    return ok;
}

/* Creates a signal event and maps the process's signal page through /dev/kfd at the offset
 * CREATE_EVENT gives, as libhsakmt does: 1 when the mapping shows the event's slot
 * unsignaled (all ones: allocate_signal_page fills the page with UNSIGNALED_EVENT_SLOT). */
static int event_map(void) {
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (kfd < 0)
        return 0;
    struct create_event_args ev = {.event_type = 0, .auto_reset = 1};
    int ok = 0;
    if (ioctl(kfd, KFD_CREATE_EVENT, &ev) == 0) {
        void *p = mmap(NULL, EVENT_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, kfd,
                       (off_t)ev.event_page_offset);
        if (p == MAP_FAILED) {
            printf("event mmap errno %s\n", strerrorname_np(errno));
        } else {
            ok = ((volatile uint64_t *)p)[ev.event_slot_index] == UINT64_MAX;
            munmap(p, EVENT_PAGE_BYTES);
        }
        uint64_t destroy = ev.event_id;
        ok = ioctl(kfd, KFD_DESTROY_EVENT, &destroy) == 0 && ok;
    }
    close(kfd);
    return ok;
}

/* The child's side of the attach: exit status 0 when each step worked, else the step. */
static int attach_parent(pid_t parent) {
    /* An invalid option set: the kernel refuses it (EIO) and the parent stays as it is. */
    errno = 0;
    if (ptrace(PTRACE_SEIZE, parent, 0, (void *)0x80000000UL) != -1 || errno != EIO)
        return 10;
    if (ptrace(PTRACE_ATTACH, parent, 0, 0) != 0)
        return errno == EPERM ? 11 : 12;
    int status = 0;
    if (waitpid(parent, &status, 0) != parent || !WIFSTOPPED(status))
        return 13;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, parent, (void *)&secret, 0);
    if (errno != 0 || (uint64_t)word != secret)
        return 14;
    if (ptrace(PTRACE_DETACH, parent, 0, 0) != 0)
        return 15;
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int version = kfd_version();
    printf("kfd %d\n", version > 0);
    /* Yama's ptrace_scope 1 lets only ancestors attach, unless the tracee allows it. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0)
        _exit(attach_parent(parent));
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    printf("attach %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
    printf("after attach: kfd %d map %d\n", kfd_version() == version, file_map());

    child = fork();
    if (child == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
            _exit(20);
        raise(SIGSTOP);
        /* Detached by the parent: traced by kfd-emu again. */
        _exit(kfd_version() == version && file_map() ? 0 : 21);
    }
    int ok = waitpid(child, &status, 0) == child && WIFSTOPPED(status) &&
             WSTOPSIG(status) == SIGSTOP;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, child, (void *)&secret, 0);
    ok = ok && errno == 0 && (uint64_t)word == secret;
    ok = ok && ptrace(PTRACE_DETACH, child, 0, 0) == 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    printf("traceme %d %d\n", ok, WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));

    child = fork();
    if (child == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
            _exit(30);
        raise(SIGSTOP);
        /* Continued, still traced by the parent. */
        int map = file_map();
        int event = event_map();
        _exit(map && event ? 0 : 31 + map + 2 * event);
    }
    ok = waitpid(child, &status, 0) == child && WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP;
    ok = ok && ptrace(PTRACE_CONT, child, 0, 0) == 0;
    for (;;) {
        if (waitpid(child, &status, 0) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (!WIFSTOPPED(status))
            break;
        /* A signal for the traced child: delivered, as a debugger passes it on. */
        ptrace(PTRACE_CONT, child, 0, (void *)(uintptr_t)WSTOPSIG(status));
    }
    printf("traced maps %d %d\n", ok, WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));

    /* A child blocked in read() that its parent PTRACE_SEIZEs (no stop): it goes on, traced,
     * and maps the same once the parent writes the pipe. */
    int go[2];
    if (pipe(go) != 0)
        return 1;
    child = fork();
    if (child == 0) {
        close(go[1]);
        char byte;
        if (read(go[0], &byte, 1) != 1)
            _exit(40);
        int map = file_map();
        int event = event_map();
        _exit(map && event ? 0 : 41 + map + 2 * event);
    }
    close(go[0]);
    /* Seized inside its read(): the call is interrupted for the lend and restarted as the
     * kernel would (the child behaves the same if seized before it, but this is the path to
     * check). Waits for /proc/<child>/syscall to name read (0), 10 s at most. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)child);
    for (int tries = 0; tries < 10000; tries++) {
        char text[32] = {0};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
        if (fd >= 0)
            close(fd);
        if (got > 2 && text[0] == '0' && text[1] == ' ')
            break;
        usleep(1000);
    }
    ok = ptrace(PTRACE_SEIZE, child, 0, 0) == 0;
    ok = write(go[1], "g", 1) == 1 && ok;
    close(go[1]);
    for (;;) {
        if (waitpid(child, &status, 0) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (!WIFSTOPPED(status))
            break;
        ptrace(PTRACE_CONT, child, 0, (void *)(uintptr_t)(status >> 16 ? 0 : WSTOPSIG(status)));
    }
    printf("seized maps %d %d\n", ok, WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
    return 0;
}
