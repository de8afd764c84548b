//! SMI events (`kfd_smi_events.c`, kfd-abi.md §3.4, §4.12): the event fds AMDKFD_IOC_SMI_EVENTS
//! hands out, and the records the rest of the model emits into them.
//!
//! # The event fd
//!
//! The kernel's fd is an anonymous-inode file with its own `read`, `write` and `poll`. The
//! model's is the read end of a pipe, so that programs read and poll it natively, without a
//! round trip through the emulator:
//! * the read end is installed into the caller without `O_CLOEXEC` (as `anon_inode_getfd`
//!   installs the kernel's), with `O_NONBLOCK` set on its open file, so a read of an empty
//!   FIFO fails with `EAGAIN` and a read never respects record boundaries — both as in the
//!   kernel; and `poll` reports `POLLIN` when a record is pending and never `POLLOUT`
//!   (`pipe_poll` of a read end; `kfd_smi_ev_poll` only ever says `EPOLLIN`);
//! * records are written whole into the write end, which only the model has. `FIONREAD` on
//!   it counts the bytes still unread, so the 8192-byte FIFO and its rule — a record that
//!   does not fit whole is dropped — are the kernel's exactly;
//! * the read end goes at a free number of [`SMI_FDS`](crate::backend::SMI_FDS) (the lowest
//!   one the process does not use, taken atomically as `fcntl(F_DUPFD)` takes it, so no fd
//!   the program makes meanwhile is replaced: see
//!   [`Caller::install_fd_in`](crate::backend::Caller::install_fd_in)), and the seccomp
//!   filter notifies `write`, `writev` and
//!   `pwritev2` of those numbers only, so the supervisor hands them to the model
//!   ([`Backend::write`](crate::backend::Backend::write), [`write`]), which answers as
//!   `kfd_smi_ev_write`: fewer than 8 bytes (or 8 unreadable ones) is `EFAULT`, more take
//!   the first 8 as the mask and return 8, a `writev` goes piece by piece. The mask is in
//!   force for everything emitted after the write returned. A positioned write is `ESPIPE`
//!   natively, as for the kernel's file;
//! * a client goes when the program's end is closed everywhere (the pipe's write end then
//!   polls `POLLERR`; the kernel releases it at the last `fput`, `kfd_smi_ev_release`),
//!   checked before anything is emitted, before each new client is opened and when its
//!   opener exits: the model holds a write end only for clients whose fd is open somewhere,
//!   plus those closed since the last open or event (so a program opening and closing event
//!   fds in a loop never grows the emulator's fd table).
//!
//! Where the pipe differs from the kernel's file: the fd's number is not the lowest free one
//! (the kernel's is) but one of `SMI_FDS`, and the `SMI_EVENTS` call fails with `EMFILE` when
//! that range is full or above the process's `RLIMIT_NOFILE` (below 1008); `F_GETFL` shows
//! `O_RDONLY | O_NONBLOCK` (the kernel's is `O_RDWR`); `fstat` shows a FIFO; a read of 0
//! bytes returns 0 (the kernel's says `EAGAIN`); and a write through a duplicate of the fd at
//! a number outside `SMI_FDS` (`dup`, `fcntl(F_DUPFD)`), through `io_uring`, `splice` or
//! `sendfile` is not seen by the model and fails natively with `EBADF`.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use kfd_ioctl::Location;
use kfd_ioctl::abi::{
    KFD_SMI_EVENT_ALL_PROCESS, KFD_SMI_EVENT_MIGRATE_END, KFD_SMI_EVENT_MIGRATE_START,
    KFD_SMI_EVENT_PAGE_FAULT_END, KFD_SMI_EVENT_PAGE_FAULT_START, KFD_SMI_EVENT_PROCESS_END,
    KFD_SMI_EVENT_PROCESS_START, KFD_SMI_EVENT_QUEUE_EVICTION, KFD_SMI_EVENT_QUEUE_RESTORE,
    KFD_SMI_EVENT_UNMAP_FROM_GPU, KFD_SMI_EVENT_VMFAULT, kfd_smi_event_mask_from_index,
};
use kfd_ioctl::smi::{EvictionTrigger, MigrateTrigger, Record, RestoreMark, UnmapTrigger};
use rustix::event::{PollFd, PollFlags};
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::pipe::PipeFlags;

