//! Which bytes of the caller's memory an x86-64 system call copies, in the kernel's order:
//! the table the tracer of `kfd-emu run` consults at a call's entry while the caller's
//! process has memory hidden from its CPU (SVM pages in VRAM, [`super::tracer`]).
//!
//! On the kernel, a call's `copy_from_user`/`copy_to_user` (or `get_user`/`put_user`, or the
//! `get_user_pages` of a shared futex key or an `mlock`) that touches a device-private page
//! takes a page fault in kernel mode: `do_user_addr_fault` → `handle_mm_fault` →
//! `do_swap_page`, which finds the device-private swap entry and calls the page's
//! `dev_pagemap_ops.migrate_to_ram`, `svm_migrate_to_ram` (`kfd_migrate.c`), and the copy goes
//! on with the block home. Under emulation the hidden pages are `PROT_NONE`, and the same copy
//! fails with `EFAULT`; so the tracer brings home, before the call runs, the blocks the call's
//! copies would touch, in the order the kernel copies them ([`describe`]).
//!
//! Each row cites the kernel function whose copies it lists. Rules kept throughout:
//!
//! - a `NULL` pointer the call treats as "not given" touches nothing (the kernel's `if (ptr)`);
//! - a copy the kernel makes only in some outcome (the remaining time of an interrupted
//!   `nanosleep`, the entries `getdents64` or `epoll_wait` fill, the path `getcwd` writes)
//!   is left out unless a failed copy would lose a side effect the call already made (a
//!   child `wait4` reaped, a connection `accept` took, a signal `rt_sigtimedwait` dequeued):
//!   then the bytes the call may write are listed, and come home even when it writes none;
//! - a call the table does not describe completely ([`Described::exact`] false) is left to
//!   the tracer's fallback at its exit: an `EFAULT` then brings home the hidden block an
//!   argument register points into, or a word of an [`Described::opaque`] struct (an
//!   `ioctl`'s argument, whose layout only its driver knows), and the call is made again.
//!
//! Strings (paths) are read up to their NUL (at most `PATH_MAX`): the touch is the string and
//! its NUL (`strncpy_from_user` reads a word at a time and may read up to 7 bytes past the NUL
//! within the same page; a granule boundary there would fault the next granule on the kernel,
//! not here).

/// `PATH_MAX`, counting the NUL.
const PATH_MAX: u64 = 4096;
/// `UIO_MAXIOV`: the most `iovec`s (and, for `sendmmsg`/`recvmmsg`, messages) a call takes.
const UIO_MAXIOV: u64 = 1024;
/// A caller-given count the table follows no further than this many bytes: a larger one is
/// a bad argument the kernel refuses (`EINVAL`, `ENOMEM`) before copying, or copies lazily.
const MAX_TOUCH: u64 = 1 << 30;

/// Sizes of the x86-64 structs the rows name (`include/uapi`, `arch/x86/include/uapi`).
const STAT: u64 = 144;
const STATX: u64 = 256;
const STATFS: u64 = 120;
const TIMESPEC: u64 = 16;
const TIMEVAL: u64 = 16;
const TIMEZONE: u64 = 8;
const ITIMERSPEC: u64 = 32;
const ITIMERVAL: u64 = 32;
const RLIMIT: u64 = 16;
const RUSAGE: u64 = 144;
const SYSINFO: u64 = 112;
const UTSNAME: u64 = 6 * 65;
const TMS: u64 = 32;
const POLLFD: u64 = 8;
const IOVEC: u64 = 16;
const MSGHDR: u64 = 56;
const MMSGHDR: u64 = 64;
const SIGSET: u64 = 8;
/// The kernel's `struct sigaction` on x86-64 (handler, flags, restorer, mask).
const KSIGACTION: u64 = 32;
const STACK_T: u64 = 24;
const SIGINFO: u64 = 128;
const EPOLL_EVENT: u64 = 12;
/// The fields `waitid` writes of its `siginfo_t` (`si_signo` … `si_status`, `kernel/exit.c`).
const WAITID_INFO: u64 = 28;
/// `struct open_how`'s size as `openat2` copies it is its `size` argument.
const TERMIOS: u64 = 36;
const WINSIZE: u64 = 8;

/// Whether the kernel reads the bytes (`copy_from_user`) or writes them (`copy_to_user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// `[start, end)` of the caller's memory that a call copies, and which way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Touch {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) dir: Dir,
}

/// What [`describe`] knows of a call.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Described {
    /// The bytes it copies, in the kernel's order.
    pub(crate) touches: Vec<Touch>,
    /// Whether `touches` is every byte it may copy: false for a call the table lacks or
    /// knows only in part (the tracer's exit fallback then applies).
    pub(crate) exact: bool,
    /// `[start, end)` spans whose aligned words may be pointers the call follows (an
    /// `ioctl`'s struct): the fallback looks there too.
    pub(crate) opaque: Vec<(u64, u64)>,
}

/// Reads the caller's memory (a word at any address; `None` if unreadable).
pub(crate) type Peek<'a> = &'a mut dyn FnMut(u64) -> Option<u64>;

/// The rows' builder: touches in order, empty and `NULL` ones dropped.
struct Rows<'a, 'b> {
    peek: Peek<'b>,
    out: &'a mut Described,
}

impl Rows<'_, '_> {
    fn add(&mut self, start: u64, len: u64, dir: Dir) {
        if start == 0 || len == 0 || len > MAX_TOUCH {
            return;
        }
        self.out.touches.push(Touch {
            start,
            end: start.saturating_add(len),
            dir,
        });
    }
    fn read(&mut self, start: u64, len: u64) {
        self.add(start, len, Dir::Read);
    }
    fn write(&mut self, start: u64, len: u64) {
        self.add(start, len, Dir::Write);
    }
    fn word(&mut self, at: u64) -> Option<u64> {
        (self.peek)(at)
    }
    fn u32_at(&mut self, at: u64) -> Option<u64> {
        self.word(at).map(|w| w & 0xffff_ffff)
    }
    /// A NUL-terminated string at `at`: its bytes and the NUL (`strncpy_from_user`). Read
    /// in aligned words, which never cross a page.
    fn string(&mut self, at: u64) {
        if at == 0 {
            return;
        }
        let mut word_at = at & !7;
        let mut len = 0;
        while len < PATH_MAX {
            let Some(word) = self.word(word_at) else {
                // Unreadable: the kernel's copy stops there with EFAULT; what came before
                // was read.
                return self.read(at, len.max(1));
            };
            let skip = (at.max(word_at) - word_at) as usize;
            let bytes = word.to_le_bytes();
            if let Some(nul) = bytes[skip..].iter().position(|&b| b == 0) {
                return self.read(at, (len + nul as u64 + 1).min(PATH_MAX));
            }
            len += (8 - skip) as u64;
            let Some(next) = word_at.checked_add(8) else {
                return self.read(at, len);
            };
            word_at = next;
        }
        self.read(at, PATH_MAX);
    }
    /// `count` `struct iovec`s at `iov`: the array read (`import_iovec`), then each buffer
    /// in order with `dir`. More than `UIO_MAXIOV` fail with `EINVAL` before any copy.
    fn iovecs(&mut self, iov: u64, count: u64, dir: Dir) {
        if count > UIO_MAXIOV {
            return;
        }
        self.read(iov, count * IOVEC);
        self.buffers(iov, count, dir);
    }
    /// The buffers of `count` (at most `UIO_MAXIOV`) `struct iovec`s at `iov`, in order.
    fn buffers(&mut self, iov: u64, count: u64, dir: Dir) {
        if iov == 0 || count > UIO_MAXIOV {
            return;
        }
        let mut bufs = Vec::new();
        for i in 0..count {
            let Some(at) = iov.checked_add(i * IOVEC) else {
                return;
            };
            let (Some(base), Some(len)) =
                (self.word(at), at.checked_add(8).and_then(|a| self.word(a)))
            else {
                return;
            };
            bufs.push((base, len));
        }
        for (base, len) in bufs {
            self.add(base, len, dir);
        }
    }
    /// `move_addr_to_user(kaddr, klen, uaddr, ulen)` (`net/socket.c`): `*ulen` read, at most
    /// that many bytes of the address written (the kernel's `klen` may be fewer), `*ulen`
    /// written.
    fn addr_out(&mut self, uaddr: u64, ulen: u64) {
        if uaddr == 0 || ulen == 0 {
            return;
        }
        self.read(ulen, 4);
        let len = self.u32_at(ulen).unwrap_or(0);
        self.write(uaddr, len);
        self.write(ulen, 4);
    }
    /// `___sys_sendmsg` (`net/socket.c`) of the `struct msghdr` at `msg`: the header
    /// (`__copy_msghdr`), the name (`move_addr_to_kernel`), the iovec array (`import_iovec`),
    /// the control data (`____sys_sendmsg`), then the data (`sock_sendmsg`).
    fn sendmsg(&mut self, msg: u64) {
        self.read(msg, MSGHDR);
        let field = |rows: &mut Self, off: u64| msg.checked_add(off).and_then(|a| rows.word(a));
        let (Some(name), Some(namelen), Some(iov), Some(iovlen), Some(control), Some(controllen)) = (
            field(self, 0),
            field(self, 8),
            field(self, 16),
            field(self, 24),
            field(self, 32),
            field(self, 40),
        ) else {
            return;
        };
        self.read(name, namelen & 0xffff_ffff);
        if iovlen > UIO_MAXIOV {
            return;
        }
        self.read(iov, iovlen * IOVEC);
        self.read(control, controllen);
        self.buffers(iov, iovlen, Dir::Read);
    }
    /// `___sys_recvmsg` (`net/socket.c`) of the `struct msghdr` at `msg`: the header, the
    /// iovec array, the data (`sock_recvmsg`), the name (`move_addr_to_user` with the
    /// header's `msg_namelen` as `ulen`), `msg_flags` and `msg_controllen` written back. The
    /// control data is written only when the socket has some to give (`put_cmsg`, whose
    /// failure does not fail the call): left out.
    fn recvmsg(&mut self, msg: u64) {
        self.read(msg, MSGHDR);
        let field = |rows: &mut Self, off: u64| msg.checked_add(off).and_then(|a| rows.word(a));
        let (Some(name), Some(iov), Some(iovlen)) =
            (field(self, 0), field(self, 16), field(self, 24))
        else {
            return;
        };
        if iovlen > UIO_MAXIOV {
            return;
        }
        self.iovecs(iov, iovlen, Dir::Write);
        self.addr_out(name, msg.saturating_add(8));
        self.write(msg.saturating_add(48), 4);
        self.write(msg.saturating_add(40), 8);
    }
}

