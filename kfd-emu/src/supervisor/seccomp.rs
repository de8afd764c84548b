//! The raw seccomp layer: the BPF filter, the notification structs of `linux/seccomp.h`, and
//! the `SECCOMP_IOCTL_NOTIF_*` calls on a listener fd.
//!
//! This module is one of the crate's fenced `unsafe` modules: it issues `seccomp(2)`, `prctl`
//! and ioctls whose arguments are pointers to the structs defined here.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `struct seccomp_data`: the system call as the filter and the supervisor see it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SeccompData {
    /// System call number (`__NR_*` of `arch`).
    pub nr: i32,
    /// `AUDIT_ARCH_*` of the calling convention used.
    pub arch: u32,
    /// The caller's instruction pointer.
    pub instruction_pointer: u64,
    /// The six argument registers, unmodified.
    pub args: [u64; 6],
}
const _: () = assert!(size_of::<SeccompData>() == 64);
const _: () = assert!(std::mem::offset_of!(SeccompData, args) == 16);

/// `struct seccomp_notif`: one held system call.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SeccompNotif {
    /// Cookie naming this notification in every later call.
    pub id: u64,
    /// Thread id of the caller, in the listener's pid namespace (0 if invisible there).
    pub pid: u32,
    /// Unused by the kernel so far.
    pub flags: u32,
    /// The system call.
    pub data: SeccompData,
}
const _: () = assert!(size_of::<SeccompNotif>() == 80);
const _: () = assert!(std::mem::offset_of!(SeccompNotif, data) == 16);

/// `struct seccomp_notif_resp`: the answer to a notification.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SeccompNotifResp {
    /// The notification's cookie.
    pub id: u64,
    /// Return value when `error` is 0.
    pub val: i64,
    /// `-errno`, or 0.
    pub error: i32,
    /// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` or 0.
    pub flags: u32,
}
const _: () = assert!(size_of::<SeccompNotifResp>() == 24);

/// `struct seccomp_notif_addfd`: install an fd into the caller.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SeccompNotifAddfd {
    /// The notification's cookie.
    pub id: u64,
    /// `SECCOMP_ADDFD_FLAG_*`.
    pub flags: u32,
    /// The supervisor's fd to install.
    pub srcfd: u32,
    /// The number wanted with `SECCOMP_ADDFD_FLAG_SETFD`, else 0.
    pub newfd: u32,
    /// `O_CLOEXEC` or 0.
    pub newfd_flags: u32,
}
const _: () = assert!(size_of::<SeccompNotifAddfd>() == 24);

/// `struct seccomp_notif_sizes`: the kernel's sizes of the notification structs.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SeccompNotifSizes {
    /// `sizeof(struct seccomp_notif)`.
    pub seccomp_notif: u16,
    /// `sizeof(struct seccomp_notif_resp)`.
    pub seccomp_notif_resp: u16,
    /// `sizeof(struct seccomp_data)`.
    pub seccomp_data: u16,
}

/// `AUDIT_ARCH_X86_64` (`EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`).
pub const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `__X32_SYSCALL_BIT`: set in `nr` for x32-ABI calls, which share `AUDIT_ARCH_X86_64`.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): wake the caller on the answering CPU.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// Offsets of the low 32 bits of `args[0..6]` in `seccomp_data` (little-endian); the high
/// half follows at `+ 4`.
const ARG_LOW: [u32; 6] = [16, 24, 32, 40, 48, 56];

/// The upper 32 bits the tracer puts into a redirected `mmap`'s fd argument.
/// [`Filter::kfd_traced`] notifies a file `mmap` carrying it, so that the supervisor can
/// install the memory into the program (at a number the kernel picks) and answer the call
/// with that number, which the tracer then maps (see the `mmap` module). "kfd\0" in ASCII.
pub const SLOT_MARKER: u32 = 0x6b66_6400;

/// The upper 32 bits of the fd argument of an `mmap` the supervisor has a thread issue with
/// the fd and offset it decided (the re-issued call of a redirect, a lent thread's helper's
/// call; see the `mmap` module): [`Filter::kfd_traced`] allows it without a round trip. The
/// kernel's fd is the low 32 bits (`ksys_mmap_pgoff` → `fget(unsigned int fd)`), so the
/// marker changes nothing of the call. A program passing it itself maps natively, as an
/// unprepared [`SLOT_MARKER`] does. "kfd\x01" in ASCII.
pub const DIRECT_MARKER: u32 = 0x6b66_6401;

/// The `SECCOMP_RET_DATA` of the emulator's `SECCOMP_RET_TRACE` returns ("kf"): the tracer
/// reads it at each `PTRACE_EVENT_SECCOMP` stop (`PTRACE_GETEVENTMSG`) to tell its own stops
/// from those a program's own filter asks for, which it answers as the kernel does when no
/// tracer is attached (`ENOSYS`).
pub const TRACE_DATA: u32 = 0x6b66;

/// The fd numbers of the SMI event fds, whose writes the filter notifies.
pub use crate::backend::SMI_FDS;

/// The write calls [`SMI_FDS`] is about (`pwrite64` and `pwritev` need no answer: a pipe
/// and the kernel's anonymous SMI file both refuse positioned writes with `ESPIPE`;
/// `pwritev2` at offset -1 is a `writev`).
pub const SMI_WRITES: [i64; 3] = [libc::SYS_write, libc::SYS_writev, libc::SYS_pwritev2];

/// Jump targets of the filter's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L {
    Ioctl,
    AnonMmap,
    Madvise,
    Clone,
    Allow,
    Notify,
    Enosys,
    SmiWrite,
    Trace,
    Ptrace,
}

