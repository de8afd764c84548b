//! The ioctls that are not about buffer objects or events: version, apertures, clocks,
//! per-GPU settings, XNACK, SMI event fds, and the honest failures
//! of what this model does not emulate (CRIU). The debugger's ioctls are in
//! [`debug`](super::debug). Queues are in [`queue_ioctls`](super::queue_ioctls). SVM is in [`svm`](super::svm).

use kfd_ioctl::abi::{
    KFD_IOC_CACHE_POLICY_NONCOHERENT, KFD_IOC_PROFILER_VERSION, KFD_IOC_PROFILER_VERSION_NUM,
    KFD_IOCTL_MAJOR_VERSION, NUM_OF_SUPPORTED_GPUS, kfd_ioctl_criu_args,
    kfd_ioctl_get_clock_counters_args, kfd_ioctl_get_process_apertures_args,
    kfd_ioctl_get_process_apertures_new_args, kfd_ioctl_get_tile_config_args,
    kfd_ioctl_get_version_args, kfd_ioctl_profiler_args, kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_set_scratch_backing_va_args, kfd_ioctl_set_trap_handler_args,
    kfd_ioctl_set_xnack_mode_args, kfd_ioctl_smi_events_args, kfd_process_device_apertures,
};
use rustix::io::Errno;
use zerocopy::IntoBytes;

use super::chardev::{Ctx, KMALLOC_MAX, get, put};
use crate::machine::Gpu;

/// The machine's description of the GPU behind a pdd.
fn gpu<'a>(ctx: &'a Ctx<'_>, index: usize) -> &'a Gpu {
    &ctx.m.dev.cfg.machine.gpus()[index]
}

/// AMDKFD_IOC_GET_VERSION: 1.minor of the kernel the model acts as.
pub(super) fn get_version(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    put(
        buf,
        &kfd_ioctl_get_version_args {
            major_version: KFD_IOCTL_MAJOR_VERSION,
            minor_version: ctx.m.dev.cfg.kfd_minor,
        },
    );
    Ok(())
}

/// AMDKFD_IOC_SET_MEMORY_POLICY.
pub(super) fn set_memory_policy(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_set_memory_policy_args = get(buf);
    if a.default_policy > KFD_IOC_CACHE_POLICY_NONCOHERENT
        || a.alternate_policy > KFD_IOC_CACHE_POLICY_NONCOHERENT
    {
        return Err(Errno::INVAL);
    }
    let mut st = ctx.m.lock();
    let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
    pdd.bound().map_err(|_| Errno::SRCH)?;
    pdd.default_policy = a.default_policy;
    pdd.alternate_policy = a.alternate_policy;
    pdd.misc_process_flag = a.misc_process_flag;
    Ok(())
}

/// AMDKFD_IOC_GET_CLOCK_COUNTERS: also for a gpu_id the process lacks (then the GPU counter
/// is 0), as ROCr asks with gpu_id 0 for the system clock.
pub(super) fn get_clock_counters(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_get_clock_counters_args = get(buf);
    let known = {
        let mut st = ctx.m.lock();
        st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id).is_ok()
    };
    // kfd_ioctl_get_clock_counters: gpu_clock_counter from
    // amdgpu_amdkfd_get_gpu_clock_counter (0 without a device), cpu_clock_counter =
    // ktime_get_raw_ns(), system_clock_counter = ktime_get_boottime_ns(), system_clock_freq =
    // NSEC_PER_SEC. The GPU counter is the 100 MHz reference clock of gfx9 and later
    // (RLC's REFCLK timestamp), modeled as CLOCK_MONOTONIC_RAW / 10. Under the model clock
    // all three follow the model's time, so the counters and the SMI records agree.
    let clock = &ctx.m.dev.clock;
    let raw = clock.raw_ns();
    a.gpu_clock_counter = if known { raw / 10 } else { 0 };
    a.cpu_clock_counter = raw;
    a.system_clock_counter = clock.now_ns();
    a.system_clock_freq = 1_000_000_000;
    put(buf, &a);
    Ok(())
}

