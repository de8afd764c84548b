//! SMI events (`kfd_smi_events.c`, kfd-abi.md §3.4, §4.12): the event fds AMDKFD_IOC_SMI_EVENTS
//! hands out, and the records the rest of the model emits into them.
//!
//! # The event fd
//!
//! The kernel's fd is an anonymous-inode file with its own `read`, `write` and `poll`. The
//! model's is one end of a `SOCK_STREAM` Unix socket pair, so that programs read and poll it
//! natively, without a round trip through the emulator:
//! * the client end is installed into the caller without `O_CLOEXEC` (as `anon_inode_getfd`
//!   installs the kernel's), with `O_NONBLOCK` set on its open file, so a read of an empty FIFO
//!   fails with `EAGAIN` and a read never respects record boundaries — both as in the kernel;
//! * records are written whole into the model's end. The model keeps a duplicate of the client
//!   end only to ask `FIONREAD` how many bytes are still unread, so the 8192-byte FIFO and its
//!   rule — a record that does not fit whole is dropped — are the kernel's exactly;
//! * the 64-bit enable mask a program `write`s lands in the model's end. It is read
//!   (non-blocking) before each record is emitted and before every ioctl of the opening
//!   process, so a mask is in force for everything emitted after its `write` returned.
//!
//! Where the socket differs from the kernel's file: a `write` of fewer than 8 bytes succeeds
//! (the kernel says `EFAULT`) and counts once the rest arrives; a longer write sets the mask 8
//! bytes at a time (the kernel takes the first 8 and returns 8); `poll` also reports
//! `POLLOUT`; and a client lives until its process exits, even when the program closes the fd
//! earlier (the kernel releases it at the last close).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use kfd_ioctl::Location;
use kfd_ioctl::abi::{
    KFD_SMI_EVENT_ALL_PROCESS, KFD_SMI_EVENT_MIGRATE_END, KFD_SMI_EVENT_MIGRATE_START,
    KFD_SMI_EVENT_PAGE_FAULT_END, KFD_SMI_EVENT_PAGE_FAULT_START, KFD_SMI_EVENT_PROCESS_END,
    KFD_SMI_EVENT_PROCESS_START, KFD_SMI_EVENT_QUEUE_EVICTION, KFD_SMI_EVENT_QUEUE_RESTORE,
    KFD_SMI_EVENT_UNMAP_FROM_GPU, KFD_SMI_EVENT_VMFAULT, kfd_smi_event_mask_from_index,
};
use kfd_ioctl::smi::{EvictionTrigger, MigrateTrigger, Record, RestoreMark, UnmapTrigger};
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

use super::host::CAP_SYS_ADMIN;
use crate::backend::CallerId;

/// `KFD_MAX_KFIFO_SIZE` since the 1.10 rework of SMI events; the FIFO held 1024 bytes before.
const FIFO_SIZE: u64 = 8192;
const OLD_FIFO_SIZE: u64 = 1024;
/// The first minor with the profiler events (ids 5–11), pid filtering and the 8 KiB FIFO.
const PROFILER_EVENTS_SINCE: u32 = 10;
/// The first minor whose header has PROCESS_START/PROCESS_END.
const PROCESS_EVENTS_SINCE: u32 = 19;
/// The first minor whose MIGRATE_END record carries the migration's error code (the minor the
/// ABI crate verified it in).
const MIGRATE_END_ERROR_SINCE: u32 = 23;
/// `KFD_SMI_EVENT_MSG_SIZE` less the NUL `snprintf` keeps: the longest record.
const MAX_RECORD: usize = 95;
/// The send buffer asked for on the model's end: room for a full FIFO of the shortest records,
/// whose socket buffers cost far more than their bytes (the kernel caps it at `wmem_max`).
const SEND_BUFFER: usize = 4 << 20;

/// One SMI event, with what its record prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event<'a> {
    /// A GPU VM fault: the thread id and name the faulting VM was created by.
    VmFault { task_pid: i32, comm: &'a str },
    /// A retry fault started being handled at `ns` (CLOCK_BOOTTIME).
    PageFaultStart {
        ns: u64,
        pid: i32,
        page: u64,
        gpu_id: u32,
        write: bool,
    },
    /// A retry fault was handled, by migrating (`M`) or by updating the mapping (`U`).
    PageFaultEnd {
        pid: i32,
        page: u64,
        gpu_id: u32,
        migrated: bool,
    },
    /// A migration of `npages` pages from `start` began (`from`/`to`: 0 = system or gpu_id).
    MigrateStart {
        pid: i32,
        start: u64,
        npages: u64,
        from: u32,
        to: u32,
        prefetch: u32,
        preferred: u32,
        trigger: u32,
    },
    /// The migration ended with `error` (0 or a negative errno).
    MigrateEnd {
        pid: i32,
        start: u64,
        npages: u64,
        from: u32,
        to: u32,
        trigger: u32,
        error: i32,
    },
    /// The process's queues on `gpu_id` were evicted.
    QueueEviction { pid: i32, gpu_id: u32, trigger: u32 },
    /// The process's queues on `gpu_id` were restored (or the restore was `rescheduled`).
    QueueRestore {
        pid: i32,
        gpu_id: u32,
        rescheduled: bool,
    },
    /// Pages were unmapped from `gpu_id`.
    UnmapFromGpu {
        pid: i32,
        start: u64,
        npages: u64,
        gpu_id: u32,
        trigger: u32,
    },
    /// A process started (ACQUIRE_VM) or stopped using the GPU.
    Process {
        start: bool,
        task_pid: i32,
        comm: &'a str,
    },
}