use super::files::FileKey;
use super::host::CAP_SYS_ADMIN;
use super::timing::Clock;
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
    /// `now_ns` (the model clock's now).
    pub(super) fn record(&self, minor: u32, now_ns: u64) -> Vec<u8> {
        let now = || now_ns as i64;
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
    /// The write end of the pipe whose read end the program holds: records go in here, and
    /// `FIONREAD` on it counts the bytes not read yet.
    writer: OwnedFd,
    /// The identity of the program's end, by which its writes are recognised.
    key: FileKey,
}

impl Client {
    /// Whether the program still holds the read end anywhere: a pipe's write end polls
    /// `POLLERR` once it has no reader (`pipe_poll`), which is the kernel's last `fput` of
    /// the SMI file (`kfd_smi_ev_release`).
    fn open(&self) -> bool {
        let mut fds = [PollFd::new(&self.writer, PollFlags::OUT)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(_) => !fds[0].revents().contains(PollFlags::ERR),
            Err(_) => true,
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
        let Ok(queued) = rustix::io::ioctl_fionread(&self.writer) else {
            return;
        };
        if queued + record.len() as u64 > fifo {
            return;
        }
        // A record is below PIPE_BUF, so it is written whole or (the pipe full, which the FIFO
        // limit far below its capacity rules out) not at all.
        let _ = rustix::io::write(&self.writer, record);
    }
}

/// A `write` of one piece, or a `writev` of `pieces` (`vector`), to an SMI fd, read
/// through `read`: what the call returns, and the mask it leaves, if any.
///
/// `kfd_smi_ev_write` takes a piece of at least 8 bytes, sets the mask from its first 8 and
/// returns 8; a shorter piece (even an empty `write`: `vfs_write` passes it on), or 8 bytes
/// it cannot read, is `EFAULT`. A vector with nothing in it writes nothing (`vfs_writev`);
/// else it goes piece by piece (`do_loop_readv_writev`, empty pieces after a taken one
/// skipped as `iov_iter_advance` skips them): it stops at the first piece not taken whole,
/// and fails only when nothing was taken before.
pub(super) fn write(
    pieces: &[(u64, u64)],
    vector: bool,
    read: impl Fn(u64, &mut [u8]) -> Result<(), Errno>,
) -> (Result<i64, Errno>, Option<u64>) {
    let take = |(addr, len): (u64, u64)| {
        let mut bytes = [0u8; 8];
        if len < 8 {
            return Err(Errno::FAULT);
        }
        read(addr, &mut bytes).map_err(|_| Errno::FAULT)?;
        Ok(u64::from_ne_bytes(bytes))
    };
    let total: u64 = pieces.iter().map(|&(_, len)| len).sum();
    let (mut done, mut mask) = (0u64, None);
    let mut next = pieces.iter().copied().peekable();
    while (!vector || done < total)
        && let Some(piece) = next.next()
    {
        match take(piece) {
            Ok(value) => mask = Some(value),
            Err(errno) if done == 0 => return (Err(errno), mask),
            Err(_) => break,
        }
        done += 8;
        if !vector || piece.1 != 8 {
            break;
        }
        while next.next_if(|&(_, len)| len == 0).is_some() {}
    }
    (Ok(done as i64), mask)
}

/// The SMI clients of every GPU.
#[derive(Debug, Default)]
pub(super) struct Smi {
    clients: Vec<Client>,
    /// The clock records are stamped with: the device's (see [`Smi::use_clock`]).
    clock: Arc<Clock>,
}

impl Smi {
    /// Stamps records with `clock` (the device's model clock) from now on.
    pub(super) fn use_clock(&mut self, clock: Arc<Clock>) {
        self.clock = clock;
    }

