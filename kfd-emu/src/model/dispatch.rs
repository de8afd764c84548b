//! The `/dev/kfd` ioctl dispatcher (`kfd_ioctl` in `kfd_chardev.c`, kfd-abi.md §4.1).

use kfd_ioctl::abi::{IOC_READ, IOC_WRITE, IoctlInfo, command_end, ioc_nr, ioc_size, ioctl_info};
use rustix::io::Errno;

use super::chardev::Ctx;
use super::host::{self, CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN};
use super::{Model, events, fail, handlers, memory_ioctls, svm, trace};
use crate::backend::{Caller, IoctlResult};

/// The KFD minor from which an unknown ioctl number is `ENOTTY` rather than `EINVAL` (the
/// 2025 change, also taken into stable kernels; older kernels answer `EINVAL`).
const ENOTTY_SINCE_MINOR: u32 = 17;

/// The SVM ioctl, whose size depends on its attribute count.
const NR_SVM: u8 = 0x20;
/// CRIU, which needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN.
const NR_CRIU: u8 = 0x22;

/// Answers ioctl `cmd` on the `/dev/kfd` stand-in of process `(tgid, serial)`.
pub(super) fn kfd_ioctl(
    m: &Model,
    caller: &dyn Caller,
    tgid: i32,
    serial: u64,
    cmd: u32,
    arg: u64,
) -> IoctlResult {
    // 1. The number, against the table of the kernel we act as.
    let nr = ioc_nr(cmd);
    let info = match ioctl_info(nr) {
        Some(info) if nr < command_end(m.cfg.kfd_minor) => info,
        _ => {
            let errno = if m.cfg.kfd_minor >= ENOTTY_SINCE_MINOR {
                Errno::NOTTY
            } else {
                Errno::INVAL
            };
            trace::unknown(m, caller, cmd, errno);
            return Err(errno);
        }
    };
    // 2. Size from the caller's word, direction from the kernel's.
    let usize = ioc_size(cmd);
    let asize = usize.max(info.size);
    // 3. Only the process that opened /dev/kfd may use the fd.
    let alive = {
        let mut st = m.lock();
        let alive = st.procs.get(&tgid).is_some_and(|p| p.serial == serial);
        // Event masks the process wrote to its SMI fds apply from its next ioctl on.
        st.smi.take_masks_of(caller.id().tgid);
        alive
    };
    if caller.id().tgid != tgid || !alive {
        return finish(m, caller, info, &[], Err(Errno::BADF));
    }
    // 4. Privilege.
    if nr == NR_CRIU
        && host::effective_caps(caller.id().tid)
            & (1 << CAP_CHECKPOINT_RESTORE | 1 << CAP_SYS_ADMIN)
            == 0
    {
        return finish(m, caller, info, &[], Err(Errno::ACCESS));
    }
    // 5., 6. The kernel buffer: zero-extended, filled from the caller for IOC_IN.
    let mut buf = vec![0u8; asize];
    if info.dir & IOC_WRITE != 0 {
        let read = caller.read(arg, &mut buf[..usize]);
        if let Err(e) = read {
            let errno = if e == Errno::NOENT { e } else { Errno::FAULT };
            return finish(m, caller, info, &[], Err(errno));
        }
    }
    // 7. The SVM validator: the attributes must fit the size the caller passed.
    if nr == NR_SVM {
        let nattr = u64::from(u32::from_ne_bytes([buf[20], buf[21], buf[22], buf[23]]));
        if (usize as u64) < 24 + 8 * nattr {
            return finish(m, caller, info, &buf, Err(Errno::INVAL));
        }
    }
    let before = m.cfg.trace.then(|| buf.clone());
    // Fault injection, in place of the handler.
    let injected = {
        let mut rules = m.fail.lock().unwrap_or_else(|e| e.into_inner());
        fail::Armed::fire(&mut rules, info.name)
    };
    let mut result = match injected {
        Some(errno) => Err(errno),
        None => {
            let ctx = Ctx {
                m,
                caller,
                tgid,
                serial,
            };
            handle(&ctx, nr, &mut buf)
        }
    };
    // 9. Copy-out, even after a failure, so partial results reach the caller.
    if info.dir & IOC_READ != 0 && injected.is_none() && caller.write(arg, &buf[..usize]).is_err() {
        result = Err(Errno::FAULT);
    }
    if let Some(before) = before {
        trace::kfd(m, caller, info, &before, &buf, result);
    }
    result
}

/// Traces and returns a result the dispatcher produced before any handler ran.
fn finish(
    m: &Model,
    caller: &dyn Caller,
    info: &IoctlInfo,
    buf: &[u8],
    result: IoctlResult,
) -> IoctlResult {
    if m.cfg.trace {
        trace::kfd(m, caller, info, buf, buf, result);
    }
    result
}

/// Runs the handler of ioctl `nr`.
fn handle(ctx: &Ctx<'_>, nr: u8, buf: &mut [u8]) -> IoctlResult {
    let r = match nr {
        0x01 => handlers::get_version(ctx, buf),
        0x02 => handlers::create_queue(ctx, buf),
        0x03 => handlers::destroy_queue(ctx, buf),
        0x04 => handlers::set_memory_policy(ctx, buf),
        0x05 => handlers::get_clock_counters(ctx, buf),
        0x06 => handlers::get_process_apertures(ctx, buf),
        0x07 => handlers::update_queue(ctx, buf),
        0x08 => events::create_event(ctx, buf),
        0x09 => events::destroy_event(ctx, buf),
        0x0A => events::set_event(ctx, buf),
        0x0B => events::reset_event(ctx, buf),
        0x0C => events::wait_events(ctx, buf),
        // The pre-1.13 debugger ioctls are gone: the kernel keeps the slots, answering EPERM.
        0x0D..=0x10 => Err(Errno::PERM),
        0x11 => handlers::set_scratch_backing_va(ctx, buf),
        0x12 => handlers::get_tile_config(ctx, buf),
        0x13 => handlers::set_trap_handler(ctx, buf),
        0x14 => handlers::get_process_apertures_new(ctx, buf),
        0x15 => memory_ioctls::acquire_vm(ctx, buf),
        0x16 => memory_ioctls::alloc_memory_of_gpu(ctx, buf),
        0x17 => memory_ioctls::free_memory_of_gpu(ctx, buf),
        0x18 => memory_ioctls::map_memory_to_gpu(ctx, buf),
        0x19 => memory_ioctls::unmap_memory_from_gpu(ctx, buf),
        0x1A => handlers::set_cu_mask(ctx, buf),
        0x1B => handlers::get_queue_wave_state(ctx, buf),
        0x1C => memory_ioctls::get_dmabuf_info(ctx, buf),
        0x1D => memory_ioctls::import_dmabuf(ctx, buf),
        0x1E => handlers::alloc_queue_gws(ctx, buf),
        0x1F => handlers::smi_events(ctx, buf),
        // SVM's only return value that is not 0 or an error: see `svm::ioctl`.
        0x20 => return svm::ioctl(ctx, buf),
        0x21 => handlers::set_xnack_mode(ctx, buf),
        0x22 => handlers::criu_op(ctx, buf),
        0x23 => memory_ioctls::available_memory(ctx, buf),
        0x24 => memory_ioctls::export_dmabuf(ctx, buf),
        0x25 => handlers::runtime_enable(ctx, buf),
        0x26 => handlers::dbg_trap(ctx, buf),
        0x27 => handlers::create_process(ctx, buf),
        0x28 => handlers::profiler(ctx, buf),
        // A table slot without a handler.
        _ => Err(Errno::INVAL),
    };
    r.map(|()| 0)
}
