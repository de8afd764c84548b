//! What the model asks of the host kernel on a caller's behalf: its clocks (the kernel's
//! `ktime_get_*`) and a thread's capabilities (its `cred`).

/// `CAP_SYS_ADMIN`.
pub(super) const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_CHECKPOINT_RESTORE`.
pub(super) const CAP_CHECKPOINT_RESTORE: u32 = 40;

/// A clock in nanoseconds.
pub(super) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the pointer, which points to a local.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The effective capabilities of thread `tid` (the `CapEff` line of `/proc/<tid>/status`;
/// none when it cannot be read), as bits `1 << CAP_*`.
pub(super) fn effective_caps(tid: i32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}
