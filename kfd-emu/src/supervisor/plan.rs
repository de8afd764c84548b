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
//! - [`Lifted`]: the spans a plan showed again, each with the tracer's lift generation when
//!   its `mprotect` completed, for [`restart`];
//! - [`mprotect_outcome`]: a plan's injected `mprotect` that was interrupted before it ran
//!   (`-ERESTART*`, as `arch_do_signal_or_restart` in `arch/x86/kernel/signal.c` would restart
//!   it) is made again; one that failed is reported to the model as failed;
//! - [`segv_kind`]: a `SIGSEGV` that is no `SEGV_ACCERR` (`do_user_addr_fault` in
//!   `arch/x86/mm/fault.c`: `SEGV_MAPERR` for an address with no VMA) is the program's; a page
//!   fault's `SIGSEGV` that a thread running a plan takes is the fault of the instruction it
//!   was interrupted at, still pending, and is dropped (the instruction runs again after);
//! - [`cas_segv`]: a page fault a thread running compare-and-swaps takes elsewhere than the
//!   request's bytes is also the interrupted instruction's, dropped;
//! - [`restart`]: a thread that faulted in a span another thread's plan showed again after
//!   the thread last ran (between the fault and its delivery) restarts its instruction.

use std::collections::BTreeMap;

/// `si_code` of a `SIGSEGV` on a mapped page its protection forbids (`SEGV_ACCERR`,
/// `include/uapi/asm-generic/siginfo.h`).
pub(super) const SEGV_ACCERR: i32 = 2;

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

/// The spans of a process's memory that its plans showed again (their `mprotect` back to
/// the program's protection completed), each with the tracer's lift generation at its latest
/// lift: a count the tracer raises at every completed lift, of any process. A span lifted
/// again takes the new generation; parts of older spans outside it keep theirs. It grows
/// with the distinct span boundaries the plans made, not with the number of lifts, and
/// forgets nothing a fault could still need (see [`restart`]).
#[derive(Debug, Default)]
pub(super) struct Lifted {
    /// Start byte → (end byte, exclusive; generation of its latest lift). Disjoint.
    spans: BTreeMap<u64, (u64, u64)>,
}

impl Lifted {
    /// A plan's `mprotect` of `[start, start + len)` to `prot` completed as lift `generation`:
    /// a `PROT_NONE` hides, so it is no lift and is not noted.
    pub(super) fn note(&mut self, start: u64, len: u64, prot: u32, generation: u64) {
        if prot == libc::PROT_NONE as u32 || len == 0 {
            return;
        }
        let end = start.saturating_add(len);
        // The spans it overlaps (disjoint and sorted, so their ends are sorted too).
        let hit: Vec<(u64, (u64, u64))> = self
            .spans
            .range(..end)
            .rev()
            .take_while(|&(_, &(e, _))| e > start)
            .map(|(&s, &v)| (s, v))
            .collect();
        for (s, (e, g)) in hit {
            self.spans.remove(&s);
            if s < start {
                self.spans.insert(s, (start, g));
            }
            if e > end {
                self.spans.insert(end, (e, g));
            }
        }
        self.spans.insert(start, (end, generation));
    }

    /// Whether byte `addr` was lifted after generation `since`.
    pub(super) fn since(&self, addr: u64, since: u64) -> bool {
        self.spans
            .range(..=addr)
            .next_back()
            .is_some_and(|(_, &(end, generation))| addr < end && generation > since)
    }

    /// How many spans it keeps.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.spans.len()
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

/// `si_code` of a `SIGSEGV` on an address with no VMA (`SEGV_MAPERR`).
pub(super) const SEGV_MAPERR: i32 = 1;

/// What the tracer does with a `SIGSEGV` about to be delivered ([`segv_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Segv {
    /// Delivered to the program.
    Programs,
    /// Dropped, and the thread runs on with its plan: the page fault of the instruction it
    /// was interrupted at, which runs again once its registers come back.
    Pending,
    /// Offered to the model (a fault on memory it hid), else to [`restart`].
    Offered,
}

