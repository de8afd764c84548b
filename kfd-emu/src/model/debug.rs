//! The debugger interface: `AMDKFD_IOC_DBG_TRAP` and the debugger's half of
//! `AMDKFD_IOC_RUNTIME_ENABLE`, as `kfd_ioctl_set_debug_trap`, `runtime_enable` and
//! `runtime_disable` (`kfd_chardev.c`) and `kfd_debug.c` do them.
//!
//! - **Target and permission** (`kfd_ioctl_set_debug_trap`): a pid with no task is `ESRCH`.
//!   ENABLE of a thread the caller traces (`ptrace_parent(thread) == current`, read here as
//!   the target's `TracerPid` against the caller's thread id) creates the target's KFD
//!   process if it has none yet (`kfd_create_process`: the debuggee opens `/dev/kfd` later
//!   and gets that process); any other op, or ENABLE of an untraced thread, needs a KFD
//!   process (`ESRCH`). A target other than the caller's own process that the caller does
//!   not trace is `EPERM` (but DISABLE). Every op but ENABLE needs debugging enabled
//!   (`EINVAL`), and the wave-launch, suspend/resume, address-watch and flag ops need the
//!   runtime enabled (`EPERM`).
//! - **ENABLE** (`kfd_dbg_trap_enable`): `EALREADY` when enabled; takes the caller's
//!   `dbg_fd` (`EBADF` if it is none), copies `kfd_runtime_info` (`r_debug`,
//!   `runtime_state`, `ttmp_setup`) to `rinfo_ptr` up to `rinfo_size` bytes and answers
//!   its size (16); then the exception mask is set. A copy fault is `EFAULT` with debugging
//!   left enabled, as the kernel leaves it.
//! - **Events** (`kfd_dbg_ev_raise`): an exception sets its status bit on the process; when
//!   the debugger enabled it, one byte `'.'` is written to the debug event file.
//!   QUERY_DEBUG_EVENT (`kfd_dbg_ev_query_debug_event`) answers the raised status (and
//!   clears the bits asked), `EAGAIN` when nothing enabled is raised; SET_EXCEPTIONS_ENABLED
//!   (`kfd_dbg_set_enabled_debug_exception_mask`) writes the byte when a newly enabled
//!   exception is already raised; QUERY_EXCEPTION_INFO (`kfd_dbg_trap_query_exception_info`)
//!   copies the runtime info for `EC_PROCESS_RUNTIME`.
//! - **Runtime hand-shake** (`runtime_enable`, `runtime_disable`): with a debugger attached,
//!   RUNTIME_ENABLE and its disable raise `EC_PROCESS_RUNTIME` and block until the debugger
//!   answers SEND_RUNTIME_EVENT with that bit (`runtime_enable_sema`); a caller killed while
//!   it waits ends the wait (`EINTR`) and its next call resumes the wait without raising
//!   again (`is_runtime_retry`).
//! - **DISABLE** (`kfd_dbg_trap_disable`): drops the file, every raised status, the wave
//!   launch mode and the trap mask (`kfd_dbg_trap_deactivate`); the runtime's semaphore and
//!   retry state stay (the busy and error runtime states are not modelled).
//! - SET_WAVE_LAUNCH_MODE (`kfd_dbg_trap_set_wave_launch_mode`): NORMAL, HALT or DEBUG, else
//!   `EINVAL`; recorded.
//! - SET_WAVE_LAUNCH_OVERRIDE (`kfd_dbg_trap_set_wave_launch_override`): the supported trap
//!   bits and override modes of each GPU's GC version (see [`override_support`]), `EACCES`
//!   for a request outside them, the previous mask answered. The mask is recorded per
//!   process (GC 9.0–9.4.1 keep it in one register for every process) and no wave traps on
//!   it yet; GC 10 and later answer `EINVAL` (not emulated).
//!
//! Not emulated (each answers `EINVAL`, the kernel's answer to an op it does not know):
//! SUSPEND/RESUME_QUEUES, the address watches, SET_FLAGS and the
//! queue and device snapshots; no queue or device exception is raised yet (a wave's
//! `s_trap` and a VM fault do not reach the debugger), so QUERY_EXCEPTION_INFO of a queue
//! or device code finds nothing raised (`ENODATA`) for an existing source; SEND_RUNTIME_EVENT
//! with bits other than `EC_PROCESS_RUNTIME` is `EINVAL`.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;

