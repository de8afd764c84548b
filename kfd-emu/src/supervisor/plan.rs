//! The pure decisions of the tracer's CPU-fault and system-call code ([`super::tracer`]),
//! apart from its ptrace plumbing so that unit tests pin each branch: what the tracer does is
//! `tracer.rs`'s, which calls these on the same paths; the interleavings of threads that the
//! programs run under `kfd-emu run` cannot time become inputs here ("another thread runs the
//! plan", "a span another thread showed", "`mprotect` returned `-ERESTARTSYS`", "the 65th
//! retry").
//!
//! - [`count_retry`]: the exit fallback's cap on making one call again ([`MAX_RETRIES`]);
//! - [`parks`]: a thread that needs its process's plan while another thread runs it waits;
//! - [`when_shown`]: how a thread goes on once its memory is shown (by a plan another thread
//!   ran, or one it waited for): a failed call at its exit stop is made again, anything else
//!   resumes where it stopped;
//! - [`note_lifted`]: the spans a plan shows again, remembered (the last [`LIFTED`]) for
//!   [`restart_once`];
//! - [`mprotect_outcome`]: a plan's injected `mprotect` that was interrupted before it ran
//!   (`-ERESTART*`, as `arch_do_signal_or_restart` in `arch/x86/kernel/signal.c` would restart
//!   it) is made again; one that failed is reported to the model as failed;
//! - [`segv_is_programs`]: a `SIGSEGV` that is no `SEGV_ACCERR` (`do_user_addr_fault` in
//!   `arch/x86/mm/fault.c`: `SEGV_MAPERR` for an address with no VMA), or that a thread
//!   running a plan takes, is the program's;
//! - [`restart_once`]: a thread that faulted in a span shown again lately (another thread's
//!   plan showed it between the fault and its delivery) restarts its instruction once.

use std::collections::VecDeque;

/// `si_code` of a `SIGSEGV` on a mapped page its protection forbids (`SEGV_ACCERR`,
/// `include/uapi/asm-generic/siginfo.h`).
pub(super) const SEGV_ACCERR: i32 = 2;

/// The most lifted spans a process remembers (see [`restart_once`]).
pub(super) const LIFTED: usize = 64;

/// `-ERESTARTSYS`, `-ERESTARTNOINTR`, `-ERESTARTNOHAND`, `-ERESTART_RESTARTBLOCK`
/// (`include/linux/errno.h`).
pub(super) const ERESTARTSYS: i64 = -512;
pub(super) const ERESTARTNOINTR: i64 = -513;
pub(super) const ERESTARTNOHAND: i64 = -514;
pub(super) const ERESTART_RESTARTBLOCK: i64 = -516;

/// How many times the exit fallback makes one call again at most (each time brings one
/// more block home; a call given more hidden blocks than this, none of them in the table,
/// gets its `EFAULT`).
pub(super) const MAX_RETRIES: u32 = 64;

/// Why a thread runs the backend's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// The tracer interrupted it (a wakeup), or it stopped for another reason meanwhile.
    Interrupt,
    /// It faulted on hidden memory: the instruction restarts after, the signal suppressed.
    Fault,
    /// It stopped at the entry of a system call given hidden memory
    /// ([`super::usermem::describe`]): the call is made again after (and stops again, now
    /// finding its memory shown).
    Syscall,
    /// Its system call failed with `EFAULT` on hidden memory the table did not know of (the
    /// exit fallback): the call is made again after, from its exit stop.
    Retry,
}

/// How a thread goes on once its memory is shown ([`when_shown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Then {
    /// Resumed where it stopped.
    Resume,
    /// Its failed call made again from its exit stop.
    Retry,
}

/// What became of a plan's injected `mprotect` ([`mprotect_outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It ran.
    Done,
    /// Interrupted before it ran: made again.
    Again,
    /// It failed: reported to the model as failed (`Backend::cpu_protect_done`).
    Failed,
}

/// Counts one more retry of a thread's call by the exit fallback (`tries`, 0 before the
/// first): whether it may be made again (at most [`MAX_RETRIES`] times; the tracer forgets
/// the count when it is not, so it never goes past `MAX_RETRIES + 1`).
pub(super) fn count_retry(tries: &mut u32) -> bool {
    *tries += 1;
    *tries <= MAX_RETRIES
}