impl Event<'_> {
    /// `enum kfd_smi_event`.
    fn id(&self) -> u32 {
        match self {
            Self::VmFault { .. } => KFD_SMI_EVENT_VMFAULT,
            Self::PageFaultStart { .. } => KFD_SMI_EVENT_PAGE_FAULT_START,
            Self::PageFaultEnd { .. } => KFD_SMI_EVENT_PAGE_FAULT_END,
            Self::MigrateStart { .. } => KFD_SMI_EVENT_MIGRATE_START,
            Self::MigrateEnd { .. } => KFD_SMI_EVENT_MIGRATE_END,
            Self::QueueEviction { .. } => KFD_SMI_EVENT_QUEUE_EVICTION,
            Self::QueueRestore { .. } => KFD_SMI_EVENT_QUEUE_RESTORE,
            Self::UnmapFromGpu { .. } => KFD_SMI_EVENT_UNMAP_FROM_GPU,
            Self::Process { start: true, .. } => KFD_SMI_EVENT_PROCESS_START,
            Self::Process { start: false, .. } => KFD_SMI_EVENT_PROCESS_END,
        }
    }

    /// The pid clients are filtered by: 0 (everyone) for VM faults and process events.
    fn filter_pid(&self) -> i32 {
        match *self {
            Self::VmFault { .. } | Self::Process { .. } => 0,
            Self::PageFaultStart { pid, .. }
            | Self::PageFaultEnd { pid, .. }
            | Self::MigrateStart { pid, .. }
            | Self::MigrateEnd { pid, .. }
            | Self::QueueEviction { pid, .. }
            | Self::QueueRestore { pid, .. }
            | Self::UnmapFromGpu { pid, .. } => pid,
        }
    }

    /// Whether a kernel of KFD 1.`minor` has the event at all.
    fn exists_at(&self, minor: u32) -> bool {
        match self {
            Self::VmFault { .. } => true,
            Self::Process { .. } => minor >= PROCESS_EVENTS_SINCE,
            _ => minor >= PROFILER_EVENTS_SINCE,
        }
    }

    /// The record: `"%x "` with the id, the event's `KFD_EVENT_FMT_*` text, `\n` (kfd-ioctl's
    /// [`Record`], the one definition of the format); timestamps other than a fault's own are
    /// taken now.
    pub(super) fn record(&self, minor: u32) -> Vec<u8> {
        let now = || super::host::clock_ns(libc::CLOCK_BOOTTIME) as i64;
        let record = match *self {
            Self::VmFault { task_pid, comm } => Record::VmFault {
                pid: task_pid as u32,
                task: comm.to_owned(),
            },
            Self::PageFaultStart {
                ns,
                pid,
                page,
                gpu_id,
                write,
            } => Record::PageFaultStart {
                ns: ns as i64,
                pid: pid as u32,
                addr_page: page,
                node: gpu_id,
                write,
            },
            Self::PageFaultEnd {
                pid,
                page,
                gpu_id,
                migrated,
            } => Record::PageFaultEnd {
                ns: now(),
                pid: pid as u32,
                addr_page: page,
                node: gpu_id,
                migrated,
            },
            Self::MigrateStart {
                pid,
                start,
                npages,
                from,
                to,
                prefetch,
                preferred,
                trigger,
            } => Record::MigrateStart {
                ns: now(),
                pid: pid as u32,
                start_page: start,
                npages,
                from: Location::from_raw(from),
                to: Location::from_raw(to),
                prefetch_loc: Location::from_raw(prefetch),
                preferred_loc: Location::from_raw(preferred),
                trigger: MigrateTrigger::from_raw(trigger as i32),
            },
            Self::MigrateEnd {
                pid,
                start,
                npages,
                from,
                to,
                trigger,
                error,
            } => Record::MigrateEnd {
                ns: now(),
                pid: pid as u32,
                start_page: start,
                npages,
                from: Location::from_raw(from),
                to: Location::from_raw(to),
                trigger: MigrateTrigger::from_raw(trigger as i32),
                error_code: (minor >= MIGRATE_END_ERROR_SINCE).then_some(error),
            },
            Self::QueueEviction {
                pid,
                gpu_id,
                trigger,
            } => Record::QueueEviction {
                ns: now(),
                pid: pid as u32,
                node: gpu_id,
                trigger: EvictionTrigger::from_raw(trigger as i32),
            },
            Self::QueueRestore {
                pid,
                gpu_id,
                rescheduled,
            } => Record::QueueRestore {
                ns: now(),
                pid: pid as u32,
                node: gpu_id,
                // `%c` of 0 when the restore was not rescheduled: a NUL byte in the record.
                rescheduled: if rescheduled {
                    RestoreMark::Rescheduled
                } else {
                    RestoreMark::Nul
                },
            },
            Self::UnmapFromGpu {
                pid,
                start,
                npages,
                gpu_id,
                trigger,
            } => Record::UnmapFromGpu {
                ns: now(),
                pid: pid as u32,
                start_page: start,
                npages,
                node: gpu_id,
                trigger: UnmapTrigger::from_raw(trigger as i32),
            },
            Self::Process {
                start: true,
                task_pid,
                comm,
            } => Record::ProcessStart {
                pid: task_pid as u32,
                task: comm.to_owned(),
            },
            Self::Process {
                start: false,
                task_pid,
                comm,
            } => Record::ProcessEnd {
                pid: task_pid as u32,
                task: comm.to_owned(),
            },
        };
        let mut bytes = format!("{record}\n").into_bytes();
        bytes.truncate(MAX_RECORD);
        bytes
    }
}