/// `_IOC_DIR`'s bits and where `_IOC_SIZE` is (`include/uapi/asm-generic/ioctl.h`).
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

/// Legacy tty and socket ioctls, whose numbers encode neither size nor direction
/// (`include/uapi/asm-generic/ioctls.h`): the request, the bytes, and which way.
const LEGACY_IOCTLS: [(u32, u64, Dir); 12] = [
    (0x5401, TERMIOS, Dir::Write), // TCGETS
    (0x5402, TERMIOS, Dir::Read),  // TCSETS
    (0x5403, TERMIOS, Dir::Read),  // TCSETSW
    (0x5404, TERMIOS, Dir::Read),  // TCSETSF
    (0x540F, 4, Dir::Write),       // TIOCGPGRP
    (0x5410, 4, Dir::Read),        // TIOCSPGRP
    (0x5411, 4, Dir::Write),       // TIOCOUTQ
    (0x5413, WINSIZE, Dir::Write), // TIOCGWINSZ
    (0x5414, WINSIZE, Dir::Read),  // TIOCSWINSZ
    (0x541B, 4, Dir::Write),       // FIONREAD
    (0x5421, 4, Dir::Read),        // FIONBIO
    (0x5452, 4, Dir::Read),        // FIOASYNC
];

/// `FUTEX_*` commands (`include/uapi/linux/futex.h`).
const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_UNLOCK_PI: u64 = 7;
const FUTEX_TRYLOCK_PI: u64 = 8;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_WAIT_REQUEUE_PI: u64 = 11;
const FUTEX_CMP_REQUEUE_PI: u64 = 12;
const FUTEX_LOCK_PI2: u64 = 13;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;

/// `MADV_POPULATE_READ`, `MADV_POPULATE_WRITE` (Linux 5.14).
const MADV_POPULATE_READ: u64 = 22;
const MADV_POPULATE_WRITE: u64 = 23;
/// `PR_SET_NAME`, `PR_GET_NAME`: a 16-byte name.
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
/// `ARCH_GET_FS`, `ARCH_GET_GS`: an 8-byte base written.
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;
/// `EPOLL_CTL_DEL`: the one `epoll_ctl` op that reads no event.
const EPOLL_CTL_DEL: u64 = 2;