/// `AMDKFD_IOC_SMI_EVENTS`, the command whose new fd the tracer puts into [`SMI_FDS`].
pub const SMI_EVENTS_CMD: u32 = kfd_ioctl::abi::AMDKFD_IOC_SMI_EVENTS;

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The next instruction.
    Next,
    /// Skip this many instructions.
    Here(u8),
    /// A label defined later.
    To(L),
}
use Target::{Here, Next, To};

/// A classic BPF program with forward jumps to labels, resolved at the end.
#[derive(Debug, Default)]
struct Program {
    code: Vec<(libc::sock_filter, Option<L>, Option<L>)>,
    labels: Vec<(L, usize)>,
}

impl Program {
    fn op(&mut self, code: u32, k: u32) {
        self.code.push((stmt(code, k), None, None));
    }

    fn jump(&mut self, code: u32, k: u32, jt: Target, jf: Target) {
        let split = |t: Target| match t {
            Next => (0, None),
            Here(n) => (n, None),
            To(l) => (0, Some(l)),
        };
        let ((t, lt), (f, lf)) = (split(jt), split(jf));
        self.code.push((jump(code, k, t, f), lt, lf));
    }

    fn label(&mut self, l: L) {
        self.labels.push((l, self.code.len()));
    }

    /// The instructions, with each label jump turned into its offset (jumps count the
    /// instructions after themselves). Every label is defined after its uses.
    fn resolve(self) -> Vec<libc::sock_filter> {
        let at = |l: L| {
            self.labels
                .iter()
                .find(|(m, _)| *m == l)
                .map(|&(_, i)| i)
                .unwrap_or(0)
        };
        self.code
            .iter()
            .enumerate()
            .map(|(i, &(mut ins, lt, lf))| {
                if let Some(l) = lt {
                    ins.jt = at(l).saturating_sub(i + 1) as u8;
                }
                if let Some(l) = lf {
                    ins.jf = at(l).saturating_sub(i + 1) as u8;
                }
                ins
            })
            .collect()
    }
}

/// The system calls (x86_64 numbers) that are always notified: the opens and the path-based
/// `stat` family, the path-based xattr reads, and the calls that resize a file (`ftruncate`,
/// `fallocate`: rare, and refused on stand-ins as the kernel refuses them on device files), and
/// `fstat` (a stand-in describes itself as its device file), and `readlink`/`readlinkat` (the
/// emulated sysfs links, such as a render node's `device/subsystem`).
pub const NOTIFIED: [i64; 18] = [
    libc::SYS_openat,
    libc::SYS_open,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_fstat,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
];

/// The memory-policy calls that name NUMA nodes, always notified: a node the emulated machine
/// has and the host lacks is answered by the supervisor (see `Shared::mempolicy`).
pub const MEMPOLICY: [i64; 2] = [libc::SYS_mbind, libc::SYS_set_mempolicy];

/// The address-space calls that are always notified (the backend applies what the kernel's
/// MMU notifiers do before they run): `munmap`, `mremap`, `mprotect` and `brk`. `madvise`
/// and anonymous `mmap`s are notified only for some arguments, `fork` and `clone` only by
/// [`Filter::kfd_traced`] (see [`Filter::kfd`]).
pub const ADDRESS_SPACE: [i64; 4] = [
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_brk,
];

/// The `madvise` advice that drops pages (`MMU_NOTIFY_CLEAR`): `MADV_DONTNEED`, `MADV_FREE`,
/// `MADV_REMOVE`, `MADV_DONTNEED_LOCKED`. Other advice is not notified.
pub const MADVISE_NOTIFIED: [u32; 4] = [4, 8, 9, 24];

/// A classic BPF program for `SECCOMP_SET_MODE_FILTER`.
#[derive(Debug, Clone)]
pub struct Filter {
    program: Vec<libc::sock_filter>,
}

const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

