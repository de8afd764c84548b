//! The boundary between the seccomp supervisor (the mechanism) and the KFD model (the driver).
//!
//! The supervisor knows syscalls: it receives a notification, reads the path or the ioctl
//! command, grabs a duplicate of the caller's fd with `pidfd_getfd`, and asks the [`Backend`]
//! what to do. The backend knows the driver: which stand-in file an fd is, what an ioctl means,
//! and what the kernel would answer. Neither side reaches into the other.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;

/// The thread whose system call is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerId {
    /// The calling thread's id (`gettid`), as the supervisor's pid namespace sees it.
    pub tid: i32,
    /// The calling thread's process id (`getpid`, the thread-group id).
    pub tgid: i32,
}

/// Access to the calling process while its system call is held.
///
/// Every read re-checks that the notification is still valid (the caller may have been killed
/// and its pid reused), so data read through this trait belongs to the caller.
pub trait Caller {
    /// Who is calling.
    fn id(&self) -> CallerId;

    /// Reads `buf.len()` bytes at `addr` of the caller's memory; `EFAULT` when any byte is not
    /// readable, `ENOENT` when the notification is no longer valid.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno>;

    /// Writes `buf` at `addr` of the caller's memory; `EFAULT` when any byte is not writable.
    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), Errno>;

    /// `ENOENT` unless the call is still held (the caller was not killed meanwhile). Touches
    /// no caller memory, so it is safe to ask while holding a lock others need. The default
    /// says the call is held.
    fn still_valid(&self) -> Result<(), Errno> {
        Ok(())
    }

    /// A duplicate of the caller's fd `fd` (the kernel's `fget`: the same open file), for
    /// files an ioctl names by number (DBG_TRAP's debug event fd); `EBADF` when it has none
    /// there. The default cannot.
    fn dup_fd(&self, fd: i32) -> Result<OwnedFd, Errno> {
        let _ = fd;
        Err(Errno::NOSYS)
    }

    /// Installs `fd` into the caller's fd table (`SECCOMP_IOCTL_NOTIF_ADDFD` without SEND) and
    /// returns the number it got there; `cloexec` sets `O_CLOEXEC` on the new descriptor. Used
    /// for fds an ioctl returns inside its argument (EXPORT_DMABUF, SMI_EVENTS).
    fn install_fd(&self, fd: BorrowedFd<'_>, cloexec: bool) -> Result<i32, Errno>;

    /// Installs `fd` into the caller's fd table at the lowest free number in `range`, never
    /// replacing a descriptor (`fcntl(F_DUPFD)`'s rule, bounded above); `EMFILE` when every
    /// number of `range` below the caller's `RLIMIT_NOFILE` is taken. Used for the SMI event
    /// fds, which live at numbers in [`SMI_FDS`]. The default cannot.
    fn install_fd_in(
        &self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<u32>,
        cloexec: bool,
    ) -> Result<i32, Errno> {
        let _ = (fd, range, cloexec);
        Err(Errno::NOSYS)
    }
}

/// The fd numbers the SMI event fds are installed at: the filter notifies `write`, `writev`
/// and `pwritev2` of these numbers (only), so that [`Backend::write`] answers them as the
/// kernel's SMI file does, while reads and polls stay native. Below the usual soft
/// `RLIMIT_NOFILE` of 1024; far above the numbers programs are given first.
pub const SMI_FDS: std::ops::Range<u32> = 944..1008;

/// The pieces of a write call that [`Backend::write`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCall {
    /// `write(fd, buf, count)`: `(buf, count)`.
    Write(u64, u64),
    /// `writev` (or `pwritev2` at the current position): the vector's `(base, len)` pieces.
    Vector(Vec<(u64, u64)>),
}

/// What to do with an intercepted `open`/`openat`.
#[derive(Debug)]
pub enum OpenAction {
    /// Not ours: let the kernel run the syscall as the program issued it.
    Continue,
    /// Answer with this stand-in: the supervisor installs it into the caller
    /// (`SECCOMP_ADDFD_FLAG_SEND`, honouring `O_CLOEXEC` from `flags`) as the syscall's result.
    Inject(OwnedFd),
    /// Fail the syscall with this errno.
    Fail(Errno),
}