/// The bytes of the caller's memory that system call `nr` with arguments `a` (`rdi`, `rsi`,
/// `rdx`, `r10`, `r8`, `r9`) copies, in the kernel's order; `peek` reads the structs the
/// call follows (an `iovec` array, a `msghdr`, a path).
pub(crate) fn describe(nr: i64, a: [u64; 6], peek: Peek<'_>) -> Described {
    let mut out = Described {
        exact: true,
        ..Described::default()
    };
    let mut r = Rows {
        peek,
        out: &mut out,
    };
    match nr {
        // `ksys_read`/`ksys_pread64` (`fs/read_write.c`): the whole buffer (a short read
        // copies less: its blocks come home all the same).
        libc::SYS_read | libc::SYS_pread64 => r.write(a[1], a[2]),
        libc::SYS_write | libc::SYS_pwrite64 => r.read(a[1], a[2]),
        // `do_readv`/`do_writev` and the `p` forms: `import_iovec`, then the buffers.
        libc::SYS_readv | libc::SYS_preadv | libc::SYS_preadv2 => r.iovecs(a[1], a[2], Dir::Write),
        libc::SYS_writev | libc::SYS_pwritev | libc::SYS_pwritev2 => {
            r.iovecs(a[1], a[2], Dir::Read);
        }
        // `sys_getrandom` (`drivers/char/random.c`).
        libc::SYS_getrandom => r.write(a[0], a[1]),
        // `__sys_sendto`: the address first (`move_addr_to_kernel`), then the data.
        libc::SYS_sendto => {
            r.read(a[4], a[5] & 0xffff_ffff);
            r.read(a[1], a[2]);
        }
        // `__sys_recvfrom`: the data, then the address (`move_addr_to_user`).
        libc::SYS_recvfrom => {
            r.write(a[1], a[2]);
            r.addr_out(a[4], a[5]);
        }
        libc::SYS_sendmsg => r.sendmsg(a[1]),
        libc::SYS_recvmsg => r.recvmsg(a[1]),
        // `__sys_sendmmsg`/`do_recvmmsg`: each `struct mmsghdr` as `sendmsg`/`recvmsg`, its
        // `msg_len` written after (`put_user`); `vlen` clamped to `UIO_MAXIOV`.
        libc::SYS_sendmmsg | libc::SYS_recvmmsg => {
            let send = nr == libc::SYS_sendmmsg;
            for i in 0..(a[2] & 0xffff_ffff).min(UIO_MAXIOV) {
                let Some(at) = a[1].checked_add(i * MMSGHDR) else {
                    break;
                };
                if send {
                    r.sendmsg(at);
                } else {
                    r.recvmsg(at);
                }
                r.write(at.saturating_add(MSGHDR), 4);
            }
            // A later message is copied only if the earlier ones went through, and
            // `recvmmsg`'s timeout is read first: the fallback covers what this misses.
            r.out.exact = a[2] <= 1 && (send || a[4] == 0);
        }
        // `__sys_connect`/`__sys_bind`: `move_addr_to_kernel`.
        libc::SYS_connect | libc::SYS_bind => r.read(a[1], a[2] & 0xffff_ffff),
        // `__sys_accept4_file`, `__sys_getsockname`, `__sys_getpeername`: `move_addr_to_user`
        // (accept's after the connection is taken: listed though it may fail before).
        libc::SYS_accept | libc::SYS_accept4 | libc::SYS_getsockname | libc::SYS_getpeername => {
            r.addr_out(a[1], a[2])
        }
        // `do_sock_getsockopt`: `optlen` read, at most that much of `optval` written, `optlen`
        // written (a protocol's option may be shorter).
        libc::SYS_getsockopt => {
            if a[4] != 0 {
                r.read(a[4], 4);
                let len = r.u32_at(a[4]).unwrap_or(0);
                r.write(a[3], len);
                r.write(a[4], 4);
            }
        }
        libc::SYS_setsockopt => r.read(a[3], a[4] & 0xffff_ffff),
        // `__sys_socketpair`, `do_pipe2`: two ints written.
        libc::SYS_socketpair => r.write(a[3], 8),
        libc::SYS_pipe | libc::SYS_pipe2 => r.write(a[0], 8),
        // `vfs_fstatat` → `cp_new_stat` (`fs/stat.c`): the path, then the struct.
        libc::SYS_stat | libc::SYS_lstat => {
            r.string(a[0]);
            r.write(a[1], STAT);
        }
        libc::SYS_fstat => r.write(a[1], STAT),
        libc::SYS_newfstatat => {
            r.string(a[1]);
            r.write(a[2], STAT);
        }
        libc::SYS_statx => {
            r.string(a[1]);
            r.write(a[4], STATX);
        }
        libc::SYS_statfs => {
            r.string(a[0]);
            r.write(a[1], STATFS);
        }
        libc::SYS_fstatfs => r.write(a[1], STATFS),
        // Calls given one path first (`getname`).
        libc::SYS_open
        | libc::SYS_creat
        | libc::SYS_access
        | libc::SYS_chdir
        | libc::SYS_mkdir
        | libc::SYS_rmdir
        | libc::SYS_unlink
        | libc::SYS_truncate
        | libc::SYS_chmod
        | libc::SYS_chown
        | libc::SYS_lchown => r.string(a[0]),
        libc::SYS_openat
        | libc::SYS_faccessat
        | libc::SYS_faccessat2
        | libc::SYS_mkdirat
        | libc::SYS_unlinkat
        | libc::SYS_fchmodat
        | libc::SYS_fchownat => r.string(a[1]),
        // `do_sys_openat2`: the `struct open_how` (`copy_struct_from_user`), then the path.
        libc::SYS_openat2 => {
            r.read(a[2], a[3]);
            r.string(a[1]);
        }
        // Two paths, in the order the kernel takes them.
        libc::SYS_rename | libc::SYS_link | libc::SYS_symlink => {
            r.string(a[0]);
            r.string(a[1]);
        }
        libc::SYS_renameat | libc::SYS_renameat2 | libc::SYS_linkat => {
            r.string(a[1]);
            r.string(a[3]);
        }
        libc::SYS_symlinkat => {
            r.string(a[0]);
            r.string(a[2]);
        }
        // `do_readlinkat`: the path; the buffer gets the link's length (unknown here).
        libc::SYS_readlink => {
            r.string(a[0]);
            r.out.exact = false;
        }
        libc::SYS_readlinkat => {
            r.string(a[1]);
            r.out.exact = false;
        }
        // `kernel/time/posix-timers.c`, `kernel/time/time.c`, `kernel/time/itimer.c`.
        libc::SYS_clock_gettime | libc::SYS_clock_getres => r.write(a[1], TIMESPEC),
        libc::SYS_clock_settime => r.read(a[1], TIMESPEC),
        libc::SYS_gettimeofday => {
            r.write(a[0], TIMEVAL);
            r.write(a[1], TIMEZONE);
        }
        libc::SYS_settimeofday => {
            r.read(a[0], TIMEVAL);
            r.read(a[1], TIMEZONE);
        }
        libc::SYS_time => r.write(a[0], 8),
        // The remaining time is written only when a signal interrupts the sleep.
        libc::SYS_nanosleep => {
            r.read(a[0], TIMESPEC);
            r.out.exact = a[1] == 0;
        }
        libc::SYS_clock_nanosleep => {
            r.read(a[2], TIMESPEC);
            r.out.exact = a[3] == 0;
        }
        libc::SYS_timer_settime | libc::SYS_timerfd_settime => {
            r.read(a[2], ITIMERSPEC);
            r.write(a[3], ITIMERSPEC);
        }
        libc::SYS_timer_gettime | libc::SYS_timerfd_gettime => r.write(a[1], ITIMERSPEC),
        libc::SYS_setitimer => {
            r.read(a[1], ITIMERVAL);
            r.write(a[2], ITIMERVAL);
        }
        libc::SYS_getitimer => r.write(a[1], ITIMERVAL),
        libc::SYS_times => r.write(a[0], TMS),
        libc::SYS_getrusage => r.write(a[1], RUSAGE),
        // `kernel_wait4` then `sys_wait4` (`kernel/exit.c`): the status, then the usage;
        // written once a child is reaped (which a failed copy would lose).
        libc::SYS_wait4 => {
            r.write(a[1], 4);
            r.write(a[3], RUSAGE);
        }
        libc::SYS_waitid => {
            r.write(a[2], WAITID_INFO);
            r.write(a[4], RUSAGE);
        }
        libc::SYS_uname => r.write(a[0], UTSNAME),
        libc::SYS_sysinfo => r.write(a[0], SYSINFO),
        libc::SYS_getrlimit => r.write(a[1], RLIMIT),
        libc::SYS_setrlimit => r.read(a[1], RLIMIT),
        libc::SYS_prlimit64 => {
            r.read(a[2], RLIMIT);
            r.write(a[3], RLIMIT);
        }
        libc::SYS_getcpu => {
            r.write(a[0], 4);
            r.write(a[1], 4);
        }
        // `kernel/signal.c`: a wrong `sigsetsize` fails with EINVAL before any copy.
        libc::SYS_rt_sigaction => {
            if a[3] == SIGSET {
                r.read(a[1], KSIGACTION);
                r.write(a[2], KSIGACTION);
            }
        }
        libc::SYS_rt_sigprocmask => {
            if a[3] == SIGSET {
                r.read(a[1], SIGSET);
                r.write(a[2], SIGSET);
            }
        }
        libc::SYS_rt_sigpending => r.write(a[0], a[1].min(SIGSET)),
        libc::SYS_rt_sigsuspend => {
            if a[1] == SIGSET {
                r.read(a[0], SIGSET);
            }
        }
        // The set and the timeout, then the siginfo of the signal dequeued.
        libc::SYS_rt_sigtimedwait => {
            if a[3] == SIGSET {
                r.read(a[0], SIGSET);
                r.read(a[2], TIMESPEC);
                r.write(a[1], SIGINFO);
            }
        }
        libc::SYS_rt_sigqueueinfo => r.read(a[2], SIGINFO),
        libc::SYS_rt_tgsigqueueinfo => r.read(a[3], SIGINFO),
        libc::SYS_sigaltstack => {
            r.read(a[0], STACK_T);
            r.write(a[1], STACK_T);
        }
        // `do_sys_poll` (`fs/select.c`): the array read, then each `revents` written.
        libc::SYS_poll => {
            let len = a[1].saturating_mul(POLLFD);
            r.read(a[0], len);
            r.write(a[0], len);
        }
        // `do_sys_ppoll`: the timeout, the mask, the array, then the remaining time.
        libc::SYS_ppoll => {
            let len = a[1].saturating_mul(POLLFD);
            r.read(a[2], TIMESPEC);
            if a[4] == SIGSET {
                r.read(a[3], SIGSET);
            }
            r.read(a[0], len);
            r.write(a[0], len);
            r.write(a[2], TIMESPEC);
        }
        // `kern_select`/`core_sys_select`: the timeout, the three sets read, written back,
        // then the remaining time.
        libc::SYS_select => {
            r.read(a[4], TIMEVAL);
            fd_sets(&mut r, a[0], [a[1], a[2], a[3]]);
            r.write(a[4], TIMEVAL);
        }
        // `sys_pselect6`: the `{sigset, size}` pair first (`get_sigset_argpack`), the
        // timeout, the mask, the sets.
        libc::SYS_pselect6 => {
            r.read(a[5], 16);
            let (mask, size) = if a[5] == 0 {
                (0, 0)
            } else {
                (
                    r.word(a[5]).unwrap_or(0),
                    a[5].checked_add(8).and_then(|at| r.word(at)).unwrap_or(0),
                )
            };
            r.read(a[4], TIMESPEC);
            if size == SIGSET {
                r.read(mask, SIGSET);
            }
            fd_sets(&mut r, a[0], [a[1], a[2], a[3]]);
            r.write(a[4], TIMESPEC);
        }
        // `do_epoll_ctl`: the event, unless deleting.
        libc::SYS_epoll_ctl => {
            if a[1] != EPOLL_CTL_DEL {
                r.read(a[3], EPOLL_EVENT);
            }
        }
        // The events the call returns are written (how many is unknown here).
        libc::SYS_epoll_wait => r.out.exact = false,
        libc::SYS_epoll_pwait => {
            if a[5] == SIGSET {
                r.read(a[4], SIGSET);
            }
            r.out.exact = false;
        }
        libc::SYS_futex => futex(&mut r, a),
        // `__mm_populate` / `madvise_populate` fault every page in (`get_user_pages`).
        libc::SYS_mlock => r.read(a[0], a[1]),
        libc::SYS_mlock2 => r.read(a[0], a[1]),
        libc::SYS_madvise if a[2] == MADV_POPULATE_READ => r.read(a[0], a[1]),
        libc::SYS_madvise if a[2] == MADV_POPULATE_WRITE => r.write(a[0], a[1]),
        libc::SYS_prctl if a[0] == PR_SET_NAME => r.read(a[1], 16),
        libc::SYS_prctl if a[0] == PR_GET_NAME => r.write(a[1], 16),
        libc::SYS_arch_prctl if a[0] == ARCH_GET_FS || a[0] == ARCH_GET_GS => r.write(a[1], 8),
        // `process_vm_rw` (`mm/process_vm_access.c`): the local iovecs and the remote ones
        // read, then the local buffers (the remote process's memory is its own).
        libc::SYS_process_vm_readv | libc::SYS_process_vm_writev => {
            let dir = if nr == libc::SYS_process_vm_readv {
                Dir::Write
            } else {
                Dir::Read
            };
            if a[2] <= UIO_MAXIOV && a[4] <= UIO_MAXIOV {
                r.read(a[1], a[2] * IOVEC);
                r.read(a[3], a[4] * IOVEC);
                r.buffers(a[1], a[2], dir);
            }
        }
        // `do_sendfile`, `splice`, `copy_file_range`: the offsets read, then written.
        libc::SYS_sendfile => {
            r.read(a[2], 8);
            r.write(a[2], 8);
        }
        libc::SYS_splice => {
            r.read(a[1], 8);
            r.read(a[3], 8);
            r.write(a[1], 8);
            r.write(a[3], 8);
        }
        libc::SYS_copy_file_range => {
            r.read(a[1], 8);
            r.read(a[3], 8);
            r.write(a[1], 8);
            r.write(a[3], 8);
        }
        // `vmsplice`: the iovecs, then the pages pinned (`iov_iter_get_pages`).
        libc::SYS_vmsplice => r.iovecs(a[1], a[2], Dir::Read),
        // `sys_ioctl`: the size and direction `_IOC` encodes, or a legacy request's; what
        // the driver does with the struct (pointers in it) only it knows.
        libc::SYS_ioctl => ioctl(&mut r, a[1] as u32, a[2]),
        // Anything else: the fallback's.
        _ => r.out.exact = false,
    }
    out
}

/// `core_sys_select`: each set given is `FDS_BYTES(n)` read, then each written back.
fn fd_sets(r: &mut Rows<'_, '_>, n: u64, sets: [u64; 3]) {
    // `n` is an int; a negative one fails with EINVAL (and past the table's limits, the
    // kernel clamps it to its open files).
    let n = n & 0xffff_ffff;
    if n > i32::MAX as u64 {
        return;
    }
    let bytes = n.div_ceil(64) * 8;
    for set in sets {
        r.read(set, bytes);
    }
    for set in sets {
        r.write(set, bytes);
    }
}