impl Filter {
    /// The emulator's filter.
    ///
    /// - another architecture (an `int 0x80` i386 call) → `SECCOMP_RET_KILL_PROCESS`, as its
    ///   syscall numbers mean other calls;
    /// - an x32-ABI call (`X32_SYSCALL_BIT`) → `ENOSYS`, so it cannot bypass the filter;
    /// - [`NOTIFIED`]: `openat`, `open` and the path-based `stat` family (`newfstatat`,
    ///   `statx`, `stat`, `lstat`, `access`, `faccessat`, `faccessat2`) and the path-based
    ///   xattr reads (`getxattr`, `lgetxattr`, `listxattr`, `llistxattr`: `ls -l` asks for
    ///   `security.selinux` of what it lists), `readlink` and `readlinkat` →
    ///   `SECCOMP_RET_USER_NOTIF`;
    /// - [`MEMPOLICY`] (`mbind`, `set_mempolicy`) → `SECCOMP_RET_USER_NOTIF`;
    /// - `write`, `writev` and `pwritev2` of an fd number in [`SMI_FDS`] (the low 32 bits of
    ///   the argument, the kernel's `unsigned int fd`) → `SECCOMP_RET_USER_NOTIF`: an SMI
    ///   event fd's writes are answered as `kfd_smi_ev_write` answers them; every other
    ///   write runs natively without a round trip;
    /// - `openat2` → `ENOSYS` (glibc then uses `openat`);
    /// - `ioctl` whose command type byte (`(cmd >> 8) & 0xff` of the low 32 bits, the
    ///   kernel's `unsigned int cmd`) is `'K'` or `'d'` → `SECCOMP_RET_USER_NOTIF`; only the type
    ///   is matched because `AMDKFD_IOC_SVM` carries a variable size;
    /// - a file `mmap` (not `MAP_ANONYMOUS`, fd ≥ 0 in the low 32 bits of its argument)
    ///   → `SECCOMP_RET_USER_NOTIF` (one with fd -1 is allowed without a round trip); see
    ///   [`Filter::kfd_traced`] for the spawned program's variant;
    /// - an anonymous `mmap` with `MAP_FIXED` (it replaces what was there), [`ADDRESS_SPACE`]
    ///   (`munmap`, `mremap`, `mprotect`, `brk`) and `madvise` with advice in
    ///   [`MADVISE_NOTIFIED`] → `SECCOMP_RET_USER_NOTIF`; anonymous mappings without
    ///   `MAP_FIXED` and other advice are allowed. Forks are not notified here: glibc's
    ///   `fork` holds every malloc arena lock across its `clone`, and the supervisor's own
    ///   threads, in the same process, allocate to serve a call (see [`Filter::kfd_traced`]);
    /// - everything else → `SECCOMP_RET_ALLOW`.
    ///
    /// The supervisor's threads share the attached program's allocator: a call notified while
    /// its thread holds a malloc arena lock (glibc's `brk`, `mprotect`, `madvise` and `munmap`
    /// of its heaps) waits for a worker, which uses an arena of its own as long as the
    /// process has fewer threads than glibc's arena limit (8 per CPU).
    ///
    /// Cost: every notified call is a round trip through the supervisor, including the
    /// great majority that are not the emulator's and are sent back with
    /// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`. A `stat` of an unrelated path took about 7–9 µs
    /// under the filter against 0.5–0.8 µs natively (a 2-CPU VM; the `stat_cost` test of
    /// `tests/supervisor_stat.rs` measures it), so programs that stat thousands of files
    /// (`ls -lR`, a compiler's include search) slow down accordingly. `statx(fd, "",
    /// AT_EMPTY_PATH)` — what Rust's `File::metadata` issues — pays the round trip too, as the
    /// filter cannot read the path; so does `fstat`, and the rare `ftruncate`/`fallocate`.
    /// `readlink`/`readlinkat` pay it as well, and glibc's `realpath` issues one per path
    /// component. So do the address-space calls: a program that frees large blocks
    /// (`munmap`), grows them (`mremap`), trims its heap (`brk`, `madvise`) or changes
    /// protections pays one round trip per call.
    pub fn kfd() -> Self {
        Self::build(libc::SECCOMP_RET_USER_NOTIF, false)
    }

    /// The filter of `kfd-emu run` (a traced program, see the `tracer` module): as
    /// [`Filter::kfd`] (a file `mmap` is notified, the worker asks the backend, and the
    /// tracer carries a redirect out: see the `mmap` module), except that a file `mmap` whose
    /// fd argument carries [`DIRECT_MARKER`] in its upper 32 bits is allowed (the calls the
    /// supervisor has a thread issue); and that forks are notified:
    /// `fork`, and `clone` without `CLONE_VM` (`vfork`, which shares the address space, is
    /// not). `clone3`, whose flags are in memory the filter cannot read, fails with `ENOSYS`
    /// (glibc, ≥ 2.34, then uses `clone`), so no fork and no `CLONE_UNTRACED` goes unseen;
    /// `SMI_EVENTS` and `clone` with `CLONE_UNTRACED` go to the tracer (see `build`).
    /// Every `SECCOMP_RET_TRACE` carries [`TRACE_DATA`].
    ///
    /// File `mmap`s are notified, not traced, because a thread lent to the program's own
    /// tracer (see the `tracer` module) has a tracer that asked for no seccomp stops: the
    /// kernel fails a `SECCOMP_RET_TRACE` call of such a thread with `ENOSYS`
    /// (`__seccomp_filter`: `!ptrace_event_enabled(current, PTRACE_EVENT_SECCOMP)`), while a
    /// notification reaches the supervisor whoever traces the thread. A filter stacked on the
    /// lent thread alone cannot do it: a chain holds one listener (`has_duplicate_listener`,
    /// `EBUSY`), and a `SECCOMP_RET_USER_NOTIF` of a filter without one fails with `ENOSYS`
    /// (`seccomp_do_user_notification`).
    ///
    /// Without a tracer a `SECCOMP_RET_TRACE` call fails with `ENOSYS`, so this filter is only
    /// for a program the supervisor has seized.
    pub fn kfd_traced() -> Self {
        Self::build(libc::SECCOMP_RET_USER_NOTIF, true)
    }