/// What becomes of a `SIGSEGV` with `si_code` of a thread (`running_plan`: one running its
/// process's plan of injected `mprotect`s).
///
/// A thread running a plan runs no code of the program's, and an `mprotect` touches no user
/// memory, so a page fault's `SIGSEGV` (`SEGV_ACCERR` or `SEGV_MAPERR`, from
/// `do_user_addr_fault`) it takes is the fault of the instruction it was interrupted at: the
/// fault happened just before the interrupt, and the kernel reports the interrupt's stop
/// first (`get_signal` in `kernel/signal.c` runs the `JOBCTL_TRAP_MASK` stop before it
/// dequeues a signal), so the signal comes once the plan's first `mprotect` is set up, with
/// the registers the plan gave the thread. It is dropped: once the plan is done the thread
/// gets back its registers, whose instruction pointer is still on the faulting instruction
/// (a page fault restarts it), and runs it again: the memory shown by then, it goes on, as on
/// the kernel after `svm_migrate_to_ram`; still hidden, it faults again and the model takes
/// the fault; the program's own protection, it faults again and the signal is delivered
/// with the program's registers. Any other `SIGSEGV` of a plan's thread (`kill`, `SI_KERNEL`)
/// is the program's, as is one that is no `SEGV_ACCERR` (no mapping at the address: nothing
/// hidden there).
pub(super) fn segv_kind(si_code: i32, running_plan: bool) -> Segv {
    match (si_code, running_plan) {
        (SEGV_ACCERR | SEGV_MAPERR, true) => Segv::Pending,
        (SEGV_ACCERR, false) => Segv::Offered,
        _ => Segv::Programs,
    }
}

/// What a `SIGSEGV` of a thread running compare-and-swaps is ([`cas_segv`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CasSegv {
    /// Possibly the stub's own fault on the request's bytes (or no page fault at all): as
    /// before, the stub's fault answers the request, anything else is held.
    Other,
    /// The page fault of the program's instruction the thread was interrupted at, still
    /// pending: dropped (the instruction runs again after the run).
    Pending,
}

/// A `SIGSEGV` with `si_code` at `addr` of a thread running compare-and-swaps, while its
/// stub's `mmap` runs (`op` none) or the stub (its page at `stub`) runs a request on the
/// `size` bytes at `op`'s address. The stub touches no memory but the request's and its own
/// page (an instruction fetch, which fails if the program unmapped it), and the `mmap` none;
/// so a page fault (`SEGV_ACCERR`, `SEGV_MAPERR`) elsewhere is the fault of the instruction the thread
/// was interrupted at, reported after the interrupt's stop (see [`segv_kind`]). Held and
/// raised again with `tgkill` it would be a `SI_TKILL` signal, delivered though the
/// instruction had only to run again; it is dropped. A fault on the request's bytes is taken
/// as the stub's (were it the program's, the program's instruction faults again after).
pub(super) fn cas_segv(si_code: i32, addr: u64, op: Option<(u64, u8)>, stub: u64) -> CasSegv {
    if si_code != SEGV_ACCERR && si_code != SEGV_MAPERR {
        return CasSegv::Other;
    }
    if op.is_some() && stub != 0 && (stub..stub.saturating_add(4096)).contains(&addr) {
        return CasSegv::Other;
    }
    match op {
        Some((at, size)) if (at..at.saturating_add(u64::from(size))).contains(&addr) => {
            CasSegv::Other
        }
        _ => CasSegv::Pending,
    }
}