/// `do_futex` (`kernel/futex/syscalls.c`, `core.c`, `waitwake.c`, `requeue.c`, `pi.c`):
/// the timeout of a waiting command first (`futex_init_timeout`), then the words the command
/// reads or writes. A private futex's key is its address (`get_futex_key` touches nothing);
/// a shared one's is found through `get_user_pages_fast`, which faults the page in: so a
/// private `FUTEX_WAKE` touches no memory, a shared one its word.
fn futex(r: &mut Rows<'_, '_>, a: [u64; 6]) {
    let op = a[1];
    let cmd = op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    let shared = op & FUTEX_PRIVATE_FLAG == 0;
    let (uaddr, utime, uaddr2) = (a[0], a[3], a[4]);
    if matches!(
        cmd,
        FUTEX_WAIT | FUTEX_LOCK_PI | FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2
    ) {
        r.read(utime, TIMESPEC);
    }
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI => r.read(uaddr, 4),
        FUTEX_WAKE | FUTEX_WAKE_BITSET if shared => r.read(uaddr, 4),
        FUTEX_REQUEUE if shared => {
            r.read(uaddr, 4);
            r.read(uaddr2, 4);
        }
        FUTEX_CMP_REQUEUE | FUTEX_CMP_REQUEUE_PI => {
            if shared {
                r.read(uaddr, 4);
                r.read(uaddr2, 4);
            } else {
                r.read(uaddr, 4);
            }
        }
        // The keys (shared: both pages), then `futex_atomic_op_inuser` on the second word.
        FUTEX_WAKE_OP => {
            if shared {
                r.read(uaddr, 4);
            }
            r.write(uaddr2, 4);
        }
        // `futex_lock_pi_atomic`/`futex_unlock_pi`: a cmpxchg of the word.
        FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | FUTEX_UNLOCK_PI | FUTEX_TRYLOCK_PI => r.write(uaddr, 4),
        // A private wake or requeue touches no memory; FUTEX_FD (gone) and unknown commands
        // fail with ENOSYS before any copy.
        _ => {}
    }
}

/// `sys_ioctl`: a request that follows `_IOC` (`include/uapi/asm-generic/ioctl.h`) copies
/// `_IOC_SIZE` bytes at `arg` in (`_IOC_WRITE`) and then out (`_IOC_READ`), as `kfd_ioctl`
/// does (`amdkfd/kfd_chardev.c`); a legacy tty or socket request its struct
/// ([`LEGACY_IOCTLS`]). Never exact: a driver may follow pointers in the struct (`opaque`)
/// or copy less.
fn ioctl(r: &mut Rows<'_, '_>, cmd: u32, arg: u64) {
    r.out.exact = false;
    let cmd = u64::from(cmd);
    let dir = cmd >> 30;
    let size = (cmd >> 16) & 0x3fff;
    if let Some(&(_, len, d)) = LEGACY_IOCTLS.iter().find(|(c, _, _)| u64::from(*c) == cmd) {
        r.add(arg, len, d);
        return;
    }
    if size == 0 || dir == 0 || arg == 0 {
        return;
    }
    if dir & IOC_WRITE != 0 {
        r.read(arg, size);
    }
    if dir & IOC_READ != 0 {
        r.write(arg, size);
    }
    r.out.opaque.push((arg, arg.saturating_add(size)));
}

/// How many argument registers system call `nr` reads (`SYSCALL_DEFINEn`): the exit fallback
/// takes no register past them for a pointer (they hold whatever the caller left there). Given
/// for the calls [`describe`] does not know exactly; any other counts as six.
pub(crate) fn arg_count(nr: i64) -> usize {
    match nr {
        libc::SYS_getcwd | libc::SYS_nanosleep | libc::SYS_clone3 => 2,
        libc::SYS_ioctl
        | libc::SYS_readlink
        | libc::SYS_getdents
        | libc::SYS_getdents64
        | libc::SYS_sched_getaffinity
        | libc::SYS_sched_setaffinity
        | libc::SYS_set_mempolicy
        | libc::SYS_execve
        | libc::SYS_listxattr
        | libc::SYS_llistxattr
        | libc::SYS_flistxattr => 3,
        libc::SYS_readlinkat
        | libc::SYS_clock_nanosleep
        | libc::SYS_epoll_wait
        | libc::SYS_sendmmsg
        | libc::SYS_getxattr
        | libc::SYS_lgetxattr
        | libc::SYS_fgetxattr => 4,
        libc::SYS_recvmmsg | libc::SYS_prctl | libc::SYS_get_mempolicy | libc::SYS_execveat => 5,
        _ => 6,
    }
}

/// `io_pgetevents`' number on x86-64 (`arch/x86/entry/syscalls/syscall_64.tbl`; `libc` has
/// no constant for it).
const SYS_IO_PGETEVENTS: i64 = 333;

/// The system calls whose `EFAULT` may come after a side effect a second call would not
/// repeat the same way, which the tracer's fallback therefore does not make again: an
/// interrupted `nanosleep`/`clock_nanosleep` whose remaining time cannot be written (made
/// again, it would sleep the whole time over), and calls that take a message off a queue
/// before they copy it out (`msgrcv`, `mq_timedreceive`, `io_getevents`, `io_pgetevents`).
/// (Such calls the table describes exactly, `wait4`, `accept`, `rt_sigtimedwait`, the
/// datagram receives, never reach the fallback: their memory comes home at the entry.)
pub(crate) const NOT_RESTARTABLE: [i64; 6] = [
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_msgrcv,
    libc::SYS_mq_timedreceive,
    libc::SYS_io_getevents,
    SYS_IO_PGETEVENTS,
];

/// How far past an argument register's address the exit fallback looks for hidden memory
/// when the address itself is not hidden (a struct the table does not know crossing into
/// a hidden block): one page.
const FALLBACK_WINDOW: u64 = 4096;

/// Whether the tracer's exit fallback may make call `nr` again after its `EFAULT`: not a
/// call whose `EFAULT` may follow a side effect ([`NOT_RESTARTABLE`]), nor `rt_sigreturn`
/// (its "result" is the `rax` of the code it returns to), nor a call the tracer skipped
/// (number -1).
pub(crate) fn restartable(nr: i64) -> bool {
    nr >= 0 && nr != libc::SYS_rt_sigreturn && !NOT_RESTARTABLE.contains(&nr)
}

/// Where the exit fallback looks for the hidden memory a failed call `nr` with arguments
/// `a` may have touched, in order (`[start, end)` spans; the first hidden byte of the first
/// span holding one is brought home): none for a call the table knows exactly (its memory
/// came home at its entry, so its `EFAULT` is its own); else the byte each argument
/// register the call reads points at ([`arg_count`]), then the byte each aligned word of an
/// [`Described::opaque`] struct points at (an `ioctl`'s, whose pointers only its driver
/// knows); failing those, the page from each argument the table did not follow (a struct
/// crossing into a hidden block).
pub(crate) fn fallback_spans(nr: i64, a: [u64; 6], peek: Peek<'_>) -> Vec<(u64, u64)> {
    let described = describe(nr, a, &mut *peek);
    if described.exact {
        return Vec::new();
    }
    let args = &a[..arg_count(nr)];
    let mut pointers: Vec<u64> = args.to_vec();
    for &(start, end) in &described.opaque {
        let mut at = start.next_multiple_of(8);
        while at.saturating_add(8) <= end {
            pointers.extend(peek(at));
            at += 8;
        }
    }
    let known = |p: u64| described.touches.iter().any(|t| t.start == p);
    let windows = args
        .iter()
        .filter(|&&p| !known(p))
        .map(|&p| (p, p.saturating_add(FALLBACK_WINDOW)));
    pointers
        .iter()
        .map(|&p| (p, p.saturating_add(1)))
        .chain(windows)
        .collect()
}