    /// `traced` (the filter of [`Filter::kfd_traced`]) adds, besides file `mmap`s going to the
    /// tracer and forks being notified:
    /// - `AMDKFD_IOC_SMI_EVENTS` → `SECCOMP_RET_TRACE` unless its command's upper 32 bits
    ///   (which the kernel's `unsigned int cmd` drops) carry [`SLOT_MARKER`]: the tracer
    ///   marks it, so it is notified, and puts the new fd into [`SMI_FDS`] at its exit;
    /// - `clone` with `CLONE_UNTRACED` → `SECCOMP_RET_TRACE`: the tracer clears the flag, so
    ///   the child stays traced (and keeps working: the filter it inherits sends its file
    ///   `mmap`s to a tracer);
    /// - an anonymous `mmap` of 4 GiB or more without `MAP_FIXED` or `MAP_NORESERVE` →
    ///   `SECCOMP_RET_TRACE`: the tracer adds `MAP_NORESERVE` when the host would refuse it
    ///   for its size alone and the emulated machine would not (the `overcommit` module);
    /// - `clone3` → `ENOSYS`: its flags (`CLONE_UNTRACED` among them) are in memory the
    ///   filter cannot read; glibc (≥ 2.34) and the other callers fall back to `clone`;
    /// - `ptrace` with `PTRACE_TRACEME`, `PTRACE_ATTACH`, `PTRACE_SEIZE` or `PTRACE_DETACH`
    ///   (the low 32 bits of the request) → `SECCOMP_RET_TRACE`: the tracer lends the tracee
    ///   to the program's own tracer and takes it back after (the `tracer` module says how);
    ///   `PTRACE_POKETEXT` and `PTRACE_POKEDATA` are notified (a write into a BO's mapping,
    ///   which the kernel makes through the mapping's `access` hook whatever its protection,
    ///   is the backend's: [`Backend::poke`](crate::backend::Backend::poke)); every other
    ///   request runs natively.
    fn build(file_mmap: u32, traced: bool) -> Self {
        let forks = traced;
        let trace = libc::SECCOMP_RET_TRACE | TRACE_DATA;
        use libc::{
            BPF_ABS, BPF_ALU, BPF_AND, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET,
            BPF_RSH, BPF_W,
        };
        let ld = BPF_LD | BPF_W | BPF_ABS;
        let (jeq, jge, jset) = (
            BPF_JMP | BPF_JEQ | BPF_K,
            BPF_JMP | BPF_JGE | BPF_K,
            BPF_JMP | BPF_JSET | BPF_K,
        );
        let ret = BPF_RET | BPF_K;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let mut p = Program::default();
        p.op(ld, 4); // arch
        p.jump(jeq, AUDIT_ARCH_X86_64, Here(1), Next);
        p.op(ret, libc::SECCOMP_RET_KILL_PROCESS);
        p.op(ld, 0); // nr
        p.jump(jge, X32_SYSCALL_BIT, To(L::Enosys), Next);
        for nr in NOTIFIED.iter().chain(&ADDRESS_SPACE).chain(&MEMPOLICY) {
            p.jump(jeq, *nr as u32, To(L::Notify), Next);
        }
        for nr in SMI_WRITES {
            p.jump(jeq, nr as u32, To(L::SmiWrite), Next);
        }
        p.jump(jeq, libc::SYS_openat2 as u32, To(L::Enosys), Next);
        p.jump(jeq, libc::SYS_ioctl as u32, To(L::Ioctl), Next);
        p.jump(jeq, libc::SYS_madvise as u32, To(L::Madvise), Next);
        if forks {
            p.jump(jeq, libc::SYS_fork as u32, To(L::Notify), Next);
            p.jump(jeq, libc::SYS_clone as u32, To(L::Clone), Next);
            p.jump(jeq, libc::SYS_clone3 as u32, To(L::Enosys), Next);
            p.jump(jeq, libc::SYS_ptrace as u32, To(L::Ptrace), Next);
        }
        p.jump(jeq, libc::SYS_mmap as u32, Next, To(L::Allow));
        // A file mapping: not MAP_ANONYMOUS, and a non-negative fd (the kernel's fd is the
        // low 32 bits; -1 fails with EBADF natively).
        p.op(ld, ARG_LOW[3]);
        p.jump(jset, libc::MAP_ANONYMOUS as u32, To(L::AnonMmap), Next);
        p.op(ld, ARG_LOW[4] + 4);
        p.jump(jeq, SLOT_MARKER, To(L::Notify), Next);
        if traced {
            p.jump(jeq, DIRECT_MARKER, To(L::Allow), Next);
        }
        p.op(ld, ARG_LOW[4]);
        p.jump(jset, 0x8000_0000, To(L::Allow), Next);
        p.op(ret, file_mmap);
        // An anonymous mapping (its flags still loaded): notified when it replaces.
        p.label(L::AnonMmap);
        if traced {
            // One of 4 GiB or more the kernel may account (no MAP_NORESERVE) goes to the
            // tracer, which checks its size against the machine's RAM.
            p.jump(jset, libc::MAP_FIXED as u32, To(L::Notify), Next);
            p.jump(jset, libc::MAP_NORESERVE as u32, To(L::Allow), Next);
            p.op(ld, ARG_LOW[1] + 4);
            p.jump(jeq, 0, To(L::Allow), To(L::Trace));
        } else {
            p.jump(jset, libc::MAP_FIXED as u32, To(L::Notify), To(L::Allow));
        }
        p.label(L::Madvise);
        p.op(ld, ARG_LOW[2]);
        let (last, rest) = MADVISE_NOTIFIED.split_last().unwrap_or((&0, &[]));
        for advice in rest {
            p.jump(jeq, *advice, To(L::Notify), Next);
        }
        p.jump(jeq, *last, To(L::Notify), To(L::Allow));
        if forks {
            // clone: a fork unless CLONE_VM (a thread, vfork).
            p.label(L::Clone);
            p.op(ld, ARG_LOW[0]);
            p.jump(jset, libc::CLONE_UNTRACED as u32, To(L::Trace), Next);
            p.jump(jset, libc::CLONE_VM as u32, To(L::Allow), To(L::Notify));
        }
        if traced {
            // ptrace: the requests that make a tracer (the tracer lends the tracee first)
            // or end one (the tracer takes it back after).
            p.label(L::Ptrace);
            p.op(ld, ARG_LOW[0]);
            for request in [
                libc::PTRACE_TRACEME,
                libc::PTRACE_ATTACH,
                libc::PTRACE_SEIZE,
            ] {
                p.jump(jeq, request, To(L::Trace), Next);
            }
            p.jump(jeq, libc::PTRACE_DETACH, To(L::Trace), Next);
            // A write into the tracee's memory: the supervisor writes a BO mapping itself.
            p.jump(jeq, libc::PTRACE_POKETEXT, To(L::Notify), Next);
            p.jump(jeq, libc::PTRACE_POKEDATA, To(L::Notify), To(L::Allow));
        }
        p.label(L::Ioctl);
        if traced {
            p.op(ld, ARG_LOW[1]);
            p.jump(jeq, SMI_EVENTS_CMD, Next, Here(2));
            p.op(ld, ARG_LOW[1] + 4);
            p.jump(jeq, SLOT_MARKER, To(L::Notify), To(L::Trace));
        }
        p.op(ld, ARG_LOW[1]);
        p.op(BPF_ALU | BPF_RSH | BPF_K, 8);
        p.op(BPF_ALU | BPF_AND | BPF_K, 0xff);
        p.jump(jeq, u32::from(b'K'), To(L::Notify), Next);
        p.jump(jeq, u32::from(b'd'), To(L::Notify), Next);
        p.label(L::Allow);
        p.op(ret, libc::SECCOMP_RET_ALLOW);
        p.label(L::Notify);
        p.op(ret, libc::SECCOMP_RET_USER_NOTIF);
        p.label(L::Enosys);
        p.op(ret, enosys);
        p.label(L::Trace);
        p.op(ret, trace);
        // An SMI write: the fd (the kernel's `unsigned int`, the low 32 bits) in SMI_FDS.
        p.label(L::SmiWrite);
        p.op(ld, ARG_LOW[0]);
        p.jump(jge, SMI_FDS.end, Here(1), Next);
        p.jump(jge, SMI_FDS.start, Here(1), Next);
        p.op(ret, libc::SECCOMP_RET_ALLOW);
        p.op(ret, libc::SECCOMP_RET_USER_NOTIF);
        Self {
            program: p.resolve(),
        }
    }

