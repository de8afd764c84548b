//! The `/dev/kfd` ioctl table and dispatcher (`amdkfd_ioctls[]` and `kfd_ioctl` in
//! `kfd_chardev.c`, kfd-abi.md §4.1).
//!
//! [`KFD_IOCTLS`] has one entry per ABI opcode: its handler, what the dispatcher checks
//! before calling it, and the decoder `--trace` prints it with. [`kfd_ioctl`](fn@kfd_ioctl) runs the checks
//! every ioctl passes in the kernel's order, then the entry's handler, the copy-out and the
//! trace of the same entry. Adding an ioctl is adding its entry.

use kfd_ioctl::abi::{
    AMDKFD_IOC_ACQUIRE_VM, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_ALLOC_QUEUE_GWS,
    AMDKFD_IOC_AVAILABLE_MEMORY, AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_CREATE_PROCESS,
    AMDKFD_IOC_CREATE_QUEUE, AMDKFD_IOC_CRIU_OP, AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
    AMDKFD_IOC_DBG_REGISTER_DEPRECATED, AMDKFD_IOC_DBG_TRAP, AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED,
    AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED, AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_DESTROY_QUEUE,
    AMDKFD_IOC_EXPORT_DMABUF, AMDKFD_IOC_FREE_MEMORY_OF_GPU, AMDKFD_IOC_GET_CLOCK_COUNTERS,
    AMDKFD_IOC_GET_DMABUF_INFO, AMDKFD_IOC_GET_PROCESS_APERTURES,
    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
    AMDKFD_IOC_GET_TILE_CONFIG, AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_IMPORT_DMABUF,
    AMDKFD_IOC_MAP_MEMORY_TO_GPU, AMDKFD_IOC_PROFILER, AMDKFD_IOC_RESET_EVENT,
    AMDKFD_IOC_RUNTIME_ENABLE, AMDKFD_IOC_SET_CU_MASK, AMDKFD_IOC_SET_EVENT,
    AMDKFD_IOC_SET_MEMORY_POLICY, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, AMDKFD_IOC_SET_TRAP_HANDLER,
    AMDKFD_IOC_SET_XNACK_MODE, AMDKFD_IOC_SMI_EVENTS, AMDKFD_IOC_SVM,
    AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, AMDKFD_IOC_UPDATE_QUEUE, AMDKFD_IOC_WAIT_EVENTS, IOC_READ,
    IOC_WRITE, IOCTLS, IoctlInfo, command_end, ioc_nr, ioc_size, ioctl_info, kfd_ioctl_svm_args,
    kfd_ioctl_svm_attribute,
};
use rustix::io::Errno;
use rustix::ioctl::Opcode;

use super::chardev::{Ctx, get};
use super::device::Kernel;
use super::driver::Driver;
use super::host::{self, CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN};
use super::trace::{Decoder, Format};
use super::{
    debug, dkms, event_ioctls, fail, handlers, memory_ioctls, queue_ioctls, svm_ioctl, trace,
};
use crate::backend::{Caller, IoctlResult};

/// The KFD minor from which an unknown ioctl number is `ENOTTY` rather than `EINVAL` (the
/// 2025 change, also taken into stable kernels; older kernels answer `EINVAL`).
const ENOTTY_SINCE_MINOR: u32 = 17;

