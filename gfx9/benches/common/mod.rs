//! What the kfd-gfx9 benches share.

use std::time::Duration;

/// The calling thread's CPU time for `n` runs of `f` (`CLOCK_THREAD_CPUTIME_ID`): every run
/// is on the calling thread (`threads: 1`), and on a shared machine the wall clock also
/// counts the time other processes hold the core.
pub fn cpu_time(n: u64, mut f: impl FnMut()) -> Duration {
    let now = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let start = now();
    for _ in 0..n {
        f();
    }
    now() - start
}