    /// The instructions, for inspection.
    pub fn instructions(&self) -> &[libc::sock_filter] {
        &self.program
    }

    /// Installs the filter on the calling thread and returns its listener.
    ///
    /// Sets `PR_SET_NO_NEW_PRIVS` first (required without `CAP_SYS_ADMIN`), then
    /// `seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV)`, retrying without
    /// `WAIT_KILLABLE_RECV` on kernels older than 5.19. `WAIT_KILLABLE_RECV` matters: once the
    /// supervisor has received a call, a non-fatal signal to the caller no longer interrupts
    /// (and restarts) it, so an ioctl with side effects is never run twice.
    ///
    /// Async-signal-safe (no allocation, only system calls): usable between `fork` and `exec`.
    /// Only the calling thread is filtered (no `TSYNC`); threads and processes it creates
    /// afterwards inherit the filter.
    pub fn install(&self) -> Result<OwnedFd, Errno> {
        rustix::thread::set_no_new_privs(true)?;
        let prog = libc::sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr().cast_mut(),
        };
        let base = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
        for flags in [base | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, base] {
            // SAFETY: `prog` points at `self.program`, which outlives the call; the kernel
            // copies the program and does not keep the pointer.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    flags,
                    &raw const prog,
                )
            };
            if ret >= 0 {
                // SAFETY: with NEW_LISTENER the kernel returns a new fd that nothing else owns.
                return Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) });
            }
            let errno = Errno::from_raw_os_error(last_errno());
            if errno != Errno::INVAL {
                return Err(errno);
            }
        }
        Err(Errno::INVAL)
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Issues `ioctl(fd, request, arg)` and maps `-1` to the errno.
///
/// # Safety
/// `arg` must be valid for what `request` reads and writes.
unsafe fn ioctl_ptr(
    fd: BorrowedFd<'_>,
    request: libc::Ioctl,
    arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    // SAFETY: the caller guarantees `arg` matches `request`; `fd` is a live descriptor.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
    if ret < 0 {
        Err(Errno::from_raw_os_error(last_errno()))
    } else {
        Ok(ret)
    }
}

/// A seccomp listener fd with the kernel's struct sizes.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    notif_size: usize,
    resp_size: usize,
}