/// Answers ioctl `cmd` on the `/dev/kfd` stand-in of process `(tgid, serial)`.
pub(super) fn kfd_ioctl(
    m: &Driver,
    caller: &dyn Caller,
    tgid: i32,
    serial: u64,
    cmd: u32,
    arg: u64,
) -> IoctlResult {
    // 1. The number, against the table of the kernel we act as.
    let nr = ioc_nr(cmd);
    let dkms_entry;
    let entry = match lookup(nr) {
        Some(entry) if nr < command_end(m.dev.cfg.kfd_minor) => entry,
        // The out-of-tree driver's second range (`amdkfd_ioctls_2`).
        _ if let Some(d) = dkms::lookup(nr).filter(|_| m.dev.cfg.kernel == Kernel::Dkms) => {
            dkms_entry = IoctlEntry {
                info: d.info,
                handler: Status(d.handler),
                checkpoint_restore: false,
                decoder: Decoder::FIELDS,
            };
            &dkms_entry
        }
        _ => {
            let errno = if m.dev.cfg.kfd_minor >= ENOTTY_SINCE_MINOR {
                Errno::NOTTY
            } else {
                Errno::INVAL
            };
            if m.dev.cfg.trace {
                trace::unknown(caller, cmd, errno);
            }
            return Err(errno);
        }
    };
    let info: &IoctlInfo = entry.info;
    // 2. Size from the caller's word, direction from the kernel's.
    let usize = ioc_size(cmd);
    let asize = usize.max(info.size);
    // 3. Only the process that opened /dev/kfd may use the fd.
    let (alive, kick) = match m.lock().procs.get_mut(&tgid) {
        Some(p) if p.serial == serial && caller.id().tgid == tgid => {
            (true, p.queues.due_kick(std::time::Instant::now()))
        }
        _ => (false, Vec::new()),
    };
    if !alive {
        return finish(m, caller, entry, &[], Err(Errno::BADF));
    }
    // Work the process wrote before this call runs now, not at the doorbell watcher's next
    // look or its engine's next poll (`doorbells`, `scheduler`): one the watcher cannot see
    // (a write pointer in the process's own memory, with no doorbell write) included.
    for runner in kick {
        runner.kick.kick();
    }
    // 4. Privilege.
    let restore_caps = 1 << CAP_CHECKPOINT_RESTORE | 1 << CAP_SYS_ADMIN;
    if entry.checkpoint_restore && host::effective_caps(caller.id().tid) & restore_caps == 0 {
        return finish(m, caller, entry, &[], Err(Errno::ACCESS));
    }
    // 5., 6. The kernel buffer: zero-extended, filled from the caller for IOC_IN.
    let mut buf = vec![0u8; asize];
    if info.dir & IOC_WRITE != 0 {
        let read = caller.read(arg, &mut buf[..usize]);
        if let Err(e) = read {
            let errno = if e == Errno::NOENT { e } else { Errno::FAULT };
            return finish(m, caller, entry, &[], Err(errno));
        }
    }
    // 7. The SVM validator: the attributes must fit the size the caller passed.
    if info.opcode == AMDKFD_IOC_SVM {
        let nattr = u64::from(get::<kfd_ioctl_svm_args>(&buf).nattr);
        let header = size_of::<kfd_ioctl_svm_args>() as u64;
        let attr = size_of::<kfd_ioctl_svm_attribute>() as u64;
        if (usize as u64) < header + attr * nattr {
            return finish(m, caller, entry, &buf, Err(Errno::INVAL));
        }
    }
    let before = m.dev.cfg.trace.then(|| buf.clone());
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
            entry.handler.call(&ctx, &mut buf)
        }
    };
    // 9. Copy-out, even after a failure, so partial results reach the caller.
    if info.dir & IOC_READ != 0 && injected.is_none() && caller.write(arg, &buf[..usize]).is_err() {
        result = Err(Errno::FAULT);
    }
    if let Some(before) = before {
        trace::kfd(caller, info, &entry.decoder, &before, &buf, result);
    }
    result
}

/// Traces and returns a result the dispatcher produced before any handler ran.
fn finish(
    m: &Driver,
    caller: &dyn Caller,
    entry: &IoctlEntry,
    buf: &[u8],
    result: IoctlResult,
) -> IoctlResult {
    if m.dev.cfg.trace {
        trace::kfd(caller, entry.info, &entry.decoder, buf, buf, result);
    }
    result
}