/// Whether thread `tid`, needing its process's plan, waits (parked) because thread
/// `injecting` (if any) runs it now: only one thread of a process runs `mprotect`s at a time.
pub(super) fn parks(injecting: Option<i32>, tid: i32) -> bool {
    injecting.is_some_and(|t| t != tid)
}

/// How a thread that stopped for `why` goes on once its memory is shown with no `mprotect`
/// of its own left to run (a plan another thread ran, or one it waited for): a call that
/// failed at its exit stop (`Why::Retry`), where the thread still is, is made again; a
/// wakeup's stop, a fault (its instruction restarts) and a call stopped at its entry (it
/// goes on with its memory shown) resume.
pub(super) fn when_shown(why: Why) -> Then {
    match why {
        Why::Retry => Then::Retry,
        Why::Interrupt | Why::Fault | Why::Syscall => Then::Resume,
    }
}

/// Notes a plan's `mprotect` of `[start, start + len)` to `prot` in `lifted`, the spans its
/// process showed again lately: a `PROT_NONE` hides, so it is not noted; the oldest span goes
/// when more than [`LIFTED`] are.
pub(super) fn note_lifted(lifted: &mut VecDeque<(u64, u64)>, start: u64, len: u64, prot: u32) {
    if prot == libc::PROT_NONE as u32 {
        return;
    }
    lifted.push_back((start, start + len));
    if lifted.len() > LIFTED {
        lifted.pop_front();
    }
}

/// What became of an injected `mprotect` whose result (at its exit stop) is `rax`: a
/// `-ERESTART*` means it was interrupted before it ran (a `PTRACE_INTERRUPT` of a later
/// wakeup pending), and is made again as the kernel would restart it; counted as failed, a
/// lift would leave the memory inaccessible while the model forgot it was hidden. Any other
/// negative result is a failure; the rest, success.
pub(super) fn mprotect_outcome(rax: i64) -> Outcome {
    match rax {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK => Outcome::Again,
        r if r < 0 => Outcome::Failed,
        _ => Outcome::Done,
    }
}

/// Whether a `SIGSEGV` with `si_code` goes to the program at once: one that is no
/// `SEGV_ACCERR` (no mapping at the address: nothing hidden there), or one a thread running a
/// plan takes (`running_plan`: its injected `mprotect`s never touch memory, so the fault is
/// the program's own).
pub(super) fn segv_is_programs(si_code: i32, running_plan: bool) -> bool {
    si_code != SEGV_ACCERR || running_plan
}

