//! The ptrace tracer of `kfd-emu run`: carries out the backend's answer to a file `mmap` in a
//! program whose address space is not the supervisor's (see [`super::mmap`] for the scheme).
//!
//! One dedicated thread does every ptrace request. It seizes the spawned child before its
//! `exec` (the child waits in its pre-exec hook until then) with `TRACESECCOMP`, `TRACEFORK`,
//! `TRACEVFORK`, `TRACECLONE`, `TRACEEXEC`, `TRACESYSGOOD` and `EXITKILL`, so every descendant
//! is traced from its first instruction and every tracee is killed if the supervisor dies.
//! A file `mmap` the backend redirects comes from a worker ([`Request`]): the thread is
//! interrupted and the call carried out from its interrupt stop in the steps [`super::mmap`]
//! describes, with a per-thread [`Stage`]. Its `PTRACE_EVENT_SECCOMP` stops are the filter's
//! (`SECCOMP_RET_DATA` is [`TRACE_DATA`]): `ptrace` (below), `AMDKFD_IOC_SMI_EVENTS` (its new fd moved into [`SMI_FDS`] by the
//! thread itself: `fcntl(F_DUPFD)` and `close`, `anon_fd` rewritten) and `clone` with
//! `CLONE_UNTRACED` (the flag cleared). A stop another filter asked for fails its call with
//! `ENOSYS`, the kernel's answer when no tracer is attached. Besides those it keeps the
//! program behaving as untraced:
//!
//! - a signal-delivery stop re-injects the signal;
//! - a group-stop (`PTRACE_EVENT_STOP` with a stopping signal) is entered with `PTRACE_LISTEN`,
//!   so the tracee stays stopped until a `SIGCONT`, as without a tracer;
//! - the other event stops (a new child's or thread's first stop, fork/clone/exec events) are
//!   resumed as they are;
//! - the direct child's exit status, which the tracer reaps (it shares a thread group with the
//!   child's parent), is handed to the code that waits for the child ([`ChildExit`]).
//!
//! CPU faults on SVM memory in VRAM (`model/svm/cpu.rs` says what the model does) are its
//! fourth job:
//!
//! - the backend's waker ([`Wakeups`]) names a process whose hidden memory is to change; the
//!   tracer interrupts each of its threads (`PTRACE_INTERRUPT`); a worker answering a call,
//!   and a GPU access, first wait until it has ([`Wakeups::sync`]), so the caller stops
//!   before it runs on;
//! - the first thread to stop runs the backend's plan: its registers saved, each `mprotect`
//!   is run at a `syscall` instruction of the process (one a seccomp stop was made at, or
//!   that a notified `mmap` was made at)
//!   with no call number to restart, through its syscall stops (its seccomp notification is
//!   answered `CONTINUE` and not told to the backend: [`Wakeups::is_injected`]); then the
//!   thread gets its registers back, with the restart the kernel would have made of the call
//!   it was interrupted in (`-ERESTART*`). Other threads of the process that stop meanwhile
//!   wait (parked) until the plan is done, so `mprotect`s never race;
//! - a `SIGSEGV` (`SEGV_ACCERR`) the backend claims ([`Backend::cpu_fault`]) runs the plan on
//!   the faulting thread, which then restarts its instruction without the signal. A fault in
//!   a span another thread's plan showed again after the faulting thread last ran (between
//!   the fault and its delivery: each completed lift is noted with a generation, each thread
//!   with the generation at its last stop where no fault of its can be pending) restarts;
//!   so does a page fault a thread running a plan takes (the fault of the instruction it
//!   was interrupted at, which the kernel reports after the interrupt's stop: it runs again
//!   once the thread has its registers back). Any other `SIGSEGV` is delivered, to the
//!   program's own handler if it has one; a fault on memory the program protected itself
//!   comes again after such a restart and is then delivered.
//!
//! A forked child inherits the `PROT_NONE` of hidden memory: the spans its parent had hidden
//! at the fork (its `PTRACE_EVENT_FORK`) are shown again in the child at its first touch of
//! each (the kernel's child faults the parent's range back through the device-private entry;
//! here the parent's pages stay where they are). A new tracee whose first stop comes before
//! the fork or clone event that made it waits for that event. A program's own `mprotect`
//! over hidden memory takes effect and the span is hidden again after it, with the new
//! protection to restore.
//!
//! A system call given hidden memory (`read()` into it, `fstat()` into it, a `futex` word
//! there, an `ioctl`'s struct) would fail with `EFAULT` where the kernel's
//! `copy_to_user`/`copy_from_user` faults the device-private pages (`do_user_addr_fault` →
//! `handle_mm_fault` → `do_swap_page` → `migrate_to_ram`) and `svm_migrate_to_ram` brings
//! them home. So while a process has hidden memory (its own, or a forked child's inherited
//! copy), its threads are resumed with `PTRACE_SYSCALL` instead of `PTRACE_CONT`, and:
//!
//! - at a call's entry stop, the table of the x86-64 calls' user memory
//!   ([`usermem::describe`]: pointers and sizes, fixed structs, sizes from other arguments,
//!   `iovec`s and `msghdr`s read from the tracee's memory, paths up to their NUL, an
//!   `ioctl`'s `_IOC_SIZE` and `_IOC_DIR`) gives the bytes the call copies in the kernel's
//!   order; the backend brings home the hidden blocks those copies would touch, in that
//!   order ([`Backend::cpu_touch`]); the call is skipped, the plan runs on the thread, and
//!   the call is issued again, finding its memory shown;
//! - at a call's exit stop, the fallback for what the table lacks: a result of `-EFAULT`
//!   from a call the table does not describe exactly brings home the hidden block one of
//!   its pointers names ([`Backend::cpu_fault`] of that byte: the argument registers the
//!   call reads, then the words of a struct whose layout only its driver knows, an
//!   `ioctl`'s; failing those, the first hidden byte within a page after an argument:
//!   [`usermem::fallback_spans`]), and
//!   the call is made again from its exit stop (the registers it entered with, which the
//!   kernel leaves but for `rax`, `rcx` and `r11`: `rax` the call number again, `rip` back
//!   over the `syscall` instruction, `orig_rax` -1 so that no signal restart applies), as
//!   often as it fails so and a pointer names hidden memory (at most [`plan::MAX_RETRIES`] times).
//!
//! Making a call again is right only if the kernel did nothing before its `EFAULT`: so for
//! most calls, whose arguments are copied in before they act (and whose failed copy out
//! undoes what they did: `pipe2`, `socketpair`, `timer_create`). The calls whose copy out
//! follows a side effect that a second call would not repeat (a child `wait4` reaped, a
//! connection `accept` took, a datagram `recvmsg` consumed, a signal `rt_sigtimedwait`
//! dequeued, an old `sigaction` replaced) are in the table, so their memory is home before
//! they run; those the table leaves partly open and that cannot be made again
//! ([`usermem::restartable`]: an interrupted `nanosleep` whose remaining time cannot be
//! written, `msgrcv`, `mq_timedreceive`, `io_getevents`) keep their `EFAULT`, as does
//! `rt_sigreturn` (its "result" is the interrupted code's `rax`). An `ioctl` is made again
//! on the assumption that its driver copies its struct in before it acts (`kfd_ioctl` does).
//!
//! Only a process with hidden memory pays: one entry and one exit stop per system call;
//! without hidden memory left its threads go back to `PTRACE_CONT` at their next stop.
//! Where the emulation differs from the kernel: a call that copies less than it is given (a
//! short `read()`, an option shorter than `optlen`) brings home the whole of what it was
//! given; calls whose copy out is listed though it may not happen (`wait4` with `WNOHANG`
//! and no child, `rt_sigtimedwait` that times out, `accept` that fails) bring it home all
//! the same; the fallback brings home one block per retry, where the kernel might have
//! touched it later in the call or not at all (an argument that only looks like a pointer
//! into hidden memory); `strncpy_from_user`'s word reads past a path's NUL, `recvmsg`'s
//! control data (`put_cmsg`, whose failure does not fail the call) and the entries
//! `getdents64` fills after a first one that fits are not followed; a `vfork` child's call
//! on its parent's hidden memory fails with `EFAULT`; `process_vm_*` on another process's
//! hidden memory too (the remote side is that process's).
//!
//! Not covered: a wakeup made by a GPU access with no thread able to stop before the
//! program sees the write leaves a window of a few instructions.
//!
//! The decisions of this CPU-fault and system-call code that depend on no ptrace request
//! (the retry cap, parking, how a thread goes on once its memory is shown, the spans shown
//! again and their generations, an injected `mprotect`'s outcome, which `SIGSEGV` is the
//! program's, the restart) are [`super::plan`]'s, where unit tests pin each branch with the
//! threads' interleavings as inputs.
//!
//! Compare-and-swaps for the model's GPU atomics on process memory ([`CpuWake::cas`]:
//! atomic with the program's own locked instructions, as a PCIe/xGMI atomic is on the
//! hardware) are its fifth job, x86_64 only:
//!
//! - a request names a process: the tracer interrupts its threads (not one running a plan,
//!   parked, or running a compare-and-swap already); the first to stop (an interrupt stop:
//!   never one holding a redirect) runs every request of the process then pending, then gets
//!   its registers back with the kernel's syscall restart, as a plan's thread does, and runs
//!   a plan if one is due;
//! - the first time, the thread maps a stub page into its process with an injected
//!   `mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS)` at the process's
//!   `syscall` instruction (the page stays for the process's life and goes to a forked child
//!   with its memory), and the tracer writes [`STUB`] there (`PTRACE_POKEDATA`);
//! - each request runs the stub from its registers (`rdi` the address, `rax` the expected
//!   value, `rsi` the new one): `lock cmpxchg`, `mov rdx, rax`, `syscall`, resumed with
//!   `PTRACE_SYSEMU`, so that the `syscall`'s entry stop ends it and no call runs (nor does
//!   any seccomp filter see one: `syscall_trace_enter`, `kernel/entry/common.c`, returns
//!   before `__secure_computing` under `SYSCALL_EMU`); `rdx` holds the value before;
//! - while it runs, every signal but the synchronous ones is blocked (`PTRACE_SETSIGMASK`;
//!   the thread's own mask comes back after; a forced synchronous signal that is blocked
//!   would reset the program's handler, `force_sig_info_to_task` in `kernel/signal.c`), so
//!   a pending signal is delivered afterwards
//!   at the program's own instruction; a `SIGSEGV`/`SIGBUS` of the stub (memory the CPU may
//!   not write) answers [`CasError::Fault`] and is not delivered; a page fault elsewhere is
//!   the program's instruction's, pending when the thread was interrupted, and is dropped
//!   (the instruction runs again once the thread has its registers back); a stopping signal meanwhile
//!   is raised again after (`tgkill`);
//! - a request no thread takes within a quarter of a second while every thread of the
//!   process is blocked in a call a worker serves (which `WAIT_KILLABLE_RECV` keeps from
//!   stopping: `seccomp_do_user_notification` waits killable once the notification was
//!   received; the workers keep the set, `Wakeups::serving`), or within 5 s at all (a thread
//!   stopped by job control, or one the loaded host does not run), is withdrawn by its caller
//!   ([`CasError::NoThread`]), which falls back. A thread that is merely slow to be scheduled
//!   (30–235 ms per request under two CPU burners on 2 cores) is waited for: falling back
//!   then made a dispatch's atomics plain read-modify-writes racing the program's own
//!   (kfdtest's `KFDQMTest.Atomics` on a loaded host).
//!
//! Not covered: a thread stopped inside an rseq critical section that runs the stub has its
//! `rseq_cs` cleared by the kernel (the stub's instruction pointer is outside it), so that
//! section is not aborted at that preemption (as for a plan's `mprotect`s). The stub page is
//! the program's to see (`/proc/self/maps`: one anonymous `r-x` page); a `vfork` or
//! `CLONE_VM` child that runs a compare-and-swap maps a second one into the shared memory.
//!
//! A program's own ptrace is its fifth job. The filter sends `ptrace` with `PTRACE_TRACEME`,
//! `PTRACE_ATTACH`, `PTRACE_SEIZE` and `PTRACE_DETACH` to the tracer. Linux lets a thread
//! have one tracer, so before an attach runs the thread it names is lent: interrupted
//! (the stops it reports first are handled as usual, so a redirect or a plan it is in runs
//! to its end), then detached at its interrupt stop (a signal about to be delivered is
//! delivered by the detach, a stopped thread stays stopped); a `PTRACE_TRACEME` caller is
//! detached at its own stop. The kernel then runs the call as without `kfd-emu` (its
//! permission checks included: `__ptrace_may_access`, Yama's if configured). The tracer
//! seizes the thread back at the exit stop of an attach that failed, of the program
//! tracer's `PTRACE_DETACH`, or when the program's tracing thread ends (`exit_ptrace`
//! detaches its tracees). While lent, its CPU faults on memory in VRAM are not handled and a
//! wakeup does not interrupt it (its plan runs at its first stop after it is back); this is
//! logged once.
//!
//! A lent thread's redirected file `mmap`s (a debuggee creating its queues: kfdtest's
//! drive, as neither stops nor register changes of the thread itself are the supervisor's any
//! more (and a notification cannot change a call's arguments). So before lending a thread
//! (at the seccomp stop of its `PTRACE_TRACEME`, whose call is made a `clone` and then issued
//! again; at the interrupt stop of an attach's target, where the `clone` is injected at the
//! process's `syscall` instruction and the thread's registers come back with the kernel's
//! restart), the tracer has it `clone` a helper: `CLONE_VM | CLONE_FILES`, no exit signal, no
//! new stack. The helper is traced from its first stop (`TRACECLONE`) and never runs code of
//! the program's: it stays stopped, every signal it can block blocked (`PTRACE_SETSIGMASK`),
//! killed when the thread ends (`PR_SET_PDEATHSIG`, set by a call it is made to issue) or is
//! taken back (`SIGKILL`); for each redirect of the lent thread it is made to issue the
//! `mmap` and the `close` ([`super::mmap`]). What a program can see of it: a child process of
//! the thread's (not a thread of its process: a debugger that attaches to every thread does
//! not meet it) in `/proc`, sharing its memory (`kcmp`), reported to a `wait` only with
//! `__WALL` or `__WCLONE` (`eligible_child`; a zombie until then or until the process ends).
//! A thread the tracer could not stop at an interrupt stop for the lend (stopped by job
//! control, or parked) gets no helper, and its redirects fail with `ENOSYS`; so does one
//! whose helper was killed. A thread a lent thread makes, untraced unless the program's
//! tracer traces clones, is served by the helper of its address space. A helper keeps the
//! address space it had: a lent thread that
//! `exec`s leaves its helper on the old one, which is then killed at the thread's next
//! redirect (checked with `kcmp(KCMP_VM)`), which fails with `ENOSYS`. A thread of the caller's own process
//! is never lent (the kernel refuses it: `EPERM`). A `PTRACE_TRACEME` child is taken back
//! when its parent detaches it or the parent process's leader ends.
//!
//! Anonymous mappings never stop the program: the filter allows them outright, so only file
//! mappings (the loader's, a few per library) pay a notification, a `pidfd_getfd` and a
//! backend call, and only redirected ones (a stand-in's) a stop and the calls above.

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use rustix::event::{EventfdFlags, eventfd};
use rustix::io::Errno;

