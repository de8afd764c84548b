//! `AMDKFD_IOC_PC_SAMPLE` (`kfd_pc_sampling.c` of ROCm/ROCK-Kernel-Driver at `bebf678`, PC
//! sampling revision 1.1; the ioctl's entry `kfd_ioctl_pc_sample` in `kfd_chardev.c`).
//!
//! Each GPU keeps, per method (host trap, stochastic), how many sessions use it, how many
//! are started and the format the first session chose; sessions are ids of the GPU
//! (`idr_alloc_cyclic` from 1), each owned by one process device.
//! * The methods per GC version (`supported_formats`): host trap (interval in µs, 1 to
//!   `u64::MAX`) on GC 9.4.2 (gfx90a, MI210), 9.4.3 (gfx942, MI300X) and 9.5.0; stochastic
//!   (clock cycles, a power of two from 256 to 2^31) on GC 9.4.3. Every other GPU answers
//!   QUERY_CAPABILITIES with `EOPNOTSUPP` (libhsakmt: NOT_SUPPORTED, which kfdtest skips on).
//! * QUERY_CAPABILITIES (`kfd_pc_sample_query_cap`): the revision in the argument's last
//!   word; while a session exists on the GPU and `flags` is not `QUERY_TYPE_FULL`, only the
//!   formats in use (stochastic first), each copied if it fits, the pointer moved past the
//!   stochastic one; otherwise the count of methods, `ENOSPC` if the array is too short,
//!   and the table's entries.
//! * CREATE (`kfd_pc_sample_create`): `EINVAL` unless `num_sample_info` is 1; `EFAULT` for
//!   an unreadable format; `EOPNOTSUPP` for one no method of the GPU takes; `EINVAL` for an
//!   interval that is not a power of two where the method needs one; `EEXIST` when the
//!   method is in use with another format (which is copied back over the caller's): one
//!   format per method and GPU, across all processes.
//! * DESTROY, START, STOP (`kfd_pc_sample`): a trace id that is not a session of this
//!   process device is `EINVAL`; DESTROY of a started session `EBUSY`, START of one
//!   `EALREADY`, STOP of a stopped one `EALREADY`. QUERY and CREATE of a process a debugger
//!   enabled the debug trap on are `EBUSY` ("Cannot have PC Sampling and debug trap
//!   simultaneously"). An unknown op is `EINVAL`. A gpu_id the process has no device for is
//!   `EINVAL`; START without a VM there `ESRCH` (`kfd_bind_process_to_device` failing).
//! * A process's sessions are stopped and destroyed when it goes (`kfd_pc_sample_release`,
//!   [`DkmsState::release`](super::state::DkmsState::release)).
//!
//! Where it differs: no sample is delivered. With sessions started the driver's thread
//! (`kfd_pc_sample_thread`) triggers a host trap every interval (`trigger_pc_sample_trap`,
//! an `SQ_CMD` to one wave of the KFD VMIDs), and the trap handler of the CWSR firmware
//! writes the wave's PC and state to the buffer the runtime's second-level handler set up
//! (rocprofiler-sdk); the stochastic method programs the SQ's sampling registers
//! (`setup_stoch_sampling`). The model counts sessions only: it never interrupts a wave, so
//! a profiler's sample buffer stays empty (kfdtest checks only the ioctl's results). Also
//! not modelled: the `NO_HWS` scheduling policy's `EINVAL` (the model is HWS), and that a
//! CREATE turns the process's TTMP setup on and keeps a debugger from attaching
//! (`kfd_dbg_enable_ttmp_setup`, `pc_sampling_ref`).

use kfd_ioctl::topology::GfxTargetVersion;
use rustix::io::Errno;
use zerocopy::{FromBytes, IntoBytes};

use super::super::chardev::{Ctx, get, put};
use super::abi::{
    KFD_IOCTL_PCS_FLAG_POWER_OF_2, KFD_IOCTL_PCS_METHOD_HOSTTRAP, KFD_IOCTL_PCS_METHOD_STOCHASTIC,
    KFD_IOCTL_PCS_OP_CREATE, KFD_IOCTL_PCS_OP_DESTROY, KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES,
    KFD_IOCTL_PCS_OP_START, KFD_IOCTL_PCS_OP_STOP, KFD_IOCTL_PCS_QUERY_TYPE_FULL,
    KFD_IOCTL_PCS_TYPE_CLOCK_CYCLES, KFD_IOCTL_PCS_TYPE_TIME_US, kfd_ioctl_pc_sample_args,
    kfd_pc_sample_info,
};
use super::state::{PcsNode, PcsSession};

/// `KFD_IOCTL_PCS_MAJOR_VERSION << 16 | KFD_IOCTL_PCS_MINOR_VERSION` (1.1).
const PCS_VERSION: u32 = 1 << 16 | 1;

