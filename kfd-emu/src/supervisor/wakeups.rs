//! What the tracer and the rest of the supervisor share about CPU faults: the backend's
//! waker ([`Wakeups`]: the processes whose hidden memory is to change, the threads running an
//! `mprotect` the tracer injected) and the signal that interrupts the tracer's `waitpid`
//! ([`kick_signal`]). Its own module so that `mmap` (which hands the waker to the workers) and
//! `tracer` (which acts on it) both use it without using each other.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
}

#[derive(Debug, Default)]
struct WakeState {
    tgids: Vec<i32>,
    /// Wakeups posted, and of those the tracer has acted on (its threads interrupted).
    posted: u64,
    processed: u64,
}

impl crate::backend::CpuWake for Wakeups {
    fn wake(&self, tgid: i32) {
        Wakeups::wake(self, tgid);
    }

    fn sync(&self) {
        Wakeups::sync(self);
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
    fn kick(&self) {
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
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        if self.tracer_tid.load(Ordering::Acquire) == me {
            // The tracer acts on them itself, next.
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut st = self.state();
        let target = st.posted;
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
}
