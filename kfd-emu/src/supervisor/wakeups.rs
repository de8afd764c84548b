//! What the tracer and the rest of the supervisor share about CPU faults: the backend's
//! waker ([`Wakeups`]: the processes whose hidden memory is to change, the threads running an
//! `mprotect` the tracer injected, the compare-and-swaps the model's GPU atomics ask a
//! process to run, [`CpuWake::cas`]) and the signal that interrupts the tracer's `waitpid`
//! ([`kick_signal`]). Its own module so that `mmap` (which hands the waker to the workers) and
//! `tracer` (which acts on it) both use it without using each other.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::backend::{CasError, CpuWake};

/// The signal that interrupts the tracer's `waitpid` ([`ChildExit::release_failed_exec`]):
/// a real-time signal given a handler that does nothing, installed without `SA_RESTART`.
pub(super) fn kick_signal() -> Option<i32> {
    static SIGNAL: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *SIGNAL.get_or_init(|| {
        extern "C" fn nothing(_: libc::c_int) {}
        let sig = libc::SIGRTMAX() - 3;
        // SAFETY: sigaction reads and writes only the two local structs; the handler does
        // nothing, so it is async-signal-safe. An existing handler of the program's is kept
        // (then no signal is used).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &raw mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                return None;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&raw mut action.sa_mask);
            (libc::sigaction(sig, &raw const action, std::ptr::null_mut()) == 0).then_some(sig)
        }
    })
}

/// What the backend's CPU-fault waker and the tracer share (see the module docs): the
/// processes whose hidden memory is to change, and the threads running an `mprotect` the
/// tracer made them run.
#[derive(Debug, Default)]
pub(crate) struct Wakeups {
    state: Mutex<WakeState>,
    cond: Condvar,
    /// The tracer thread's id while its loop runs (0 before and after).
    pub(super) tracer_tid: AtomicI32,
    injected: Mutex<HashSet<i32>>,
    /// Compare-and-swaps asked for ([`CpuWake::cas`]), and their answers.
    cas: Mutex<CasTable>,
    cas_done: Condvar,
    /// The threads a worker is serving a notified call of (received, not answered yet):
    /// they stop only once answered (`WAIT_KILLABLE_RECV`), so a compare-and-swap of their
    /// process waits for them only when it has no other thread ([`CAS_STOP_RUNNABLE`]).
    serving: Mutex<HashSet<i32>>,
}

/// How long [`CpuWake::cas`] waits for a thread of the process to stop (and take its
/// compare-and-swap) before it gives up with [`CasError::NoThread`]: a thread that runs stops
/// within a scheduler tick or two even on a loaded machine; one blocked in a call the
/// supervisor received (`WAIT_KILLABLE_RECV`) stops only when answered.
const CAS_STOP: Duration = Duration::from_millis(250);

/// How long [`CpuWake::cas`] goes on waiting past [`CAS_STOP`] while the process has a thread
/// that is not in a call a worker is serving ([`Wakeups::serving`]): such a thread stops
/// once the scheduler runs it, which on a loaded host takes longer than `CAS_STOP` (measured
/// under two CPU burners on 2 cores: 30–235 ms per compare-and-swap, four requesters at
/// once). Past this, a thread that cannot stop for another reason (stopped by a signal, in
/// an uninterruptible sleep) makes the request [`CasError::NoThread`] all the same.
const CAS_STOP_RUNNABLE: Duration = Duration::from_secs(5);

/// How often, past [`CAS_STOP`], whether the process has a thread that can stop is asked
/// again.
const CAS_RECHECK: Duration = Duration::from_millis(50);

/// One compare-and-swap for the tracer to run in process `tgid` (see [`CpuWake::cas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CasOp {
    pub(super) tgid: i32,
    pub(super) addr: u64,
    /// 4 or 8.
    pub(super) size: u8,
    pub(super) expected: u64,
    pub(super) new: u64,
}

#[derive(Debug, Clone, Copy)]
enum CasState {
    /// Waiting for a thread of the process to stop.
    Pending,
    /// A stopped thread runs it (it will be answered).
    Taken,
    Done(Result<u64, CasError>),
}

#[derive(Debug, Default)]
struct CasTable {
    next: u64,
    ops: Vec<(u64, CasOp, CasState)>,
    /// Processes with a new (or still pending) request, whose threads the tracer is to
    /// interrupt.
    fresh: Vec<i32>,
    /// The process a stopped thread of which waits for its next request
    /// ([`Wakeups::wait_cas_op`]): a request of it needs no interrupt, nor the tracer a kick.
    waiting: Option<i32>,
}

#[derive(Debug, Default)]
struct WakeState {
    tgids: Vec<i32>,
    /// Wakeups posted, and of those the tracer has acted on (its threads interrupted).
    posted: u64,
    processed: u64,
}

impl CpuWake for Wakeups {
    fn wake(&self, tgid: i32) {
        Wakeups::wake(self, tgid);
    }

    fn sync(&self) {
        Wakeups::sync(self);
    }