/// One open SMI event fd.
#[derive(Debug)]
struct Client {
    /// The GPU (index) whose events it carries.
    gpu: usize,
    /// The opener's thread group (`client->pid`).
    tgid: i32,
    /// The opener had CAP_SYS_ADMIN (`client->suser`).
    suser: bool,
    /// The enable mask (bit `i - 1` for event `i`).
    mask: u64,
    /// The model's end: records go out, masks come in.
    model_end: OwnedFd,
    /// The program's end (the same open file the program has), for `FIONREAD`.
    client_end: OwnedFd,
    /// Mask bytes received that do not make a whole mask yet.
    partial: Vec<u8>,
}

impl Client {
    /// Takes the masks the program wrote since the last look.
    fn take_masks(&mut self) {
        let mut buf = [0u8; 256];
        loop {
            match rustix::net::recv(&self.model_end, &mut buf, RecvFlags::DONTWAIT) {
                Ok((0, _)) | Err(_) => break,
                Ok((n, _)) => self.partial.extend_from_slice(&buf[..n]),
            }
        }
        let whole = self.partial.len() / 8 * 8;
        if whole > 0 {
            let last = &self.partial[whole - 8..whole];
            self.mask = u64::from_ne_bytes(last.try_into().unwrap_or([0; 8]));
            self.partial.drain(..whole);
        }
    }

    /// `kfd_smi_ev_enabled`.
    fn enabled(&self, pid: i32, id: u32) -> bool {
        let all = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_ALL_PROCESS);
        if pid != 0 && self.tgid != pid && !(self.suser && self.mask & all != 0) {
            return false;
        }
        self.mask & kfd_smi_event_mask_from_index(id) != 0
    }

    /// Queues `record` unless it does not fit whole in the FIFO of `fifo` bytes.
    fn push(&self, record: &[u8], fifo: u64) {
        let Ok(queued) = rustix::io::ioctl_fionread(&self.client_end) else {
            return;
        };
        if queued + record.len() as u64 > fifo {
            return;
        }
        // A record is far below one socket buffer, so it is sent whole or (the socket's own
        // buffers exhausted) not at all, which is the drop the kernel would make anyway.
        let _ = rustix::net::send(
            &self.model_end,
            record,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        );
    }
}

/// The SMI clients of every GPU.
#[derive(Debug, Default)]
pub(super) struct Smi {
    clients: Vec<Client>,
}

impl Smi {
    /// `kfd_smi_event_open`: a new client of GPU `gpu` for the thread `who`; `install` puts the
    /// client end into the caller (without `O_CLOEXEC`) and returns its fd number, which this
    /// returns.
    pub(super) fn open(
        &mut self,
        who: CallerId,
        gpu: usize,
        install: impl FnOnce(BorrowedFd<'_>) -> Result<i32, Errno>,
    ) -> Result<i32, Errno> {
        let (model_end, client_end) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|_| Errno::NOMEM)?;
        let flags = rustix::fs::fcntl_getfl(&client_end)?;
        rustix::fs::fcntl_setfl(&client_end, flags | OFlags::NONBLOCK)?;
        // Best effort: the default buffer holds a full FIFO of typical records.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&model_end, SEND_BUFFER);
        let suser = super::host::effective_caps(who.tid) & (1 << CAP_SYS_ADMIN) != 0;
        let fd = install(client_end.as_fd())?;
        self.clients.push(Client {
            gpu,
            tgid: who.tgid,
            suser,
            mask: 0,
            model_end,
            client_end,
            partial: Vec::new(),
        });
        Ok(fd)
    }