use kfd_ioctl::abi::{
    DEBUG_RUNTIME_STATE_DISABLED, DEBUG_RUNTIME_STATE_ENABLED, EC_MAX, EC_PROCESS_RUNTIME,
    KFD_EC_MASK_DEVICE, KFD_EC_MASK_PROCESS, KFD_EC_MASK_QUEUE,
    KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH, KFD_IOC_DBG_TRAP_DISABLE, KFD_IOC_DBG_TRAP_ENABLE,
    KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO,
    KFD_IOC_DBG_TRAP_RESUME_QUEUES, KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT,
    KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED, KFD_IOC_DBG_TRAP_SET_FLAGS,
    KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH, KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE,
    KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
    KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK, kfd_ec_mask,
    kfd_ioctl_dbg_trap_args, kfd_ioctl_dbg_trap_enable_args,
    kfd_ioctl_dbg_trap_query_exception_info_args, kfd_ioctl_runtime_enable_args,
};
use kfd_ioctl::abi::{
    KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH, KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION,
    KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO, KFD_DBG_TRAP_MASK_FP_INEXACT,
    KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL, KFD_DBG_TRAP_MASK_FP_INVALID,
    KFD_DBG_TRAP_MASK_FP_OVERFLOW, KFD_DBG_TRAP_MASK_FP_UNDERFLOW,
    KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO, KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END,
    KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START, KFD_DBG_TRAP_OVERRIDE_OR, KFD_DBG_TRAP_OVERRIDE_REPLACE,
    kfd_ioctl_dbg_trap_set_wave_launch_override_args,
};
use rustix::io::Errno;

use super::chardev::{Ctx, get, put};
use super::driver::FileKind;
use super::events::LIVENESS_PERIOD;
use super::process::{DebugState, Process, State};

/// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL`, `_HALT` and `_DEBUG` (`kfd_ioctl.h`).
const WAVE_LAUNCH_MODES: [u32; 3] = [0, 1, 3];

/// `sizeof(struct kfd_runtime_info)`.
const RUNTIME_INFO_SIZE: u32 = 16;

/// `validate_trap_override_request` of a GPU of `gfx_target_version` `target`: the trap
/// bits it supports, whether `KFD_DBG_TRAP_OVERRIDE_REPLACE` is allowed besides `_OR`, and
/// the errno of another override mode; `None` where it is not emulated (GC 10 and later,
/// GC 9.5).
///
/// - GC 9.0–9.4.1 (`kgd_gfx_v9_validate_trap_override_request`, which arcturus uses too):
///   address watch only; only OR (else `EINVAL`), as the register is global;
/// - GC 9.4.2 (`kgd_aldebaran_validate_trap_override_request`): the float and integer
///   exceptions, address watch and memory violation; OR or REPLACE (else `EPERM`);
/// - GC 9.4.3 (`kgd_gfx_v9_4_3_validate_trap_override_request`): those and trap on wave
///   start and end; OR or REPLACE (else `EPERM`).
fn override_support(target: u32) -> Option<(u32, bool, Errno)> {
    let exceptions = KFD_DBG_TRAP_MASK_FP_INVALID
        | KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL
        | KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO
        | KFD_DBG_TRAP_MASK_FP_OVERFLOW
        | KFD_DBG_TRAP_MASK_FP_UNDERFLOW
        | KFD_DBG_TRAP_MASK_FP_INEXACT
        | KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO
        | KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH
        | KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION;
    match target {
        90400..=90402 => Some((
            exceptions | KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START | KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END,
            true,
            Errno::PERM,
        )),
        90010 => Some((exceptions, true, Errno::PERM)),
        90000..=90399 => Some((KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH, false, Errno::INVAL)),
        _ => None,
    }
}