impl Listener {
    /// Wraps `fd`, a listener returned by [`Filter::install`], and asks the kernel for its
    /// notification struct sizes (`SECCOMP_GET_NOTIF_SIZES`).
    pub fn new(fd: OwnedFd) -> Result<Self, Errno> {
        let mut sizes = SeccompNotifSizes::default();
        // SAFETY: GET_NOTIF_SIZES writes one `struct seccomp_notif_sizes` to the pointer.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0,
                &raw mut sizes,
            )
        };
        if ret < 0 {
            return Err(Errno::from_raw_os_error(last_errno()));
        }
        let listener = Self {
            fd,
            notif_size: usize::from(sizes.seccomp_notif),
            resp_size: usize::from(sizes.seccomp_notif_resp),
        };
        // A best-effort latency win on Linux ≥ 6.6; older kernels refuse it with EINVAL.
        // SAFETY: SET_FLAGS takes the flags by value in the argument register, not a pointer.
        let _ = unsafe {
            libc::ioctl(
                listener.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        Ok(listener)
    }

    /// Receives the next notification (`SECCOMP_IOCTL_NOTIF_RECV`); blocks if none is pending.
    ///
    /// `ENOENT` means the caller was killed between the wake-up and the receive.
    pub fn recv(&self) -> Result<SeccompNotif, Errno> {
        if self.notif_size <= size_of::<SeccompNotif>() {
            let mut notif = SeccompNotif::default();
            // SAFETY: RECV writes the kernel's `seccomp_notif` (at most our size, checked
            // above) into the zeroed struct, as it requires.
            unsafe {
                ioctl_ptr(
                    self.fd.as_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    (&raw mut notif).cast(),
                )?
            };
            return Ok(notif);
        }
        // A newer kernel with a bigger struct: give it a zeroed buffer of its size.
        let mut buf = vec![0u64; self.notif_size.div_ceil(8)];
        // SAFETY: `buf` is zeroed and holds at least `notif_size` bytes.
        unsafe {
            ioctl_ptr(
                self.fd.as_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                buf.as_mut_ptr().cast(),
            )?
        };
        let (notif, _) =
            SeccompNotif::read_from_prefix(buf.as_bytes()).map_err(|_| Errno::INVAL)?;
        Ok(notif)
    }

    fn send(&self, resp: SeccompNotifResp) -> Result<(), Errno> {
        let mut buf = vec![
            0u64;
            self.resp_size
                .max(size_of::<SeccompNotifResp>())
                .div_ceil(8)
        ];
        buf.as_mut_bytes()[..size_of::<SeccompNotifResp>()].copy_from_slice(resp.as_bytes());
        // SAFETY: SEND reads the kernel's `seccomp_notif_resp` size from `buf`, which is at
        // least that large; the bytes past our struct are zero.
        unsafe {
            ioctl_ptr(
                self.fd.as_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                buf.as_mut_ptr().cast(),
            )?
        };
        Ok(())
    }

    /// Answers notification `id` with return value `val`.
    pub fn respond_value(&self, id: u64, val: i64) -> Result<(), Errno> {
        self.send(SeccompNotifResp {
            id,
            val,
            error: 0,
            flags: 0,
        })
    }

    /// Fails notification `id` with `errno`.
    pub fn respond_error(&self, id: u64, errno: Errno) -> Result<(), Errno> {
        self.send(SeccompNotifResp {
            id,
            val: 0,
            error: -errno.raw_os_error(),
            flags: 0,
        })
    }

    /// Lets the kernel run the held system call as issued (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
    pub fn respond_continue(&self, id: u64) -> Result<(), Errno> {
        self.send(SeccompNotifResp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        })
    }

    /// Whether notification `id` is still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`): its caller
    /// is alive and waiting, so a pid read for it still names it.
    pub fn id_valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            ioctl_ptr(
                self.fd.as_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                (&raw mut id).cast(),
            )
        }
        .is_ok()
    }

    /// Installs `fd` into the caller of notification `id` (`SECCOMP_IOCTL_NOTIF_ADDFD`) and
    /// returns its number there. With `send`, this also answers the notification with that
    /// number (`SECCOMP_ADDFD_FLAG_SEND`, Linux 5.14).
    pub fn add_fd(
        &self,
        id: u64,
        fd: BorrowedFd<'_>,
        cloexec: bool,
        send: bool,
    ) -> Result<i32, Errno> {
        let mut addfd = SeccompNotifAddfd {
            id,
            flags: if send {
                libc::SECCOMP_ADDFD_FLAG_SEND as u32
            } else {
                0
            },
            srcfd: fd.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: ADDFD reads one `seccomp_notif_addfd`.
        unsafe {
            ioctl_ptr(
                self.fd.as_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                (&raw mut addfd).cast(),
            )
        }
    }
}

impl Listener {
    /// Installs `fd` into the caller of notification `id` at number `newfd`, replacing what
    /// is there (`SECCOMP_ADDFD_FLAG_SETFD`, close-on-exec), without answering the call.
    pub fn add_fd_at(&self, id: u64, fd: BorrowedFd<'_>, newfd: u32) -> Result<i32, Errno> {
        self.add_fd_numbered(id, fd, newfd, true)
    }