/// What answers an ioctl once the dispatcher's checks passed.
#[derive(Clone, Copy)]
pub(super) enum Handler {
    /// A handler whose success is `0`.
    Status(fn(&Ctx<'_>, &mut [u8]) -> Result<(), Errno>),
    /// A handler that returns a value of its own on success (SVM).
    Value(fn(&Ctx<'_>, &mut [u8]) -> IoctlResult),
    /// A slot the kernel keeps and refuses with this errno.
    Refused(Errno),
}

impl Handler {
    /// Runs the handler on the kernel buffer `buf`.
    pub(super) fn call(self, ctx: &Ctx<'_>, buf: &mut [u8]) -> IoctlResult {
        match self {
            Handler::Status(handler) => handler(ctx, buf).map(|()| 0),
            Handler::Value(handler) => handler(ctx, buf),
            Handler::Refused(errno) => Err(errno),
        }
    }
}

/// One ioctl of the table.
#[derive(Clone, Copy)]
pub(super) struct IoctlEntry {
    /// The ABI's entry of the opcode: name, number, direction, size and argument struct.
    pub info: &'static IoctlInfo,
    pub handler: Handler,
    /// Needs `CAP_CHECKPOINT_RESTORE` or `CAP_SYS_ADMIN` (`KFD_IOC_FLAG_CHECKPOINT_RESTORE`).
    pub checkpoint_restore: bool,
    /// How `--trace` prints the argument.
    pub decoder: Decoder,
}

impl IoctlEntry {
    /// The entry of ABI opcode `opcode` (a build error for a number the ABI does not have).
    const fn new(opcode: Opcode, handler: Handler) -> IoctlEntry {
        let Some(info) = ioctl_info(ioc_nr(opcode)) else {
            panic!("not a KFD ioctl opcode");
        };
        IoctlEntry {
            info,
            handler,
            checkpoint_restore: false,
            decoder: Decoder::FIELDS,
        }
    }

    /// The same entry, with these fields traced in these formats.
    const fn traced(self, formats: &'static [(&'static str, Format)]) -> IoctlEntry {
        IoctlEntry {
            decoder: Decoder { formats },
            ..self
        }
    }

    /// The same entry, for callers with `CAP_CHECKPOINT_RESTORE` or `CAP_SYS_ADMIN` only.
    const fn checkpoint_restore(self) -> IoctlEntry {
        IoctlEntry {
            checkpoint_restore: true,
            ..self
        }
    }
}

use Handler::{Refused, Status, Value};

/// Every KFD ioctl, in number order from `AMDKFD_COMMAND_START`.
pub(super) const KFD_IOCTLS: &[IoctlEntry] = &[
    IoctlEntry::new(AMDKFD_IOC_GET_VERSION, Status(handlers::get_version)),
    IoctlEntry::new(AMDKFD_IOC_CREATE_QUEUE, Status(queue_ioctls::create_queue))
        .traced(&[("queue_type", Format::QueueType)]),
    IoctlEntry::new(
        AMDKFD_IOC_DESTROY_QUEUE,
        Status(queue_ioctls::destroy_queue),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_SET_MEMORY_POLICY,
        Status(handlers::set_memory_policy),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_GET_CLOCK_COUNTERS,
        Status(handlers::get_clock_counters),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_GET_PROCESS_APERTURES,
        Status(handlers::get_process_apertures),
    ),
    IoctlEntry::new(AMDKFD_IOC_UPDATE_QUEUE, Status(queue_ioctls::update_queue)),
    IoctlEntry::new(AMDKFD_IOC_CREATE_EVENT, Status(event_ioctls::create_event))
        .traced(&[("event_type", Format::EventType)]),
    IoctlEntry::new(
        AMDKFD_IOC_DESTROY_EVENT,
        Status(event_ioctls::destroy_event),
    ),
    IoctlEntry::new(AMDKFD_IOC_SET_EVENT, Status(event_ioctls::set_event)),
    IoctlEntry::new(AMDKFD_IOC_RESET_EVENT, Status(event_ioctls::reset_event)),
    IoctlEntry::new(AMDKFD_IOC_WAIT_EVENTS, Status(event_ioctls::wait_events)),
    // The pre-1.13 debugger ioctls are gone: the kernel keeps the slots, answering EPERM.
    IoctlEntry::new(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, Refused(Errno::PERM)),
    IoctlEntry::new(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED, Refused(Errno::PERM)),
    IoctlEntry::new(
        AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
        Refused(Errno::PERM),
    ),
    IoctlEntry::new(AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED, Refused(Errno::PERM)),
    IoctlEntry::new(
        AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
        Status(handlers::set_scratch_backing_va),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_GET_TILE_CONFIG,
        Status(handlers::get_tile_config),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_SET_TRAP_HANDLER,
        Status(handlers::set_trap_handler),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
        Status(handlers::get_process_apertures_new),
    ),
    IoctlEntry::new(AMDKFD_IOC_ACQUIRE_VM, Status(memory_ioctls::acquire_vm)),
    IoctlEntry::new(
        AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
        Status(memory_ioctls::alloc_memory_of_gpu),
    )
    .traced(&[("flags", Format::AllocFlags)]),
    IoctlEntry::new(
        AMDKFD_IOC_FREE_MEMORY_OF_GPU,
        Status(memory_ioctls::free_memory_of_gpu),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_MAP_MEMORY_TO_GPU,
        Status(memory_ioctls::map_memory_to_gpu),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
        Status(memory_ioctls::unmap_memory_from_gpu),
    ),
    IoctlEntry::new(AMDKFD_IOC_SET_CU_MASK, Status(queue_ioctls::set_cu_mask)),
    IoctlEntry::new(
        AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
        Status(queue_ioctls::get_queue_wave_state),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_GET_DMABUF_INFO,
        Status(memory_ioctls::get_dmabuf_info),
    )
    .traced(&[("flags", Format::AllocFlags)]),
    IoctlEntry::new(
        AMDKFD_IOC_IMPORT_DMABUF,
        Status(memory_ioctls::import_dmabuf),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_ALLOC_QUEUE_GWS,
        Status(queue_ioctls::alloc_queue_gws),
    ),
    IoctlEntry::new(AMDKFD_IOC_SMI_EVENTS, Status(handlers::smi_events)),
    // SVM's only return value that is not 0 or an error: see `svm_ioctl::ioctl`.
    IoctlEntry::new(AMDKFD_IOC_SVM, Value(svm_ioctl::ioctl)),
    IoctlEntry::new(AMDKFD_IOC_SET_XNACK_MODE, Status(handlers::set_xnack_mode))
        .traced(&[("xnack_enabled", Format::Signed)]),
    IoctlEntry::new(AMDKFD_IOC_CRIU_OP, Status(handlers::criu_op)).checkpoint_restore(),
    IoctlEntry::new(
        AMDKFD_IOC_AVAILABLE_MEMORY,
        Status(memory_ioctls::available_memory),
    ),
    IoctlEntry::new(
        AMDKFD_IOC_EXPORT_DMABUF,
        Status(memory_ioctls::export_dmabuf),
    ),
    IoctlEntry::new(AMDKFD_IOC_RUNTIME_ENABLE, Status(debug::runtime_enable)),
    IoctlEntry::new(AMDKFD_IOC_DBG_TRAP, Value(debug::dbg_trap)),
    IoctlEntry::new(AMDKFD_IOC_CREATE_PROCESS, Status(handlers::create_process)),
    IoctlEntry::new(AMDKFD_IOC_PROFILER, Status(handlers::profiler)),
];

// The table is the ABI's, in its order: entry `i` is the ioctl numbered `i + 1`, so `lookup`
// indexes it.
const _: () = {
    assert!(KFD_IOCTLS.len() == IOCTLS.len());
    let mut i = 0;
    while i < KFD_IOCTLS.len() {
        assert!(KFD_IOCTLS[i].info.nr == IOCTLS[i].nr);
        i += 1;
    }
};

/// The entry of ioctl number `nr`, if the ABI has one.
pub(super) fn lookup(nr: u8) -> Option<&'static IoctlEntry> {
    let entry = KFD_IOCTLS.get(usize::from(nr).checked_sub(1)?)?;
    (entry.info.nr == nr).then_some(entry)
}

#[cfg(test)]
mod tests {
    use kfd_ioctl::abi::{AMDKFD_COMMAND_END, amdkfd_ioc_svm, command_end, ioc_nr};