    /// `kfd_smi_event_open`: a new client of GPU `gpu` for the thread `who`; `install` puts the
    /// program's end into the caller (without `O_CLOEXEC`) and returns its fd number, which
    /// this returns.
    pub(super) fn open(
        &mut self,
        who: CallerId,
        gpu: usize,
        install: impl FnOnce(BorrowedFd<'_>) -> Result<i32, Errno>,
    ) -> Result<i32, Errno> {
        // Clients whose file went since the last look are released first
        // (`kfd_smi_ev_release` ran at their last `fput`): a program that opens and closes
        // event fds in a loop holds at most its open ones here, whatever it emits.
        self.clients.retain(Client::open);
        // No pipe: the kernel's `anon_inode_getfd` fails as its allocation does (`EMFILE`
        // for this process's table, `ENFILE` for the system's), never another way.
        let (reader, writer) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(|e| {
            if matches!(e, Errno::MFILE | Errno::NFILE) {
                e
            } else {
                Errno::NOMEM
            }
        })?;
        let flags = rustix::fs::fcntl_getfl(&reader)?;
        rustix::fs::fcntl_setfl(&reader, flags | OFlags::NONBLOCK)?;
        let flags = rustix::fs::fcntl_getfl(&writer)?;
        rustix::fs::fcntl_setfl(&writer, flags | OFlags::NONBLOCK)?;
        let key = super::files::key_of(reader.as_fd())?;
        let suser = super::host::effective_caps(who.tid) & (1 << CAP_SYS_ADMIN) != 0;
        let fd = install(reader.as_fd())?;
        self.clients.push(Client {
            gpu,
            tgid: who.tgid,
            suser,
            mask: 0,
            writer,
            key,
        });
        Ok(fd)
    }

    /// Whether `key` is the program's end of a client (its writes are
    /// [`set_mask`](Self::set_mask)s).
    pub(super) fn is_client(&self, key: FileKey) -> bool {
        self.clients.iter().any(|c| c.key == key)
    }

    /// `kfd_smi_ev_write` took `mask` for the client whose program end is `key`.
    pub(super) fn set_mask(&mut self, key: FileKey, mask: u64) {
        for client in self.clients.iter_mut().filter(|c| c.key == key) {
            client.mask = mask;
        }
    }

    /// Process `tgid` exited, and its fds with it: every client whose fd is closed
    /// everywhere goes (its own, and any other process's closed meanwhile). A client whose fd
    /// it passed on lives on until that goes too.
    pub(super) fn release(&mut self, tgid: i32) {
        let _ = tgid;
        self.clients.retain(Client::open);
    }

    /// Whether any client listens to GPU `gpu` (`list_empty(&dev->smi_clients)`); clients whose
    /// file is closed everywhere are released first.
    pub(super) fn listening(&mut self, gpu: usize) -> bool {
        self.clients.retain(Client::open);
        self.clients.iter().any(|c| c.gpu == gpu)
    }

    /// `kfd_smi_event_add`: formats `event` for the kernel of KFD 1.`minor` and queues it to
    /// every client of GPU `gpu` that enabled it and may see it.
    /// Its time is the clock's now.
    pub(super) fn emit(&mut self, minor: u32, gpu: usize, event: &Event<'_>) {
        if !self.listening(gpu) || !event.exists_at(minor) {
            return;
        }
        let record = event.record(minor, self.clock.now_ns());
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
        for client in self.clients.iter().filter(|c| c.gpu == gpu) {
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
        let text = |e: Event<'_>, minor| String::from_utf8(e.record(minor, 0)).expect("utf-8");
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
        .record(23, 0);
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
    fn writes_take_whole_eight_byte_pieces() {
        let memory: Vec<u8> = (0..64).collect();
        let read = |addr: u64, buf: &mut [u8]| {
            let at = usize::try_from(addr).map_err(|_| Errno::FAULT)?;
            let bytes = memory.get(at..at + buf.len()).ok_or(Errno::FAULT)?;
            buf.copy_from_slice(bytes);
            Ok(())
        };
        let word = |at: u64| u64::from_ne_bytes(memory[at as usize..][..8].try_into().unwrap());
        // write: one piece, whatever its length.
        assert_eq!(write(&[(0, 16)], false, read), (Ok(8), Some(word(0))));
        assert_eq!(write(&[(0, 7)], false, read), (Err(Errno::FAULT), None));
        assert_eq!(write(&[(0, 0)], false, read), (Err(Errno::FAULT), None));
        assert_eq!(write(&[(60, 8)], false, read), (Err(Errno::FAULT), None));
        // writev: nothing to write is 0; whole pieces in turn; empty ones after a taken piece
        // are skipped, a leading one fails.
        assert_eq!(write(&[], true, read), (Ok(0), None));
        assert_eq!(write(&[(0, 0), (8, 0)], true, read), (Ok(0), None));
        let three = [(0, 8), (0, 0), (16, 8), (24, 8)];
        assert_eq!(write(&three, true, read), (Ok(24), Some(word(24))));
        assert_eq!(
            write(&[(0, 0), (8, 8)], true, read),
            (Err(Errno::FAULT), None)
        );
        // A piece not taken whole ends the call; a failure after a taken piece is its count.
        assert_eq!(
            write(&[(0, 8), (8, 12), (24, 8)], true, read),
            (Ok(16), Some(word(8)))
        );
        assert_eq!(write(&[(0, 8), (8, 4)], true, read), (Ok(8), Some(word(0))));
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