/// `sample_info_hosttrap_9_0_0`.
const HOSTTRAP_9_0_0: kfd_pc_sample_info = kfd_pc_sample_info {
    interval: 0,
    interval_min: 1,
    interval_max: u64::MAX,
    flags: 0,
    method: KFD_IOCTL_PCS_METHOD_HOSTTRAP,
    type_: KFD_IOCTL_PCS_TYPE_TIME_US,
};

/// `sample_info_stoch_cycle_9_4_3`.
const STOCH_CYCLE_9_4_3: kfd_pc_sample_info = kfd_pc_sample_info {
    interval: 0,
    interval_min: 256,
    interval_max: 1 << 31,
    flags: KFD_IOCTL_PCS_FLAG_POWER_OF_2,
    method: KFD_IOCTL_PCS_METHOD_STOCHASTIC,
    type_: KFD_IOCTL_PCS_TYPE_CLOCK_CYCLES,
};

/// `supported_formats`: the methods by GC IP version, in the driver's order.
const SUPPORTED_FORMATS: &[((u8, u8, u8), kfd_pc_sample_info)] = &[
    ((9, 4, 2), HOSTTRAP_9_0_0),
    ((9, 4, 3), HOSTTRAP_9_0_0),
    ((9, 4, 3), STOCH_CYCLE_9_4_3),
    ((9, 5, 0), HOSTTRAP_9_0_0),
];

/// `KFD_GC_VERSION` of a GPU from its `gfx_target_version`, as `kgd2kfd_probe` maps one to
/// the other (`kfd_device.c`): gfx906 is GC 9.4.0 (Vega 20), gfx908 9.4.1 (Arcturus),
/// gfx90a 9.4.2 (Aldebaran), gfx940–gfx942 9.4.3; from GC 10 on the target is the version.
fn gc_ip_version(target: GfxTargetVersion) -> (u8, u8, u8) {
    match (target.major, target.minor, target.stepping) {
        (9, 0, 6) => (9, 4, 0),
        (9, 0, 8) => (9, 4, 1),
        (9, 0, 10) => (9, 4, 2),
        _ => crate::machine::ip_discovery::gc_version(target),
    }
}

/// The methods of GC version `gc`.
fn formats(gc: (u8, u8, u8)) -> impl Iterator<Item = &'static kfd_pc_sample_info> {
    SUPPORTED_FORMATS
        .iter()
        .filter(move |(v, _)| *v == gc)
        .map(|(_, f)| f)
}

/// What a handler leaves for after the locks: caller memory to write (`copy_to_user`), and
/// the errno the op returns if the writes succeed.
struct Outcome {
    writes: Vec<(u64, kfd_pc_sample_info)>,
    result: Result<(), Errno>,
}

impl Outcome {
    fn done(result: Result<(), Errno>) -> Outcome {
        Outcome {
            writes: Vec::new(),
            result,
        }
    }
}

/// AMDKFD_IOC_PC_SAMPLE.
pub(super) fn pc_sample(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_pc_sample_args = get(buf);
    let m = ctx.m;
    // kfd_ioctl_pc_sample: the process device of gpu_id, bound for START.
    let (gpu, bound, debugged) = {
        let mut st = m.lock();
        let p = st.process(ctx.tgid, ctx.serial)?;
        let debugged = p.debug.enabled;
        let pdd = p.pdd(a.gpu_id)?;
        (pdd.gpu, pdd.bound().is_ok(), debugged)
    };
    if a.op == KFD_IOCTL_PCS_OP_START && !bound {
        return Err(Errno::SRCH);
    }
    let gc = gc_ip_version(m.dev.cfg.machine.gpus()[gpu].target);
    // CREATE reads its format before taking the node's mutex.
    let user_info = if a.op == KFD_IOCTL_PCS_OP_CREATE && a.num_sample_info == 1 {
        let mut bytes = [0u8; size_of::<kfd_pc_sample_info>()];
        ctx.caller
            .read(a.sample_info_ptr, &mut bytes)
            .map_err(|_| Errno::FAULT)
            .map(|()| kfd_pc_sample_info::read_from_bytes(&bytes).unwrap_or_default())
    } else {
        Ok(kfd_pc_sample_info::default())
    };
    let outcome = {
        let mut dkms = m.dkms.lock().unwrap_or_else(|e| e.into_inner());
        let node = dkms.pcs(gpu);
        op(
            node,
            &mut a,
            (ctx.tgid, ctx.serial),
            gc,
            debugged,
            user_info,
        )
    };
    for (addr, info) in &outcome.writes {
        if ctx.caller.write(*addr, info.as_bytes()).is_err() {
            put(buf, &a);
            return Err(Errno::FAULT);
        }
    }
    put(buf, &a);
    outcome.result
}