    use super::*;

    #[test]
    fn every_abi_opcode_is_in_the_table_once() {
        for abi in IOCTLS {
            let entries: Vec<&IoctlEntry> = KFD_IOCTLS
                .iter()
                .filter(|e| e.info.opcode == abi.opcode)
                .collect();
            assert_eq!(
                entries.len(),
                1,
                "{} is in the table {} times",
                abi.name,
                entries.len()
            );
            assert!(std::ptr::eq(entries[0].info, abi), "{}", abi.name);
        }
        assert_eq!(KFD_IOCTLS.len(), IOCTLS.len());
    }

    #[test]
    fn lookup_finds_the_entry_of_each_number_and_nothing_else() {
        for nr in 0..=u8::MAX {
            match lookup(nr) {
                Some(entry) => {
                    assert_eq!(entry.info.nr, nr);
                    assert_eq!(ioc_nr(entry.info.opcode), nr);
                }
                None => assert!(nr == 0 || nr >= AMDKFD_COMMAND_END, "{nr:#x} has no entry"),
            }
        }
        // SVM's variable-size words find the one SVM entry.
        let svm = lookup(ioc_nr(amdkfd_ioc_svm(3))).map(|e| e.info.name);
        assert_eq!(svm, Some("SVM"));
        assert!(command_end(23) as usize == KFD_IOCTLS.len() + 1);
    }

    #[test]
    fn only_criu_needs_checkpoint_restore() {
        let privileged: Vec<&str> = KFD_IOCTLS
            .iter()
            .filter(|e| e.checkpoint_restore)
            .map(|e| e.info.name)
            .collect();
        assert_eq!(privileged, ["CRIU_OP"]);
    }

    #[test]
    fn decoders_name_fields_of_their_argument() {
        for entry in KFD_IOCTLS {
            let fields = entry
                .info
                .arg
                .and_then(kfd_ioctl::abi::layout::struct_layout)
                .map(|s| s.flat_fields())
                .unwrap_or_default();
            for (name, _) in entry.decoder.formats {
                assert!(
                    fields.iter().any(|f| f.path == *name),
                    "{}'s decoder names {name}, which its argument lacks",
                    entry.info.name
                );
            }
        }
    }
}