    fn cas(
        &self,
        tgid: i32,
        addr: u64,
        size: u8,
        expected: u64,
        new: u64,
    ) -> Result<u64, CasError> {
        Wakeups::cas(
            self,
            CasOp {
                tgid,
                addr,
                size,
                expected,
                new,
            },
        )
    }
}

impl Wakeups {
    fn state(&self) -> std::sync::MutexGuard<'_, WakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What process `tgid` should have hidden changed (the backend's waker): the tracer
    /// interrupts its threads, and the first to stop runs the plan. Does not block.
    pub(crate) fn wake(&self, tgid: i32) {
        let mut st = self.state();
        if !st.tgids.contains(&tgid) {
            st.tgids.push(tgid);
        }
        st.posted += 1;
        drop(st);
        self.kick();
    }

    /// Interrupts the tracer's `waitpid` ([`kick_signal`]).
    pub(super) fn kick(&self) {
        let tid = self.tracer_tid.load(Ordering::Acquire);
        let Some(sig) = kick_signal() else {
            return;
        };
        if tid == 0 || tid == rustix::thread::gettid().as_raw_nonzero().get() {
            return;
        }
        // SAFETY: tgkill takes plain integers; `tid` is the tracer thread of this process
        // (its id is cleared before that thread ends).
        unsafe {
            libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig);
        }
    }

    /// Waits (2 s at most) until the tracer has acted on every wakeup posted so far: a
    /// worker calls it before it answers a call, so that the caller, interrupted, stops
    /// before it runs on and runs the plan first.
    pub(crate) fn sync(&self) {
        let mut st = self.state();
        let target = st.posted;
        if st.processed >= target {
            // Nothing to wait for (every GPU access asks: no system call then).
            return;
        }
        drop(st);
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        if self.tracer_tid.load(Ordering::Acquire) == me {
            // The tracer acts on them itself, next.
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        st = self.state();
        while st.processed < target && self.tracer_tid.load(Ordering::Acquire) != 0 {
            if Instant::now() > deadline {
                return;
            }
            drop(st);
            // Again, in case a kick came before the tracer's waitpid.
            self.kick();
            st = self.state();
            st = self
                .cond
                .wait_timeout(st, Duration::from_millis(2))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The processes woken, and the count of wakeups they answer.
    pub(super) fn take(&self) -> (Vec<i32>, u64) {
        let mut st = self.state();
        (std::mem::take(&mut st.tgids), st.posted)
    }

    /// The tracer acted on the wakeups up to `seq`.
    pub(super) fn processed(&self, seq: u64) {
        let mut st = self.state();
        st.processed = st.processed.max(seq);
        drop(st);
        self.cond.notify_all();
    }

    /// Whether thread `tid` is running an `mprotect` the tracer made it run.
    pub(crate) fn is_injected(&self, tid: i32) -> bool {
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&tid)
    }

    pub(super) fn set_injected(&self, tid: i32, on: bool) {
        let mut set = self.injected.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            set.insert(tid);
        } else {
            set.remove(&tid);
        }
    }

    fn cas_table(&self) -> std::sync::MutexGuard<'_, CasTable> {
        self.cas.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`CpuWake::cas`]: posts `op`, interrupts the tracer, and waits for the answer; a
    /// request no thread took within [`CAS_STOP`] is withdrawn ([`CasError::NoThread`]), one
    /// taken is always waited for (the thread running it is stopped: it ends in a few
    /// instructions, or its exit answers it).
    fn cas(&self, op: CasOp) -> Result<u64, CasError> {
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        let tracer = self.tracer_tid.load(Ordering::Acquire);
        if tracer == 0 || tracer == me || !cfg!(target_arch = "x86_64") {
            return Err(CasError::Unsupported);
        }
        if !(op.size == 4 || op.size == 8) || !op.addr.is_multiple_of(u64::from(op.size)) {
            return Err(CasError::Fault);
        }
        let mut table = self.cas_table();
        let id = table.next;
        table.next += 1;
        table.ops.push((id, op, CasState::Pending));
        let mut waited = table.waiting == Some(op.tgid);
        if !waited {
            table.fresh.push(op.tgid);
        }
        drop(table);
        // A thread running this process's requests may be waiting for it.
        self.cas_done.notify_all();
        if !waited {
            self.kick();
        }
        let start = Instant::now();
        let mut posted = start;
        let (mut checked, mut runnable): (Option<Instant>, bool) = (None, false);
        let mut table = self.cas_table();
        loop {
            let Some(i) = table.ops.iter().position(|&(i, ..)| i == id) else {
                return Err(CasError::NoThread);
            };
            let state = table.ops[i].2;
            let gone = self.tracer_tid.load(Ordering::Acquire) == 0;
            match state {
                CasState::Done(result) => {
                    table.ops.swap_remove(i);
                    return result;
                }
                // The tracer ended: no tracee is left to run it.
                CasState::Pending | CasState::Taken if gone => {
                    table.ops.swap_remove(i);
                    return Err(CasError::Unsupported);
                }
                CasState::Pending
                    if start.elapsed() > CAS_STOP
                        && (start.elapsed() > CAS_STOP_RUNNABLE || {
                            // Asked without the table: it reads /proc.
                            if checked.is_none_or(|at: Instant| at.elapsed() > CAS_RECHECK) {
                                drop(table);
                                runnable = self.has_thread_that_can_stop(op.tgid);
                                checked = Some(Instant::now());
                                table = self.cas_table();
                            }
                            !runnable
                        }) =>
                {
                    // The table was let go meanwhile: the request may have been taken.
                    let Some(i) = table.ops.iter().position(|&(i, ..)| i == id) else {
                        return Err(CasError::NoThread);
                    };
                    if matches!(table.ops[i].2, CasState::Pending) {
                        table.ops.swap_remove(i);
                        return Err(CasError::NoThread);
                    }
                    continue;
                }
                CasState::Pending => {
                    // Again, in case the kick came before the tracer's waitpid, or the
                    // threads it interrupted stopped busy and ran on, or the thread that
                    // waited for it ran on first.
                    if posted.elapsed() > Duration::from_millis(20) {
                        table.fresh.push(op.tgid);
                        posted = Instant::now();
                        waited = false;
                    }
                    if !waited {
                        drop(table);
                        self.kick();
                        table = self.cas_table();
                    }
                }
                CasState::Taken => {}
            }
            table = self
                .cas_done
                .wait_timeout(table, Duration::from_millis(2))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A worker starts serving a notified call of thread `tid` ([`Wakeups::serving`]).
    pub(super) fn serving_begin(&self, tid: i32) {
        self.serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tid);
    }

    /// The call of thread `tid` was answered.
    pub(super) fn serving_end(&self, tid: i32) {
        self.serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tid);
    }

    /// Whether process `tgid` has a thread that is not in a call a worker serves: more
    /// threads (`Threads:` of `/proc/<tgid>/status`) than served ones of its own
    /// (`/proc/<tgid>/task/<tid>` exists). A process that cannot be read has none.
    fn has_thread_that_can_stop(&self, tgid: i32) -> bool {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{tgid}/status")) else {
            return false;
        };
        let Some(threads) = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
        else {
            return false;
        };
        let serving: Vec<i32> = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        let served = serving
            .iter()
            .filter(|tid| std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists())
            .count();
        threads > served
    }

    /// The processes with compare-and-swaps posted since the last call (each once).
    pub(super) fn take_cas(&self) -> Vec<i32> {
        let mut tgids = std::mem::take(&mut self.cas_table().fresh);
        tgids.sort_unstable();
        tgids.dedup();
        tgids
    }

    /// Whether process `tgid` has a compare-and-swap waiting for a thread.
    pub(super) fn cas_pending(&self, tgid: i32) -> bool {
        self.cas_table()
            .ops
            .iter()
            .any(|(_, op, state)| op.tgid == tgid && matches!(state, CasState::Pending))
    }

    /// The next compare-and-swap of process `tgid` waiting for a thread, now taken.
    pub(super) fn take_cas_op(&self, tgid: i32) -> Option<(u64, CasOp)> {
        let mut table = self.cas_table();
        let (id, op, state) = table
            .ops
            .iter_mut()
            .find(|(_, op, state)| op.tgid == tgid && matches!(state, CasState::Pending))?;
        *state = CasState::Taken;
        Some((*id, *op))
    }

    /// [`Wakeups::take_cas_op`], waiting up to `wait` for a request of process `tgid` (a
    /// thread that ran one stays stopped that long for the next: the retry of a mismatch, or
    /// the next lane of a wave, come within microseconds).
    pub(super) fn wait_cas_op(&self, tgid: i32, wait: Duration) -> Option<(u64, CasOp)> {
        let deadline = Instant::now() + wait;
        let mut table = self.cas_table();
        loop {
            if let Some((id, op, state)) = table
                .ops
                .iter_mut()
                .find(|(_, op, state)| op.tgid == tgid && matches!(state, CasState::Pending))
            {
                *state = CasState::Taken;
                let found = (*id, *op);
                table.waiting = None;
                return Some(found);
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                table.waiting = None;
                return None;
            };
            table.waiting = Some(tgid);
            table = self
                .cas_done
                .wait_timeout(table, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The answer to compare-and-swap `id`.
    pub(super) fn cas_answer(&self, id: u64, result: Result<u64, CasError>) {
        let mut table = self.cas_table();
        if let Some((_, _, state)) = table.ops.iter_mut().find(|(i, ..)| *i == id) {
            *state = CasState::Done(result);
        }
        drop(table);
        self.cas_done.notify_all();
    }

    /// Answers `error` to every compare-and-swap of process `tgid` (every process when
    /// `None`) not taken yet.
    pub(super) fn cas_refuse(&self, tgid: Option<i32>, error: CasError) {
        let mut table = self.cas_table();
        for (_, op, state) in &mut table.ops {
            if tgid.is_none_or(|t| t == op.tgid) && matches!(state, CasState::Pending) {
                *state = CasState::Done(Err(error));
            }
        }
        drop(table);
        self.cas_done.notify_all();
    }
}