/// The answer to an intercepted ioctl.
pub type IoctlResult = Result<i64, Errno>;

/// The type of a file a [`StatAnswer`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    /// A character device (`S_IFCHR`) with this device number (`st_rdev`).
    CharDevice {
        /// `major(st_rdev)`.
        major: u32,
        /// `minor(st_rdev)`.
        minor: u32,
    },
    /// A regular file (`S_IFREG`).
    Regular,
    /// A directory (`S_IFDIR`).
    Directory,
}

/// A point in time as `stat` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatTime {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds, below 10^9.
    pub nsec: u32,
}

/// What a `stat`-family call reports about an emulated path; the supervisor lays it out as
/// `struct stat` or `struct statx`, and derives `access` answers from `kind` and `perm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatAnswer {
    /// The file type.
    pub kind: StatKind,
    /// The permission bits (`st_mode & 07777`).
    pub perm: u32,
    /// `st_dev` as (major, minor).
    pub dev: (u32, u32),
    /// `st_ino`.
    pub ino: u64,
    /// `st_nlink`.
    pub nlink: u32,
    /// `st_uid`.
    pub uid: u32,
    /// `st_gid`.
    pub gid: u32,
    /// `st_size`.
    pub size: u64,
    /// `st_blksize`.
    pub blksize: u32,
    /// `st_blocks` (512-byte units).
    pub blocks: u64,
    /// Last access.
    pub atime: StatTime,
    /// Last modification.
    pub mtime: StatTime,
    /// Last status change.
    pub ctime: StatTime,
}

/// What to do with an intercepted `mmap` of a file (not `MAP_ANONYMOUS`).
///
/// The kernel decides what a device file's mapping shows by its offset (`kfd_mmap` decodes
/// `KFD_MMAP_TYPE_*` and the GPU id; `drm_gem_mmap` looks the offset up in the device's vma
/// manager and checks the file holds a handle on the object). A stand-in is a memfd, so the
/// backend translates: the mapping the caller asked for becomes a mapping of `fd` at `offset`
/// with the caller's own address, length, protection and flags.
#[derive(Debug)]
pub enum MmapAction {
    /// Not a stand-in, or one whose offsets need no translation: the call runs natively.
    Continue,
    /// Map `fd` at byte `offset` instead of the caller's file and offset.
    Redirect {
        /// The memory to map (a memfd the backend owns).
        fd: std::sync::Arc<OwnedFd>,
        /// The byte offset in `fd` that the caller's offset stands for.
        offset: u64,
    },
    /// Fail the call with this errno (the kernel's: `EINVAL` for an offset no object has,
    /// `EACCES` for an object the file holds no handle on, ...).
    Fail(Errno),
}

/// A change to a process's address space, seen at the system call that makes it, before the
/// kernel runs it: what drives the kernel's MMU notifiers. The arguments are the caller's, not
/// validated: the backend checks them as the kernel would (a call the kernel will refuse
/// changes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressSpaceChange {
    /// `munmap(start, len)`.
    Unmap {
        /// First byte.
        start: u64,
        /// Length in bytes (rounded up to pages by the kernel).
        len: u64,
    },
    /// `mmap(start, len, ..., MAP_FIXED, ...)` that the kernel will run (its fd, if any, is
    /// open): whatever was mapped in `[start, start + len)` is unmapped first.
    MapFixed {
        /// First byte.
        start: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `mremap(old, old_len, new_len, flags, new_addr)`.
    Remap {
        /// The old address.
        old: u64,
        /// The old length.
        old_len: u64,
        /// The new length.
        new_len: u64,
        /// `MREMAP_*`.
        flags: u32,
        /// The new address (with `MREMAP_FIXED`).
        new_addr: u64,
    },
    /// `madvise(start, len, advice)` with an advice that drops pages (`MADV_DONTNEED`,
    /// `MADV_FREE`, `MADV_REMOVE`, `MADV_DONTNEED_LOCKED`).
    Advise {
        /// First byte.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// `MADV_*`.
        advice: i32,
    },
    /// `mprotect(start, len, prot)`.
    Protect {
        /// First byte.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// `PROT_*`.
        prot: u32,
    },
    /// `brk(addr)`: the heap ends at `addr` (a shrink unmaps the rest of it).
    Brk {
        /// The new program break.
        addr: u64,
    },
    /// `fork`, or `clone` without `CLONE_VM`: the process's private memory becomes
    /// copy-on-write.
    Fork,
}

