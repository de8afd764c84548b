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
//! - **Events** (`kfd_dbg_ev_raise`, [`exceptions`](super::exceptions)): an exception sets
//!   its status bit on the process, a queue or a GPU; when the debugger enabled it, one
//!   byte `'.'` is written to the debug event file. A queue created under the debugger has
//!   `EC_QUEUE_NEW`; a wave's trap-handler interrupt raises its queue's exception
//!   (`EC_QUEUE_WAVE_TRAP`, ...) and a VM fault `EC_DEVICE_MEMORY_VIOLATION` on the GPU
//!   ([`kernel`](super::kernel), [`engine::vm_fault`]). QUERY_DEBUG_EVENT
//!   (`kfd_dbg_ev_query_debug_event`) answers the first queue with an enabled status raised
//!   (its id and GPU), else the first GPU, else the process (and clears the bits asked
//!   there), `EAGAIN` when nothing enabled is raised; SET_EXCEPTIONS_ENABLED
//!   (`kfd_dbg_set_enabled_debug_exception_mask`) writes the byte when a newly enabled
//!   exception is already raised anywhere; QUERY_EXCEPTION_INFO
//!   (`kfd_dbg_trap_query_exception_info`) finds the queue, GPU or process (`EINVAL` for an
//!   unknown source, `ENODATA` when the bit is not raised), copies the runtime info for
//!   `EC_PROCESS_RUNTIME` and the fault's `kfd_hsa_memory_exception_data` for
//!   `EC_DEVICE_MEMORY_VIOLATION`, and clears the bit when asked.
//! - **SEND_RUNTIME_EVENT** (`kfd_dbg_send_exception_to_runtime`): a memory violation
//!   evicts the GPU's queues and sets the memory events with the kept fault (`ENODEV` for
//!   a GPU the process has not), `EC_PROCESS_RUNTIME` answers the hand-shake below, other
//!   bits go to the queue's runtime (`kfd_send_exception_to_runtime`).
//! - **Snapshots**: GET_QUEUE_SNAPSHOT (`pqm_get_queue_snapshot`) and GET_DEVICE_SNAPSHOT
//!   (`kfd_dbg_trap_device_snapshot`) copy up to the asked count of entries of at most the
//!   kernel's size, clear the asked bits, and answer the real count and the size used.
//! - **SUSPEND/RESUME_QUEUES** (`suspend_queues`, `resume_queues`): the ids come back
//!   marked invalid unless the queue was (or already is) suspended or resumed; a queue with
//!   `EC_QUEUE_NEW` raised is not suspended; the ioctl answers the count. A suspended
//!   queue's engine starts no packet (a dispatch in flight runs to its end: the waves are
//!   not saved); DISABLE with the runtime enabled resumes every queue.
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
//! - **Address watches** (`kfd_dbg_trap_set_dev_address_watch`, `_clear_`): a GPU the
//!   process has not is `ENODEV`; SET takes the lowest of the GPU's 4 watch points no
//!   process holds (`ENOMEM`, id -1, when none is free), CLEAR only one the process holds
//!   (`EINVAL`); DISABLE with the runtime enabled releases them, and so does the process's
//!   end. SET_FLAGS (`kfd_dbg_trap_set_flags`): `KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP` needs
//!   per-VMID debug registers on every GPU (GC 9.4.2, 9.4.3, 11 and later; else `EACCES`),
//!   the previous flags answered. Where it differs: no wave stops at a watched address (the
//!   interpreter has no watch registers), and SINGLE_MEM_OP changes nothing (every access
//!   completes before the next instruction already).
//!
//! Queues are listed in queue-id order (the kernel's list is newest first).

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
    EC_DEVICE_MEMORY_VIOLATION, EC_QUEUE_NEW, KFD_DBG_QUEUE_INVALID_MASK,
    KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP, KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT,
    KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT, kfd_dbg_device_info_entry,
    kfd_ioctl_dbg_trap_device_snapshot_args, kfd_ioctl_dbg_trap_queue_snapshot_args,
    kfd_ioctl_dbg_trap_resume_queues_args, kfd_ioctl_dbg_trap_suspend_queues_args,
    kfd_queue_snapshot_entry,
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
use super::engine;
use super::events::LIVENESS_PERIOD;
use super::exceptions;
use super::process::{DebugState, Process, State};
use crate::backend::IoctlResult;
use zerocopy::IntoBytes;

/// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL`, `_HALT` and `_DEBUG` (`kfd_ioctl.h`).
const WAVE_LAUNCH_MODES: [u32; 3] = [0, 1, 3];

/// `MAX_WATCH_ADDRESSES` (`kfd_debug.c`): a GPU's address watch points.
const MAX_WATCH_ADDRESSES: u32 = 4;

/// `kfd_dbg_is_per_vmid_supported` of a GPU of `gfx_target_version` `target`: GC 9.4.2
/// (gfx90a), 9.4.3 (gfx940–gfx942) and GC 11 and later.
fn per_vmid_debug(target: u32) -> bool {
    matches!(target, 90010 | 90400..=90402) || target >= 110000
}

/// `sizeof(struct kfd_runtime_info)`.
const RUNTIME_INFO_SIZE: u32 = 16;

/// `validate_trap_override_request` of a GPU of `gfx_target_version` `target`: the trap
/// bits it supports, whether `KFD_DBG_TRAP_OVERRIDE_REPLACE` is allowed besides `_OR`, and
/// the errno of another override mode; `None` where it is not emulated (GC 12, GC 9.5).
///
/// - GC 9.0–9.4.1 (`kgd_gfx_v9_validate_trap_override_request`, which arcturus uses too)
///   and GC 10.x (`kgd_gfx_v10_validate_trap_override_request`, gfx10.3 too): address watch
///   only; only OR (else `EINVAL`), as the register is global;
/// - GC 9.4.2 (`kgd_aldebaran_validate_trap_override_request`): the float and integer
///   exceptions, address watch and memory violation; OR or REPLACE (else `EPERM`);
/// - GC 9.4.3 (`kgd_gfx_v9_4_3_validate_trap_override_request`): those and trap on wave
///   start and end; OR or REPLACE (else `EPERM`);
/// - GC 11 (`kgd_gfx_v11_validate_trap_override_request`): the exceptions of GC 9.4.2, and
///   trap on wave start and end from GC 11.0.4 on; OR or REPLACE (else `EPERM`). Of the
///   gfx11 targets only gfx115x (GC 11.5) is certainly 11.0.4 or later: gfx1103 is GC 11.0.1
///   or 11.0.4 (`kgd2kfd_probe`), taken as 11.0.1.
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
        90000..=90399 | 100000..=109999 => {
            Some((KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH, false, Errno::INVAL))
        }
        110500..=119999 => Some((
            exceptions | KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START | KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END,
            true,
            Errno::PERM,
        )),
        110000..=110499 => Some((exceptions, true, Errno::PERM)),
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
    exceptions::ev_raise(p, mask & KFD_EC_MASK_PROCESS, 0, 0, None)
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
pub(super) fn dbg_trap(ctx: &Ctx<'_>, buf: &mut [u8]) -> IoctlResult {
    let mut a: kfd_ioctl_dbg_trap_args = get(buf);
    let mut value = 0;
    let result = trap(ctx, &mut a, &mut value);
    // The argument goes back whatever the result (`kfd_ioctl` copies it out after any call).
    put(buf, &a);
    // SUSPEND/RESUME_QUEUES answer their count as the ioctl's value.
    result.map(|()| value)
}