/// `kfd_pc_sample` on GPU `node` of GC version `gc` for process `owner`.
fn op(
    node: &mut PcsNode,
    a: &mut kfd_ioctl_pc_sample_args,
    owner: (i32, u64),
    gc: (u8, u8, u8),
    debugged: bool,
    user_info: Result<kfd_pc_sample_info, Errno>,
) -> Outcome {
    let session = if a.op != KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES && a.op != KFD_IOCTL_PCS_OP_CREATE
    {
        match node.sessions.get(&a.trace_id) {
            Some(s) if (s.tgid, s.serial) == owner => Some(*s),
            _ => return Outcome::done(Err(Errno::INVAL)),
        }
    } else if debugged {
        return Outcome::done(Err(Errno::BUSY));
    } else {
        None
    };
    match (a.op, session) {
        (KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES, _) => query_cap(node, a, gc),
        (KFD_IOCTL_PCS_OP_CREATE, _) => create(node, a, owner, gc, user_info),
        (KFD_IOCTL_PCS_OP_DESTROY, Some(s)) if s.enabled => Outcome::done(Err(Errno::BUSY)),
        (KFD_IOCTL_PCS_OP_DESTROY, Some(_)) => {
            node.destroy(a.trace_id);
            Outcome::done(Ok(()))
        }
        (KFD_IOCTL_PCS_OP_START, Some(s)) if s.enabled => Outcome::done(Err(Errno::ALREADY)),
        (KFD_IOCTL_PCS_OP_START, Some(_)) => {
            node.start(a.trace_id);
            Outcome::done(Ok(()))
        }
        (KFD_IOCTL_PCS_OP_STOP, Some(s)) if !s.enabled => Outcome::done(Err(Errno::ALREADY)),
        (KFD_IOCTL_PCS_OP_STOP, Some(_)) => {
            node.stop(a.trace_id);
            Outcome::done(Ok(()))
        }
        _ => Outcome::done(Err(Errno::INVAL)),
    }
}

/// `kfd_pc_sample_query_cap`.
fn query_cap(node: &mut PcsNode, a: &mut kfd_ioctl_pc_sample_args, gc: (u8, u8, u8)) -> Outcome {
    let user_num = a.num_sample_info;
    a.version = PCS_VERSION;
    let num_method = formats(gc).count() as u32;
    if num_method == 0 {
        return Outcome::done(Err(Errno::OPNOTSUPP));
    }
    let mut writes = Vec::new();
    let (stoch, hosttrap) = (node.stochastic, node.hosttrap);
    if a.flags != KFD_IOCTL_PCS_QUERY_TYPE_FULL && (hosttrap.use_count > 0 || stoch.use_count > 0) {
        // A session exists: only the formats in use.
        a.num_sample_info = 0;
        if stoch.use_count > 0 {
            a.num_sample_info += 1;
            if a.sample_info_ptr != 0 && a.num_sample_info <= user_num {
                writes.push((a.sample_info_ptr, stoch.info));
                // The kernel moves the pointer past the stochastic entry (and copies the
                // moved pointer back).
                a.sample_info_ptr += size_of::<kfd_pc_sample_info>() as u64;
            }
        }
        if hosttrap.use_count > 0 {
            a.num_sample_info += 1;
            if a.sample_info_ptr != 0 && a.num_sample_info <= user_num {
                writes.push((a.sample_info_ptr, hosttrap.info));
            }
        }
        return Outcome {
            writes,
            result: Ok(()),
        };
    }
    a.num_sample_info = num_method;
    if a.sample_info_ptr == 0 || user_num == 0 {
        // The caller asks for the size it needs.
        return Outcome::done(Ok(()));
    }
    if user_num < num_method {
        return Outcome::done(Err(Errno::NOSPC));
    }
    let step = size_of::<kfd_pc_sample_info>() as u64;
    for (i, f) in formats(gc).enumerate() {
        writes.push((a.sample_info_ptr + step * i as u64, *f));
    }
    Outcome {
        writes,
        result: Ok(()),
    }
}