/// The supervisor's side of CPU faults (see [`Backend::cpu_faults`]).
pub trait CpuWake: Send + Sync {
    /// What process `tgid` should have hidden from its CPU changed (see
    /// [`Backend::cpu_protect_plan`]): the supervisor stops its threads to run the plan.
    /// Must not block.
    fn wake(&self, tgid: i32);

    /// Waits (briefly) until the threads of every process woken so far were told to stop:
    /// called without the backend's locks before a change is made visible to the program
    /// (a call's answer, a GPU write it may poll for), so that it runs the plan first.
    fn sync(&self);

    /// Runs one `lock cmpxchg` inside traced process `tgid`, on one of its own threads: the
    /// `size`-byte (4 or 8) little-endian word at `addr` is compared with `expected` and, if
    /// equal, replaced by `new`, atomically with respect to the process's own locked
    /// instructions (and anyone else's on the same memory); returns the word's value before
    /// (equal to `expected` exactly when it was replaced). What a GPU atomic on process
    /// memory is on the hardware (a PCIe/xGMI atomic), for the model's GPU atomics on USERPTR
    /// and SVM pages (`model/kernel.rs`). Blocks until a thread of the process ran it, or
    /// until none stopped in time ([`CasError::NoThread`]). The default runs nothing.
    ///
    /// # Errors
    ///
    /// [`CasError`]: nothing can run it, no thread stopped, or the CPU may not write there.
    fn cas(
        &self,
        tgid: i32,
        addr: u64,
        size: u8,
        expected: u64,
        new: u64,
    ) -> Result<u64, CasError> {
        let _ = (tgid, addr, size, expected, new);
        Err(CasError::Unsupported)
    }
}

/// Why [`CpuWake::cas`] did not run its compare-and-swap (the caller then falls back to what
/// it does without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasError {
    /// Nothing can run code in the process: no tracer (attach mode), a process it does not
    /// trace, an architecture other than x86_64, no `syscall` instruction of the process
    /// known yet, or the stub could not be mapped into it.
    Unsupported,
    /// No thread of the process stopped in time (every one blocked in a call the
    /// supervisor is answering, or stopped by job control), or the one running it exited.
    NoThread,
    /// The instruction faulted: the CPU may not write `addr` (`SIGSEGV`/`SIGBUS`, not
    /// delivered).
    Fault,
}

/// The supervisor's waker (see [`CpuWake`]).
pub type CpuWaker = std::sync::Arc<dyn CpuWake>;

/// One `mprotect` the supervisor makes a traced process run on itself: `[start, start + len)`
/// to `prot` (`PROT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuProtect {
    /// First byte (page-aligned).
    pub start: u64,
    /// Bytes (page-aligned).
    pub len: u64,
    /// `PROT_NONE` to hide the memory, else the protection it had.
    pub prot: u32,
}