fn trap(ctx: &Ctx<'_>, a: &mut kfd_ioctl_dbg_trap_args, value: &mut i64) -> Result<(), Errno> {
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
    // Each GPU's watch points held by any process (`dev->alloc_watch_ids`).
    let mut dev_watch = vec![0u32; ctx.m.dev.cfg.machine.gpus().len()];
    for pdd in st.procs.values().flat_map(|p| &p.pdds) {
        if let Some(m) = dev_watch.get_mut(pdd.gpu) {
            *m |= pdd.watch_ids;
        }
    }
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
    // The GPU of an address watch op (`kfd_process_device_data_by_id`): `ENODEV` without it.
    let watch_gpu = match a.op {
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH => Some(a.set_node_address_watch().gpu_id),
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH => Some(a.clear_node_address_watch().gpu_id),
        _ => None,
    };
    let watch_pdd = match watch_gpu {
        Some(id) => Some(
            p.pdds
                .iter()
                .position(|d| d.gpu_id == id)
                .ok_or(Errno::NODEV)?,
        ),
        None => None,
    };
    if a.op == KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT {
        // (It evicts and signals, which take the lock: `st` goes with it.)
        let e = a.send_runtime_event();
        return send_to_runtime(ctx, tgid, st, e.gpu_id, e.queue_id, e.exception_mask);
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
            // kfd_dbg_trap_disable (runtime busy or in error is not modelled: enabled or not):
            // with the runtime enabled the traps are deactivated, which resumes every
            // suspended queue (`resume_queues(target, 0, NULL)`); every exception status
            // is cleaned (`kfd_dbg_clean_exception_status`).
            // Deactivating also clears the process's address watch points
            // (`kfd_dbg_clear_process_address_watch`) and its flags.
            if p.runtime_enabled {
                resume_all(p);
                for pdd in &mut p.pdds {
                    pdd.watch_ids = 0;
                }
            }
            for pdd in &mut p.pdds {
                pdd.exception_status = 0;
            }
            for q in p.queues.by_id.values_mut() {
                q.exception_status = 0;
            }
            p.debug = DebugState {
                sema: p.debug.sema,
                runtime_retry: p.debug.runtime_retry,
                ..DebugState::default()
            };
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED => {
            // kfd_dbg_set_enabled_debug_exception_mask: the byte when any raised status
            // (process, queue or device) is newly enabled.
            let mask = a.set_exceptions_enabled().exception_mask;
            let found = p.debug.exception_status
                | p.queues
                    .by_id
                    .values()
                    .fold(0, |m, q| m | q.exception_status)
                | p.pdds.iter().fold(0, |m, d| m | d.exception_status);
            if mask & found != 0 {
                exceptions::notify(&p.debug);
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
            // kfd_dbg_ev_query_debug_event: the first queue with an enabled status raised,
            // else the first device, else the process; the asked bits cleared there.
            let mut q = a.query_debug_event();
            let clear = q.exception_mask;
            q.exception_mask = 0;
            q.gpu_id = 0;
            q.queue_id = 0;
            let enabled = p.debug.exception_enable_mask;
            let gpu_id = |gpu: usize| p.pdds.iter().find(|d| d.gpu == gpu).map(|d| d.gpu_id);
            let queue = p
                .queues
                .by_id
                .iter()
                .find(|(_, x)| enabled & x.exception_status != 0)
                .map(|(&id, x)| (id, x.gpu));
            if let Some((id, gpu)) = queue {
                let gpu_id = gpu_id(gpu).unwrap_or(0);
                if let Some(x) = p.queues.by_id.get_mut(&id) {
                    q.exception_mask = x.exception_status;
                    q.queue_id = id;
                    q.gpu_id = gpu_id;
                    x.exception_status &= !clear;
                }
            } else if let Some(d) = p
                .pdds
                .iter_mut()
                .find(|d| enabled & d.exception_status != 0)
            {
                q.exception_mask = d.exception_status;
                q.gpu_id = d.gpu_id;
                d.exception_status &= !clear;
            } else if enabled & p.debug.exception_status != 0 {
                q.exception_mask = p.debug.exception_status;
                p.debug.exception_status &= !clear;
            }
            a.set_query_debug_event(q);
            if q.exception_mask == 0 {
                return Err(Errno::AGAIN);
            }
            Ok(())
        }
        KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => {
            let mut q = a.queue_snapshot();
            let r = queue_snapshot(ctx, p, &mut q);
            a.set_queue_snapshot(q);
            r
        }
        KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => {
            let mut d = a.device_snapshot();
            let r = device_snapshot(ctx, p, &mut d);
            a.set_device_snapshot(d);
            r
        }
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH => {
            // kfd_dbg_trap_set_dev_address_watch: the lowest watch point no process holds on
            // the GPU (`kfd_dbg_get_dev_watch_id`), else `ENOMEM` with the id -1.
            let i = watch_pdd.unwrap_or(0);
            let gpu = p.pdds[i].gpu;
            let held = dev_watch.get(gpu).copied().unwrap_or(0);
            let mut w = a.set_node_address_watch();
            let free = (0..MAX_WATCH_ADDRESSES).find(|b| held & 1 << b == 0);
            w.id = free.unwrap_or(u32::MAX);
            a.set_set_node_address_watch(w);
            let id = free.ok_or(Errno::NOMEM)?;
            p.pdds[i].watch_ids |= 1 << id;
            Ok(())
        }
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH => {
            // kfd_dbg_trap_clear_dev_address_watch: only a watch point the process holds.
            let i = watch_pdd.unwrap_or(0);
            let id = a.clear_node_address_watch().id;
            let d = &mut p.pdds[i];
            if id >= MAX_WATCH_ADDRESSES || d.watch_ids & 1 << id == 0 {
                return Err(Errno::INVAL);
            }
            d.watch_ids &= !(1 << id);
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SET_FLAGS => {
            // kfd_dbg_trap_set_flags: SINGLE_MEM_OP needs every GPU to have per-VMID debug
            // registers (else `EACCES`, the flags unchanged); the previous flags answered.
            let mut f = a.set_flags();
            let prev = p.debug.flags;
            let machine = &ctx.m.dev.cfg.machine;
            let per_vmid = p.pdds.iter().all(|pdd| {
                let target = machine
                    .node_of(&machine.gpus()[pdd.gpu])
                    .and_then(|n| n.gfx_target_version())
                    .and_then(|v| v.raw())
                    .unwrap_or(0);
                per_vmid_debug(target)
            });
            let wanted = f.flags;
            f.flags = prev;
            a.set_set_flags(f);
            if !per_vmid && wanted & KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP != 0 {
                return Err(Errno::ACCESS);
            }
            p.debug.flags = wanted & KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP;
            Ok(())
        }
        KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => {
            *value = suspend_queues(ctx, p, &a.suspend_queues())?;
            Ok(())
        }
        KFD_IOC_DBG_TRAP_RESUME_QUEUES => {
            *value = resume_queues(ctx, p, &a.resume_queues())?;
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
        let x = p.queues.by_id.get_mut(&q.source_id).ok_or(Errno::INVAL)?;
        if x.exception_status & bit == 0 {
            return Err(Errno::NODATA);
        }
        q.info_size = 0;
        if q.clear_exception != 0 {
            x.exception_status &= !bit;
        }
        return Ok(());
    }
    if bit & KFD_EC_MASK_DEVICE != 0 {
        let d = p
            .pdds
            .iter_mut()
            .find(|d| d.gpu_id == q.source_id)
            .ok_or(Errno::INVAL)?;
        if d.exception_status & bit == 0 {
            return Err(Errno::NODATA);
        }
        let mut size = 0;
        if code == EC_DEVICE_MEMORY_VIOLATION {
            // The fault's kfd_hsa_memory_exception_data (none kept: 0 bytes).
            let data = d.vm_fault_exc_data.clone().unwrap_or_default();
            let copy = (q.info_size as usize).min(data.len());
            ctx.caller.write(q.info_ptr, &data[..copy])?;
            size = data.len() as u32;
            if q.clear_exception != 0 {
                d.vm_fault_exc_data = None;
            }
        }
        q.info_size = size;
        if q.clear_exception != 0 {
            d.exception_status &= !bit;
        }
        return Ok(());
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

/// SEND_RUNTIME_EVENT (`kfd_dbg_send_exception_to_runtime`) on `tgid`'s process, whose
/// lock `st` is held: a device memory violation evicts the process's queues on the GPU
/// `gpu_id` and sets its memory events with the fault kept for the debugger (`ENODEV` for a
/// GPU the process has not); `EC_PROCESS_RUNTIME` answers the runtime's hand-shake; any
/// other bits go to the runtime of queue `queue_id` (`kfd_send_exception_to_runtime`,
/// nothing when no such queue).
fn send_to_runtime(
    ctx: &Ctx<'_>,
    tgid: i32,
    mut st: std::sync::MutexGuard<'_, State>,
    gpu_id: u32,
    queue_id: u32,
    mut reason: u64,
) -> Result<(), Errno> {
    let p = st.procs.get_mut(&tgid).ok_or(Errno::SRCH)?;
    let mut evict = None;
    let violation = kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION);
    if reason & violation != 0 {
        let d = p
            .pdds
            .iter()
            .find(|d| d.gpu_id == gpu_id)
            .ok_or(Errno::NODEV)?;
        evict = Some((d.gpu, d.vm_fault_exc_data.clone().unwrap_or_default()));
        reason &= !violation;
    }
    if reason & kfd_ec_mask(EC_PROCESS_RUNTIME) != 0 {
        // "up(&p->runtime_enable_sema)".
        p.debug.sema = p.debug.sema.saturating_add(1);
        reason &= !kfd_ec_mask(EC_PROCESS_RUNTIME);
        ctx.m.wake.notify_all();
    }
    let runtime = if reason != 0 {
        p.queues.by_id.get(&queue_id).and_then(|q| {
            let gpu = p.pdds.iter().find(|d| d.gpu == q.gpu)?.gpu_id;
            Some((gpu, q.ctx_save.0))
        })
    } else {
        None
    };
    drop(st);
    if let Some((gpu, data)) = evict {
        engine::evict_for_fault(ctx.m, tgid, gpu, None, &data);
    }
    if let Some((gpu, csa)) = runtime {
        exceptions::to_runtime(ctx.m, tgid, gpu, csa, reason);
    }
    Ok(())
}

/// GET_QUEUE_SNAPSHOT (`pqm_get_queue_snapshot`, `set_queue_snapshot_entry`): up to
/// `num_queues` entries of `entry_size` (at most the kernel's 64) bytes, each queue's
/// exception status cleared of `exception_mask`; `num_queues` answers how many queues
/// there are, `entry_size` the size copied. The kernel walks its queue list (newest
/// first); here the queues go in queue-id order.
fn queue_snapshot(
    ctx: &Ctx<'_>,
    p: &mut Process,
    a: &mut kfd_ioctl_dbg_trap_queue_snapshot_args,
) -> Result<(), Errno> {
    let stride = a.entry_size as u64;
    let size = (a.entry_size as usize).min(size_of::<kfd_queue_snapshot_entry>());
    a.entry_size = size as u32;
    let gpu_ids: Vec<(usize, u32)> = p.pdds.iter().map(|d| (d.gpu, d.gpu_id)).collect();
    let mut count = 0u32;
    let mut result = Ok(());
    for (&id, q) in &mut p.queues.by_id {
        if count < a.num_queues && result.is_ok() {
            let e = kfd_queue_snapshot_entry {
                exception_status: q.exception_status,
                ring_base_address: q.ring_va,
                write_pointer_address: q.wptr_va,
                read_pointer_address: q.rptr_va,
                ctx_save_restore_address: q.ctx_save.0,
                queue_id: id,
                gpu_id: gpu_ids
                    .iter()
                    .find(|(g, _)| *g == q.gpu)
                    .map_or(0, |(_, i)| *i),
                ring_size: q.ring_size as u32,
                queue_type: q.user_type,
                ctx_save_restore_area_size: q.ctx_save.1,
                reserved: 0,
            };
            q.exception_status &= !a.exception_mask;
            let at = a.snapshot_buf_ptr + u64::from(count) * stride;
            result = ctx.caller.write(at, &e.as_bytes()[..size]);
        }
        count += 1;
    }
    a.num_queues = count;
    result
}

/// GET_DEVICE_SNAPSHOT (`kfd_dbg_trap_device_snapshot`): an entry per GPU of the process,
/// up to `num_devices`, of `entry_size` bytes at most the kernel's; `num_devices` answers
/// the process's GPUs. Each entry: the pdd's exception status (then cleared of
/// `exception_mask`), the apertures GET_PROCESS_APERTURES reports, the topology node's
/// ids and counts, `fw_version` (the MEC firmware's, as the node's `fw_version`), the PCI
/// revision and subsystem ids as sysfs shows them (the subsystem is the vendor, device 0).
fn device_snapshot(
    ctx: &Ctx<'_>,
    p: &mut Process,
    a: &mut kfd_ioctl_dbg_trap_device_snapshot_args,
) -> Result<(), Errno> {
    if a.snapshot_buf_ptr == 0 {
        return Err(Errno::INVAL);
    }
    let stride = u64::from(a.entry_size);
    let wanted = (a.num_devices as usize).min(p.pdds.len());
    a.num_devices = p.pdds.len() as u32;
    let size = (a.entry_size as usize).min(size_of::<kfd_dbg_device_info_entry>());
    a.entry_size = size as u32;
    let machine = &ctx.m.dev.cfg.machine;
    for (i, pdd) in p.pdds.iter_mut().take(wanted).enumerate() {
        let gpu = &machine.gpus()[pdd.gpu];
        let node = machine.node_of(gpu);
        let prop = |key: &str| {
            node.and_then(|n| n.properties.get(key))
                .map_or(0, |v| v as u32)
        };
        let ap = gpu.apertures();
        let e = kfd_dbg_device_info_entry {
            exception_status: pdd.exception_status,
            lds_base: ap.lds_base,
            lds_limit: ap.lds_limit,
            scratch_base: ap.scratch_base,
            scratch_limit: ap.scratch_limit,
            gpuvm_base: ap.gpuvm_base,
            gpuvm_limit: ap.gpuvm_limit,
            gpu_id: pdd.gpu_id,
            location_id: prop("location_id"),
            vendor_id: prop("vendor_id"),
            device_id: prop("device_id"),
            revision_id: gpu.pci_revision(),
            subsystem_vendor_id: gpu.vendor_id,
            subsystem_device_id: 0,
            fw_version: prop("fw_version"),
            gfx_target_version: prop("gfx_target_version"),
            simd_count: prop("simd_count"),
            max_waves_per_simd: prop("max_waves_per_simd"),
            array_count: prop("array_count"),
            simd_arrays_per_engine: prop("simd_arrays_per_engine"),
            num_xcc: prop("num_xcc").max(1),
            capability: prop("capability"),
            debug_prop: prop("debug_prop"),
            ..Default::default()
        };
        pdd.exception_status &= !a.exception_mask;
        ctx.caller.write(
            a.snapshot_buf_ptr + i as u64 * stride,
            &e.as_bytes()[..size],
        )?;
    }
    Ok(())
}

/// The queue ids of a SUSPEND/RESUME_QUEUES array, each marked invalid until its queue
/// answers (`get_queue_ids`, `q_array_invalidate`).
fn queue_ids(ctx: &Ctx<'_>, at: u64, n: u32) -> Result<Vec<u32>, Errno> {
    let bytes = u64::from(n) * 4;
    if bytes > super::chardev::KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let mut raw = vec![0u8; bytes as usize];
    ctx.caller.read(at, &mut raw).map_err(|_| Errno::FAULT)?;
    Ok(raw
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) | KFD_DBG_QUEUE_INVALID_MASK)
        .collect())
}

/// The index in `ids` of queue `id` (`q_array_get_index`).
fn index_of(ids: &[u32], id: u32) -> Option<usize> {
    ids.iter()
        .position(|&x| x & !KFD_DBG_QUEUE_INVALID_MASK == id)
}

/// Writes the queue id array back (`copy_to_user`, whose failure the kernel only logs).
fn write_ids(ctx: &Ctx<'_>, at: u64, ids: &[u32]) {
    let raw: Vec<u8> = ids.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let _ = ctx.caller.write(at, &raw);
}

/// SUSPEND_QUEUES (`suspend_queues`, `suspend_single_queue`): each listed queue is
/// suspended (its engine starts no packet: a dispatch in flight runs to its end, as at an
/// eviction, where the hardware would save its waves) and marked valid, unless it is new
/// (`EC_QUEUE_NEW` raised and not cleared: `EBUSY`, left invalid); a queue suspended already
/// counts; the suspended ones' statuses are cleared of `exception_mask`. Answers the count.
fn suspend_queues(
    ctx: &Ctx<'_>,
    p: &mut Process,
    a: &kfd_ioctl_dbg_trap_suspend_queues_args,
) -> Result<i64, Errno> {
    let mut ids = queue_ids(ctx, a.queue_array_ptr, a.num_queues)?;
    let mut count = 0;
    for (&id, q) in &mut p.queues.by_id {
        let Some(i) = index_of(&ids, id) else {
            continue;
        };
        if !q.suspended {
            if q.exception_status & kfd_ec_mask(EC_QUEUE_NEW) != 0 {
                continue;
            }
            q.suspended = true;
            q.runner.set_evicted(true);
        }
        ids[i] &= !KFD_DBG_QUEUE_INVALID_MASK;
        q.exception_status &= !a.exception_mask;
        count += 1;
    }
    write_ids(ctx, a.queue_array_ptr, &ids);
    Ok(count)
}

/// RESUME_QUEUES (`resume_queues`, `resume_single_queue`): each listed queue resumes (a
/// queue not suspended counts too) and is marked valid. Answers the count.
fn resume_queues(
    ctx: &Ctx<'_>,
    p: &mut Process,
    a: &kfd_ioctl_dbg_trap_resume_queues_args,
) -> Result<i64, Errno> {
    let mut ids = queue_ids(ctx, a.queue_array_ptr, a.num_queues)?;
    let mut count = 0;
    let ttm_evicted = p.ttm_evicted;
    for (&id, q) in &mut p.queues.by_id {
        let Some(i) = index_of(&ids, id) else {
            continue;
        };
        resume(q, ttm_evicted);
        ids[i] &= !KFD_DBG_QUEUE_INVALID_MASK;
        count += 1;
    }
    write_ids(ctx, a.queue_array_ptr, &ids);
    Ok(count)
}

/// `resume_single_queue`: the queue runs again unless its process is evicted.
fn resume(q: &mut super::queues::Queue, ttm_evicted: bool) {
    if q.suspended {
        q.suspended = false;
        q.runner.set_evicted(ttm_evicted);
    }
}

/// `resume_queues(target, 0, NULL)`: every queue of the process.
fn resume_all(p: &mut Process) {
    let ttm_evicted = p.ttm_evicted;
    for q in p.queues.by_id.values_mut() {
        resume(q, ttm_evicted);
    }
}