    /// Applies the masks the clients of process `tgid` wrote (before any ioctl of it).
    pub(super) fn take_masks_of(&mut self, tgid: i32) {
        for client in self.clients.iter_mut().filter(|c| c.tgid == tgid) {
            client.take_masks();
        }
    }

    /// Closes the clients process `tgid` opened (it exited, and its fds with it).
    pub(super) fn release(&mut self, tgid: i32) {
        self.clients.retain(|c| c.tgid != tgid);
    }

    /// Whether any client listens to GPU `gpu` (`list_empty(&dev->smi_clients)`).
    pub(super) fn listening(&self, gpu: usize) -> bool {
        self.clients.iter().any(|c| c.gpu == gpu)
    }

    /// `kfd_smi_event_add`: formats `event` for the kernel of KFD 1.`minor` and queues it to
    /// every client of GPU `gpu` that enabled it and may see it.
    pub(super) fn emit(&mut self, minor: u32, gpu: usize, event: &Event<'_>) {
        if !self.listening(gpu) || !event.exists_at(minor) {
            return;
        }
        let record = event.record(minor);
        let fifo = if minor >= PROFILER_EVENTS_SINCE {
            FIFO_SIZE
        } else {
            OLD_FIFO_SIZE
        };
        let (pid, id) = (event.filter_pid(), event.id());
        // Before 1.10 every client saw every event it enabled.
        let pid = if minor >= PROFILER_EVENTS_SINCE {
            pid
        } else {
            0
        };
        for client in self.clients.iter_mut().filter(|c| c.gpu == gpu) {
            client.take_masks();
            if client.enabled(pid, id) {
                client.push(&record, fifo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_follow_the_kernel_formats() {
        let text = |e: Event<'_>, minor| String::from_utf8(e.record(minor)).expect("utf-8");
        assert_eq!(
            text(
                Event::VmFault {
                    task_pid: 0x1234,
                    comm: "app"
                },
                23
            ),
            "1 1234:app\n"
        );
        let start = text(
            Event::PageFaultStart {
                ns: 77,
                pid: 42,
                page: 0x7f00_0001,
                gpu_id: 0xabcd,
                write: true,
            },
            23,
        );
        assert_eq!(start, "7 77 -42 @7f000001(abcd) W\n");
        let migrate = text(
            Event::MigrateStart {
                pid: 42,
                start: 0x100,
                npages: 0x200,
                from: 0,
                to: 0xabcd,
                prefetch: 0xabcd,
                preferred: 0xffff_ffff,
                trigger: 0,
            },
            23,
        );
        assert!(
            migrate.starts_with("5 ")
                && migrate.ends_with(" -42 @100(200) 0->abcd abcd:ffffffff 0\n"),
            "{migrate}"
        );
        let end = |minor| {
            text(
                Event::MigrateEnd {
                    pid: 42,
                    start: 0x100,
                    npages: 0x200,
                    from: 0,
                    to: 0xabcd,
                    trigger: 1,
                    error: 0,
                },
                minor,
            )
        };
        assert!(end(23).ends_with(" -42 @100(200) 0->abcd 1 0\n"));
        assert!(end(22).ends_with(" -42 @100(200) 0->abcd 1\n"));
        let restore = Event::QueueRestore {
            pid: 42,
            gpu_id: 0xabcd,
            rescheduled: false,
        }
        .record(23);
        assert!(restore.ends_with(b" -42 abcd \0\n"), "{restore:?}");
        assert_eq!(
            text(
                Event::Process {
                    start: true,
                    task_pid: 0x99,
                    comm: "app"
                },
                23
            ),
            "c 99 app\n"
        );
    }

    #[test]
    fn events_a_minor_lacks_are_not_emitted() {
        let fault = Event::UnmapFromGpu {
            pid: 1,
            start: 0,
            npages: 1,
            gpu_id: 1,
            trigger: 2,
        };
        assert!(fault.exists_at(10) && !fault.exists_at(9));
        let process = Event::Process {
            start: false,
            task_pid: 1,
            comm: "x",
        };
        assert!(process.exists_at(19) && !process.exists_at(18));
        assert!(
            Event::VmFault {
                task_pid: 1,
                comm: "x"
            }
            .exists_at(3)
        );
    }
}