/// The apertures entry of one GPU.
fn apertures_of(gpu: &Gpu) -> kfd_process_device_apertures {
    let a = gpu.apertures();
    kfd_process_device_apertures {
        lds_base: a.lds_base,
        lds_limit: a.lds_limit,
        scratch_base: a.scratch_base,
        scratch_limit: a.scratch_limit,
        gpuvm_base: a.gpuvm_base,
        gpuvm_limit: a.gpuvm_limit,
        gpu_id: gpu.gpu_id,
        pad: 0,
    }
}

/// AMDKFD_IOC_GET_PROCESS_APERTURES: the first 7 GPUs.
pub(super) fn get_process_apertures(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_get_process_apertures_args = get(buf);
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    let gpus = ctx.m.dev.cfg.machine.gpus();
    a.num_of_nodes = 0;
    for (slot, gpu) in a.process_apertures.iter_mut().zip(gpus) {
        *slot = apertures_of(gpu);
        a.num_of_nodes += 1;
    }
    debug_assert!(a.num_of_nodes as usize <= NUM_OF_SUPPORTED_GPUS);
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: the count with `num_of_nodes == 0`, else up to
/// `num_of_nodes` entries.
pub(super) fn get_process_apertures_new(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_get_process_apertures_new_args = get(buf);
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    let gpus = ctx.m.dev.cfg.machine.gpus();
    if a.num_of_nodes == 0 {
        a.num_of_nodes = gpus.len() as u32;
        put(buf, &a);
        return Ok(());
    }
    // kcalloc(num_of_nodes, 56)
    if u64::from(a.num_of_nodes) * size_of::<kfd_process_device_apertures>() as u64 > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let entries: Vec<kfd_process_device_apertures> = gpus
        .iter()
        .take(a.num_of_nodes as usize)
        .map(apertures_of)
        .collect();
    a.num_of_nodes = entries.len() as u32;
    put(buf, &a);
    ctx.caller
        .write(a.kfd_process_device_apertures_ptr, entries.as_bytes())
        .map_err(|_| Errno::FAULT)
}

/// AMDKFD_IOC_SET_SCRATCH_BACKING_VA.
pub(super) fn set_scratch_backing_va(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_set_scratch_backing_va_args = get(buf);
    let mut st = ctx.m.lock();
    let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
    pdd.bound()?;
    pdd.scratch_va = a.va_addr;
    Ok(())
}

/// AMDKFD_IOC_GET_TILE_CONFIG: GFX9 and later have no tile tables (zeros) and no bank/rank
/// counts.
pub(super) fn get_tile_config(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    const TILE_CONFIGS: u32 = 32;
    const MACRO_TILE_CONFIGS: u32 = 16;
    let mut a: kfd_ioctl_get_tile_config_args = get(buf);
    let index = {
        let mut st = ctx.m.lock();
        st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?.gpu
    };
    a.gb_addr_config = gpu(ctx, index).gb_addr_config();
    a.num_banks = 0;
    a.num_ranks = 0;
    a.num_tile_configs = a.num_tile_configs.min(TILE_CONFIGS);
    let zeros = vec![0u8; 4 * TILE_CONFIGS as usize];
    if a.num_tile_configs > 0
        && ctx
            .caller
            .write(a.tile_config_ptr, &zeros[..4 * a.num_tile_configs as usize])
            .is_err()
    {
        a.num_tile_configs = 0;
        put(buf, &a);
        return Err(Errno::FAULT);
    }
    a.num_macro_tile_configs = a.num_macro_tile_configs.min(MACRO_TILE_CONFIGS);
    if a.num_macro_tile_configs > 0
        && ctx
            .caller
            .write(
                a.macro_tile_config_ptr,
                &zeros[..4 * a.num_macro_tile_configs as usize],
            )
            .is_err()
    {
        a.num_macro_tile_configs = 0;
        put(buf, &a);
        return Err(Errno::FAULT);
    }
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_SET_TRAP_HANDLER.
pub(super) fn set_trap_handler(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_set_trap_handler_args = get(buf);
    let mut st = ctx.m.lock();
    let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
    pdd.bound().map_err(|_| Errno::SRCH)?;
    pdd.tba = a.tba_addr;
    pdd.tma = a.tma_addr;
    Ok(())
}

/// AMDKFD_IOC_SMI_EVENTS: a new event fd for the GPU (see [`smi`](super::smi)), installed in
/// the caller without `O_CLOEXEC`.
pub(super) fn smi_events(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_smi_events_args = get(buf);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let gpu = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpuid)?.gpu;
    // anon_inode_getfd installs it without O_CLOEXEC; the model's goes at a number of
    // SMI_FDS, whose writes the supervisor hands to `Backend::write`.
    a.anon_fd = st.smi.open(ctx.caller.id(), gpu, |fd| {
        ctx.caller.install_fd_in(fd, crate::backend::SMI_FDS, false)
    })? as u32;
    put(buf, &a);
    Ok(())
}

/// Whether every GPU of the process lets it turn XNACK on: `kfd_process_xnack_mode(p, true)`
/// (see [`Machine::xnack_mode`](crate::machine::Machine::xnack_mode)).
fn xnack_allowed(ctx: &Ctx<'_>) -> bool {
    ctx.m.dev.cfg.machine.xnack_mode(true)
}

/// AMDKFD_IOC_SET_XNACK_MODE: `< 0` queries; `>= 0` sets (EPERM where not supported), moving
/// the SVM ranges' system-memory reservation (`ENOMEM` when turning XNACK off cannot reserve
/// it); `EBUSY` to change it while the process has user queues.
pub(super) fn set_xnack_mode(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_set_xnack_mode_args = get(buf);
    let allowed = xnack_allowed(ctx);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let process = st.process(ctx.tgid, ctx.serial)?;
    // An installed SVM observer hears the mode each successful call leaves (queried or set).
    let observe = |on: bool| {
        if let Some(observer) = ctx.m.observer.get() {
            observer.0.xnack(ctx.tgid, on);
        }
    };
    if a.xnack_enabled < 0 {
        a.xnack_enabled = i32::from(process.xnack);
        put(buf, &a);
        observe(process.xnack);
        return Ok(());
    }
    let want = a.xnack_enabled != 0;
    // kfd_ioctl_set_xnack_mode: "Process has user queues running".
    if !process.queues.by_id.is_empty() {
        return Err(Errno::BUSY);
    }
    if want == process.xnack {
        observe(want);
        return Ok(());
    }
    if want && !allowed {
        return Err(Errno::PERM);
    }
    super::svm::switch_xnack(ctx.m, st, ctx.tgid, want)?;
    observe(want);
    Ok(())
}

/// AMDKFD_IOC_CRIU_OP (the privilege check is the dispatcher's): checkpoint/restore is not
/// emulated; unknown ops are `EINVAL` as in the kernel, and so are the known ones here.
pub(super) fn criu_op(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let _a: kfd_ioctl_criu_args = get(buf);
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    Err(Errno::INVAL)
}

/// AMDKFD_IOC_CREATE_PROCESS (1.19): secondary contexts are not emulated.
pub(super) fn create_process(ctx: &Ctx<'_>, _buf: &mut [u8]) -> Result<(), Errno> {
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    Err(Errno::INVAL)
}

/// AMDKFD_IOC_PROFILER (1.23): VERSION answers; the PMC and PTL controls are not emulated.
pub(super) fn profiler(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_profiler_args = get(buf);
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    if a.op == KFD_IOC_PROFILER_VERSION {
        a.set_version(KFD_IOC_PROFILER_VERSION_NUM);
        put(buf, &a);
        return Ok(());
    }
    Err(Errno::INVAL)
}