/// `kfd_dbg_trap_set_wave_launch_override` on `p` (GPUs of the targets `targets`): each
/// GPU narrows the supported mask (written back even when the request fails); a request
/// outside it is `EACCES`; then the previous mask is answered and the request's bits
/// replace the mask's within the request (`set_wave_launch_trap_override`).
fn wave_launch_override(
    p: &mut Process,
    targets: &[u32],
    o: &mut kfd_ioctl_dbg_trap_set_wave_launch_override_args,
) -> Result<(), Errno> {
    let mut supported = u32::MAX;
    for &target in targets {
        let Some((mask, replace, bad)) = override_support(target) else {
            return Err(Errno::INVAL);
        };
        supported &= mask;
        let allowed = o.override_mode == KFD_DBG_TRAP_OVERRIDE_OR
            || (replace && o.override_mode == KFD_DBG_TRAP_OVERRIDE_REPLACE);
        if !allowed {
            o.support_request_mask = supported;
            return Err(bad);
        }
    }
    let request = o.support_request_mask;
    o.support_request_mask = supported;
    if request & !supported != 0 {
        return Err(Errno::ACCESS);
    }
    let prev = p.debug.trap_mask;
    p.debug.trap_mask = (o.enable_mask & request) | (prev & !request);
    o.enable_mask = prev;
    Ok(())
}

/// `kfd_runtime_info` of `p` as the kernel lays it out.
fn runtime_info(p: &Process) -> [u8; RUNTIME_INFO_SIZE as usize] {
    let mut info = [0u8; RUNTIME_INFO_SIZE as usize];
    info[..8].copy_from_slice(&p.r_debug.to_ne_bytes());
    let state = if p.runtime_enabled {
        DEBUG_RUNTIME_STATE_ENABLED
    } else {
        DEBUG_RUNTIME_STATE_DISABLED
    };
    info[8..12].copy_from_slice(&state.to_ne_bytes());
    info[12..].copy_from_slice(&u32::from(p.ttmp_setup).to_ne_bytes());
    info
}

/// `kfd_dbg_ev_raise` of process-level exceptions `mask`: true when the debugger is told.
fn raise(p: &mut Process, mask: u64) -> bool {
    let d = &mut p.debug;
    if !d.enabled {
        return false;
    }
    d.exception_status |= mask & KFD_EC_MASK_PROCESS;
    if d.exception_enable_mask & mask == 0 {
        return false;
    }
    notify(d);
    true
}

/// Writes the byte the kernel writes to the debug event file (`kernel_write` of `'.'`).
fn notify(d: &DebugState) {
    if let Some(file) = &d.ev_file {
        // A full pipe or a closed reader loses the byte, as the kernel's write does.
        let _ = rustix::io::write(file.as_fd(), b".");
    }
}