/// The first byte of `[lo, hi)` within one of the `[start, start + len)` spans `hidden`
/// (the exit fallback's test of a span from [`fallback_spans`] against what a process hides).
pub(crate) fn first_hidden(
    hidden: impl IntoIterator<Item = (u64, u64)>,
    lo: u64,
    hi: u64,
) -> Option<u64> {
    hidden
        .into_iter()
        .filter(|&(start, len)| start < hi && lo < start.saturating_add(len))
        .map(|(start, _)| start.max(lo))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A caller's memory as words at addresses (little-endian bytes laid out from `bytes`).
    fn memory(bytes: &[(u64, &[u8])]) -> impl FnMut(u64) -> Option<u64> {
        let mut map: HashMap<u64, u8> = HashMap::new();
        for &(at, b) in bytes {
            for (i, &x) in b.iter().enumerate() {
                map.insert(at + i as u64, x);
            }
        }
        move |at| {
            let mut word = [0u8; 8];
            for (i, w) in word.iter_mut().enumerate() {
                *w = *map.get(&(at + i as u64))?;
            }
            Some(u64::from_le_bytes(word))
        }
    }

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn t(start: u64, len: u64, dir: Dir) -> Touch {
        Touch {
            start,
            end: start + len,
            dir,
        }
    }

    fn run(nr: i64, a: [u64; 6], mem: &[(u64, &[u8])]) -> Described {
        let mut m = memory(mem);
        describe(nr, a, &mut m)
    }

    #[test]
    fn buffers_of_the_copying_calls() {
        let d = run(libc::SYS_read, [3, 0x1000, 10, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x1000, 10, Dir::Write)]);
        assert!(d.exact);
        let d = run(libc::SYS_pwrite64, [3, 0x2000, 7, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x2000, 7, Dir::Read)]);
        let d = run(libc::SYS_getrandom, [0x3000, 16, 0, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x3000, 16, Dir::Write)]);
        // A NULL or empty buffer touches nothing.
        assert!(
            run(libc::SYS_read, [3, 0, 10, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
        assert!(
            run(libc::SYS_write, [3, 0x10, 0, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
    }

    #[test]
    fn vectored_calls_read_the_array_then_copy_each_buffer_in_order() {
        let iov = words(&[0x9000, 4, 0x5000, 8]);
        let d = run(libc::SYS_readv, [3, 0x100, 2, 0, 0, 0], &[(0x100, &iov)]);
        assert_eq!(
            d.touches,
            vec![
                t(0x100, 32, Dir::Read),
                t(0x9000, 4, Dir::Write),
                t(0x5000, 8, Dir::Write),
            ]
        );
        let d = run(libc::SYS_writev, [3, 0x100, 2, 0, 0, 0], &[(0x100, &iov)]);
        assert_eq!(d.touches[2], t(0x5000, 8, Dir::Read));
        // More than UIO_MAXIOV: EINVAL before any copy.
        assert!(
            run(libc::SYS_readv, [3, 0x100, 1025, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
        // Exactly UIO_MAXIOV is taken (its array unreadable here: just the array).
        let d = run(libc::SYS_readv, [3, 0x100, 1024, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 1024 * 16, Dir::Read)]);
    }

    #[test]
    fn sendmsg_and_recvmsg_follow_the_msghdr() {
        // msghdr at 0x1000: name 0x2000 (len 16), iov 0x3000 (1), control 0x4000 (24).
        let hdr = words(&[0x2000, 16, 0x3000, 1, 0x4000, 24, 0]);
        let iov = words(&[0x5000, 100]);
        let mem: [(u64, &[u8]); 3] = [(0x1000, &hdr), (0x3000, &iov), (0x2008, &[0; 8])];
        let d = run(libc::SYS_sendmsg, [3, 0x1000, 0, 0, 0, 0], &mem);
        assert_eq!(
            d.touches,
            vec![
                t(0x1000, 56, Dir::Read),
                t(0x2000, 16, Dir::Read),
                t(0x3000, 16, Dir::Read),
                t(0x4000, 24, Dir::Read),
                t(0x5000, 100, Dir::Read),
            ]
        );
        assert!(d.exact);
        let d = run(libc::SYS_recvmsg, [3, 0x1000, 0, 0, 0, 0], &mem);
        assert_eq!(
            d.touches,
            vec![
                t(0x1000, 56, Dir::Read),
                t(0x3000, 16, Dir::Read),
                t(0x5000, 100, Dir::Write),
                t(0x1008, 4, Dir::Read),
                t(0x2000, 16, Dir::Write),
                t(0x1008, 4, Dir::Write),
                t(0x1030, 4, Dir::Write),
                t(0x1028, 8, Dir::Write),
            ]
        );
        // sendmmsg of one message: the msghdr's copies, then its msg_len.
        let d = run(libc::SYS_sendmmsg, [3, 0x1000, 1, 0, 0, 0], &mem);
        assert_eq!(d.touches.last(), Some(&t(0x1038, 4, Dir::Write)));
        assert!(d.exact);
        assert!(!run(libc::SYS_sendmmsg, [3, 0x1000, 2, 0, 0, 0], &mem).exact);
    }

    #[test]
    fn socket_addresses_in_and_out() {
        let d = run(libc::SYS_sendto, [3, 0x100, 5, 0, 0x200, 16], &[]);
        assert_eq!(
            d.touches,
            vec![t(0x200, 16, Dir::Read), t(0x100, 5, Dir::Read)]
        );
        let len = 12u32.to_le_bytes();
        let d = run(
            libc::SYS_recvfrom,
            [3, 0x100, 5, 0, 0x200, 0x300],
            &[(0x300, &[len[0], len[1], len[2], len[3], 0, 0, 0, 0])],
        );
        assert_eq!(
            d.touches,
            vec![
                t(0x100, 5, Dir::Write),
                t(0x300, 4, Dir::Read),
                t(0x200, 12, Dir::Write),
                t(0x300, 4, Dir::Write),
            ]
        );
        let d = run(libc::SYS_accept4, [3, 0, 0x300, 0, 0, 0], &[]);
        assert!(d.touches.is_empty(), "no address asked for");
        let d = run(libc::SYS_connect, [3, 0x200, 110, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x200, 110, Dir::Read)]);
    }

    #[test]
    fn stat_calls_read_the_path_then_write_the_struct() {
        let path = b"/tmp/abcdefghij\0";
        let d = run(
            libc::SYS_newfstatat,
            [libc::AT_FDCWD as u64, 0x100, 0x800, 0, 0, 0],
            &[(0x100, path)],
        );
        assert_eq!(
            d.touches,
            vec![t(0x100, 16, Dir::Read), t(0x800, 144, Dir::Write)]
        );
        assert_eq!(
            run(libc::SYS_fstat, [3, 0x800, 0, 0, 0, 0], &[]).touches,
            vec![t(0x800, 144, Dir::Write)]
        );
        let d = run(
            libc::SYS_statx,
            [0, 0x100, 0, 0, 0x900, 0],
            &[(0x100, b"ab\0\0\0\0\0\0")],
        );
        assert_eq!(
            d.touches,
            vec![t(0x100, 3, Dir::Read), t(0x900, 256, Dir::Write)]
        );
        // A path whose NUL is the 9th byte: two words read.
        let d = run(
            libc::SYS_open,
            [0x100, 0, 0, 0, 0, 0],
            &[(0x100, b"12345678\0\0\0\0\0\0\0\0")],
        );
        assert_eq!(d.touches, vec![t(0x100, 9, Dir::Read)]);
        // A string starting mid-word: the aligned word before it is read, its bytes before
        // the string skipped (a NUL there is not the string's).
        let d = run(
            libc::SYS_open,
            [0x103, 0, 0, 0, 0, 0],
            &[(0x100, b"\0\0\0abcdefgh\0\0\0\0\0")],
        );
        assert_eq!(d.touches, vec![t(0x103, 9, Dir::Read)]);
        // Unreadable after its first word: the bytes read so far.
        let d = run(
            libc::SYS_open,
            [0x100, 0, 0, 0, 0, 0],
            &[(0x100, b"12345678")],
        );
        assert_eq!(d.touches, vec![t(0x100, 8, Dir::Read)]);
    }

    #[test]
    fn ioctl_sizes_and_directions_from_the_request() {
        // AMDKFD_IOC_GET_VERSION = _IOR('K', 1, 8 bytes).
        let d = run(libc::SYS_ioctl, [3, 0x8008_4b01, 0x100, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 8, Dir::Write)]);
        assert_eq!(d.opaque, vec![(0x100, 0x108)]);
        assert!(!d.exact);
        // _IOWR of 24 bytes: read, then written.
        let d = run(libc::SYS_ioctl, [3, 0xc018_4b02, 0x100, 0, 0, 0], &[]);
        assert_eq!(
            d.touches,
            vec![t(0x100, 24, Dir::Read), t(0x100, 24, Dir::Write)]
        );
        // _IOW: read only.
        let d = run(libc::SYS_ioctl, [3, 0x4010_4b03, 0x100, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 16, Dir::Read)]);
        // FIONREAD (legacy): an int written; TCSETS: a termios read.
        let d = run(libc::SYS_ioctl, [3, 0x541B, 0x100, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Write)]);
        assert!(d.opaque.is_empty());
        let d = run(libc::SYS_ioctl, [3, 0x5402, 0x100, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 36, Dir::Read)]);
        // _IO (no direction) and an unknown legacy request: nothing known.
        assert!(
            run(libc::SYS_ioctl, [3, 0x4b05, 0x100, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
        // The request is the low 32 bits of rsi (`unsigned int cmd`).
        let d = run(
            libc::SYS_ioctl,
            [3, 0xffff_ffff_0000_541b, 0x100, 0, 0, 0],
            &[],
        );
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Write)]);
    }

    #[test]
    fn futex_words_as_the_kernel_touches_them() {
        let private = FUTEX_PRIVATE_FLAG;
        // A private wake touches nothing; a shared one the word (get_user_pages_fast).
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_WAKE | private, 1, 0, 0, 0],
            &[],
        );
        assert!(d.touches.is_empty());
        assert!(d.exact);
        let d = run(libc::SYS_futex, [0x100, FUTEX_WAKE, 1, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Read)]);
        // A wait: the timeout first, then the word.
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_WAIT | private, 1, 0x200, 0, 0],
            &[],
        );
        assert_eq!(
            d.touches,
            vec![t(0x200, 16, Dir::Read), t(0x100, 4, Dir::Read)]
        );
        // FUTEX_CLOCK_REALTIME is no command bit.
        let d = run(
            libc::SYS_futex,
            [
                0x100,
                FUTEX_WAIT_BITSET | private | FUTEX_CLOCK_REALTIME,
                1,
                0,
                0,
                !0,
            ],
            &[],
        );
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Read)]);
        // CMP_REQUEUE's fourth argument is a count, not a timeout.
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_CMP_REQUEUE | private, 1, 5, 0x300, 0],
            &[],
        );
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Read)]);
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_CMP_REQUEUE, 1, 5, 0x300, 0],
            &[],
        );
        assert_eq!(
            d.touches,
            vec![t(0x100, 4, Dir::Read), t(0x300, 4, Dir::Read)]
        );
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_WAKE_OP | private, 1, 1, 0x300, 0],
            &[],
        );
        assert_eq!(d.touches, vec![t(0x300, 4, Dir::Write)]);
        let d = run(
            libc::SYS_futex,
            [0x100, FUTEX_LOCK_PI | private, 0, 0, 0, 0],
            &[],
        );
        assert_eq!(d.touches, vec![t(0x100, 4, Dir::Write)]);
    }

    #[test]
    fn poll_select_and_signal_calls() {
        let d = run(libc::SYS_poll, [0x100, 3, 0, 0, 0, 0], &[]);
        assert_eq!(
            d.touches,
            vec![t(0x100, 24, Dir::Read), t(0x100, 24, Dir::Write)]
        );
        let d = run(libc::SYS_ppoll, [0x100, 1, 0x200, 0x300, 8, 0], &[]);
        assert_eq!(
            d.touches,
            vec![
                t(0x200, 16, Dir::Read),
                t(0x300, 8, Dir::Read),
                t(0x100, 8, Dir::Read),
                t(0x100, 8, Dir::Write),
                t(0x200, 16, Dir::Write),
            ]
        );
        // 65 fds: two longs per set.
        let d = run(libc::SYS_select, [65, 0x100, 0, 0, 0x200, 0], &[]);
        assert_eq!(
            d.touches,
            vec![
                t(0x200, 16, Dir::Read),
                t(0x100, 16, Dir::Read),
                t(0x100, 16, Dir::Write),
                t(0x200, 16, Dir::Write),
            ]
        );
        let pack = words(&[0x400, 8]);
        let d = run(
            libc::SYS_pselect6,
            [1, 0x100, 0, 0, 0, 0x500],
            &[(0x500, &pack)],
        );
        assert_eq!(
            d.touches,
            vec![
                t(0x500, 16, Dir::Read),
                t(0x400, 8, Dir::Read),
                t(0x100, 8, Dir::Read),
                t(0x100, 8, Dir::Write),
            ]
        );
        let d = run(libc::SYS_rt_sigaction, [2, 0x100, 0x200, 8, 0, 0], &[]);
        assert_eq!(
            d.touches,
            vec![t(0x100, 32, Dir::Read), t(0x200, 32, Dir::Write)]
        );
        // A wrong sigsetsize: EINVAL first.
        assert!(
            run(libc::SYS_rt_sigaction, [2, 0x100, 0x200, 4, 0, 0], &[])
                .touches
                .is_empty()
        );
        let d = run(libc::SYS_clock_gettime, [1, 0x100, 0, 0, 0, 0], &[]);
        assert_eq!(d.touches, vec![t(0x100, 16, Dir::Write)]);
        let d = run(libc::SYS_wait4, [!0, 0x100, 0, 0x200, 0, 0], &[]);
        assert_eq!(
            d.touches,
            vec![t(0x100, 4, Dir::Write), t(0x200, 144, Dir::Write)]
        );
    }

    #[test]
    fn argument_counts_of_the_calls_left_to_the_fallback() {
        assert_eq!(arg_count(libc::SYS_getcwd), 2);
        assert_eq!(arg_count(libc::SYS_ioctl), 3);
        assert_eq!(arg_count(libc::SYS_epoll_wait), 4);
        assert_eq!(arg_count(libc::SYS_recvmmsg), 5);
        assert_eq!(arg_count(libc::SYS_mbind), 6);
    }

    #[test]
    fn the_fallback_makes_again_only_calls_that_did_nothing() {
        assert!(restartable(libc::SYS_getcwd));
        assert!(restartable(libc::SYS_ioctl));
        assert!(restartable(0), "read is number 0");
        assert!(!restartable(-1), "a call the tracer skipped");
        assert!(!restartable(libc::SYS_rt_sigreturn));
        assert!(!restartable(libc::SYS_nanosleep));
        assert!(!restartable(libc::SYS_msgrcv));
    }

    #[test]
    fn the_fallback_looks_at_the_arguments_then_the_ioctl_words_then_past_the_arguments() {
        // An exactly known call: nothing (its EFAULT is its own).
        assert!(
            fallback_spans(libc::SYS_read, [3, 0x100, 8, 0, 0, 0], &mut memory(&[])).is_empty()
        );
        // getcwd reads two registers: the stale ones after are not pointers.
        assert_eq!(
            fallback_spans(
                libc::SYS_getcwd,
                [0x100, 4096, 0x777, 0x888, 0, 0],
                &mut memory(&[])
            ),
            vec![(0x100, 0x101), (4096, 4097), (0x100, 0x1100), (4096, 8192)]
        );
        // An ioctl's struct of 20 bytes at 0x204 (its words at 0x208 and 0x210; the one at
        // 0x218 would end past the struct): the registers, the struct's words, then the page
        // from each argument but the struct's start, which the table followed.
        let words = words(&[0, 0x5000, 0x6000, 0x7000]);
        let spans = fallback_spans(
            libc::SYS_ioctl,
            [3, 0xc014_4b14, 0x204, 0x999, 0, 0],
            &mut memory(&[(0x200, &words)]),
        );
        assert_eq!(
            spans,
            vec![
                (3, 4),
                (0xc014_4b14, 0xc014_4b15),
                (0x204, 0x205),
                (0x5000, 0x5001),
                (0x6000, 0x6001),
                (3, 3 + 4096),
                (0xc014_4b14, 0xc014_4b14 + 4096),
            ]
        );
        // An unreadable word is no pointer.
        let spans = fallback_spans(
            libc::SYS_ioctl,
            [3, 0xc010_4b14, 0x200, 0, 0, 0],
            &mut memory(&[(0x200, &words[..8])]),
        );
        assert_eq!(spans[3], (0, 1), "the readable word (0)");
        assert_eq!(spans.len(), 6);
        // An argument at the top of the address space: its page is clipped.
        let spans = fallback_spans(
            libc::SYS_getcwd,
            [u64::MAX - 2, 1, 0, 0, 0, 0],
            &mut memory(&[]),
        );
        assert_eq!(spans[0], (u64::MAX - 2, u64::MAX - 1));
        assert_eq!(spans[2], (u64::MAX - 2, u64::MAX));
    }

    /// Every row of the table: the call, its arguments, the memory it follows, the touches
    /// (`[start, len, 'r'|'w']`) and whether it is exact.
    #[test]
    fn every_row_of_the_table() {
        use Dir::{Read as R, Write as W};
        const A: u64 = 0x1000;
        const B: u64 = 0x2000;
        const C: u64 = 0x3000;
        const P: u64 = 0x8000;
        const Q: u64 = 0x9000;
        let sixteen = 16u64.to_le_bytes();
        // A socklen_t of 16 followed by garbage the mask must drop.
        let len16 = words(&[0xdead_0000_0000_0010]);
        let iov = words(&[C, 8]);
        let cwd = libc::AT_FDCWD as u64;
        let mem: Vec<(u64, &[u8])> = vec![
            (P, b"p\0\0\0\0\0\0\0"),
            (Q, b"q\0\0\0\0\0\0\0"),
            (B, &len16),
            (A + 0x100, &iov),
            (C + 0x100, &sixteen),
        ];
        let high = 0xffff_ffff_0000_0000u64;
        #[rustfmt::skip]
        let rows: Vec<(i64, [u64; 6], Vec<Touch>, bool)> = vec![
            (libc::SYS_write, [1, A, 5, 0, 0, 0], vec![t(A, 5, R)], true),
            (libc::SYS_pread64, [1, A, 5, 0, 0, 0], vec![t(A, 5, W)], true),
            (libc::SYS_preadv2, [1, A + 0x100, 1, 0, 0, 0], vec![t(A + 0x100, 16, R), t(C, 8, W)], true),
            (libc::SYS_pwritev, [1, A + 0x100, 1, 0, 0, 0], vec![t(A + 0x100, 16, R), t(C, 8, R)], true),
            (libc::SYS_sendto, [1, A, 5, 0, C, high | 16], vec![t(C, 16, R), t(A, 5, R)], true),
            (libc::SYS_bind, [1, A, high | 16, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_getsockname, [1, A, B, 0, 0, 0], vec![t(B, 4, R), t(A, 16, W), t(B, 4, W)], true),
            (libc::SYS_getpeername, [1, A, 0, 0, 0, 0], vec![], true),
            (libc::SYS_accept, [1, A, B, 0, 0, 0], vec![t(B, 4, R), t(A, 16, W), t(B, 4, W)], true),
            (libc::SYS_getsockopt, [1, 1, 2, A, B, 0], vec![t(B, 4, R), t(A, 16, W), t(B, 4, W)], true),
            (libc::SYS_getsockopt, [1, 1, 2, A, 0, 0], vec![], true),
            (libc::SYS_setsockopt, [1, 1, 2, A, high | 4, 0], vec![t(A, 4, R)], true),
            (libc::SYS_socketpair, [1, 1, 0, A, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_pipe, [A, 0, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_pipe2, [A, 0, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_stat, [P, A, 0, 0, 0, 0], vec![t(P, 2, R), t(A, 144, W)], true),
            (libc::SYS_lstat, [P, A, 0, 0, 0, 0], vec![t(P, 2, R), t(A, 144, W)], true),
            (libc::SYS_statfs, [P, A, 0, 0, 0, 0], vec![t(P, 2, R), t(A, 120, W)], true),
            (libc::SYS_fstatfs, [1, A, 0, 0, 0, 0], vec![t(A, 120, W)], true),
            (libc::SYS_unlink, [P, 0, 0, 0, 0, 0], vec![t(P, 2, R)], true),
            (libc::SYS_faccessat, [cwd, P, 0, 0, 0, 0], vec![t(P, 2, R)], true),
            (libc::SYS_openat2, [cwd, P, A, 24, 0, 0], vec![t(A, 24, R), t(P, 2, R)], true),
            (libc::SYS_rename, [P, Q, 0, 0, 0, 0], vec![t(P, 2, R), t(Q, 2, R)], true),
            (libc::SYS_renameat2, [cwd, P, cwd, Q, 0, 0], vec![t(P, 2, R), t(Q, 2, R)], true),
            (libc::SYS_symlinkat, [P, cwd, Q, 0, 0, 0], vec![t(P, 2, R), t(Q, 2, R)], true),
            (libc::SYS_readlinkat, [cwd, P, A, 10, 0, 0], vec![t(P, 2, R)], false),
            (libc::SYS_clock_getres, [1, A, 0, 0, 0, 0], vec![t(A, 16, W)], true),
            (libc::SYS_clock_settime, [1, A, 0, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_gettimeofday, [A, B, 0, 0, 0, 0], vec![t(A, 16, W), t(B, 8, W)], true),
            (libc::SYS_settimeofday, [A, B, 0, 0, 0, 0], vec![t(A, 16, R), t(B, 8, R)], true),
            (libc::SYS_time, [A, 0, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_nanosleep, [A, 0, 0, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_clock_nanosleep, [1, 0, A, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_clock_nanosleep, [1, 0, A, B, 0, 0], vec![t(A, 16, R)], false),
            (libc::SYS_timer_settime, [1, 0, A, B, 0, 0], vec![t(A, 32, R), t(B, 32, W)], true),
            (libc::SYS_timerfd_settime, [1, 0, A, 0, 0, 0], vec![t(A, 32, R)], true),
            (libc::SYS_timer_gettime, [1, A, 0, 0, 0, 0], vec![t(A, 32, W)], true),
            (libc::SYS_timerfd_gettime, [1, A, 0, 0, 0, 0], vec![t(A, 32, W)], true),
            (libc::SYS_setitimer, [0, A, B, 0, 0, 0], vec![t(A, 32, R), t(B, 32, W)], true),
            (libc::SYS_getitimer, [0, A, 0, 0, 0, 0], vec![t(A, 32, W)], true),
            (libc::SYS_times, [A, 0, 0, 0, 0, 0], vec![t(A, 32, W)], true),
            (libc::SYS_getrusage, [0, A, 0, 0, 0, 0], vec![t(A, 144, W)], true),
            (libc::SYS_waitid, [0, 0, A, 4, B, 0], vec![t(A, 28, W), t(B, 144, W)], true),
            (libc::SYS_uname, [A, 0, 0, 0, 0, 0], vec![t(A, 390, W)], true),
            (libc::SYS_sysinfo, [A, 0, 0, 0, 0, 0], vec![t(A, 112, W)], true),
            (libc::SYS_getrlimit, [0, A, 0, 0, 0, 0], vec![t(A, 16, W)], true),
            (libc::SYS_setrlimit, [0, A, 0, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_prlimit64, [0, 0, A, B, 0, 0], vec![t(A, 16, R), t(B, 16, W)], true),
            (libc::SYS_getcpu, [A, B, 0, 0, 0, 0], vec![t(A, 4, W), t(B, 4, W)], true),
            (libc::SYS_rt_sigprocmask, [0, A, B, 8, 0, 0], vec![t(A, 8, R), t(B, 8, W)], true),
            (libc::SYS_rt_sigprocmask, [0, A, B, 16, 0, 0], vec![], true),
            (libc::SYS_rt_sigpending, [A, 8, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_rt_sigpending, [A, 4, 0, 0, 0, 0], vec![t(A, 4, W)], true),
            (libc::SYS_rt_sigpending, [A, 9, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_rt_sigsuspend, [A, 8, 0, 0, 0, 0], vec![t(A, 8, R)], true),
            (libc::SYS_rt_sigsuspend, [A, 7, 0, 0, 0, 0], vec![], true),
            (libc::SYS_rt_sigtimedwait, [A, B, C, 8, 0, 0], vec![t(A, 8, R), t(C, 16, R), t(B, 128, W)], true),
            (libc::SYS_rt_sigtimedwait, [A, B, C, 4, 0, 0], vec![], true),
            (libc::SYS_rt_sigqueueinfo, [1, 2, A, 0, 0, 0], vec![t(A, 128, R)], true),
            (libc::SYS_rt_tgsigqueueinfo, [1, 2, 3, A, 0, 0], vec![t(A, 128, R)], true),
            (libc::SYS_sigaltstack, [A, B, 0, 0, 0, 0], vec![t(A, 24, R), t(B, 24, W)], true),
            (libc::SYS_ppoll, [A, 1, 0, B, 4, 0], vec![t(A, 8, R), t(A, 8, W)], true),
            (libc::SYS_select, [high | 1, A, 0, 0, 0, 0], vec![t(A, 8, R), t(A, 8, W)], true),
            (libc::SYS_select, [(1 << 31) + 1, A, 0, 0, 0, 0], vec![], true),
            (libc::SYS_select, [64, A, B, C, 0, 0], vec![t(A, 8, R), t(B, 8, R), t(C, 8, R), t(A, 8, W), t(B, 8, W), t(C, 8, W)], true),
            (libc::SYS_pselect6, [1, A, 0, 0, B, C + 0x100], vec![t(C + 0x100, 16, R), t(B, 16, R), t(A, 8, R), t(A, 8, W), t(B, 16, W)], true),
            (libc::SYS_epoll_ctl, [1, 1, 2, A, 0, 0], vec![t(A, 12, R)], true),
            (libc::SYS_epoll_ctl, [1, 2, 2, A, 0, 0], vec![], true),
            (libc::SYS_epoll_wait, [1, A, 1, 0, 0, 0], vec![], false),
            (libc::SYS_epoll_pwait, [1, A, 1, 0, B, 8], vec![t(B, 8, R)], false),
            (libc::SYS_epoll_pwait, [1, A, 1, 0, B, 4], vec![], false),
            (libc::SYS_mlock, [A, 4096, 0, 0, 0, 0], vec![t(A, 4096, R)], true),
            (libc::SYS_mlock2, [A, 4096, 1, 0, 0, 0], vec![t(A, 4096, R)], true),
            (libc::SYS_madvise, [A, 4096, 22, 0, 0, 0], vec![t(A, 4096, R)], true),
            (libc::SYS_madvise, [A, 4096, 23, 0, 0, 0], vec![t(A, 4096, W)], true),
            (libc::SYS_madvise, [A, 4096, 4, 0, 0, 0], vec![], false),
            (libc::SYS_prctl, [15, A, 0, 0, 0, 0], vec![t(A, 16, R)], true),
            (libc::SYS_prctl, [16, A, 0, 0, 0, 0], vec![t(A, 16, W)], true),
            (libc::SYS_prctl, [4, A, 0, 0, 0, 0], vec![], false),
            (libc::SYS_arch_prctl, [0x1003, A, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_arch_prctl, [0x1004, A, 0, 0, 0, 0], vec![t(A, 8, W)], true),
            (libc::SYS_arch_prctl, [0x1002, A, 0, 0, 0, 0], vec![], false),
            (libc::SYS_process_vm_readv, [1, A + 0x100, 1, B, 1, 0], vec![t(A + 0x100, 16, R), t(B, 16, R), t(C, 8, W)], true),
            (libc::SYS_process_vm_writev, [1, A + 0x100, 1, B, 2, 0], vec![t(A + 0x100, 16, R), t(B, 32, R), t(C, 8, R)], true),
            (libc::SYS_process_vm_writev, [1, A + 0x100, 1, B, 1025, 0], vec![], true),
            (libc::SYS_process_vm_writev, [1, A + 0x100, 1025, B, 1, 0], vec![], true),
            (libc::SYS_sendfile, [1, 2, A, 9, 0, 0], vec![t(A, 8, R), t(A, 8, W)], true),
            (libc::SYS_splice, [1, A, 2, B, 9, 0], vec![t(A, 8, R), t(B, 8, R), t(A, 8, W), t(B, 8, W)], true),
            (libc::SYS_copy_file_range, [1, A, 2, B, 9, 0], vec![t(A, 8, R), t(B, 8, R), t(A, 8, W), t(B, 8, W)], true),
            (libc::SYS_vmsplice, [1, A + 0x100, 1, 0, 0, 0], vec![t(A + 0x100, 16, R), t(C, 8, R)], true),
            (libc::SYS_futex, [A, 9 | 128, 0, 0, 0, !0], vec![t(A, 4, R)], true),
            (libc::SYS_futex, [A, 10, 0, 0, 0, !0], vec![t(A, 4, R)], true),
            (libc::SYS_futex, [A, 10 | 128, 0, 0, 0, !0], vec![], true),
            (libc::SYS_futex, [A, 3, 1, 1, B, 0], vec![t(A, 4, R), t(B, 4, R)], true),
            (libc::SYS_futex, [A, 3 | 128, 1, 1, B, 0], vec![], true),
            (libc::SYS_futex, [A, 5, 1, 1, B, 0], vec![t(A, 4, R), t(B, 4, W)], true),
            (libc::SYS_futex, [A, 7 | 128, 0, C, 0, 0], vec![t(A, 4, W)], true),
            (libc::SYS_futex, [A, 8 | 128, 0, C, 0, 0], vec![t(A, 4, W)], true),
            (libc::SYS_futex, [A, 13 | 128, 0, C, 0, 0], vec![t(C, 16, R), t(A, 4, W)], true),
            (libc::SYS_futex, [A, 11 | 128, 0, C, B, 0], vec![t(C, 16, R), t(A, 4, R)], true),
            (libc::SYS_futex, [A, 12 | 128, 1, 1, B, 0], vec![t(A, 4, R)], true),
            (libc::SYS_futex, [A, 12, 1, 1, B, 0], vec![t(A, 4, R), t(B, 4, R)], true),
            (libc::SYS_futex, [A, 2, 0, C, 0, 0], vec![], true),
            (libc::SYS_ioctl, [1, 0x5401, A, 0, 0, 0], vec![t(A, 36, W)], false),
            (libc::SYS_ioctl, [1, 0x5413, A, 0, 0, 0], vec![t(A, 8, W)], false),
            (libc::SYS_ioctl, [1, 0x5414, A, 0, 0, 0], vec![t(A, 8, R)], false),
            (libc::SYS_ioctl, [1, 0x5421, A, 0, 0, 0], vec![t(A, 4, R)], false),
            (libc::SYS_ioctl, [1, 0xc008_4b01, 0, 0, 0, 0], vec![], false),
            (libc::SYS_getdents64, [1, A, 64, 0, 0, 0], vec![], false),
        ];
        for (nr, a, touches, exact) in rows {
            let d = run(nr, a, &mem);
            assert_eq!(d.touches, touches, "call {nr} {a:x?}");
            assert_eq!(d.exact, exact, "call {nr} {a:x?}");
        }
    }

    #[test]
    fn mmsg_vectors_and_masks() {
        // msghdr at 0x1000 (no name, one iovec at 0x3000 → 0x5000 of 100, no control).
        let hdr = words(&[0, 0, 0x3000, 1, 0, 0, 0, 0]);
        let iov = words(&[0x5000, 100]);
        let mem: [(u64, &[u8]); 2] = [(0x1000, &hdr), (0x3000, &iov)];
        let d = run(libc::SYS_recvmmsg, [3, 0x1000, 1, 0, 0, 0], &mem);
        assert_eq!(
            d.touches,
            vec![
                t(0x1000, 56, Dir::Read),
                t(0x3000, 16, Dir::Read),
                t(0x5000, 100, Dir::Write),
                t(0x1030, 4, Dir::Write),
                t(0x1028, 8, Dir::Write),
                t(0x1038, 4, Dir::Write),
            ]
        );
        assert!(d.exact);
        // With a timeout, it is read first: left to the fallback.
        assert!(!run(libc::SYS_recvmmsg, [3, 0x1000, 1, 0, 0x9000, 0], &mem).exact);
        // `vlen` is an unsigned int: its high bits are not a count.
        let d = run(
            libc::SYS_sendmmsg,
            [3, 0x1000, 0xffff_ffff_0000_0001, 0, 0, 0],
            &mem,
        );
        assert_eq!(d.touches.len(), 4);
        // A msghdr whose msg_namelen word carries padding: the name's length is 16.
        let hdr = words(&[0x7000, 0xdead_beef_0000_0010, 0, 0, 0, 0, 0]);
        let d = run(
            libc::SYS_sendmsg,
            [3, 0x1000, 0, 0, 0, 0],
            &[(0x1000, &hdr)],
        );
        assert_eq!(
            d.touches,
            vec![t(0x1000, 56, Dir::Read), t(0x7000, 16, Dir::Read)]
        );
        // recvmsg's iovec count past UIO_MAXIOV: only the header.
        let hdr = words(&[0, 0, 0x3000, 1025, 0, 0, 0]);
        let d = run(
            libc::SYS_recvmsg,
            [3, 0x1000, 0, 0, 0, 0],
            &[(0x1000, &hdr)],
        );
        assert_eq!(d.touches, vec![t(0x1000, 56, Dir::Read)]);
        // A huge count (past the table's limit): nothing listed for it.
        assert!(
            run(libc::SYS_read, [3, 0x1000, 1 << 31, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
        assert_eq!(
            run(libc::SYS_read, [3, 0x1000, 1 << 30, 0, 0, 0], &[]).touches,
            vec![t(0x1000, 1 << 30, Dir::Write)]
        );
    }

    #[test]
    fn the_first_hidden_byte_of_a_span() {
        let hidden = [(0x5000, 0x1000), (0x2000, 0x1000)];
        // Inside one, starting before one, the lowest of two.
        assert_eq!(first_hidden(hidden, 0x2800, 0x2801), Some(0x2800));
        assert_eq!(first_hidden(hidden, 0x1000, 0x2001), Some(0x2000));
        assert_eq!(first_hidden(hidden, 0x1000, 0x6000), Some(0x2000));
        // Ending where one starts, starting where one ends: none.
        assert_eq!(first_hidden(hidden, 0x1000, 0x2000), None);
        assert_eq!(first_hidden(hidden, 0x3000, 0x5000), None);
        // The last byte of one.
        assert_eq!(first_hidden(hidden, 0x2fff, 0x3000), Some(0x2fff));
        // A span at the top of the address space.
        assert_eq!(
            first_hidden([(u64::MAX - 0xfff, 0x1000)], u64::MAX - 1, u64::MAX),
            Some(u64::MAX - 1)
        );
        assert_eq!(first_hidden([], 0, u64::MAX), None);
    }

    #[test]
    fn counts_at_their_limits() {
        // UIO_MAXIOV iovecs, all readable: the array and every buffer.
        let many: Vec<u64> = (0..1024u64).flat_map(|i| [0x10_0000 + i * 16, 1]).collect();
        let array = words(&many);
        let mem: [(u64, &[u8]); 1] = [(0x1000, &array)];
        let d = run(libc::SYS_readv, [3, 0x1000, 1024, 0, 0, 0], &mem);
        assert_eq!(d.touches.len(), 1025);
        assert_eq!(d.touches[1024], t(0x10_0000 + 1023 * 16, 1, Dir::Write));
        // A msghdr with UIO_MAXIOV iovecs is sent and received; one more fails (EMSGSIZE)
        // after the header (and, for sendmsg, the name).
        for (count, sent, received) in [(1024u64, 1 + 1 + 1024, 1 + 1 + 1024 + 2), (1025, 1, 1)] {
            let hdr = words(&[0, 0, 0x1000, count, 0, 0, 0]);
            let mem: [(u64, &[u8]); 2] = [(0x1000, &array), (0x9000, &hdr)];
            let send = run(libc::SYS_sendmsg, [3, 0x9000, 0, 0, 0, 0], &mem);
            assert_eq!(send.touches.len(), sent, "sendmsg of {count}");
            let recv = run(libc::SYS_recvmsg, [3, 0x9000, 0, 0, 0, 0], &mem);
            assert_eq!(recv.touches.len(), received, "recvmsg of {count}");
        }
        // A NULL iovec array: the kernel's copy of it fails before any buffer (even were
        // page 0 readable).
        let at_zero = words(&[0x5000, 8]);
        let d = run(libc::SYS_readv, [3, 0, 1, 0, 0, 0], &[(0, &at_zero)]);
        assert!(d.touches.is_empty());
        let hdr = words(&[0, 0, 0, 1, 0, 0, 0]);
        let d = run(
            libc::SYS_sendmsg,
            [3, 0x9000, 0, 0, 0, 0],
            &[(0, &at_zero), (0x9000, &hdr)],
        );
        assert_eq!(d.touches, vec![t(0x9000, 56, Dir::Read)]);
        // Two messages of sendmmsg: the second mmsghdr 64 bytes on.
        let two = words(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let d = run(
            libc::SYS_sendmmsg,
            [3, 0x9000, 2, 0, 0, 0],
            &[(0x9000, &two)],
        );
        assert_eq!(
            d.touches,
            vec![
                t(0x9000, 56, Dir::Read),
                t(0x9038, 4, Dir::Write),
                t(0x9040, 56, Dir::Read),
                t(0x9078, 4, Dir::Write),
            ]
        );
        // select with n = INT_MAX: sets of 256 MiB (a negative n, EINVAL, nothing).
        let d = run(libc::SYS_select, [0x7fff_ffff, 0x1000, 0, 0, 0, 0], &[]);
        assert_eq!(
            d.touches,
            vec![
                t(0x1000, 1 << 28, Dir::Read),
                t(0x1000, 1 << 28, Dir::Write)
            ]
        );
        assert!(
            run(libc::SYS_select, [0x8000_0000, 0x1000, 0, 0, 0, 0], &[])
                .touches
                .is_empty()
        );
    }

    #[test]
    fn ioctl_requests_without_a_size_or_a_direction_name_no_struct() {
        for cmd in [
            0x0000_4b05u64, // _IO
            0x0010_4b05,    // a size, no direction
            0x8000_4b05,    // _IOR of 0 bytes
        ] {
            let d = run(libc::SYS_ioctl, [3, cmd, 0x100, 0, 0, 0], &[]);
            assert!(d.touches.is_empty(), "{cmd:#x}");
            assert!(d.opaque.is_empty(), "{cmd:#x}");
            assert!(!d.exact);
        }
        // A NULL argument: nothing either.
        let d = run(libc::SYS_ioctl, [3, 0xc008_4b01, 0, 0, 0, 0], &[]);
        assert!(d.opaque.is_empty());
    }

    #[test]
    fn partly_known_calls_leave_the_rest_to_the_fallback() {
        assert!(!run(libc::SYS_getdents64, [3, 0x100, 4096, 0, 0, 0], &[]).exact);
        assert!(!run(libc::SYS_nanosleep, [0x100, 0x200, 0, 0, 0, 0], &[]).exact);
        assert!(run(libc::SYS_nanosleep, [0x100, 0, 0, 0, 0, 0], &[]).exact);
        let d = run(
            libc::SYS_readlink,
            [0x100, 0x200, 10, 0, 0, 0],
            &[(0x100, b"a\0\0\0\0\0\0\0")],
        );
        assert!(!d.exact);
        assert_eq!(d.touches, vec![t(0x100, 2, Dir::Read)], "its path");
        assert!(run(libc::SYS_getpid, [0; 6], &[]).touches.is_empty());
        assert!(!run(libc::SYS_getpid, [0; 6], &[]).exact);
    }
}