/// The driver side of the emulator.
///
/// Implementations are shared by the supervisor's threads: `ioctl` may be called concurrently
/// (a blocking WAIT_EVENTS runs on its own thread while others are served).
pub trait Backend: Send + Sync + 'static {
    /// Decides an `open`/`openat` of the absolute, lexically normalised `path` with `flags`
    /// (`O_*`, as passed by the caller) and `mode`.
    fn open(&self, caller: &dyn Caller, path: &str, flags: i32, mode: u32) -> OpenAction;

    /// Decides a path-based `stat`-family call (`stat`, `lstat`, `newfstatat`, `statx`,
    /// `access`, `faccessat`, `faccessat2`) on the absolute, lexically normalised `path`:
    /// `None` when the path is not this backend's (the kernel runs the call), `Some(Err)` to
    /// fail it (`ENOENT` for a path under an emulated root that does not exist), `Some(Ok)`
    /// to describe the file. The default claims nothing.
    fn stat(&self, caller: &dyn Caller, path: &str) -> Option<Result<StatAnswer, Errno>> {
        let _ = (caller, path);
        None
    }

    /// Decides a `readlink`/`readlinkat` of the absolute, lexically normalised `path`: `None`
    /// when the path is not this backend's (the kernel runs the call), `Some(Ok(target))` for
    /// an emulated symbolic link, `Some(Err)` to fail it (`EINVAL` for an emulated file that
    /// is not a link, `ENOENT` for one that does not exist). The default claims nothing.
    fn readlink(&self, caller: &dyn Caller, path: &str) -> Option<Result<String, Errno>> {
        let _ = (caller, path);
        None
    }

    /// Describes `file` (a duplicate of the caller's descriptor) for an `fstat`, or a
    /// `newfstatat`/`statx` of an empty path with `AT_EMPTY_PATH`: `None` when it is not a
    /// stand-in the backend describes (the kernel answers from the file itself), else what a
    /// stat of the device file would say (`S_IFCHR` and its `st_rdev` for `/dev/kfd` and the
    /// render nodes). The default describes nothing.
    fn fstat(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
    ) -> Option<Result<StatAnswer, Errno>> {
        let _ = (caller, file);
        None
    }

    /// Answers ioctl `cmd` with argument `arg` on `file`, a duplicate (taken with
    /// `pidfd_getfd`) of the caller's descriptor. Returns `None` when `file` is not one of this
    /// backend's stand-ins, so the supervisor lets the kernel run the ioctl natively.
    fn ioctl(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        cmd: u32,
        arg: u64,
    ) -> Option<IoctlResult>;

    /// Decides an `mmap` of `file` (a duplicate of the caller's descriptor, taken with
    /// `pidfd_getfd`) at byte `offset` for `len` bytes with `prot` (`PROT_*`) and `flags`
    /// (`MAP_*`). The supervisor carries a [`MmapAction::Redirect`] out so that the caller's
    /// address space ends up exactly as if the kernel had mapped the device file. The default
    /// lets every mapping run natively.
    fn mmap(
        &self,
        caller: CallerId,
        file: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        prot: u32,
        flags: u32,
    ) -> MmapAction {
        let _ = (caller, file, offset, len, prot, flags);
        MmapAction::Continue
    }

    /// Whether `file` (a duplicate of the caller's descriptor) stands in for a file the kernel
    /// would not let a program resize: a device node, a dma-buf, a sysfs or procfs file. The
    /// supervisor then answers `ftruncate` with `EINVAL` (`do_ftruncate`: not a regular file)
    /// and `fallocate` with `vfs_fallocate`'s errnos (`ENODEV` for a writable device file), so
    /// that no program can resize or punch holes in a stand-in's memory. The default claims no
    /// file.
    fn is_standin(&self, file: BorrowedFd<'_>) -> bool {
        let _ = file;
        false
    }

    /// Applies `change` to the caller's address space as the kernel's MMU notifiers would,
    /// before the system call runs (the supervisor then lets the kernel run it). Called for
    /// `munmap`, `mremap`, `madvise` (page-dropping advice only), `mprotect`, `brk`, `mmap`
    /// with `MAP_FIXED`, `fork` and `clone` without `CLONE_VM`. The default does nothing.
    fn address_space(&self, caller: CallerId, change: AddressSpaceChange) {
        let _ = (caller, change);
    }

    /// The supervisor can make a traced program's memory inaccessible to its CPU and sees
    /// the faults that follows (`kfd-emu run`): from now on the backend may ask for that
    /// (`waker` tells the supervisor when; `None` turns it off). The default never asks.
    fn cpu_faults(&self, waker: Option<CpuWaker>) {
        let _ = waker;
    }

    /// The `mprotect`s process `tgid` is to run so that what it should have hidden is, in
    /// order. The supervisor runs them on one stopped thread of the process, then calls
    /// [`Backend::cpu_protect_done`]; it asks again until none is left. The default has none.
    fn cpu_protect_plan(&self, tgid: i32) -> Vec<CpuProtect> {
        let _ = tgid;
        Vec::new()
    }

    /// The `mprotect`s of the last plan of process `tgid` ran; `failed` are those that failed.
    fn cpu_protect_done(&self, tgid: i32, failed: &[CpuProtect]) {
        let _ = (tgid, failed);
    }

    /// What process `tgid` has hidden now, each span with the protection to give it back
    /// (for a child it forks: its copy of the memory is hidden too). The default has none.
    fn cpu_hidden(&self, tgid: i32) -> Vec<CpuProtect> {
        let _ = tgid;
        Vec::new()
    }

    /// A thread of the caller's process took a `SIGSEGV` (`SEGV_ACCERR`) at byte `addr`, or
    /// a system call of it failed with `EFAULT` and `addr` is where one of its pointers
    /// leads (the tracer's exit fallback: the kernel's copy would have faulted there):
    /// whether it is memory the backend had hidden. Then the backend did what the kernel's
    /// CPU fault handler does, and the supervisor runs the new plan and restarts the
    /// instruction, the signal suppressed; otherwise the signal is the program's. The default
    /// claims none.
    fn cpu_fault(&self, caller: CallerId, addr: u64) -> bool {
        let _ = (caller, addr);
        false
    }

    /// A system call of the caller is about to copy to (`write`: `read()` into a buffer) or
    /// from the byte spans `spans` (`start`, `end`), in that order: the backend does what
    /// the kernel's CPU fault handler does for each hidden page the copy would touch, and
    /// says whether anything changed (the supervisor then runs the new plan before the call
    /// goes on). The default changes nothing.
    fn cpu_touch(&self, caller: CallerId, spans: &[(u64, u64)], write: bool) -> bool {
        let _ = (caller, spans, write);
        false
    }

    /// A process that used the backend has exited (its pidfd became readable): release what the
    /// kernel would release when its last `/dev/kfd` reference goes.
    fn process_exited(&self, tgid: i32);

    /// `PTRACE_POKEDATA` (or `POKETEXT`) of `word` at `addr` of `tracee`, a thread its
    /// caller traces and that is stopped (the supervisor checked, as `ptrace_check_attach`
    /// does): `Some` with the call's result when `addr` is in a mapping of the backend's own
    /// memory that it writes itself (the kernel's `ptrace_access_vm` reaches a device
    /// mapping through its `vm_ops->access`, which writes whatever the mapping's
    /// protection); `None` lets the kernel run the call. The default writes nothing.
    fn poke(&self, tracee: i32, addr: u64, word: u64) -> Option<Result<(), Errno>> {
        let _ = (tracee, addr, word);
        None
    }

    /// How many NUMA nodes the emulated machine has (`/sys/devices/system/node` lists them),
    /// for the memory-policy calls that name them (`mbind`, `set_mempolicy`); `None` when the
    /// backend emulates no NUMA nodes (the host's are what a program sees). The default says
    /// `None`.
    fn numa_nodes(&self) -> Option<u32> {
        None
    }

    /// The emulated machine's RAM in bytes (what its kernel's `totalram_pages()` would count),
    /// for the overcommit check of a large anonymous `mmap` (see
    /// [`Filter::kfd_traced`](crate::supervisor::seccomp::Filter::kfd_traced)); `None` when
    /// the backend emulates no memory size (the host's is the machine's). The default says
    /// `None`.
    fn system_memory(&self) -> Option<u64> {
        None
    }

    /// Answers a `write`, `writev` or `pwritev2` at the current position on `file` (a
    /// duplicate of the caller's descriptor, whose number is in [`SMI_FDS`]): `None` when it
    /// is not a stand-in the backend writes (the kernel runs the call), else the call's
    /// result. `segments` gives the call's `(address, length)` pieces in order (one for a
    /// `write`, the vector's for the others, as [`WriteCall`] says), or the errno the
    /// kernel's checks of them would fail with; it is only asked for a stand-in's. The
    /// default writes nothing.
    fn write(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        segments: &dyn Fn() -> Result<WriteCall, Errno>,
    ) -> Option<IoctlResult> {
        let _ = (caller, file, segments);
        None
    }
}