/// Whether a thread's `SEGV_ACCERR` at `addr`, which the model does not claim (not hidden
/// now), is restarted rather than delivered: `addr` lies in a span of its process
/// (`lifted`) that a plan showed again after generation `ran`, the lift generation when the
/// thread last stopped where no fault of its could be pending (a system-call stop, a seccomp
/// stop, its last `SIGSEGV`; a page fault's signal is dequeued before the thread returns to
/// its code, `get_signal`). The memory was then hidden after the thread last ran, so the fault
/// may be the model's: another thread's plan showed the span between the fault and its
/// delivery (the kernel's fault would have found the page home and gone on). A fault on
/// memory the program protected itself comes again at once after a restart with no newer
/// lift of its address, and is then delivered. Exact: any number of lifts, of any spans, may
/// come between the fault and its delivery.
pub(super) fn restart(lifted: Option<&Lifted>, addr: u64, ran: u64) -> bool {
    lifted.is_some_and(|l| l.since(addr, ran))
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
    fn lifted_spans_keep_the_generation_of_their_latest_lift() {
        let mut lifted = Lifted::default();
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        // Hiding is no lift.
        lifted.note(0x1000, 0x2000, libc::PROT_NONE as u32, 1);
        assert_eq!(lifted.len(), 0);
        assert!(!lifted.since(0x1000, 0));
        // A lift keeps its span, end exclusive, with its generation.
        lifted.note(0x10_0000, 0x20_0000, libc::PROT_READ as u32, 2);
        assert!(lifted.since(0x10_0000, 1));
        assert!(lifted.since(0x2f_ffff, 1));
        assert!(!lifted.since(0x30_0000, 1));
        assert!(!lifted.since(0xf_ffff, 1));
        // Not after the generation it was lifted in.
        assert!(!lifted.since(0x10_0000, 2));
        // A lift over its middle takes the new generation there; the rest keeps the old.
        lifted.note(0x18_0000, 0x1000, rw, 5);
        assert_eq!(lifted.len(), 3);
        assert!(lifted.since(0x18_0000, 4));
        assert!(lifted.since(0x18_0fff, 4));
        assert!(!lifted.since(0x17_ffff, 4));
        assert!(!lifted.since(0x18_1000, 4));
        assert!(lifted.since(0x17_ffff, 1));
        assert!(lifted.since(0x18_1000, 1));
        // A lift over several spans and beyond replaces them.
        lifted.note(0x8_0000, 0x40_0000, rw, 6);
        assert_eq!(lifted.len(), 1);
        assert!(lifted.since(0x8_0000, 5));
        assert!(lifted.since(0x47_ffff, 5));
        assert!(!lifted.since(0x48_0000, 0));
        // Lifted again and again in the same blocks, it keeps one span per block.
        for generation in 7..1000u64 {
            let block = generation % 4;
            lifted.note(0x100_0000 + block * 0x20_0000, 0x20_0000, rw, generation);
        }
        assert_eq!(lifted.len(), 5);
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
    fn a_page_fault_a_plans_thread_takes_is_dropped_and_only_an_access_error_is_offered() {
        // A plan's thread: the pending page fault of the instruction it stopped at.
        assert_eq!(segv_kind(SEGV_ACCERR, true), Segv::Pending);
        assert_eq!(segv_kind(SEGV_MAPERR, true), Segv::Pending);
        // SI_USER (kill), SI_TKILL (tgkill), SI_KERNEL (a general protection fault, a bad
        // signal frame), SEGV_PKUERR: the program's, plan or not.
        for code in [0, -6, 0x80, 4] {
            assert_eq!(segv_kind(code, true), Segv::Programs, "{code}");
            assert_eq!(segv_kind(code, false), Segv::Programs, "{code}");
        }
        assert_eq!(segv_kind(SEGV_MAPERR, false), Segv::Programs);
        // Only an access error of a thread running its own code is offered to the model.
        assert_eq!(segv_kind(SEGV_ACCERR, false), Segv::Offered);
    }

    #[test]
    fn a_page_fault_elsewhere_than_the_stubs_bytes_is_the_interrupted_instructions() {
        // While the stub page is mapped: any page fault is pending from before.
        assert_eq!(
            cas_segv(SEGV_ACCERR, 0x1000, None, 0x5000_0000),
            CasSegv::Pending
        );
        assert_eq!(
            cas_segv(SEGV_MAPERR, 0, None, 0x5000_0000),
            CasSegv::Pending
        );
        // While the stub runs on 8 bytes at 0x2000: a fault on them is the stub's...
        for addr in [0x2000, 0x2007] {
            assert_eq!(
                cas_segv(SEGV_ACCERR, addr, Some((0x2000, 8)), 0x5000_0000),
                CasSegv::Other
            );
        }
        assert_eq!(
            cas_segv(SEGV_ACCERR, 0x2003, Some((0x2000, 4)), 0x5000_0000),
            CasSegv::Other
        );
        // ...one elsewhere the program's pending fault.
        for addr in [0x1fff, 0x2008, 0x7000_0000] {
            assert_eq!(
                cas_segv(SEGV_ACCERR, addr, Some((0x2000, 8)), 0x5000_0000),
                CasSegv::Pending
            );
        }
        assert_eq!(
            cas_segv(SEGV_ACCERR, 0x2004, Some((0x2000, 4)), 0x5000_0000),
            CasSegv::Pending
        );
        // The stub's own page (the program unmapped it): not dropped, or it would fault for ever.
        for addr in [0x5000_0000, 0x5000_0fff] {
            assert_eq!(
                cas_segv(SEGV_MAPERR, addr, Some((0x2000, 8)), 0x5000_0000),
                CasSegv::Other
            );
        }
        // No page fault (kill, tgkill, SI_KERNEL): as before.
        for code in [0, -6, 0x80] {
            assert_eq!(cas_segv(code, 0x1000, None, 0x5000_0000), CasSegv::Other);
            assert_eq!(
                cas_segv(code, 0x1000, Some((0x2000, 8)), 0x5000_0000),
                CasSegv::Other
            );
        }
    }

    #[test]
    fn a_fault_in_a_span_shown_again_after_the_thread_last_ran_restarts() {
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        let mut lifted = Lifted::default();
        // No span shown in the process: delivered.
        assert!(!restart(None, 0x20_0010, 0));
        assert!(!restart(Some(&lifted), 0x20_0010, 0));
        // The thread last ran at generation 10; its block is shown again as lift 11.
        lifted.note(0x20_0000, 0x20_0000, rw, 11);
        assert!(restart(Some(&lifted), 0x20_0010, 10));
        assert!(restart(Some(&lifted), 0x20_0000, 10));
        assert!(restart(Some(&lifted), 0x3f_ffff, 10));
        // Not this address: delivered.
        assert!(!restart(Some(&lifted), 0x1f_ffff, 10));
        assert!(!restart(Some(&lifted), 0x40_0000, 10));
        // A 128 MiB range of 2 MiB blocks shown again block by block, twice over, by other
        // threads' plans between the fault and its delivery (256 lifts; the tracer once
        // remembered the last 64 only, and delivered this fault to the program): restarted.
        for generation in 12..12 + 256 {
            let block = (generation - 12) % 64;
            lifted.note(0x1000_0000 + block * 0x20_0000, 0x20_0000, rw, generation);
        }
        assert!(restart(Some(&lifted), 0x20_0010, 10));
        // The restarted instruction faults again at once, no newer lift of its address since
        // its SIGSEGV stop (generation 267): the program's own protection, delivered...
        assert!(!restart(Some(&lifted), 0x20_0010, 267));
        // ...though another block was shown meanwhile.
        lifted.note(0x1000_0000, 0x20_0000, rw, 268);
        assert!(!restart(Some(&lifted), 0x20_0010, 267));
        // A block shown again before the thread last ran: its fault is the program's.
        assert!(!restart(Some(&lifted), 0x1000_0010, 268));
        // Hidden and shown again after that: restarted.
        lifted.note(0x1000_0000, 0x20_0000, rw, 269);
        assert!(restart(Some(&lifted), 0x1000_0010, 268));
    }
}