/// The thread id tracing `pid` (`TracerPid` of its status; 0 when untraced).
fn tracer_of(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The process (thread group) of thread `pid`.
fn tgid_of(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The target's KFD process for `op`, created for ENABLE of a traced thread without one.
fn target(ctx: &Ctx<'_>, pid: i32, op: u32) -> Result<i32, Errno> {
    let tgid = tgid_of(pid).ok_or(Errno::SRCH)?;
    let caller = ctx.caller.id();
    let create =
        op == KFD_IOC_DBG_TRAP_ENABLE && pid != caller.tid && tracer_of(pid) == Some(caller.tid);
    let mut st = ctx.m.lock();
    if st.procs.contains_key(&tgid) {
        return Ok(tgid);
    }
    if !create {
        return Err(Errno::SRCH);
    }
    let process = Process::create(tgid, &mut st, &ctx.m.dev.cfg.machine)?;
    let (key, serial) = (process.key, process.serial);
    st.procs.insert(tgid, process);
    drop(st);
    ctx.m.register(key, FileKind::Kfd { tgid, serial });
    Ok(tgid)
}

/// AMDKFD_IOC_DBG_TRAP (see the module docs).
pub(super) fn dbg_trap(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_dbg_trap_args = get(buf);
    let result = trap(ctx, &mut a);
    // The argument goes back whatever the result (`kfd_ioctl` copies it out after any call).
    put(buf, &a);
    result
}

fn trap(ctx: &Ctx<'_>, a: &mut kfd_ioctl_dbg_trap_args) -> Result<(), Errno> {
    let pid = i32::try_from(a.pid).map_err(|_| Errno::SRCH)?;
    if pid <= 0 {
        return Err(Errno::SRCH);
    }
    let tgid = target(ctx, pid, a.op)?;
    // "Check if target is still PTRACED": its leader's tracer must be the caller.
    if tgid != ctx.tgid
        && a.op != KFD_IOC_DBG_TRAP_DISABLE
        && tracer_of(tgid) != Some(ctx.caller.id().tid)
    {
        return Err(Errno::PERM);
    }
    let mut st = ctx.m.lock();
    let p = st.procs.get_mut(&tgid).ok_or(Errno::SRCH)?;
    if a.op != KFD_IOC_DBG_TRAP_ENABLE && !p.debug.enabled {
        return Err(Errno::INVAL);
    }
    let needs_runtime = [
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE,
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE,
        KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
        KFD_IOC_DBG_TRAP_RESUME_QUEUES,
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH,
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH,
        KFD_IOC_DBG_TRAP_SET_FLAGS,
    ];
    if !p.runtime_enabled && needs_runtime.contains(&a.op) {
        return Err(Errno::PERM);
    }
    match a.op {
        KFD_IOC_DBG_TRAP_ENABLE => {
            let mut e = a.enable();
            let r = enable(ctx, p, &mut e);
            if r.is_ok() {
                p.debug.exception_enable_mask = e.exception_mask;
            }
            a.set_enable(e);
            r
        }
        KFD_IOC_DBG_TRAP_DISABLE => {
            // kfd_dbg_trap_disable (runtime busy or in error is not modelled: enabled or not).
            p.debug = DebugState {
                sema: p.debug.sema,
                runtime_retry: p.debug.runtime_retry,
                ..DebugState::default()
            };
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT => {
            let mut reason = a.send_runtime_event().exception_mask;
            if reason & kfd_ec_mask(EC_PROCESS_RUNTIME) != 0 {
                // "up(&p->runtime_enable_sema)".
                p.debug.sema = p.debug.sema.saturating_add(1);
                reason &= !kfd_ec_mask(EC_PROCESS_RUNTIME);
                ctx.m.wake.notify_all();
            }
            if reason != 0 {
                return Err(Errno::INVAL);
            }
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED => {
            let mask = a.set_exceptions_enabled().exception_mask;
            if mask & p.debug.exception_status != 0 {
                notify(&p.debug);
            }
            p.debug.exception_enable_mask = mask;
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE => {
            let machine = &ctx.m.dev.cfg.machine;
            let targets: Vec<u32> = p
                .pdds
                .iter()
                .map(|pdd| {
                    machine
                        .node_of(&machine.gpus()[pdd.gpu])
                        .and_then(|n| n.gfx_target_version())
                        .and_then(|v| v.raw())
                        .unwrap_or(0)
                })
                .collect();
            let mut o = a.launch_override();
            let r = wave_launch_override(p, &targets, &mut o);
            a.set_launch_override(o);
            r
        }
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE => {
            let mode = a.launch_mode().launch_mode;
            if !WAVE_LAUNCH_MODES.contains(&mode) {
                return Err(Errno::INVAL);
            }
            p.debug.wave_launch_mode = mode;
            Ok(())
        }
        KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT => {
            let mut q = a.query_debug_event();
            let clear = q.exception_mask;
            q.exception_mask = 0;
            q.gpu_id = 0;
            q.queue_id = 0;
            let d = &mut p.debug;
            if d.exception_enable_mask & d.exception_status != 0 {
                q.exception_mask = d.exception_status;
                d.exception_status &= !clear;
            }
            a.set_query_debug_event(q);
            if q.exception_mask == 0 {
                return Err(Errno::AGAIN);
            }
            Ok(())
        }
        KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => {
            let mut q = a.query_exception_info();
            let r = exception_info(ctx, p, &mut q);
            a.set_query_exception_info(q);
            r
        }
        _ => Err(Errno::INVAL),
    }
}

/// `kfd_dbg_trap_enable` on target `p` with the caller's arguments `e`.
fn enable(
    ctx: &Ctx<'_>,
    p: &mut Process,
    e: &mut kfd_ioctl_dbg_trap_enable_args,
) -> Result<(), Errno> {
    if p.debug.enabled {
        return Err(Errno::ALREADY);
    }
    let copy = e.rinfo_size.min(RUNTIME_INFO_SIZE) as usize;
    let fd = i32::try_from(e.dbg_fd).map_err(|_| Errno::BADF)?;
    let file = ctx.caller.dup_fd(fd).map_err(|_| Errno::BADF)?;
    p.debug.ev_file = Some(Arc::new(file));
    p.debug.enabled = true;
    let info = runtime_info(p);
    e.rinfo_size = RUNTIME_INFO_SIZE;
    // On a fault the kernel deactivates the traps but leaves debugging enabled.
    ctx.caller.write(e.rinfo_ptr, &info[..copy])
}

/// `kfd_dbg_trap_query_exception_info` on `p`.
fn exception_info(
    ctx: &Ctx<'_>,
    p: &mut Process,
    q: &mut kfd_ioctl_dbg_trap_query_exception_info_args,
) -> Result<(), Errno> {
    if q.info_ptr == 0 {
        return Err(Errno::INVAL);
    }
    let code = q.exception_code;
    if code == 0 || code >= EC_MAX {
        return Err(Errno::INVAL);
    }
    let bit = kfd_ec_mask(code);
    if bit & KFD_EC_MASK_QUEUE != 0 {
        let found = p.queues.by_id.contains_key(&q.source_id);
        return Err(if found { Errno::NODATA } else { Errno::INVAL });
    }
    if bit & KFD_EC_MASK_DEVICE != 0 {
        let found = p.pdds.iter().any(|pdd| pdd.gpu_id == q.source_id);
        return Err(if found { Errno::NODATA } else { Errno::INVAL });
    }
    if bit & KFD_EC_MASK_PROCESS == 0 {
        return Err(Errno::INVAL);
    }
    if p.debug.exception_status & bit == 0 {
        return Err(Errno::NODATA);
    }
    let mut size = 0;
    if code == EC_PROCESS_RUNTIME {
        let info = runtime_info(p);
        let copy = q.info_size.min(RUNTIME_INFO_SIZE) as usize;
        ctx.caller.write(q.info_ptr, &info[..copy])?;
        size = RUNTIME_INFO_SIZE;
    }
    q.info_size = size;
    if q.clear_exception != 0 {
        p.debug.exception_status &= !bit;
    }
    Ok(())
}

/// AMDKFD_IOC_RUNTIME_ENABLE (`runtime_enable`, `runtime_disable`): enable (`EBUSY` when
/// enabled, `EEXIST` while the process has user queues) or disable; with a debugger
/// attached each raises `EC_PROCESS_RUNTIME` and waits for the debugger's answer.
pub(super) fn runtime_enable(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_runtime_enable_args = get(buf);
    let mut st = ctx.m.lock();
    let p = st.process(ctx.tgid, ctx.serial)?;
    if a.mode_mask & KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK != 0 {
        if !p.debug.runtime_retry {
            if p.runtime_enabled {
                return Err(Errno::BUSY);
            }
            if !p.queues.by_id.is_empty() {
                return Err(Errno::EXIST);
            }
            p.runtime_enabled = true;
            p.r_debug = a.r_debug;
            p.ttmp_setup = a.mode_mask & KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK != 0;
        }
        return hand_shake(ctx, st);
    }
    p.runtime_enabled = false;
    p.r_debug = 0;
    hand_shake(ctx, st)?;
    ctx.m
        .lock()
        .process(ctx.tgid, ctx.serial)
        .map(|p| p.ttmp_setup = false)
}

/// The debugger's half of a runtime enable or disable: raise `EC_PROCESS_RUNTIME` (unless
/// this call resumes an interrupted wait) and wait for SEND_RUNTIME_EVENT
/// (`down_interruptible(&p->runtime_enable_sema)`).
fn hand_shake(ctx: &Ctx<'_>, mut st: std::sync::MutexGuard<'_, State>) -> Result<(), Errno> {
    let p = st.process(ctx.tgid, ctx.serial)?;
    if !p.debug.enabled {
        return Ok(());
    }
    if !p.debug.runtime_retry {
        raise(p, kfd_ec_mask(EC_PROCESS_RUNTIME));
    }
    let mut last_check = Instant::now();
    loop {
        let p = st.process(ctx.tgid, ctx.serial)?;
        if p.debug.sema > 0 {
            p.debug.sema -= 1;
            p.debug.runtime_retry = false;
            return Ok(());
        }
        // (A debugger that detaches meanwhile leaves the wait as it is, as the kernel's:
        // only a SEND_RUNTIME_EVENT or a signal ends it.)
        st = ctx
            .m
            .wake
            .wait_timeout(st, LIVENESS_PERIOD)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if last_check.elapsed() >= LIVENESS_PERIOD {
            last_check = Instant::now();
            if ctx.caller.still_valid() == Err(Errno::NOENT) {
                if let Ok(p) = st.process(ctx.tgid, ctx.serial) {
                    p.debug.runtime_retry = true;
                }
                return Err(Errno::INTR);
            }
        }
    }
}