    /// [`add_fd_at`](Self::add_fd_at) with `O_CLOEXEC` as asked.
    pub fn add_fd_numbered(
        &self,
        id: u64,
        fd: BorrowedFd<'_>,
        newfd: u32,
        cloexec: bool,
    ) -> Result<i32, Errno> {
        let mut addfd = SeccompNotifAddfd {
            id,
            flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
            srcfd: fd.as_raw_fd() as u32,
            newfd,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: ADDFD reads one `seccomp_notif_addfd`.
        unsafe {
            ioctl_ptr(
                self.fd.as_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                (&raw mut addfd).cast(),
            )
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter's classic BPF over `data` (the subset of instructions it uses).
    fn run(filter: &Filter, data: &SeccompData) -> u32 {
        let bytes = data.as_bytes();
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = filter.instructions()[pc];
            let code = u32::from(ins.code);
            pc += 1;
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let at = ins.k as usize;
                    acc = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
                }
                c if c == libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K => acc >>= ins.k,
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => acc &= ins.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += usize::from(if acc == ins.k { ins.jt } else { ins.jf });
                }
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => {
                    pc += usize::from(if acc >= ins.k { ins.jt } else { ins.jf });
                }
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                    pc += usize::from(if acc & ins.k != 0 { ins.jt } else { ins.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return ins.k,
                other => panic!("unexpected BPF opcode {other:#x}"),
            }
        }
    }

    fn call(nr: i64, args: [u64; 6]) -> SeccompData {
        SeccompData {
            nr: nr as i32,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0,
            args,
        }
    }

    fn ioctl(cmd: u64) -> SeccompData {
        call(libc::SYS_ioctl, [3, cmd, 0, 0, 0, 0])
    }

    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn filter_routes_each_call_as_documented() {
        let f = Filter::kfd();
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        assert_eq!(run(&f, &call(libc::SYS_openat, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_open, [0; 6])), notify);
        for nr in NOTIFIED {
            assert_eq!(run(&f, &call(nr, [0; 6])), notify, "syscall {nr}");
        }
        assert_eq!(run(&f, &call(libc::SYS_fstat, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_ftruncate, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_pread64, [0; 6])), allow);
        assert_eq!(run(&f, &call(libc::SYS_readlinkat, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_readlink, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_openat2, [0; 6])), ENOSYS);
        assert_eq!(run(&f, &call(libc::SYS_read, [0; 6])), allow);
        // A file mmap is notified; anonymous ones and fd -1 are not.
        assert_eq!(run(&f, &call(libc::SYS_mmap, [0; 6])), notify);
        let anon = (libc::MAP_ANONYMOUS | libc::MAP_PRIVATE) as u64;
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [0, 4096, 3, anon, 0, 0])),
            allow
        );
        // An anonymous MAP_FIXED mapping replaces what was there: notified; NOREPLACE is not.
        let fixed = anon | libc::MAP_FIXED as u64;
        assert_eq!(
            run(
                &f,
                &call(libc::SYS_mmap, [1 << 30, 4096, 3, fixed, u64::MAX, 0])
            ),
            notify
        );
        let noreplace = anon | libc::MAP_FIXED_NOREPLACE as u64;
        assert_eq!(
            run(
                &f,
                &call(libc::SYS_mmap, [1 << 30, 4096, 3, noreplace, 0, 0])
            ),
            allow
        );
        for nr in ADDRESS_SPACE {
            assert_eq!(run(&f, &call(nr, [0; 6])), notify, "syscall {nr}");
        }
        // madvise: only advice that drops pages.
        for advice in [libc::MADV_DONTNEED, libc::MADV_FREE, libc::MADV_REMOVE, 24] {
            let args = [1 << 30, 4096, advice as u64, 0, 0, 0];
            assert_eq!(run(&f, &call(libc::SYS_madvise, args)), notify, "{advice}");
        }
        for advice in [
            libc::MADV_WILLNEED,
            libc::MADV_HUGEPAGE,
            libc::MADV_DONTFORK,
        ] {
            let args = [1 << 30, 4096, advice as u64, 0, 0, 0];
            assert_eq!(run(&f, &call(libc::SYS_madvise, args)), allow, "{advice}");
        }
        // No fork is notified in attach mode (glibc holds the malloc locks across it).
        let fork = [libc::SIGCHLD as u64, 0, 0, 0, 0, 0];
        assert_eq!(run(&f, &call(libc::SYS_clone, fork)), allow);
        assert_eq!(run(&f, &call(libc::SYS_fork, [0; 6])), allow);
        let minus_one = u64::MAX;
        let shared = libc::MAP_SHARED as u64;
        let no_fd = [0, 4096, 3, shared, minus_one, 0];
        assert_eq!(run(&f, &call(libc::SYS_mmap, no_fd)), allow);
        // AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_SVM with two sizes, DRM_IOCTL_VERSION.
        assert_eq!(run(&f, &ioctl(0x8008_4b01)), notify);
        assert_eq!(run(&f, &ioctl(0xc028_4b20)), notify);
        assert_eq!(run(&f, &ioctl(0xc020_4b20)), notify);
        assert_eq!(run(&f, &ioctl(0xc040_6400)), notify);
        // TCGETS ('T') and a 'K' byte outside the type field stay native.
        assert_eq!(run(&f, &ioctl(0x5401)), allow);
        assert_eq!(run(&f, &ioctl(0x4b00_0054)), allow);
        // A sign-extended command: only the low 32 bits count, as in the kernel.
        assert_eq!(run(&f, &ioctl(0xffff_ffff_c018_4b16)), notify);
    }

    #[test]
    fn writes_are_notified_only_for_the_smi_fd_numbers() {
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        for f in [Filter::kfd(), Filter::kfd_traced()] {
            for nr in SMI_WRITES {
                let at = |fd: u64| run(&f, &call(nr, [fd, 0, 8, 0, 0, 0]));
                let (first, last) = (u64::from(SMI_FDS.start), u64::from(SMI_FDS.end - 1));
                assert_eq!(at(first), notify, "syscall {nr}");
                assert_eq!(at(last), notify, "syscall {nr}");
                assert_eq!(at(first - 1), allow, "syscall {nr}");
                assert_eq!(at(last + 1), allow, "syscall {nr}");
                assert_eq!(at(1), allow, "syscall {nr}: stdout stays native");
                // Only the low 32 bits are the fd, as in the kernel.
                assert_eq!(at((7 << 32) | first), notify, "syscall {nr}");
            }
            assert_eq!(
                run(
                    &f,
                    &call(
                        libc::SYS_pwrite64,
                        [u64::from(SMI_FDS.start), 0, 8, 0, 0, 0]
                    )
                ),
                allow
            );
        }
    }

    #[test]
    fn traced_filter_notifies_file_mmaps_and_the_slot_marker_and_allows_the_direct_one() {
        let f = Filter::kfd_traced();
        let shared = libc::MAP_SHARED as u64;
        let file = [0, 4096, 3, shared, 5, 0];
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run(&f, &call(libc::SYS_mmap, file)), notify);
        let marked = [0, 4096, 3, shared, (u64::from(SLOT_MARKER) << 32) | 1023, 0];
        assert_eq!(run(&f, &call(libc::SYS_mmap, marked)), notify);
        let direct = [
            0,
            4096,
            3,
            shared,
            (u64::from(DIRECT_MARKER) << 32) | 1023,
            0,
        ];
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, direct)),
            libc::SECCOMP_RET_ALLOW
        );
        // The attach filter has no direct marker: notified like any file mmap.
        assert_eq!(run(&Filter::kfd(), &call(libc::SYS_mmap, direct)), notify);
        // Anonymous mappings never stop the program, marker or not; MAP_FIXED ones are
        // notified (not traced).
        let anon = (libc::MAP_ANONYMOUS | libc::MAP_PRIVATE) as u64;
        let fixed = anon | libc::MAP_FIXED as u64;
        assert_eq!(
            run(
                &f,
                &call(libc::SYS_mmap, [1 << 30, 4096, 3, fixed, u64::MAX, 0])
            ),
            notify
        );
        let anon_marked = [0, 4096, 3, anon, (u64::from(SLOT_MARKER) << 32) | 7, 0];
        let allow = libc::SECCOMP_RET_ALLOW;
        assert_eq!(run(&f, &call(libc::SYS_mmap, anon_marked)), allow);
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [0, 4096, 3, anon, 0, 0])),
            allow
        );
        // One of 4 GiB or more goes to the tracer (the machine's overcommit check) unless it
        // has MAP_NORESERVE; the attached filter lets it run.
        let trace = libc::SECCOMP_RET_TRACE | TRACE_DATA;
        let big = 1u64 << 32;
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [0, big, 3, anon, 0, 0])),
            trace
        );
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [0, big - 4096, 3, anon, 0, 0])),
            allow
        );
        let noreserve = anon | libc::MAP_NORESERVE as u64;
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [0, big, 3, noreserve, 0, 0])),
            allow
        );
        assert_eq!(
            run(&f, &call(libc::SYS_mmap, [1 << 40, big, 3, fixed, 0, 0])),
            notify
        );
        assert_eq!(
            run(
                &Filter::kfd(),
                &call(libc::SYS_mmap, [0, big, 3, anon, 0, 0])
            ),
            allow
        );
        // Forks are: a fork is notified, a thread is not; vfork is allowed, clone3 refused
        // (ENOSYS: glibc falls back to clone), CLONE_UNTRACED goes to the tracer.
        let fork = [libc::SIGCHLD as u64, 0, 0, 0, 0, 0];
        assert_eq!(run(&f, &call(libc::SYS_clone, fork)), notify);
        assert_eq!(run(&f, &call(libc::SYS_fork, [0; 6])), notify);
        let thread = [(libc::CLONE_VM | libc::CLONE_THREAD) as u64, 0, 0, 0, 0, 0];
        assert_eq!(run(&f, &call(libc::SYS_clone, thread)), allow);
        assert_eq!(run(&f, &call(libc::SYS_vfork, [0; 6])), allow);
        assert_eq!(run(&f, &call(libc::SYS_clone3, [0; 6])), ENOSYS);
        let trace = libc::SECCOMP_RET_TRACE | TRACE_DATA;
        for flags in [fork[0], thread[0]] {
            let untraced = [flags | libc::CLONE_UNTRACED as u64, 0, 0, 0, 0, 0];
            assert_eq!(run(&f, &call(libc::SYS_clone, untraced)), trace);
        }
        // SMI_EVENTS goes to the tracer, which marks it to be notified.
        let smi = u64::from(SMI_EVENTS_CMD);
        let smi_call = |cmd| call(libc::SYS_ioctl, [3, cmd, 0, 0, 0, 0]);
        assert_eq!(run(&f, &smi_call(smi)), trace);
        let marked_smi = (u64::from(SLOT_MARKER) << 32) | smi;
        assert_eq!(run(&f, &smi_call(marked_smi)), notify);
        // ptrace requests that make or end a tracer go to the tracer, the rest run natively
        // (the attach filter lets them all run).
        let ptrace = |request: u32| call(libc::SYS_ptrace, [u64::from(request), 7, 0, 0, 0, 0]);
        for request in [
            libc::PTRACE_TRACEME,
            libc::PTRACE_ATTACH,
            libc::PTRACE_SEIZE,
            libc::PTRACE_DETACH,
        ] {
            assert_eq!(run(&f, &ptrace(request)), trace, "request {request}");
            assert_eq!(run(&Filter::kfd(), &ptrace(request)), allow);
        }
        for request in [
            libc::PTRACE_PEEKDATA,
            libc::PTRACE_CONT,
            libc::PTRACE_INTERRUPT,
        ] {
            assert_eq!(run(&f, &ptrace(request)), allow, "request {request}");
        }
        // Writes into the tracee's memory are notified.
        for request in [libc::PTRACE_POKETEXT, libc::PTRACE_POKEDATA] {
            assert_eq!(run(&f, &ptrace(request)), notify, "request {request}");
            assert_eq!(run(&Filter::kfd(), &ptrace(request)), allow);
        }
        // The attach filter has no tracer: SMI_EVENTS is notified, clone3 allowed.
        assert_eq!(run(&Filter::kfd(), &smi_call(smi)), notify);
        assert_eq!(run(&Filter::kfd(), &call(libc::SYS_clone3, [0; 6])), allow);
        // The rest is routed as in the attach filter.
        assert_eq!(run(&f, &ioctl(0x8008_4b01)), notify);
        assert_eq!(run(&f, &call(libc::SYS_openat, [0; 6])), notify);
        assert_eq!(run(&f, &call(libc::SYS_read, [0; 6])), allow);
    }

    #[test]
    fn filter_refuses_other_abis() {
        let f = Filter::kfd();
        let mut i386 = call(5 /* i386 open */, [0; 6]);
        i386.arch = 3 | 0x4000_0000; // AUDIT_ARCH_I386
        assert_eq!(run(&f, &i386), libc::SECCOMP_RET_KILL_PROCESS);
        let x32_openat = call(libc::SYS_openat | i64::from(X32_SYSCALL_BIT), [0; 6]);
        assert_eq!(run(&f, &x32_openat), ENOSYS);
    }
}