/// Whether a thread's `SIGSEGV` at `addr` (instruction and address `key`), which the model
/// does not claim, is restarted rather than delivered: `addr` lies in a span its process
/// showed again lately (`lifted`: another thread's plan showed it between the fault and its
/// delivery), and the thread's last such restart (`last`) was not of this same fault (so a
/// fault that persists is delivered the second time).
pub(super) fn restart_once(
    lifted: Option<&VecDeque<(u64, u64)>>,
    addr: u64,
    last: Option<(u64, u64)>,
    key: (u64, u64),
) -> bool {
    let in_lifted = lifted.is_some_and(|l| l.iter().any(|&(s, e)| (s..e).contains(&addr)));
    in_lifted && last != Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_fallback_makes_a_call_again_at_most_64_times() {
        let mut tries = 0;
        for n in 1..=MAX_RETRIES {
            assert!(count_retry(&mut tries), "retry {n}");
            assert_eq!(tries, n);
        }
        // The 65th: the call keeps its EFAULT.
        assert!(!count_retry(&mut tries));
        assert_eq!(tries, MAX_RETRIES + 1);
    }

    #[test]
    fn a_thread_waits_while_another_thread_of_its_process_runs_the_plan() {
        // Nobody runs it: this thread does.
        assert!(!parks(None, 10));
        // It runs it itself (a plan after a plan, or its own fault meanwhile).
        assert!(!parks(Some(10), 10));
        // Another thread does: this one waits.
        assert!(parks(Some(11), 10));
    }

    #[test]
    fn only_a_failed_call_at_its_exit_stop_is_made_again_once_its_memory_is_shown() {
        assert_eq!(when_shown(Why::Retry), Then::Retry);
        assert_eq!(when_shown(Why::Interrupt), Then::Resume);
        assert_eq!(when_shown(Why::Fault), Then::Resume);
        assert_eq!(when_shown(Why::Syscall), Then::Resume);
    }

    #[test]
    fn lifted_spans_are_the_last_64_shown_again() {
        let mut lifted = VecDeque::new();
        // Hiding is no lift.
        note_lifted(&mut lifted, 0x1000, 0x2000, libc::PROT_NONE as u32);
        assert!(lifted.is_empty());
        // A lift keeps its span, end exclusive.
        note_lifted(&mut lifted, 0x10_0000, 0x20_0000, libc::PROT_READ as u32);
        assert_eq!(lifted.front(), Some(&(0x10_0000, 0x30_0000)));
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        for i in 1..LIFTED as u64 {
            note_lifted(&mut lifted, i << 32, 0x1000, rw);
        }
        // 64 remembered, the first among them.
        assert_eq!(lifted.len(), LIFTED);
        assert_eq!(lifted.front(), Some(&(0x10_0000, 0x30_0000)));
        // The 65th drops the oldest only.
        note_lifted(&mut lifted, 0x7000_0000_0000, 0x1000, rw);
        assert_eq!(lifted.len(), LIFTED);
        assert_eq!(lifted.front(), Some(&(1 << 32, (1 << 32) + 0x1000)));
        assert_eq!(lifted.back(), Some(&(0x7000_0000_0000, 0x7000_0000_1000)));
    }

    #[test]
    fn an_interrupted_mprotect_is_made_again_and_a_failed_one_reported() {
        // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
        // (include/linux/errno.h), as the kernel leaves them in rax.
        for r in [-512, -513, -514, -516] {
            assert_eq!(mprotect_outcome(r), Outcome::Again, "{r}");
        }
        // -ENOMEM (too many VMAs), -EACCES, -EINVAL, -EFAULT: failed.
        for r in [-12, -13, -22, -14, -1, -515, i64::MIN] {
            assert_eq!(mprotect_outcome(r), Outcome::Failed, "{r}");
        }
        assert_eq!(mprotect_outcome(0), Outcome::Done);
        // (No mprotect returns a positive value; were it so, it is no failure.)
        assert_eq!(mprotect_outcome(1), Outcome::Done);
    }

    #[test]
    fn a_segv_that_is_no_access_error_or_a_plan_threads_is_the_programs() {
        const SEGV_MAPERR: i32 = 1;
        assert!(segv_is_programs(SEGV_MAPERR, false));
        assert!(segv_is_programs(SEGV_MAPERR, true));
        assert!(segv_is_programs(SEGV_ACCERR, true));
        // Only an access error of a thread running its own code is offered to the model.
        assert!(!segv_is_programs(SEGV_ACCERR, false));
    }

    #[test]
    fn a_fault_in_a_span_another_thread_showed_restarts_once() {
        let mut lifted = VecDeque::new();
        note_lifted(&mut lifted, 0x20_0000, 0x20_0000, libc::PROT_READ as u32);
        let key = (0x40_1000, 0x20_0010);
        // No span shown lately in the process, or not this address: delivered.
        assert!(!restart_once(None, 0x20_0010, None, key));
        assert!(!restart_once(Some(&lifted), 0x1f_ffff, None, key));
        assert!(!restart_once(
            Some(&lifted),
            0x40_0000,
            None,
            (0x40_1000, 0x40_0000)
        ));
        // In the span: restarted once...
        assert!(restart_once(Some(&lifted), 0x20_0010, None, key));
        assert!(restart_once(
            Some(&lifted),
            0x20_0000,
            None,
            (0x40_1000, 0x20_0000)
        ));
        assert!(restart_once(
            Some(&lifted),
            0x3f_ffff,
            None,
            (0x40_1000, 0x3f_ffff)
        ));
        // ...not the same fault a second time...
        assert!(!restart_once(Some(&lifted), 0x20_0010, Some(key), key));
        // ...but another fault after it (another instruction, or another address) again.
        assert!(restart_once(
            Some(&lifted),
            0x20_0010,
            Some(key),
            (0x40_1008, 0x20_0010)
        ));
        assert!(restart_once(
            Some(&lifted),
            0x20_0020,
            Some(key),
            (0x40_1000, 0x20_0020)
        ));
        // A restart remembered for a fault outside every span changes nothing.
        assert!(!restart_once(
            Some(&lifted),
            0x50_0000,
            Some(key),
            (1, 0x50_0000)
        ));
    }
}