use super::mmap::{self as file_mmap, Pending, Request, SLOT_MARKER, Slots};
use super::overcommit::{self, Commit};
use super::plan::{
    self, CasSegv, ERESTART_RESTARTBLOCK, ERESTARTNOHAND, ERESTARTNOINTR, ERESTARTSYS, Outcome,
    Segv, Then, Why,
};
use super::seccomp::{DIRECT_MARKER, SMI_EVENTS_CMD, SMI_FDS, TRACE_DATA};
use super::serve::tgid_from_proc;
use super::usermem::{self, Dir};
use super::wakeups::kick_signal;
use crate::backend::{Backend, CallerId, CasError, CpuProtect};

/// The options every tracee gets.
const OPTIONS: i32 = libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACEEXIT
    | libc::PTRACE_O_EXITKILL;

fn errno() -> Errno {
    Errno::from_raw_os_error(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// `ptrace(request, tid, addr, data)` for requests whose `addr` and `data` are integers.
fn ptrace_value(request: libc::c_uint, tid: i32, data: usize) -> Result<(), Errno> {
    // SAFETY: the requests used with this helper (SEIZE, CONT, SYSCALL, LISTEN) take `addr`
    // and `data` by value; no memory of ours is read or written.
    let ret = unsafe {
        libc::ptrace(
            request,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            data as *mut libc::c_void,
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

/// `ptrace(request, tid, NULL, data)` for requests whose `data` points at a struct.
///
/// # Safety
/// `data` must be valid for what `request` reads or writes there.
unsafe fn ptrace_ptr(
    request: libc::c_uint,
    tid: i32,
    data: *mut libc::c_void,
) -> Result<(), Errno> {
    // SAFETY: the caller guarantees `data` suits `request`; `addr` is unused by it.
    let ret = unsafe { libc::ptrace(request, tid, std::ptr::null_mut::<libc::c_void>(), data) };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

fn get_regs(tid: i32) -> Result<libc::user_regs_struct, Errno> {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETREGS writes one `struct user_regs_struct` to `data`.
    unsafe { ptrace_ptr(libc::PTRACE_GETREGS, tid, (&raw mut regs).cast())? };
    Ok(regs)
}

fn set_regs(tid: i32, regs: &libc::user_regs_struct) -> Result<(), Errno> {
    let mut copy = *regs;
    // SAFETY: PTRACE_SETREGS reads one `struct user_regs_struct` from `data`.
    unsafe { ptrace_ptr(libc::PTRACE_SETREGS, tid, (&raw mut copy).cast()) }
}

fn event_msg(tid: i32) -> Result<u64, Errno> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: PTRACE_GETEVENTMSG writes one unsigned long to `data`.
    unsafe { ptrace_ptr(libc::PTRACE_GETEVENTMSG, tid, (&raw mut msg).cast())? };
    Ok(msg)
}

/// Seizes `pid` with the tracer's options. Must be called on the tracer thread.
pub(crate) fn seize(pid: i32) -> Result<(), Errno> {
    ptrace_value(libc::PTRACE_SEIZE, pid, OPTIONS as usize)
}

/// The spawned child's exit status, reaped by the tracer, for the code that waits for it.
#[derive(Debug)]
pub(crate) struct ChildExit {
    status: Mutex<Option<ExitStatus>>,
    /// Written when the status is recorded, or when the tracer ends without one.
    pub(crate) ready: OwnedFd,
    /// The tracer thread's id while its loop runs (0 before and after).
    tracer_tid: AtomicI32,
    /// Tracees the tracer is asked to resume (see [`ChildExit::release_failed_exec`]).
    release: Mutex<Vec<i32>>,
}

impl ChildExit {
    pub(crate) fn new() -> Result<Self, Errno> {
        // Installed before any tracer runs, so its first kick finds the handler.
        let _ = kick_signal();
        Ok(Self {
            status: Mutex::new(None),
            ready: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            tracer_tid: AtomicI32::new(0),
            release: Mutex::new(Vec::new()),
        })
    }

    /// The child `pid` failed to exec, and `std`'s spawn, which then waits for it from a
    /// thread of the tracer's thread group, may have taken the report of its
    /// `PTRACE_EVENT_EXIT` stop: the tracer would never see it, and the child would stay
    /// stopped in its exit for good (holding every fd it inherited). Only the tracer may
    /// resume it, so this asks it to (interrupting its `waitpid` with [`kick_signal`]) and
    /// waits until it has, or has ended. A child the tracer saw exit itself is not traced
    /// any more, and the resume does nothing.
    pub(crate) fn release_failed_exec(&self, pid: i32) {
        let Some(sig) = kick_signal() else {
            return;
        };
        self.release
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let tid = self.tracer_tid.load(Ordering::Acquire);
            let pending = !self
                .release
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty();
            if tid == 0 || !pending || std::time::Instant::now() > deadline {
                return;
            }
            // SAFETY: tgkill takes plain integers; `tid` is a thread of this process (the
            // tracer's id is cleared before that thread ends).
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Says that the calling thread is the tracer (before it hands the child's listener
    /// over, so that a failed exec seen after that finds it).
    pub(crate) fn tracing_on_this_thread(&self) {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        self.tracer_tid.store(tid, Ordering::Release);
    }

    /// Resumes the tracees [`ChildExit::release_failed_exec`] asked for.
    fn resume_released(&self) {
        let pids = std::mem::take(&mut *self.release.lock().unwrap_or_else(|e| e.into_inner()));
        for pid in pids {
            // ESRCH: not stopped or not traced any more (the tracer saw its exit itself).
            let _ = ptrace_value(libc::PTRACE_CONT, pid, 0);
        }
    }

    fn record(&self, status: Option<ExitStatus>) {
        let mut slot = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = status;
        }
        drop(slot);
        let _ = rustix::io::write(&self.ready, &1u64.to_ne_bytes());
    }

    /// The recorded status, if the tracer saw the child end.
    pub(crate) fn status(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A thread running the `mprotect`s of a plan in place of its own code.
#[derive(Debug)]
struct Inject {
    tgid: i32,
    /// Its registers when it stopped.
    saved: libc::user_regs_struct,
    /// A `syscall` instruction of its process.
    insn: u64,
    ops: VecDeque<CpuProtect>,
    current: Option<CpuProtect>,
    failed: Vec<CpuProtect>,
    why: Why,
    /// It is stopped at a system call's entry (`Why::Syscall`) and runs no `mprotect` yet.
    at_entry: bool,
}

/// The compare-and-swap stub (see the module docs): at [`STUB_64`] the 8-byte form
/// `lock cmpxchg [rdi], rsi` (`f0 48 0f b1 37`), at [`STUB_32`] the 4-byte form
/// `lock cmpxchg [rdi], esi` (`f0 0f b1 37`), each followed by `mov rdx, rax` (`48 89 c2`)
/// and `syscall` (`0f 05`), padded with `int3` (encodings from `llvm-mc-19 -show-encoding`).
const STUB: [u8; 32] = [
    0xf0, 0x48, 0x0f, 0xb1, 0x37, 0x48, 0x89, 0xc2, 0x0f, 0x05, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
    0xf0, 0x0f, 0xb1, 0x37, 0x48, 0x89, 0xc2, 0x0f, 0x05, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
];
const STUB_64: u64 = 0;
const STUB_32: u64 = 16;
/// Where each form's `syscall` leaves the instruction pointer.
const STUB_64_END: u64 = 10;
const STUB_32_END: u64 = 25;
/// The signals a thread running the stub keeps unblocked: the synchronous ones (blocking
/// them would make the kernel reset the program's handler when one is forced).
const SYNC_SIGNALS: u64 = (1 << (libc::SIGSEGV - 1))
    | (1 << (libc::SIGBUS - 1))
    | (1 << (libc::SIGTRAP - 1))
    | (1 << (libc::SIGILL - 1))
    | (1 << (libc::SIGFPE - 1));

/// `PTRACE_GETSIGMASK`, `PTRACE_SETSIGMASK` (Linux 3.11).
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

/// The blocked-signal mask of stopped tracee `tid`.
fn sigmask(tid: i32) -> Result<u64, Errno> {
    let mut mask = 0u64;
    // SAFETY: GETSIGMASK writes `addr` (8, the kernel's sigset_t) bytes to `data`, a u64.
    let ret = unsafe {
        libc::ptrace(
            PTRACE_GETSIGMASK,
            tid,
            size_of::<u64>() as *mut libc::c_void,
            (&raw mut mask).cast::<libc::c_void>(),
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(mask) }
}

/// Sets the blocked-signal mask of stopped tracee `tid`.
fn set_sigmask(tid: i32, mask: u64) -> Result<(), Errno> {
    let mut copy = mask;
    // SAFETY: SETSIGMASK reads `addr` (8) bytes from `data`, a u64.
    let ret = unsafe {
        libc::ptrace(
            PTRACE_SETSIGMASK,
            tid,
            size_of::<u64>() as *mut libc::c_void,
            (&raw mut copy).cast::<libc::c_void>(),
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

/// Writes [`STUB`] at `at` of stopped tracee `tid` (a private page it maps read-only:
/// `PTRACE_POKEDATA` writes through with `FOLL_FORCE`); whether it was written.
fn poke_stub(tid: i32, at: u64) -> bool {
    STUB.chunks_exact(8).enumerate().all(|(i, word)| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let word = u64::from_le_bytes(bytes);
        // SAFETY: POKEDATA writes one word of the tracee's memory; no memory of ours is
        // touched.
        unsafe {
            libc::ptrace(
                libc::PTRACE_POKEDATA,
                tid,
                (at + 8 * i as u64) as *mut libc::c_void,
                word as *mut libc::c_void,
            ) == 0
        }
    })
}

/// Where a thread running compare-and-swaps is.
#[derive(Debug, Clone, Copy)]
enum CasStage {
    /// Its injected `mmap` of the stub page runs.
    Map,
    /// The stub at `stub` runs request `id` of `size` bytes at `addr`.
    Op {
        id: u64,
        size: u8,
        addr: u64,
        stub: u64,
    },
}

/// A thread running its process's compare-and-swaps in place of its own code.
#[derive(Debug)]
struct CasRun {
    tgid: i32,
    /// Its registers and blocked-signal mask when it stopped.
    saved: libc::user_regs_struct,
    mask: u64,
    stage: CasStage,
    /// Signals that stopped it meanwhile, raised again when it runs on.
    held: Vec<i32>,
    /// When it stopped.
    started: std::time::Instant,
}

/// How long a thread that ran a compare-and-swap stays stopped for the next request of its
/// process ([`Wakeups::wait_cas_op`](super::wakeups::Wakeups::wait_cas_op)), and how long
/// it runs requests at most before it runs on (the tracer serves no other stop meanwhile).
const CAS_LINGER: std::time::Duration = std::time::Duration::from_millis(1);
const CAS_RUN: std::time::Duration = std::time::Duration::from_millis(20);

/// x86_64's 64-bit user code segment (`__USER_CS`): a thread running 64-bit code.
const USER_CS: u64 = 0x33;

/// The stub page's size.
const STUB_PAGE: u64 = 4096;

/// The registers `regs` of a thread stopped on its way out of a system call, with the
/// restart the kernel would have made after the stop (`arch_do_signal_or_restart` with no
/// handler to run): the tracer's own calls ran in between with no call number, so it makes
/// it here.
fn with_restart(mut regs: libc::user_regs_struct) -> libc::user_regs_struct {
    if (regs.orig_rax as i64) < 0 {
        return regs;
    }
    match regs.rax as i64 {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => regs.rax = regs.orig_rax,
        ERESTART_RESTARTBLOCK => regs.rax = libc::SYS_restart_syscall as u64,
        _ => return regs,
    }
    regs.rip = regs.rip.wrapping_sub(SYSCALL_INSN);
    regs.orig_rax = u64::MAX;
    regs
}

/// Whether tasks `a` and `b` share their memory (`kcmp(a, b, KCMP_VM)`); `None` when the
/// kernel cannot tell (no `CONFIG_KCMP`, a task gone).
fn kcmp_vm(a: i32, b: i32) -> Option<bool> {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp takes plain integers (KCMP_VM reads no pointer).
    let ret = unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0, 0) };
    (ret >= 0).then_some(ret == 0)
}

/// Whether task `pid` is gone or a zombie (`State:` Z or X of its `/proc` status).
fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .is_none_or(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("State:"))
                .is_some_and(|state| {
                    matches!(state.trim_start().as_bytes().first(), Some(b'Z' | b'X'))
                })
        })
}

/// The `clone` flags of a lent thread's helper (see the module docs): its memory and fd
/// table shared, its own process (no `CLONE_THREAD`: a debugger that attaches to every thread
/// of the program's process does not see it), no exit signal (a `wait` without `__WALL` or
/// `__WCLONE` does not see it either: `eligible_child`).
const HELPER_CLONE: u64 = (libc::CLONE_VM | libc::CLONE_FILES) as u64;

/// `regs` with the arguments of the `clone` that makes a helper (no new stack: the helper
/// runs no code of the program's, only system calls the tracer issues).
fn helper_clone(mut regs: libc::user_regs_struct) -> libc::user_regs_struct {
    [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9] = [HELPER_CLONE, 0, 0, 0, 0, 0];
    regs
}

/// Where a thread holding a redirect is (see [`super::mmap`]).
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Only the offset was rewritten (the fd marked direct): the program's registers come
    /// back at the exit stop.
    Offset,
    /// The call was made again as the marked one that installs the memfd; its exit stop finds
    /// the number the worker installed it at (or `-errno`).
    Install { offset: u64 },
    /// The `mmap` runs again with the installed fd `fd` (marked direct); its exit stop closes
    /// `fd`.
    Map { fd: u32 },
    /// `close(fds[0])`, then `close(fds[1])` up to `count`, run in place of the program's
    /// code; the last one's exit stop gives the program its registers back with `result`.
    Close {
        fds: [u32; 2],
        count: usize,
        done: usize,
        result: u64,
    },
    /// An SMI_EVENTS marked for the worker, who installs the new fd at the number the kernel
    /// picks; at its exit stop the fd is moved into [`SMI_FDS`].
    SmiOpen,
    /// `fcntl(fd, F_DUPFD, SMI_FDS.start)` runs in place of the program's code.
    SmiDup { fd: u32 },
}

/// A thread holding a redirect (or an `SMI_EVENTS`' fd move) between the stop it began at
/// (the interrupt or exit stop of its notified `mmap`, the seccomp stop of its ioctl) and
/// the end of its call.
#[derive(Debug, Clone, Copy)]
struct Hold {
    /// The registers at that stop, with the arguments as the program passed them.
    regs: libc::user_regs_struct,
    stage: Stage,
}

struct Tracer {
    backend: Arc<dyn Backend>,
    slots: Arc<Slots>,
    child: i32,
    exit: Arc<ChildExit>,
    /// tid → tgid, for every tracee seen in a seccomp stop.
    tgids: HashMap<i32, i32>,
    holds: HashMap<i32, Hold>,
    /// Per process, a `syscall` instruction (seen at a seccomp stop, or [`Tracer::insn_of`]).
    syscall_insn: HashMap<i32, u64>,
    /// Threads running a plan, and per process the one that does.
    injects: HashMap<i32, Inject>,
    injecting: HashMap<i32, i32>,
    /// Per process, threads stopped until its plan is run.
    parked: HashMap<i32, Vec<(i32, Why)>>,
    /// Processes woken whose plan has not been asked for since.
    dirty: HashSet<i32>,
    /// Per process, the spans its plans showed again, with the generation of their latest
    /// lift; the generation of the last lift (of any process).
    lifted: HashMap<i32, plan::Lifted>,
    lift_generation: u64,
    /// Processes with hidden memory (their own or a forked child's inherited copy): their
    /// threads run with `PTRACE_SYSCALL`, so that a system call given hidden memory stops
    /// at its entry ([`Tracer::buffer_call`]).
    watch: HashSet<i32>,
    /// Per thread, the lift generation when it last stopped where no page fault of its can be
    /// pending: a system-call or seccomp stop, or its last `SIGSEGV` (see [`plan::restart`]).
    ran: HashMap<i32, u64>,
    /// Per thread, how many times the exit fallback made its current call again.
    fault_retries: HashMap<i32, u32>,
    /// Per forked child, what its parent had hidden when it forked (the child's copy is
    /// hidden too).
    inherited: HashMap<i32, Vec<CpuProtect>>,
    /// Tracees a stop was seen of; new tracees a fork or clone event announced before their
    /// first stop; new tracees whose first stop came before that event (held until it).
    seen: HashSet<i32>,
    announced: HashSet<i32>,
    early: HashSet<i32>,
    /// Per process, its compare-and-swap stub page; processes none could be mapped into.
    stubs: HashMap<i32, u64>,
    no_stub: HashSet<i32>,
    /// Threads running compare-and-swaps.
    cas_runs: HashMap<i32, CasRun>,
    /// Tracees lent to a program's own tracer (see [`Tracer::ptrace_call`]): tracee → the
    /// thread that traces it now.
    lent: HashMap<i32, i32>,
    /// Threads whose `ptrace` call on a lent tracee is under way: thread → that tracee and
    /// whether the call attaches (taken back at the exit stop if it failed) or detaches
    /// (taken back if it succeeded).
    returning: HashMap<i32, (i32, bool)>,
    /// Whether the fallbacks of a lent tracee were logged (once per run).
    lent_logged: bool,
    /// Per thread, the redirected `mmap` it was interrupted for (answered `-ERESTARTNOINTR`,
    /// carried out at its interrupt stop: see [`super::mmap`]).
    awaiting: HashMap<i32, Request>,
    /// Helpers of lent threads (see the module docs): helper → lent thread, lent thread →
    /// helper, and the threads a helper was asked for (once each time they are lent).
    helpers: HashMap<i32, i32>,
    helper_of: HashMap<i32, i32>,
    helper_tried: HashSet<i32>,
}

/// Runs the tracer's loop on the calling thread (the one that seized `child`) until no tracee
/// is left.
pub(crate) fn run(backend: Arc<dyn Backend>, slots: Arc<Slots>, child: i32, exit: Arc<ChildExit>) {
    let mut tracer = Tracer {
        backend,
        slots,
        child,
        exit,
        tgids: HashMap::new(),
        holds: HashMap::new(),
        syscall_insn: HashMap::new(),
        injects: HashMap::new(),
        injecting: HashMap::new(),
        parked: HashMap::new(),
        dirty: HashSet::new(),
        lifted: HashMap::new(),
        lift_generation: 0,
        watch: HashSet::new(),
        ran: HashMap::new(),
        fault_retries: HashMap::new(),
        inherited: HashMap::new(),
        seen: HashSet::new(),
        announced: HashSet::new(),
        early: HashSet::new(),
        stubs: HashMap::new(),
        no_stub: HashSet::new(),
        cas_runs: HashMap::new(),
        lent: HashMap::new(),
        returning: HashMap::new(),
        lent_logged: false,
        awaiting: HashMap::new(),
        helpers: HashMap::new(),
        helper_of: HashMap::new(),
        helper_tried: HashSet::new(),
    };
    tracer.exit.tracing_on_this_thread();
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    tracer.slots.cpu.tracer_tid.store(tid, Ordering::Release);
    let waker: crate::backend::CpuWaker = tracer.slots.cpu.clone();
    tracer.backend.cpu_faults(Some(waker));
    tracer.run();
    tracer.backend.cpu_faults(None);
    tracer.slots.cpu.tracer_tid.store(0, Ordering::Release);
    tracer.slots.cpu.processed(u64::MAX);
    tracer.slots.cpu.cas_refuse(None, CasError::Unsupported);
    tracer.exit.tracer_tid.store(0, Ordering::Release);
    tracer.exit.resume_released();
    // Without a status (cannot happen once seized) the waiter falls back to waiting itself.
    tracer.exit.record(None);
}

/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3).
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
/// `PTRACE_SYSCALL_INFO_EXIT`: the `op` of a syscall-exit stop.
const SYSCALL_INFO_EXIT: u8 = 2;

/// The kind of syscall stop `tid` is in (`op` of `struct ptrace_syscall_info`).
fn syscall_stop_kind(tid: i32) -> Option<u8> {
    let mut info = [0u64; 12];
    // SAFETY: GET_SYSCALL_INFO writes at most `addr` (the buffer's size) bytes to `data`.
    let ret = unsafe {
        libc::ptrace(
            PTRACE_GET_SYSCALL_INFO,
            tid,
            size_of_val(&info) as *mut libc::c_void,
            info.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    (ret > 0).then(|| info[0].to_le_bytes()[0])
}

/// The word at `addr` of stopped tracee `tid` (`PTRACE_PEEKDATA`), `None` if unreadable.
fn peek_word(tid: i32, addr: u64) -> Option<u64> {
    // SAFETY: PEEKDATA reads the tracee's memory and returns the word; errno (cleared first)
    // tells an error from a word of -1. No memory of ours is touched but errno.
    unsafe {
        *libc::__errno_location() = 0;
        let word = libc::ptrace(
            libc::PTRACE_PEEKDATA,
            tid,
            addr as *mut libc::c_void,
            std::ptr::null_mut::<libc::c_void>(),
        );
        if word == -1 && *libc::__errno_location() != 0 {
            return None;
        }
        Some(word as u64)
    }
}

/// The `anon_fd` of the `struct kfd_ioctl_smi_events_args` (`gpuid`, then `anon_fd`: one
/// little-endian word) at `args` of stopped tracee `tid`.
fn anon_fd(tid: i32, args: u64) -> Option<u32> {
    peek_word(tid, args).map(|word| (word >> 32) as u32)
}

/// Sets the `anon_fd` of the `struct kfd_ioctl_smi_events_args` at `args` of stopped tracee
/// `tid` to `value` (a read-modify-write of the struct's word); whether it was written.
fn set_anon_fd(tid: i32, args: u64, value: u32) -> bool {
    let Some(word) = peek_word(tid, args) else {
        return false;
    };
    let addr = args;
    let new = (word & 0xffff_ffff) | (u64::from(value) << 32);
    // SAFETY: POKEDATA writes one word of the tracee's memory (the one just read, with only
    // the field at `addr` changed); no memory of ours is touched.
    unsafe {
        libc::ptrace(
            libc::PTRACE_POKEDATA,
            tid,
            addr as *mut libc::c_void,
            new as *mut libc::c_void,
        ) == 0
    }
}

/// The length of x86_64's `syscall` instruction (`0f 05`): moving the instruction pointer
/// back by it at a syscall-exit stop makes the thread issue a call again.
const SYSCALL_INSN: u64 = 2;

/// `PTRACE_SYSCALL_INFO_ENTRY`: the `op` of a syscall-entry stop.
const SYSCALL_INFO_ENTRY: u8 = 1;

/// `-EFAULT`: the result the exit fallback looks for.
const EFAULT: i64 = -14;

/// The arguments of the call of a thread at a syscall stop (`rdi`, `rsi`, `rdx`, `r10`, `r8`,
/// `r9`: the x86-64 system call convention).
fn args_of(regs: &libc::user_regs_struct) -> [u64; 6] {
    [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9]
}

/// The registers `saved` of a thread stopped at the entry of a system call, made to issue
/// the call again: the instruction pointer back on its `syscall`, the call number in `rax`,
/// and no call to restart.
fn again(mut saved: libc::user_regs_struct) -> libc::user_regs_struct {
    saved.rip = saved.rip.wrapping_sub(SYSCALL_INSN);
    saved.rax = saved.orig_rax;
    saved.orig_rax = u64::MAX;
    saved
}

impl Tracer {
    fn run(&mut self) {
        loop {
            self.take_wakeups();
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let tid =
                unsafe { libc::waitpid(-1, &raw mut status, libc::__WALL | libc::__WNOTHREAD) };
            if tid < 0 {
                if errno() == Errno::INTR {
                    self.exit.resume_released();
                    continue;
                }
                // ECHILD: no tracee is left.
                return;
            }
            self.handle(tid, status);
        }
    }

    /// What `waitpid` reported of `tid` (`status`).
    fn handle(&mut self, tid: i32, status: i32) {
        if self.helpers.contains_key(&tid) {
            return self.helper_status(tid, status);
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.gone(tid);
            if tid == self.child {
                self.exit.record(Some(ExitStatus::from_raw(status)));
            }
            return;
        }
        if !libc::WIFSTOPPED(status) {
            return;
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if self.seen.insert(tid)
            && event == libc::PTRACE_EVENT_STOP
            && tid != self.child
            && !self.announced.remove(&tid)
        {
            // A new tracee's first stop before the fork or clone event that made it:
            // it waits for that event (which says what it inherits).
            self.early.insert(tid);
            return;
        }
        if (event == 0 && sig == libc::SIGTRAP | 0x80) || event == libc::PTRACE_EVENT_SECCOMP {
            // A page fault's signal is dequeued before the thread returns to its code, so
            // none of its faults is pending here: a later fault came after this stop.
            self.ran.insert(tid, self.lift_generation);
        }
        match event {
            // A thread running compare-and-swaps: its stops are theirs.
            libc::PTRACE_EVENT_STOP if self.cas_runs.contains_key(&tid) => self.resume(tid, 0),
            0 if sig != libc::SIGTRAP | 0x80 && self.cas_runs.contains_key(&tid) => {
                self.cas_signal(tid, sig);
            }
            libc::PTRACE_EVENT_SECCOMP => self.seccomp_stop(tid),
            libc::PTRACE_EVENT_STOP => {
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) {
                    // A group-stop: stay stopped, but let the tracer see the SIGCONT.
                    let _ = ptrace_value(libc::PTRACE_LISTEN, tid, 0);
                } else {
                    self.interrupt_stop(tid);
                }
            }
            libc::PTRACE_EVENT_EXEC => {
                // The thread that exec'd now has the leader's id; the former one is gone.
                if let Ok(former) = event_msg(tid)
                    && former as i32 != tid
                {
                    self.gone(former as i32);
                }
                self.tgids.remove(&tid);
                if let Some(tgid) = self.tgid(tid) {
                    // A new address space: its instructions are elsewhere, nothing hidden,
                    // no stub.
                    self.syscall_insn.remove(&tgid);
                    let _ = self.slots.take_insn(tgid);
                    self.inherited.remove(&tgid);
                    self.lifted.remove(&tgid);
                    self.stubs.remove(&tgid);
                    self.no_stub.remove(&tgid);
                }
                self.resume(tid, 0);
            }
            libc::PTRACE_EVENT_EXIT if tid == self.child => {
                // Let the child's parent reap it (`Child::wait`), as `std` does when its
                // exec fails: detach it as it exits. (A child killed by a signal skips
                // this stop and is reaped above.)
                self.gone(tid);
                let _ = ptrace_value(libc::PTRACE_DETACH, tid, 0);
                self.exit.record(None);
            }
            0 if sig == libc::SIGTRAP | 0x80 => self.syscall_stop(tid),
            0 if sig == libc::SIGSEGV => self.segv(tid),
            // A signal-delivery stop: deliver it.
            0 => self.resume(tid, sig),
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                // (A vfork child shares its parent's memory: what is hidden stays the
                // parent's.)
                if event == libc::PTRACE_EVENT_FORK {
                    self.forked(tid);
                }
                if let Ok(new) = event_msg(tid) {
                    let new = new as i32;
                    if self.early.remove(&new) {
                        // Its first stop came first: it runs on now.
                        self.interrupt_stop(new);
                    } else {
                        self.announced.insert(new);
                    }
                }
                self.resume(tid, 0);
            }
            _ => self.resume(tid, 0),
        }
    }

    /// Resumes `tid`, through its syscall-exit stop while it holds a redirect.
    fn resume(&self, tid: i32, sig: i32) {
        let watched = self
            .tgids
            .get(&tid)
            .is_some_and(|tgid| self.watch.contains(tgid));
        let request = if let Some(run) = self.cas_runs.get(&tid) {
            match run.stage {
                CasStage::Map => libc::PTRACE_SYSCALL,
                CasStage::Op { .. } => libc::PTRACE_SYSEMU,
            }
        } else if watched || self.holds.contains_key(&tid) || self.injects.contains_key(&tid) {
            libc::PTRACE_SYSCALL
        } else {
            libc::PTRACE_CONT
        };
        // ESRCH: killed meanwhile; its exit is reported next.
        let _ = ptrace_value(request, tid, sig as usize);
    }

    fn tgid(&mut self, tid: i32) -> Option<i32> {
        if let Some(&tgid) = self.tgids.get(&tid) {
            return Some(tgid);
        }
        let tgid = tgid_from_proc(tid)?;
        self.tgids.insert(tid, tgid);
        Some(tgid)
    }

    /// A `syscall` instruction of process `tgid`: the one a seccomp stop was made after, or
    /// the one a worker saw a notified call made at (checked in stopped thread `tid`'s
    /// memory: `0f 05`).
    fn insn_of(&mut self, tgid: i32, tid: i32) -> Option<u64> {
        if let Some(&insn) = self.syscall_insn.get(&tgid) {
            return Some(insn);
        }
        let at = self.slots.take_insn(tgid)?;
        if peek_word(tid, at).is_none_or(|w| w & 0xffff != 0x050f) {
            return None;
        }
        self.syscall_insn.insert(tgid, at);
        Some(at)
    }

    /// Thread `tid` ended (or became another id at an exec).
    fn gone(&mut self, tid: i32) {
        self.returning.remove(&tid);
        self.lent.remove(&tid);
        self.end_helper(tid);
        self.helper_tried.remove(&tid);
        // Its tracees were detached when it exited (`exit_ptrace`): taken back.
        let freed: Vec<i32> = self
            .lent
            .iter()
            .filter(|&(_, &tracer)| tracer == tid)
            .map(|(&tracee, _)| tracee)
            .collect();
        for tracee in freed {
            self.take_back(tracee);
        }
        self.forget(tid);
    }

    /// Drops what the tracer knows of thread `tid` (gone, or lent to another tracer).
    fn forget(&mut self, tid: i32) {
        self.tgids.remove(&tid);
        self.inherited.remove(&tid);
        self.seen.remove(&tid);
        self.announced.remove(&tid);
        self.early.remove(&tid);
        self.slots.forget(tid);
        self.holds.remove(&tid);
        self.awaiting.remove(&tid);
        self.ran.remove(&tid);
        self.fault_retries.remove(&tid);
        self.slots.cpu.set_injected(tid, false);
        for parked in self.parked.values_mut() {
            parked.retain(|&(t, _)| t != tid);
        }
        if let Some(run) = self.cas_runs.remove(&tid) {
            if let CasStage::Op { id, .. } = run.stage {
                self.slots.cpu.cas_answer(id, Err(CasError::NoThread));
            }
            if !self.tgids.values().any(|&g| g == run.tgid) {
                // Its process is gone: no thread will take the rest.
                self.slots
                    .cpu
                    .cas_refuse(Some(run.tgid), CasError::NoThread);
            }
        }
        if let Some(inject) = self.injects.remove(&tid) {
            let mut failed = inject.failed;
            failed.extend(inject.current);
            failed.extend(inject.ops);
            self.backend.cpu_protect_done(inject.tgid, &failed);
            self.injecting.remove(&inject.tgid);
            self.release_parked(inject.tgid);
        }
    }

    /// A large anonymous `mmap` stopped `tid` (the filter's, see
    /// [`Filter::kfd_traced`](super::seccomp::Filter::kfd_traced)): it gets `MAP_NORESERVE`
    /// when the host would refuse it for its size and the machine would not
    /// ([`overcommit::noreserve`]); it runs either way.
    fn anon_mmap(&mut self, tid: i32, mut regs: libc::user_regs_struct) {
        if let Some(ram) = self.backend.system_memory()
            && overcommit::noreserve(regs.rsi, regs.rdx, regs.r10, Commit::of_host(ram))
        {
            regs.r10 |= libc::MAP_NORESERVE as u64;
            let _ = set_regs(tid, &regs);
        }
        self.resume(tid, 0)
    }

    /// A `SECCOMP_RET_TRACE` stop of `tid`: a program's `ptrace` that makes or ends a tracer,
    /// a `clone` with `CLONE_UNTRACED`, an `SMI_EVENTS` (or one a program's own filter asked
    /// for).
    fn seccomp_stop(&mut self, tid: i32) {
        let Ok(mut regs) = get_regs(tid) else {
            return self.resume(tid, 0);
        };
        if let Some(tgid) = self.tgid(tid)
            && !self.syscall_insn.contains_key(&tgid)
        {
            // The instruction the thread stopped after: `syscall` (`0f 05`).
            let at = regs.rip.wrapping_sub(SYSCALL_INSN);
            if peek_word(tid, at).is_some_and(|w| w & 0xffff == 0x050f) {
                self.syscall_insn.insert(tgid, at);
            }
        }
        if self.injects.contains_key(&tid) || self.cas_runs.contains_key(&tid) {
            return self.resume(tid, 0);
        }
        if self.holds.contains_key(&tid) {
            // A call the tracer made the thread issue (the re-executed mmap, the close, the
            // F_DUPFD) stopped here: it runs, whichever filter asked for the stop (a
            // program's own filter may trace close or fcntl; the program never issued this
            // one). Any other call here is one a signal handler made first, which runs
            // natively (not redirected: a documented limit). Either way the thread goes on
            // through its syscall stops, which the held call still needs (the exit of a
            // handler's call is told apart there and passed over).
            return self.resume(tid, 0);
        }
        if event_msg(tid).ok() != Some(u64::from(TRACE_DATA)) {
            // A program's own filter asked for a tracer: none is attached as far as the
            // program knows, and then the kernel fails the call with ENOSYS
            // (`__seccomp_filter`, `SECCOMP_RET_TRACE` without a tracer).
            return self.fail(tid, regs, Errno::NOSYS);
        }
        match regs.orig_rax as i64 {
            libc::SYS_mmap if regs.r10 & libc::MAP_ANONYMOUS as u64 != 0 => {
                self.anon_mmap(tid, regs)
            }
            libc::SYS_ptrace => self.ptrace_call(tid, regs),
            libc::SYS_clone => {
                // CLONE_UNTRACED would leave the child with a filter that sends its file
                // mmaps to a tracer it does not have: it is traced like any other child.
                regs.rdi &= !(libc::CLONE_UNTRACED as u64);
                let _ = set_regs(tid, &regs);
                self.resume(tid, 0)
            }
            libc::SYS_ioctl if regs.rsi as u32 == SMI_EVENTS_CMD => {
                let hold = Hold {
                    regs,
                    stage: Stage::SmiOpen,
                };
                regs.rsi = (u64::from(SLOT_MARKER) << 32) | u64::from(SMI_EVENTS_CMD);
                if set_regs(tid, &regs).is_ok() {
                    self.holds.insert(tid, hold);
                }
                self.resume(tid, 0)
            }
            _ => self.resume(tid, 0),
        }
    }

    /// A redirected file `mmap` a worker received (see [`super::mmap`]): carried out by the
    /// thread itself from an interrupt stop, or, for a thread lent to the program's own
    /// tracer, by its helper; the notification is answered here.
    fn mmap_request(&mut self, r: Request) {
        let tid = r.tid;
        if self.holds.contains_key(&tid) {
            // A signal handler's mmap while the thread's own redirect is under way: it runs
            // natively (redirects do not nest: see `super::mmap`).
            let _ = r.listener.respond_continue(r.id);
            return;
        }
        if self.lent.contains_key(&tid) {
            let helper = self.helper_of.get(&tid).copied();
            return self.helper_mmap(r, helper);
        }
        if ptrace_value(libc::PTRACE_INTERRUPT, tid, 0).is_err() {
            // Not a tracee of this thread (nor lent): a thread a lent one made, which its
            // tracer did not trace, is served by a helper in its address space if there is
            // one; else no tracer could change the call, the kernel's answer to a
            // SECCOMP_RET_TRACE without one.
            let helper = self
                .helper_of
                .values()
                .copied()
                .find(|&h| kcmp_vm(tid, h) == Some(true));
            return self.helper_mmap(r, helper);
        }
        // The interrupt is pending (`TIF_SIGPENDING`; the thread waits killable, so it is not
        // woken by it) before the answer: on its way out of the call the thread stops for it
        // (`arch_do_signal_or_restart` → `get_signal` → `do_jobctl_trap`), or at the call's
        // exit stop if it runs with `PTRACE_SYSCALL` (a ptrace stop satisfies a pending
        // interrupt), where `redirect_at_stop` has it issue the call again its way.
        let _ = r
            .listener
            .respond_error(r.id, Errno::from_raw_os_error(-ERESTARTNOINTR as i32));
        // Kept even if the answer failed: a call interrupted first (a kernel without
        // WAIT_KILLABLE_RECV) stops with `-ERESTARTSYS` and is restarted the same way.
        self.awaiting.insert(tid, r);
    }

    /// At `tid`'s interrupt stop or syscall-exit stop, the redirected `mmap` it was
    /// interrupted for: the call made again (instruction pointer back over its `syscall`, no
    /// restart left for the kernel to make: at an interrupt stop it would make one itself,
    /// `-ERESTARTNOINTR`'s `regs->ax = regs->orig_ax; regs->ip -= 2`, but a stop of another
    /// kind may have satisfied the interrupt) with the arguments that carry the redirect out
    /// (see [`super::mmap`]). False when it has none, or the stop is not in that call (it
    /// was answered otherwise meanwhile, or killed).
    fn redirect_at_stop(&mut self, tid: i32) -> bool {
        let Some(r) = self.awaiting.remove(&tid) else {
            return false;
        };
        let Ok(regs) = get_regs(tid) else {
            return false;
        };
        let result = regs.rax as i64;
        if regs.orig_rax != libc::SYS_mmap as u64
            || !(result == ERESTARTNOINTR || result == ERESTARTSYS)
            || args_of(&regs) != r.args
        {
            return false;
        }
        let mut next = again(regs);
        let stage = if r.same {
            // Only the offset changes: the program's own fd, allowed by the filter.
            next.r8 = (regs.r8 & 0xffff_ffff) | (u64::from(DIRECT_MARKER) << 32);
            next.r9 = r.offset;
            Stage::Offset
        } else {
            self.slots.prepare(
                tid,
                Pending {
                    tgid: r.tgid,
                    fd: r.fd,
                },
            );
            next.r8 = u64::from(SLOT_MARKER) << 32;
            Stage::Install { offset: r.offset }
        };
        if set_regs(tid, &next).is_err() {
            // Killed meanwhile: its exit is reported next.
            self.slots.forget(tid);
            return true;
        }
        self.holds.insert(tid, Hold { regs, stage });
        // Through its syscall stops (it holds a redirect).
        self.resume(tid, 0);
        true
    }

    /// Skips the call with `-errno` as its result (ptrace(2): syscall number -1).
    fn fail(&self, tid: i32, mut regs: libc::user_regs_struct, errno: Errno) {
        regs.orig_rax = u64::MAX;
        regs.rax = (-i64::from(errno.raw_os_error())) as u64;
        let _ = set_regs(tid, &regs);
        self.resume(tid, 0);
    }

    /// A syscall stop of `tid`, which holds a redirect: the next step of it (see
    /// [`super::mmap`]).
    fn syscall_stop(&mut self, tid: i32) {
        if self.cas_runs.contains_key(&tid) {
            return self.cas_syscall(tid);
        }
        if self.injects.contains_key(&tid) {
            return self.inject_step(tid);
        }
        if self.returning.contains_key(&tid) {
            return self.detach_done(tid);
        }
        let kind = syscall_stop_kind(tid);
        if kind == Some(SYSCALL_INFO_EXIT)
            && self.awaiting.contains_key(&tid)
            && self.redirect_at_stop(tid)
        {
            return;
        }
        let Some(hold) = self.holds.get(&tid).copied() else {
            return self.buffer_call(tid);
        };
        let Ok(regs) = get_regs(tid) else {
            return self.resume(tid, 0);
        };
        if kind != Some(SYSCALL_INFO_EXIT) {
            // The entry of the injected close (or of a call a signal handler makes first).
            return self.resume(tid, 0);
        }
        let again = |mut regs: libc::user_regs_struct, nr: i64| {
            regs.rip = hold.regs.rip.wrapping_sub(SYSCALL_INSN);
            regs.rax = nr as u64;
            // No restart logic applies to the call being replaced.
            regs.orig_rax = u64::MAX;
            regs
        };
        let ours = match hold.stage {
            Stage::Offset | Stage::Install { .. } => regs.orig_rax == libc::SYS_mmap as u64,
            Stage::Map { fd } => regs.orig_rax == libc::SYS_mmap as u64 && regs.r8 as u32 == fd,
            Stage::Close { fds, done, .. } => {
                regs.orig_rax == libc::SYS_close as u64 && regs.rdi == u64::from(fds[done])
            }
            Stage::SmiOpen => regs.orig_rax == libc::SYS_ioctl as u64,
            Stage::SmiDup { fd } => {
                regs.orig_rax == libc::SYS_fcntl as u64 && regs.rdi == u64::from(fd)
            }
        };
        if !ours {
            // A call a signal handler made before the one held goes on.
            return self.resume(tid, 0);
        }
        match hold.stage {
            Stage::Offset => self.finish(tid, hold.regs, regs.rax),
            Stage::Install { offset } => {
                self.slots.forget(tid);
                if (regs.rax as i64) < 0 {
                    // Not installed: the mmap fails with the worker's errno.
                    return self.finish(tid, hold.regs, regs.rax);
                }
                let fd = regs.rax as u32;
                let mut next = again(hold.regs, libc::SYS_mmap);
                // Allowed by the filter as it is (no notification).
                next.r8 = u64::from(fd) | (u64::from(DIRECT_MARKER) << 32);
                next.r9 = offset;
                if set_regs(tid, &next).is_err() {
                    return;
                }
                self.holds.insert(
                    tid,
                    Hold {
                        regs: hold.regs,
                        stage: Stage::Map { fd },
                    },
                );
                self.resume(tid, 0);
            }
            Stage::Map { fd } => {
                let stage = Stage::Close {
                    fds: [fd, 0],
                    count: 1,
                    done: 0,
                    result: regs.rax,
                };
                self.close_next(tid, hold.regs, regs, stage);
            }
            Stage::Close {
                fds,
                count,
                done,
                result,
            } => {
                if done + 1 >= count {
                    return self.finish(tid, hold.regs, result);
                }
                let stage = Stage::Close {
                    fds,
                    count,
                    done: done + 1,
                    result,
                };
                self.close_next(tid, hold.regs, regs, stage);
            }
            Stage::SmiOpen => {
                // The number the worker installed the fd at, in the argument's `anon_fd`.
                let args = hold.regs.rdx;
                let installed = (regs.rax == 0).then(|| anon_fd(tid, args)).flatten();
                let Some(fd) = installed.filter(|fd| !SMI_FDS.contains(fd)) else {
                    return self.finish(tid, hold.regs, regs.rax);
                };
                let mut next = again(regs, libc::SYS_fcntl);
                next.rdi = u64::from(fd);
                next.rsi = libc::F_DUPFD as u64;
                next.rdx = u64::from(SMI_FDS.start);
                if set_regs(tid, &next).is_err() {
                    return;
                }
                self.holds.insert(
                    tid,
                    Hold {
                        regs: hold.regs,
                        stage: Stage::SmiDup { fd },
                    },
                );
                self.resume(tid, 0);
            }
            Stage::SmiDup { fd } => {
                let moved = regs.rax as i64;
                let placed = u32::try_from(moved)
                    .ok()
                    .filter(|n| SMI_FDS.contains(n))
                    .filter(|&n| set_anon_fd(tid, hold.regs.rdx, n));
                let stage = match placed {
                    Some(_) => Stage::Close {
                        fds: [fd, 0],
                        count: 1,
                        done: 0,
                        result: 0,
                    },
                    // No free number in SMI_FDS below the limit: SMI_EVENTS fails with
                    // EMFILE as documented (`smi`), and neither fd stays.
                    None => Stage::Close {
                        fds: [fd, u32::try_from(moved).unwrap_or(0)],
                        count: if moved >= 0 { 2 } else { 1 },
                        done: 0,
                        result: (-i64::from(libc::EMFILE)) as u64,
                    },
                };
                self.close_next(tid, hold.regs, regs, stage);
            }
        }
    }

    /// Makes `tid` (at a syscall-exit stop with `regs`) issue the next `close` of `stage`.
    fn close_next(
        &mut self,
        tid: i32,
        original: libc::user_regs_struct,
        regs: libc::user_regs_struct,
        stage: Stage,
    ) {
        let Stage::Close { fds, done, .. } = stage else {
            return self.resume(tid, 0);
        };
        let mut next = regs;
        next.rip = original.rip.wrapping_sub(SYSCALL_INSN);
        next.rax = libc::SYS_close as u64;
        next.orig_rax = u64::MAX;
        next.rdi = u64::from(fds[done]);
        if set_regs(tid, &next).is_err() {
            return;
        }
        self.holds.insert(
            tid,
            Hold {
                regs: original,
                stage,
            },
        );
        self.resume(tid, 0);
    }

    /// Gives `tid` the registers it made its call with, and `result` as the call's result.
    fn finish(&mut self, tid: i32, mut regs: libc::user_regs_struct, result: u64) {
        self.holds.remove(&tid);
        self.slots.forget(tid);
        regs.rax = result;
        let _ = set_regs(tid, &regs);
        match self.tgid(tid) {
            // A wakeup came while it held the redirect: it runs the plan now.
            Some(tgid) if self.dirty.contains(&tgid) => self.start(tid, tgid, Why::Interrupt),
            _ => self.resume(tid, 0),
        }
    }
}

// A program's own ptrace (see the module docs).
impl Tracer {
    /// `tid` stopped at its `ptrace(request, pid, ...)` (registers `regs`), one that makes a
    /// tracer or ends one. Linux lets a thread have one tracer (`ptrace_attach`: `EPERM` when
    /// `task->ptrace` is set; `ptrace_traceme`: the same of the caller), and `kfd-emu run`
    /// traces every thread of the program; so before the call runs, the thread it would
    /// trace is lent: the tracer detaches it, and the kernel then performs the call as it
    /// would without `kfd-emu` (its permission checks, `__ptrace_may_access` and Yama's if
    /// configured, included). When the program's tracer detaches it again (`PTRACE_DETACH`,
    /// or the exit of the tracing thread, `exit_ptrace`), the tracer seizes it back.
    fn ptrace_call(&mut self, tid: i32, regs: libc::user_regs_struct) {
        // The kernel's `long request` and `pid_t pid` (kernel/ptrace.c, `SYSCALL_DEFINE4(ptrace`).
        let request = regs.rdi as i64;
        let pid = regs.rsi as i32;
        match request {
            r if r == i64::from(libc::PTRACE_TRACEME) => {
                if self.helper_tried.insert(tid) && self.helper_at_entry(tid, regs) {
                    // The call is made again once the helper is there: its next stop lends.
                    return;
                }
                // The caller itself gets its parent as tracer: detached at this stop, its
                // call runs natively (seccomp lets a call run after a tracer's stop without
                // asking the filter's `SECCOMP_RET_TRACE` again, `__seccomp_filter`).
                let parent = super::serve::ppid_from_proc(tid).unwrap_or(0);
                self.note_lent();
                self.forget(tid);
                self.lent.insert(tid, parent);
                // ESRCH: killed meanwhile.
                let _ = ptrace_value(libc::PTRACE_DETACH, tid, 0);
            }
            r if r == i64::from(libc::PTRACE_ATTACH) || r == i64::from(libc::PTRACE_SEIZE) => {
                // A thread of its own process stays the tracer's: the kernel refuses it
                // (`ptrace_attach`: `same_thread_group`, EPERM).
                let own = self
                    .tgid(tid)
                    .is_some_and(|g| tgid_from_proc(pid) == Some(g));
                if !own && self.lend(pid) {
                    self.lent.insert(pid, tid);
                    // Taken back at the call's exit stop if the kernel refuses it.
                    self.returning.insert(tid, (pid, true));
                    let _ = ptrace_value(libc::PTRACE_SYSCALL, tid, 0);
                    return;
                }
                self.resume(tid, 0);
            }
            r if r == i64::from(libc::PTRACE_DETACH) && self.lent.get(&pid) == Some(&tid) => {
                // Taken back at the call's exit stop, once the kernel has detached it.
                self.returning.insert(tid, (pid, false));
                let _ = ptrace_value(libc::PTRACE_SYSCALL, tid, 0);
            }
            _ => self.resume(tid, 0),
        }
    }

    /// Detaches tracee `pid` (a thread) so that another thread can trace it; false when it is
    /// none of the tracer's. A thread stopped already (parked, or its first stop held) is
    /// detached there; any other is interrupted, and the stops it reports before the
    /// interrupt's are handled as usual (a redirect or a plan it is in runs to its end).
    fn lend(&mut self, pid: i32) -> bool {
        let parked = self.parked.values().flatten().any(|&(t, _)| t == pid);
        if (parked || self.early.contains(&pid)) && !self.cas_runs.contains_key(&pid) {
            self.note_lent();
            self.forget(pid);
            let _ = ptrace_value(libc::PTRACE_DETACH, pid, 0);
            return true;
        }
        if ptrace_value(libc::PTRACE_INTERRUPT, pid, 0).is_err() {
            // ESRCH: not traced by this thread (or gone); the kernel answers the call.
            return false;
        }
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let got = unsafe { libc::waitpid(pid, &raw mut status, libc::__WALL) };
            if got < 0 {
                if errno() == Errno::INTR {
                    continue;
                }
                return false;
            }
            let busy = self.holds.contains_key(&pid)
                || self.injects.contains_key(&pid)
                || self.cas_runs.contains_key(&pid);
            let event = (status >> 16) & 0xff;
            let sig = libc::WSTOPSIG(status);
            if libc::WIFSTOPPED(status) && !busy && self.seen.contains(&pid) {
                // The interrupt's stop, a group-stop (it stays stopped, as Linux leaves a
                // stopped thread that is detached) or a signal about to be delivered (it is,
                // by the detach).
                let deliver = match event {
                    libc::PTRACE_EVENT_STOP => Some(0),
                    0 if sig != libc::SIGTRAP | 0x80 && sig != libc::SIGSEGV => Some(sig),
                    _ => None,
                };
                if event == libc::PTRACE_EVENT_STOP
                    && sig == libc::SIGTRAP
                    && self.helper_tried.insert(pid)
                {
                    // The interrupt's own stop (no group-stop): its helper first.
                    self.helper_at_stop(pid);
                }
                if let Some(deliver) = deliver {
                    self.note_lent();
                    self.forget(pid);
                    let _ = ptrace_value(libc::PTRACE_DETACH, pid, deliver as usize);
                    return true;
                }
            }
            self.handle(pid, status);
            if !libc::WIFSTOPPED(status) {
                // It ended: the kernel answers the call (ESRCH).
                return false;
            }
            // The handler may have taken the interrupt's stop, or the stop it handled (a
            // syscall stop of a redirect, a plan or a compare-and-swap run) may have spent
            // the pending interrupt: ask again (a second pending interrupt is one stop).
            let _ = ptrace_value(libc::PTRACE_INTERRUPT, pid, 0);
        }
    }

    /// The exit stop of `tid`'s `ptrace` call on a lent tracee: taken back if an attach
    /// failed or a detach succeeded.
    fn detach_done(&mut self, tid: i32) {
        let kind = syscall_stop_kind(tid);
        let Ok(regs) = get_regs(tid) else {
            return;
        };
        if kind != Some(SYSCALL_INFO_EXIT) || regs.orig_rax != libc::SYS_ptrace as u64 {
            // Its entry (or a signal handler's call first).
            let _ = ptrace_value(libc::PTRACE_SYSCALL, tid, 0);
            return;
        }
        if let Some((pid, attach)) = self.returning.remove(&tid)
            && attach == (regs.rax != 0)
        {
            self.take_back(pid);
        }
        self.resume(tid, 0);
    }

    /// Seizes lent tracee `pid` again (it has no tracer now).
    fn take_back(&mut self, pid: i32) {
        self.lent.remove(&pid);
        self.end_helper(pid);
        self.helper_tried.remove(&pid);
        match seize(pid) {
            Ok(()) => {
                // Its next stop is no new thread's first.
                self.seen.insert(pid);
            }
            // ESRCH: it ended meanwhile.
            Err(Errno::SRCH) => {}
            // EPERM: it is exiting (`ptrace_attach` refuses a task with an `exit_state`).
            Err(Errno::PERM) if exited(pid) => {}
            Err(e) => crate::own::elog!(
                "kfd-emu: cannot trace {pid} again after its own tracer detached it ({e}): its redirected file mmaps now fail with ENOSYS"
            ),
        }
    }

    /// Makes thread `tid`, stopped at the seccomp stop of its `PTRACE_TRACEME` (registers
    /// `saved`), create its helper (the call made a `clone`, see [`Tracer::new_helper`]),
    /// then issue its `ptrace` call again. False when nothing was changed (the call goes on).
    fn helper_at_entry(&mut self, tid: i32, saved: libc::user_regs_struct) -> bool {
        // The call becomes the clone: the kernel runs the call number the tracer leaves at a
        // seccomp stop (after checking it against the filters again: `__seccomp_filter`).
        let mut regs = helper_clone(saved);
        regs.rip = saved.rip;
        regs.orig_rax = libc::SYS_clone as u64;
        if set_regs(tid, &regs).is_err() {
            return false;
        }
        let helper = self.new_helper(tid);
        let mut again = again(saved);
        again.rax = libc::SYS_ptrace as u64;
        if let Some(tgid) = self.tgid(tid) {
            // The instruction the helper's calls are made at.
            self.syscall_insn
                .entry(tgid)
                .or_insert(saved.rip.wrapping_sub(SYSCALL_INSN));
        }
        let _ = (helper, set_regs(tid, &again));
        // Its seccomp stop comes next.
        let _ = ptrace_value(libc::PTRACE_CONT, tid, 0);
        true
    }

    /// Makes thread `pid`, at an interrupt stop, create its helper, then gives it its
    /// registers back with the restart the kernel would have made.
    fn helper_at_stop(&mut self, pid: i32) {
        let Some(tgid) = self.tgid(pid) else {
            return;
        };
        let Some(insn) = self.insn_of(tgid, pid) else {
            return;
        };
        let Ok(saved) = get_regs(pid) else {
            return;
        };
        let mut regs = helper_clone(saved);
        regs.rip = insn;
        regs.rax = libc::SYS_clone as u64;
        // No restart logic applies to it (the thread's own call is restarted below).
        regs.orig_rax = u64::MAX;
        if set_regs(pid, &regs).is_err() {
            return;
        }
        let _ = self.new_helper(pid);
        let _ = set_regs(pid, &with_restart(saved));
    }

    /// Runs thread `tid`, whose registers make it `clone` its helper, to that call's exit
    /// stop, and readies the helper: stopped at its first stop, every signal it can block
    /// blocked (`PTRACE_SETSIGMASK`: a signal to its process group stays pending), killed
    /// when `tid` ends (`PR_SET_PDEATHSIG`). The helper's id, or `None` (then none is left).
    fn new_helper(&mut self, tid: i32) -> Option<i32> {
        let mut helper = None;
        let mut swallowed = None;
        let mut request = libc::PTRACE_SYSCALL;
        loop {
            if ptrace_value(request, tid, 0).is_err() {
                break;
            }
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let got = unsafe { libc::waitpid(tid, &raw mut status, libc::__WALL) };
            if got < 0 {
                if errno() == Errno::INTR {
                    request = libc::PTRACE_SYSCALL;
                    continue;
                }
                break;
            }
            if !libc::WIFSTOPPED(status) {
                self.handle(tid, status);
                break;
            }
            let event = (status >> 16) & 0xff;
            let sig = libc::WSTOPSIG(status);
            request = libc::PTRACE_SYSCALL;
            if event == libc::PTRACE_EVENT_CLONE {
                helper = event_msg(tid).ok().map(|h| h as i32);
            } else if event == 0 && sig == libc::SIGTRAP | 0x80 {
                if syscall_stop_kind(tid) == Some(SYSCALL_INFO_EXIT) {
                    break;
                }
            } else if event == 0 {
                // A signal meanwhile: not delivered into the injected call, raised again
                // once the thread has its own registers back.
                swallowed = Some(sig);
            }
            // Anything else (its entry stop, a pending interrupt's stop) goes on.
        }
        if let (Some(sig), Some(tgid)) = (swallowed, self.tgid(tid)) {
            // SAFETY: tgkill takes plain integers.
            unsafe {
                libc::syscall(libc::SYS_tgkill, tgid, tid, sig);
            }
        }
        let helper = helper?;
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let got = unsafe { libc::waitpid(helper, &raw mut status, libc::__WALL) };
            if got < 0 && errno() == Errno::INTR {
                continue;
            }
            if got < 0 || !libc::WIFSTOPPED(status) {
                return None;
            }
            break;
        }
        self.seen.insert(helper);
        self.helpers.insert(helper, tid);
        self.helper_of.insert(tid, helper);
        let ok = set_sigmask(helper, u64::MAX).is_ok()
            && self.helper_call(
                helper,
                libc::SYS_prctl,
                [
                    libc::PR_SET_PDEATHSIG as u64,
                    libc::SIGKILL as u64,
                    0,
                    0,
                    0,
                    0,
                ],
            ) == Ok(0);
        if !ok {
            self.end_helper(tid);
            return None;
        }
        Some(helper)
    }

    /// Makes helper `helper` (stopped) issue system call `nr` with `args` at its process's
    /// `syscall` instruction and returns its result; the helper stays stopped at the call's
    /// exit.
    fn helper_call(&mut self, helper: i32, nr: i64, args: [u64; 6]) -> Result<i64, Errno> {
        let tid = self.helpers.get(&helper).copied().ok_or(Errno::SRCH)?;
        let tgid = self.tgid(tid).ok_or(Errno::SRCH)?;
        let insn = match self.syscall_insn.get(&tgid) {
            Some(&insn) => insn,
            None => self.insn_of(tgid, helper).ok_or(Errno::NOSYS)?,
        };
        let mut regs = get_regs(helper)?;
        regs.rip = insn;
        regs.rax = nr as u64;
        regs.orig_rax = u64::MAX;
        [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9] = args;
        set_regs(helper, &regs)?;
        ptrace_value(libc::PTRACE_SYSCALL, helper, 0)?;
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let got = unsafe { libc::waitpid(helper, &raw mut status, libc::__WALL) };
            if got < 0 {
                if errno() == Errno::INTR {
                    continue;
                }
                return Err(Errno::SRCH);
            }
            if !libc::WIFSTOPPED(status) {
                self.helper_status(helper, status);
                return Err(Errno::SRCH);
            }
            if libc::WSTOPSIG(status) == libc::SIGTRAP | 0x80
                && syscall_stop_kind(helper) == Some(SYSCALL_INFO_EXIT)
            {
                return Ok(get_regs(helper)?.rax as i64);
            }
            // Its entry stop; any other stop (a stopping signal, which it cannot block) is
            // passed over: the helper runs no code of the program's.
            ptrace_value(libc::PTRACE_SYSCALL, helper, 0)?;
        }
    }

    /// A redirected `mmap` of thread `r.tid`, which the tracer cannot stop (lent, or made by
    /// a lent thread and traced by nobody), made by `helper` (one sharing its memory): the
    /// memfd installed in the thread's fd table (which the helper shares) at a number the
    /// kernel picks, mapped at the backend's offset with the caller's arguments, and closed;
    /// the call answered with the helper's result.
    fn helper_mmap(&mut self, r: Request, helper: Option<i32>) {
        let Some(helper) = helper.filter(|&h| kcmp_vm(r.tid, h) != Some(false)) else {
            // No helper (or one left on the address space the thread had before an exec):
            // what the kernel answers a SECCOMP_RET_TRACE of a thread whose tracer asked
            // for no seccomp stops.
            self.end_helper(r.tid);
            let _ = r.listener.respond_error(r.id, Errno::NOSYS);
            return;
        };
        let number = if r.same {
            r.args[4] as u32
        } else {
            let install = || r.listener.add_fd(r.id, r.fd.as_fd(), true, false);
            let installed = match install() {
                Err(Errno::MFILE) => file_mmap::with_one_more_fd(r.tgid, install),
                other => other,
            };
            match installed {
                Ok(number) => number as u32,
                Err(errno) => {
                    let _ = r.listener.respond_error(r.id, errno);
                    return;
                }
            }
        };
        let mut args = r.args;
        args[4] = u64::from(number) | (u64::from(DIRECT_MARKER) << 32);
        args[5] = r.offset;
        let result = self.helper_call(helper, libc::SYS_mmap, args);
        if !r.same {
            let _ = self.helper_call(helper, libc::SYS_close, [u64::from(number), 0, 0, 0, 0, 0]);
        }
        let _ = match result {
            Ok(value) if value < 0 => r
                .listener
                .respond_error(r.id, Errno::from_raw_os_error(-value as i32)),
            Ok(address) => r.listener.respond_value(r.id, address),
            Err(_) => r.listener.respond_error(r.id, Errno::NOSYS),
        };
    }

    /// A `waitpid` status of helper `helper`: gone, or a stop, where it stays.
    fn helper_status(&mut self, helper: i32, status: i32) {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            if let Some(tid) = self.helpers.remove(&helper)
                && self.helper_of.get(&tid) == Some(&helper)
            {
                self.helper_of.remove(&tid);
            }
            self.seen.remove(&helper);
        }
    }

    /// Kills the helper of thread `tid`, if it has one (its exit is reaped as a helper's).
    fn end_helper(&mut self, tid: i32) {
        if let Some(helper) = self.helper_of.remove(&tid) {
            // SAFETY: kill takes plain integers; `helper` is a traced process of ours that
            // has not been reaped (its id is not reused before that).
            unsafe {
                libc::kill(helper, libc::SIGKILL);
            }
        }
    }

    /// Says once what a lent tracee lacks.
    fn note_lent(&mut self) {
        if !self.lent_logged {
            self.lent_logged = true;
            crate::own::elog!(
                "kfd-emu: a thread is lent to the program's own tracer: until it is detached, CPU faults on memory in VRAM are not handled for it"
            );
        }
    }
}

// CPU faults on hidden memory (see the module docs).
impl Tracer {
    /// Thread `tid` forked a child: what its process had hidden is hidden in the child's copy
    /// too, and the child runs the same code.
    fn forked(&mut self, tid: i32) {
        let (Ok(child), Some(tgid)) = (event_msg(tid), self.tgid(tid)) else {
            return;
        };
        let child = child as i32;
        if let Some(insn) = self.insn_of(tgid, tid) {
            self.syscall_insn.insert(child, insn);
        }
        // Its copy of the memory holds the stub page too.
        if let Some(&stub) = self.stubs.get(&tgid) {
            self.stubs.insert(child, stub);
        }
        let spans = self.backend.cpu_hidden(tgid);
        if !spans.is_empty() {
            self.inherited.insert(child, spans);
            self.watch.insert(child);
        }
    }

    /// Whether process `tgid` has hidden memory its system calls may be given: its threads
    /// then run with `PTRACE_SYSCALL` (see [`Tracer::buffer_call`]); with none left they go
    /// back to `PTRACE_CONT` at their next stop.
    fn update_watch(&mut self, tgid: i32) {
        let inherited = self.inherited.get(&tgid).is_some_and(|s| !s.is_empty());
        if inherited || !self.backend.cpu_hidden(tgid).is_empty() {
            self.watch.insert(tgid);
        } else {
            self.watch.remove(&tgid);
        }
    }

    /// A syscall stop of `tid`, which holds no redirect and runs no plan, in a process with
    /// hidden memory: at the entry of a system call given memory of the caller's that its
    /// process hides ([`usermem::describe`]), the backend brings that memory home as the
    /// kernel's fault handler would when the call's copies touch it, in their order, the
    /// plan runs, and the call is made again; at the exit of a call that failed with `EFAULT`
    /// on hidden memory the table did not know of, the exit fallback
    /// ([`Tracer::fault_retry`]). See the module docs.
    fn buffer_call(&mut self, tid: i32) {
        let Some(&tgid) = self.tgids.get(&tid) else {
            return self.resume(tid, 0);
        };
        let kind = syscall_stop_kind(tid);
        let entry = kind == Some(SYSCALL_INFO_ENTRY);
        if !self.watch.contains(&tgid) {
            self.fault_retries.remove(&tid);
            return self.go_on(tid, tgid, entry);
        }
        let Ok(regs) = get_regs(tid) else {
            return self.go_on(tid, tgid, entry);
        };
        if kind == Some(SYSCALL_INFO_EXIT) {
            return self.fault_retry(tid, tgid, &regs);
        }
        if !entry {
            return self.go_on(tid, tgid, entry);
        }
        let mut peek = |at: u64| peek_word(tid, at);
        let described = usermem::describe(regs.orig_rax as i64, args_of(&regs), &mut peek);
        if described.touches.is_empty() {
            return self.go_on(tid, tgid, true);
        }
        // A forked child's copies of memory its parent had hidden are shown again.
        let mut first = Vec::new();
        if let Some(inherited) = self.inherited.get_mut(&tgid) {
            inherited.retain(|h| {
                let hit = described
                    .touches
                    .iter()
                    .any(|t| t.start < h.start + h.len && h.start < t.end);
                if hit {
                    first.push(*h);
                }
                !hit
            });
        }
        // The touches in order, each with its direction (the protection it needs).
        let caller = CallerId { tid, tgid };
        let mut moved = false;
        for t in &described.touches {
            moved |= self
                .backend
                .cpu_touch(caller, &[(t.start, t.end)], t.dir == Dir::Write);
        }
        if !moved && first.is_empty() {
            return self.go_on(tid, tgid, true);
        }
        // The plan (this call's memory shown, and whatever a wakeup asked for).
        self.start_with(tid, tgid, Why::Syscall, first);
    }

    /// `tid` of `tgid`, at a syscall stop (its entry if `entry`) that needs nothing of its
    /// own, runs on; or runs its process's plan first if a wakeup asked for one.
    fn go_on(&mut self, tid: i32, tgid: i32, entry: bool) {
        if self.dirty.contains(&tgid) {
            // Stopped already, it runs the plan here, before its program runs on (resumed
            // and interrupted again, it would run a few instructions first: a CPU read
            // right after the prefetch that moved the memory to VRAM, not faulting). At an
            // entry stop its call is made again after, at an exit stop it returns.
            let why = if entry { Why::Syscall } else { Why::Interrupt };
            return self.start(tid, tgid, why);
        }
        self.resume(tid, 0);
        if self.slots.cpu.cas_pending(tgid) {
            // A compare-and-swap's PTRACE_INTERRUPT was spent by this stop (any ptrace stop
            // clears the pending trap): interrupted again, the thread stops where it would
            // have without syscall stops, and runs the compare-and-swaps there.
            let _ = ptrace_value(libc::PTRACE_INTERRUPT, tid, 0);
        }
    }

    /// The exit fallback (see the module docs): `tid`'s call (registers `regs` at its exit
    /// stop) failed with `EFAULT` while its process has hidden memory, and the table does not
    /// know all of the call's copies. The kernel's copy would have faulted the page home
    /// (`copy_{from,to}_user` → `handle_mm_fault` → `do_swap_page` → `migrate_to_ram`), so
    /// the hidden block one of its pointers names comes home (`cpu_fault`, as a CPU touch of
    /// that byte) and the call is made again; until it does not fail so, or no pointer names
    /// hidden memory. The pointers, in this order: the argument registers, the words of the
    /// structs whose layout the table does not know (an `ioctl`'s); failing those, the first
    /// hidden byte within a page after an argument register (a struct crossing into a hidden
    /// block). A call whose `EFAULT` may follow a side effect ([`NOT_RESTARTABLE`]) keeps it.
    fn fault_retry(&mut self, tid: i32, tgid: i32, regs: &libc::user_regs_struct) {
        let nr = regs.orig_rax as i64;
        if regs.rax as i64 != EFAULT || !usermem::restartable(nr) {
            self.fault_retries.remove(&tid);
            return self.go_on(tid, tgid, false);
        }
        let tries = self.fault_retries.entry(tid).or_insert(0);
        if !plan::count_retry(tries) {
            self.fault_retries.remove(&tid);
            return self.go_on(tid, tgid, false);
        }
        let mut peek = |at: u64| peek_word(tid, at);
        let found = usermem::fallback_spans(nr, args_of(regs), &mut peek)
            .into_iter()
            .find_map(|(lo, hi)| self.hidden_in(tgid, lo, hi));
        let Some(addr) = found else {
            self.fault_retries.remove(&tid);
            return self.go_on(tid, tgid, false);
        };
        let mut first = Vec::new();
        if let Some(inherited) = self.inherited.get_mut(&tgid)
            && let Some(i) = inherited
                .iter()
                .position(|h| (h.start..h.start + h.len).contains(&addr))
        {
            first.push(inherited.remove(i));
        } else if !self.backend.cpu_fault(CallerId { tid, tgid }, addr) {
            self.fault_retries.remove(&tid);
            return self.go_on(tid, tgid, false);
        }
        self.start_with(tid, tgid, Why::Retry, first);
    }

    /// The first byte of `[lo, hi)` that process `tgid` hides (its own hidden memory, or a
    /// forked child's inherited copy).
    fn hidden_in(&self, tgid: i32, lo: u64, hi: u64) -> Option<u64> {
        let inherited = self.inherited.get(&tgid).into_iter().flatten().copied();
        let spans = inherited
            .chain(self.backend.cpu_hidden(tgid))
            .map(|h| (h.start, h.len));
        usermem::first_hidden(spans, lo, hi)
    }

    /// `tid`, at the exit stop of a call that failed on memory now shown, makes it again.
    fn retry(&mut self, tid: i32) {
        if let Ok(regs) = get_regs(tid) {
            let _ = set_regs(tid, &again(regs));
        }
        self.resume(tid, 0);
    }

    /// Interrupts the threads of every process woken since the last time, and of every
    /// process with a compare-and-swap posted.
    fn take_wakeups(&mut self) {
        for request in self.slots.take_requests() {
            self.mmap_request(request);
        }
        self.take_cas();
        let (tgids, seq) = self.slots.cpu.take();
        for tgid in tgids {
            self.dirty.insert(tgid);
            let busy: HashSet<i32> = self
                .parked
                .get(&tgid)
                .into_iter()
                .flatten()
                .map(|&(t, _)| t)
                .collect();
            for (&tid, _) in self.tgids.iter().filter(|&(_, &g)| g == tgid) {
                if !self.injects.contains_key(&tid)
                    && !self.cas_runs.contains_key(&tid)
                    && !busy.contains(&tid)
                {
                    // ESRCH: gone meanwhile.
                    let _ = ptrace_value(libc::PTRACE_INTERRUPT, tid, 0);
                }
            }
        }
        self.slots.cpu.processed(seq);
    }

    /// A `PTRACE_EVENT_STOP` that is no group-stop: a thread the tracer interrupted, or a new
    /// thread's first stop.
    fn interrupt_stop(&mut self, tid: i32) {
        let Some(tgid) = self.tgid(tid) else {
            return self.resume(tid, 0);
        };
        if self.injects.contains_key(&tid) || self.holds.contains_key(&tid) {
            return self.resume(tid, 0);
        }
        if self.redirect_at_stop(tid) {
            return;
        }
        // One thread of a process runs its compare-and-swaps at a time: a second one started
        // while the first maps its stub would map another and replace the first's record, so
        // that the first's answers came from a stub it was not running (answered `NoThread`
        // after its compare-and-swap had landed, which the caller then made again).
        if self.slots.cpu.cas_pending(tgid) && !self.cas_runs.values().any(|r| r.tgid == tgid) {
            return self.cas_start(tid, tgid);
        }
        if !self.dirty.contains(&tgid) {
            return self.resume(tid, 0);
        }
        self.start(tid, tgid, Why::Interrupt);
    }

    /// Stopped thread `tid` of process `tgid` runs the process's plan, or waits for the
    /// thread that runs it.
    fn start(&mut self, tid: i32, tgid: i32, why: Why) {
        self.start_with(tid, tgid, why, Vec::new());
    }

    /// [`Tracer::start`] with `first` run before the backend's plan.
    fn start_with(&mut self, tid: i32, tgid: i32, why: Why, first: Vec<CpuProtect>) {
        if plan::parks(self.injecting.get(&tgid).copied(), tid) {
            self.parked.entry(tgid).or_default().push((tid, why));
            return;
        }
        self.dirty.remove(&tgid);
        let mut ops = first;
        ops.extend(self.backend.cpu_protect_plan(tgid));
        if ops.is_empty() {
            // Shown already (another thread's plan).
            return match plan::when_shown(why) {
                Then::Retry => self.retry(tid),
                Then::Resume => self.resume(tid, 0),
            };
        }
        let Some(insn) = self.insn_of(tgid, tid) else {
            crate::own::elog!(
                "kfd-emu: no system call instruction known in {tgid}: memory in VRAM stays accessible to its CPU"
            );
            self.backend.cpu_protect_done(tgid, &ops);
            return self.resume(tid, 0);
        };
        let Ok(saved) = get_regs(tid) else {
            self.backend.cpu_protect_done(tgid, &ops);
            return;
        };
        self.injecting.insert(tgid, tid);
        self.injects.insert(
            tid,
            Inject {
                tgid,
                saved,
                insn,
                ops: ops.into(),
                current: None,
                failed: Vec::new(),
                why,
                at_entry: why == Why::Syscall,
            },
        );
        self.next_op(tid);
    }

    /// Makes `tid` run the next `mprotect` of its plan, or ends the plan.
    fn next_op(&mut self, tid: i32) {
        let Some(inject) = self.injects.get_mut(&tid) else {
            return;
        };
        let Some(op) = inject.ops.pop_front() else {
            return self.end_plan(tid);
        };
        inject.current = Some(op);
        let mut regs = inject.saved;
        regs.rip = inject.insn;
        regs.rax = libc::SYS_mprotect as u64;
        // No restart logic applies to it (the thread's own call is restarted at the end).
        regs.orig_rax = u64::MAX;
        if std::mem::take(&mut inject.at_entry) {
            // Stopped at the entry of its own call: that call becomes the mprotect (a call
            // skipped there would meet the filter as number -1, and fail with ENOSYS).
            regs.orig_rax = libc::SYS_mprotect as u64;
        }
        regs.rdi = op.start;
        regs.rsi = op.len;
        regs.rdx = u64::from(op.prot);
        self.slots.cpu.set_injected(tid, true);
        if set_regs(tid, &regs).is_err() {
            // Killed meanwhile: its exit is reported next.
            return;
        }
        let _ = ptrace_value(libc::PTRACE_SYSCALL, tid, 0);
    }

    /// A syscall stop of a thread running a plan.
    fn inject_step(&mut self, tid: i32) {
        let kind = syscall_stop_kind(tid);
        let Ok(regs) = get_regs(tid) else {
            return;
        };
        if kind != Some(SYSCALL_INFO_EXIT) || regs.orig_rax != libc::SYS_mprotect as u64 {
            // Its entry (or a signal handler's call first).
            let _ = ptrace_value(libc::PTRACE_SYSCALL, tid, 0);
            return;
        }
        self.slots.cpu.set_injected(tid, false);
        if let Some(inject) = self.injects.get_mut(&tid)
            && let Some(op) = inject.current.take()
        {
            match plan::mprotect_outcome(regs.rax as i64) {
                // Interrupted before it ran (a PTRACE_INTERRUPT of a later wakeup, pending
                // while the supervisor had not yet received the notified call): again, as
                // the kernel would restart it.
                Outcome::Again => inject.ops.push_front(op),
                Outcome::Failed => inject.failed.push(op),
                Outcome::Done => {
                    // A lift is noted once its memory is shown (a fault before it saw the
                    // memory hidden; one after, shown).
                    self.lift_generation += 1;
                    self.lifted.entry(inject.tgid).or_default().note(
                        op.start,
                        op.len,
                        op.prot,
                        self.lift_generation,
                    );
                }
            }
        }
        self.next_op(tid);
    }

    /// The plan of `tid` ran: the next one if the backend has one, else the thread gets its
    /// registers back and runs on, and the threads waiting for the plan too.
    fn end_plan(&mut self, tid: i32) {
        let Some(mut inject) = self.injects.remove(&tid) else {
            return;
        };
        let tgid = inject.tgid;
        self.backend.cpu_protect_done(tgid, &inject.failed);
        let ops = self.backend.cpu_protect_plan(tgid);
        if !ops.is_empty() {
            inject.ops = ops.into();
            inject.failed.clear();
            self.injects.insert(tid, inject);
            return self.next_op(tid);
        }
        self.injecting.remove(&tgid);
        self.update_watch(tgid);
        let regs = match inject.why {
            Why::Interrupt => with_restart(inject.saved),
            // A fault stop is no system call's.
            Why::Fault => inject.saved,
            Why::Syscall | Why::Retry => again(inject.saved),
        };
        let _ = set_regs(tid, &regs);
        self.resume(tid, 0);
        self.release_parked(tgid);
    }

    /// The threads of `tgid` that waited for its plan run on (a faulting one restarts its
    /// instruction).
    fn release_parked(&mut self, tgid: i32) {
        for (tid, why) in self.parked.remove(&tgid).unwrap_or_default() {
            match plan::when_shown(why) {
                // It stopped on a wakeup the plan just ran, or faulted on memory it showed,
                // or its call (stopped at its entry) goes on with its memory shown.
                Then::Resume => self.resume(tid, 0),
                // Its call failed at its exit stop, where it still is: made again.
                Then::Retry => self.retry(tid),
            }
        }
    }

    /// A `SIGSEGV` about to be delivered to `tid`: a fault on memory the backend hid is
    /// handled and the instruction restarts; any other is the program's.
    fn segv(&mut self, tid: i32) {
        // SAFETY: siginfo_t is plain data; all-zero is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t to `data`.
        let got = unsafe { ptrace_ptr(libc::PTRACE_GETSIGINFO, tid, (&raw mut info).cast()) };
        let tgid = self.tgid(tid);
        let (Ok(()), Some(tgid)) = (got, tgid) else {
            return self.resume(tid, libc::SIGSEGV);
        };
        match plan::segv_kind(info.si_code, self.injects.contains_key(&tid)) {
            Segv::Programs => return self.resume(tid, libc::SIGSEGV),
            // The fault of the instruction its plan's registers replaced: run again after.
            Segv::Pending => return self.resume(tid, 0),
            Segv::Offered => {}
        }
        let ran = self
            .ran
            .insert(tid, self.lift_generation)
            .unwrap_or_default();
        // SAFETY: a SIGSEGV's siginfo carries the faulting address.
        let addr = unsafe { info.si_addr() } as u64;
        if self.backend.cpu_fault(CallerId { tid, tgid }, addr) {
            return self.start(tid, tgid, Why::Fault);
        }
        // A forked child's copy of memory its parent had hidden: shown again in the child.
        // (The kernel's child faults the parent's range back: `svm_migrate_to_ram` on a COW
        // mapping; here the parent's pages stay where they are.)
        if let Some(spans) = self.inherited.get_mut(&tgid)
            && let Some(i) = spans
                .iter()
                .position(|s| (s.start..s.start + s.len).contains(&addr))
        {
            let span = spans.remove(i);
            return self.start_with(tid, tgid, Why::Fault, vec![span]);
        }
        // A thread that faulted on a span another thread's plan showed again since it last
        // ran: the memory was hidden after it ran; the instruction restarts.
        if plan::restart(self.lifted.get(&tgid), addr, ran) {
            return self.resume(tid, 0);
        }
        self.resume(tid, libc::SIGSEGV);
    }
}

// Compare-and-swaps in a process (see the module docs).
impl Tracer {
    /// Interrupts the threads of every process with a compare-and-swap posted, unless one of
    /// its threads runs them already.
    fn take_cas(&mut self) {
        for tgid in self.slots.cpu.take_cas() {
            if self.no_stub.contains(&tgid) || !self.tgids.values().any(|&g| g == tgid) {
                // Not a process it can run code in.
                self.slots.cpu.cas_refuse(Some(tgid), CasError::Unsupported);
                continue;
            }
            if self.cas_runs.values().any(|r| r.tgid == tgid) {
                continue;
            }
            let busy: HashSet<i32> = self
                .parked
                .get(&tgid)
                .into_iter()
                .flatten()
                .map(|&(t, _)| t)
                .collect();
            for (&tid, _) in self.tgids.iter().filter(|&(_, &g)| g == tgid) {
                if !self.injects.contains_key(&tid) && !busy.contains(&tid) {
                    // ESRCH: gone meanwhile.
                    let _ = ptrace_value(libc::PTRACE_INTERRUPT, tid, 0);
                }
            }
        }
    }

    /// Stopped thread `tid` of process `tgid` runs the process's pending compare-and-swaps
    /// in place of its code (mapping the stub first if the process has none).
    fn cas_start(&mut self, tid: i32, tgid: i32) {
        let (Ok(saved), Ok(mask)) = (get_regs(tid), sigmask(tid)) else {
            return self.resume(tid, 0);
        };
        if saved.cs != USER_CS {
            // A 32-bit program (compat mode) would run the 64-bit stub as other code.
            self.slots.cpu.cas_refuse(Some(tgid), CasError::Unsupported);
            return self.resume(tid, 0);
        }
        if set_sigmask(tid, !SYNC_SIGNALS).is_err() {
            return self.resume(tid, 0);
        }
        self.cas_runs.insert(
            tid,
            CasRun {
                tgid,
                saved,
                mask,
                stage: CasStage::Map,
                held: Vec::new(),
                started: std::time::Instant::now(),
            },
        );
        if self.stubs.contains_key(&tgid) {
            return self.cas_next(tid);
        }
        let Some(insn) = self.insn_of(tgid, tid) else {
            // None known yet (the process has made no file mmap): these fall back.
            self.slots.cpu.cas_refuse(Some(tgid), CasError::Unsupported);
            return self.cas_end(tid);
        };
        let mut regs = saved;
        regs.rip = insn;
        regs.rax = libc::SYS_mmap as u64;
        // No restart logic applies to it (the thread's own call is restarted at the end).
        regs.orig_rax = u64::MAX;
        regs.rdi = 0;
        regs.rsi = STUB_PAGE;
        regs.rdx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        regs.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        regs.r8 = u64::MAX;
        regs.r9 = 0;
        if set_regs(tid, &regs).is_err() {
            // Killed meanwhile: its exit is reported next.
            return;
        }
        self.resume(tid, 0);
    }

    /// Makes `tid` run the next pending compare-and-swap of its process, or ends its run.
    fn cas_next(&mut self, tid: i32) {
        let Some(run) = self.cas_runs.get_mut(&tid) else {
            return;
        };
        let Some(&stub) = self.stubs.get(&run.tgid) else {
            return self.cas_end(tid);
        };
        let next = match self.slots.cpu.take_cas_op(run.tgid) {
            Some(next) => Some(next),
            // Stopped, the thread keeps the value it answered from unchanged by itself: a
            // mismatch's retry, made at once, finds it (unless another thread writes).
            None if matches!(run.stage, CasStage::Op { .. }) && run.started.elapsed() < CAS_RUN => {
                self.slots.cpu.wait_cas_op(run.tgid, CAS_LINGER)
            }
            None => None,
        };
        let Some((id, op)) = next else {
            return self.cas_end(tid);
        };
        run.stage = CasStage::Op {
            id,
            size: op.size,
            addr: op.addr,
            stub,
        };
        let mask = if op.size == 8 {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        let mut regs = run.saved;
        regs.orig_rax = u64::MAX;
        regs.rip = stub + if op.size == 8 { STUB_64 } else { STUB_32 };
        regs.rdi = op.addr;
        regs.rax = op.expected & mask;
        regs.rsi = op.new & mask;
        if set_regs(tid, &regs).is_err() {
            // Killed meanwhile: its exit is reported next (and answers the request).
            return;
        }
        self.resume(tid, 0);
    }

    /// A syscall stop of a thread running compare-and-swaps: its injected `mmap`'s, or the
    /// stub's `syscall` (a `PTRACE_SYSEMU` entry stop: the call never runs).
    fn cas_syscall(&mut self, tid: i32) {
        let Some(run) = self.cas_runs.get(&tid) else {
            return self.resume(tid, 0);
        };
        let (tgid, stage) = (run.tgid, run.stage);
        let kind = syscall_stop_kind(tid);
        let Ok(regs) = get_regs(tid) else {
            return;
        };
        match stage {
            CasStage::Map => {
                if kind != Some(SYSCALL_INFO_EXIT) || regs.orig_rax != libc::SYS_mmap as u64 {
                    // Its entry.
                    return self.resume(tid, 0);
                }
                let at = regs.rax;
                if (at as i64) < 0 || !poke_stub(tid, at) {
                    if self.no_stub.insert(tgid) {
                        crate::own::elog!(
                            "kfd-emu: no compare-and-swap stub could be mapped into {tgid} ({}): its GPU atomics on process memory are not atomic with its CPU's",
                            at as i64
                        );
                    }
                    self.slots.cpu.cas_refuse(Some(tgid), CasError::Unsupported);
                    return self.cas_end(tid);
                }
                self.stubs.insert(tgid, at);
                self.cas_next(tid);
            }
            CasStage::Op { id, size, stub, .. } => {
                let end = stub + if size == 8 { STUB_64_END } else { STUB_32_END };
                if regs.rip != end {
                    // Not the stub's (it runs straight to its `syscall`): nothing to answer.
                    self.slots.cpu.cas_answer(id, Err(CasError::NoThread));
                    return self.cas_end(tid);
                }
                let old = if size == 8 {
                    regs.rdx
                } else {
                    regs.rdx & u64::from(u32::MAX)
                };
                self.slots.cpu.cas_answer(id, Ok(old));
                self.cas_next(tid);
            }
        }
    }

    /// A signal-delivery stop of a thread running compare-and-swaps: the stub's own fault
    /// answers its request (the signal is not delivered); a page fault of the program's
    /// instruction the thread was interrupted at, still pending, is dropped (the instruction
    /// runs again once the thread has its registers back: [`plan::cas_segv`]); any other
    /// signal is held and raised again when the thread runs on.
    fn cas_signal(&mut self, tid: i32, sig: i32) {
        let Some(run) = self.cas_runs.get_mut(&tid) else {
            return self.resume(tid, sig);
        };
        if sig == libc::SIGSEGV {
            // SAFETY: siginfo_t is plain data; all-zero is a valid value.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t to `data`.
            let got = unsafe { ptrace_ptr(libc::PTRACE_GETSIGINFO, tid, (&raw mut info).cast()) };
            let (op, stub) = match run.stage {
                CasStage::Op {
                    size, addr, stub, ..
                } => (Some((addr, size)), stub),
                CasStage::Map => (None, self.stubs.get(&run.tgid).copied().unwrap_or(0)),
            };
            // SAFETY: a SIGSEGV's siginfo carries the faulting address.
            let addr = unsafe { info.si_addr() } as u64;
            if got.is_ok() && plan::cas_segv(info.si_code, addr, op, stub) == CasSegv::Pending {
                return self.resume(tid, 0);
            }
        }
        if let CasStage::Op { id, stub, .. } = run.stage
            && (sig == libc::SIGSEGV || sig == libc::SIGBUS)
            && get_regs(tid).is_ok_and(|r| (stub..stub + STUB.len() as u64).contains(&r.rip))
        {
            self.slots.cpu.cas_answer(id, Err(CasError::Fault));
            return self.cas_next(tid);
        }
        run.held.push(sig);
        self.resume(tid, 0);
    }

    /// The thread's run ends: its registers (with the kernel's syscall restart) and signal
    /// mask back, the signals held raised again; then it runs the process's plan if one is
    /// due, else runs on.
    fn cas_end(&mut self, tid: i32) {
        let Some(run) = self.cas_runs.remove(&tid) else {
            return;
        };
        let _ = set_sigmask(tid, run.mask);
        let _ = set_regs(tid, &with_restart(run.saved));
        for sig in run.held {
            // SAFETY: tgkill takes plain integers; `tid` is a stopped tracee of `tgid`.
            unsafe {
                libc::syscall(libc::SYS_tgkill, run.tgid, tid, sig);
            }
        }
        if self.dirty.contains(&run.tgid) {
            return self.start(tid, run.tgid, Why::Interrupt);
        }
        self.resume(tid, 0);
    }
}
