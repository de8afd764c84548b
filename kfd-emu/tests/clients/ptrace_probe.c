/* A program that ptraces another process of its own, under kfd-emu run (which traces every
 * process of the program): a child PTRACE_ATTACHes its parent, reads a value with PEEKDATA and
 * detaches, as kfdtest's KFDMemoryTest.PtraceAccess does; a refused PTRACE_SEIZE changes
 * nothing; a child that PTRACE_TRACEMEs is stopped, read and detached by its parent. Around
 * each, the traced process uses /dev/kfd and maps a file (a file mmap is one the emulator's
 * tracer serves: it works only once the process is traced by kfd-emu again).
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
    return 0;
}