/// `kfd_pc_sample_create`.
fn create(
    node: &mut PcsNode,
    a: &mut kfd_ioctl_pc_sample_args,
    owner: (i32, u64),
    gc: (u8, u8, u8),
    user_info: Result<kfd_pc_sample_info, Errno>,
) -> Outcome {
    if a.num_sample_info != 1 {
        return Outcome::done(Err(Errno::INVAL));
    }
    let user = match user_info {
        Ok(info) => info,
        Err(errno) => return Outcome::done(Err(errno)),
    };
    let Some(format) = formats(gc).find(|f| {
        user.method == f.method
            && user.type_ == f.type_
            && user.interval <= f.interval_max
            && user.interval >= f.interval_min
    }) else {
        return Outcome::done(Err(Errno::OPNOTSUPP));
    };
    if format.flags == KFD_IOCTL_PCS_FLAG_POWER_OF_2 && !user.interval.is_power_of_two() {
        return Outcome::done(Err(Errno::INVAL));
    }
    let method = *node.method(format.method);
    if method.use_count > 0 && method.info != user {
        // One format per method and GPU: the one in use is copied back.
        return Outcome {
            writes: vec![(a.sample_info_ptr, method.info)],
            result: Err(Errno::EXIST),
        };
    }
    let Some(id) = node.alloc_id() else {
        return Outcome::done(Err(Errno::NOSPC));
    };
    let counts = node.method(format.method);
    if counts.use_count == 0 {
        counts.info = user;
    }
    counts.use_count += 1;
    node.sessions.insert(
        id,
        PcsSession {
            tgid: owner.0,
            serial: owner.1,
            method: format.method,
            enabled: false,
        },
    );
    a.trace_id = id;
    Outcome::done(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(op: u32) -> kfd_ioctl_pc_sample_args {
        kfd_ioctl_pc_sample_args {
            op,
            ..Default::default()
        }
    }

    const MI300X: (u8, u8, u8) = (9, 4, 3);

    fn host_trap(interval: u64) -> kfd_pc_sample_info {
        kfd_pc_sample_info {
            interval,
            ..HOSTTRAP_9_0_0
        }
    }

    #[test]
    fn gc_versions_of_the_presets_targets() {
        let t = |major, minor, stepping| GfxTargetVersion {
            major,
            minor,
            stepping,
        };
        assert_eq!(gc_ip_version(t(9, 4, 2)), (9, 4, 3));
        assert_eq!(gc_ip_version(t(9, 0, 10)), (9, 4, 2));
        assert_eq!(gc_ip_version(t(9, 0, 8)), (9, 4, 1));
        assert_eq!(gc_ip_version(t(9, 0, 6)), (9, 4, 0));
        assert_eq!(gc_ip_version(t(11, 0, 0)), (11, 0, 0));
        assert_eq!(formats((9, 4, 3)).count(), 2);
        assert_eq!(formats((9, 4, 2)).count(), 1);
        assert_eq!(formats((9, 4, 1)).count(), 0);
    }

    #[test]
    fn a_query_during_a_session_lists_the_format_in_use() {
        let mut node = PcsNode::default();
        let mut a = args(KFD_IOCTL_PCS_OP_CREATE);
        a.num_sample_info = 1;
        let o = create(&mut node, &mut a, (1, 1), MI300X, Ok(host_trap(1000)));
        assert_eq!(o.result, Ok(()));
        let mut q = args(KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES);
        q.sample_info_ptr = 0x1000;
        q.num_sample_info = 2;
        let o = query_cap(&mut node, &mut q, MI300X);
        assert_eq!(o.result, Ok(()));
        assert_eq!(q.num_sample_info, 1);
        assert_eq!(o.writes, vec![(0x1000, host_trap(1000))]);
        // With QUERY_TYPE_FULL: the table.
        let mut q = args(KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES);
        q.flags = KFD_IOCTL_PCS_QUERY_TYPE_FULL;
        q.sample_info_ptr = 0x1000;
        q.num_sample_info = 2;
        let o = query_cap(&mut node, &mut q, MI300X);
        assert_eq!(
            o.writes,
            vec![(0x1000, HOSTTRAP_9_0_0), (0x1028, STOCH_CYCLE_9_4_3)]
        );
    }

    #[test]
    fn stochastic_intervals_must_be_powers_of_two_in_range() {
        let mut node = PcsNode::default();
        let mut a = args(KFD_IOCTL_PCS_OP_CREATE);
        a.num_sample_info = 1;
        let stoch = |interval| kfd_pc_sample_info {
            interval,
            ..STOCH_CYCLE_9_4_3
        };
        let r =
            |node: &mut PcsNode, a: &mut _, i| create(node, a, (1, 1), MI300X, Ok(stoch(i))).result;
        assert_eq!(r(&mut node, &mut a, 300), Err(Errno::INVAL));
        assert_eq!(r(&mut node, &mut a, 128), Err(Errno::OPNOTSUPP));
        assert_eq!(r(&mut node, &mut a, 1 << 32), Err(Errno::OPNOTSUPP));
        assert_eq!(r(&mut node, &mut a, 512), Ok(()));
        // Not on MI210 (GC 9.4.2: host trap only).
        let mut other = PcsNode::default();
        assert_eq!(
            create(&mut other, &mut a, (1, 1), (9, 4, 2), Ok(stoch(512))).result,
            Err(Errno::OPNOTSUPP)
        );
    }
}
