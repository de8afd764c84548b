//! The GPU-side view of memory: reads and writes through a GPU's page tables (its VM
//! mappings, and the SVM ranges of [`svm`](super::svm)), as a kernel running on that GPU would
//! see them. Only an emulator can offer this.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak, mpsc};

use rustix::io::Errno;

use super::bo_maps::BoMap;
use super::driver::Driver;
use super::process::State;

/// Why a GPU access faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuFaultReason {
    /// The process has no KFD process in the model.
    NoProcess,
    /// The machine has no GPU with that id.
    UnknownGpu,
    /// No mapping covers the address (the PTE is not present).
    NotMapped,
    /// A write to a mapping without `WRITABLE` (or an SVM page the GPU maps read-only:
    /// `GPU_RO`, or a read-only VMA).
    ReadOnly,
    /// The GPU has no access to the SVM range (NO_ACCESS), so its retry fault cannot be
    /// handled.
    NoAccess,
    /// The memory behind the mapping could not be reached (a USERPTR page the process
    /// unmapped): the errno of the access.
    Backing(Errno),
}

impl fmt::Display for GpuFaultReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoProcess => f.write_str("no KFD process"),
            Self::UnknownGpu => f.write_str("no such GPU"),
            Self::NotMapped => f.write_str("not mapped"),
            Self::ReadOnly => f.write_str("write to a read-only mapping"),
            Self::NoAccess => f.write_str("no access to the SVM range"),
            Self::Backing(errno) => write!(f, "backing memory unreachable: {errno}"),
        }
    }
}

/// A GPU VM fault: what the hardware would report (and KFD turn into a VM-fault event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("VM fault on GPU {gpu_id:#x} at {va:#x} ({access}): {reason}", access = if *.write { "write" } else { "read" })]
pub struct GpuFault {
    /// The GPU.
    pub gpu_id: u32,
    /// The first faulting address.
    pub va: u64,
    /// Whether the access was a write.
    pub write: bool,
    /// Why.
    pub reason: GpuFaultReason,
}

/// One piece of an access: `len` bytes at `offset` of backing `backing` (a BO), or at `addr`
/// of the process's own memory (SVM).
enum Piece {
    Backing {
        backing: u64,
        offset: u64,
        len: usize,
    },
    User {
        addr: u64,
        len: usize,
    },
}

impl Piece {
    fn len(&self) -> usize {
        match *self {
            Piece::Backing { len, .. } | Piece::User { len, .. } => len,
        }
    }
}

/// Where a GPU page lives ([`Driver::page_route`]).
pub(super) enum Route {
    /// `offset` of a VRAM or GTT BO's memfd, reached through its long-lived mapping
    /// ([`bo_maps`](super::bo_maps), kept in the state until the BO's last reference goes).
    /// `span`: the GPU addresses around the page that the same mapping maps linearly (the
    /// BO's whole GPU mapping), for a dispatch's translation cache.
    Memfd {
        map: Arc<BoMap>,
        offset: u64,
        writable: bool,
        span: std::ops::Range<u64>,
    },
    /// Address `addr` of process `owner`'s memory (USERPTR, SVM), mapped on the GPU now;
    /// `span` as for `Memfd` (a USERPTR BO's mapping; an SVM page alone).
    Process {
        owner: i32,
        addr: u64,
        writable: bool,
        span: std::ops::Range<u64>,
    },
    /// Anything else the GPU maps (memory the model keeps for the kernel driver): reached
    /// through the GPU view on every access.
    Other,
    /// Not mapped on the GPU now (its access faults, or migrates on XNACK's retry path).
    Unmapped,
}

/// Where the bytes of a piece of a GPU access are, for an engine that moves them itself
/// without the model's lock ([`Driver::reach`]).
#[derive(Debug)]
pub(super) enum Reach {
    /// `len` bytes at `offset` of a VRAM or GTT BO, through its long-lived mapping.
    Map {
        map: std::sync::Arc<super::bo_maps::BoMap>,
        offset: usize,
        len: usize,
    },
    /// `len` bytes at `addr` of process `tgid`'s own memory (a USERPTR BO, SVM pages).
    Process { tgid: i32, addr: u64, len: usize },
}

impl Reach {
    pub(super) fn len(&self) -> usize {
        match *self {
            Reach::Map { len, .. } | Reach::Process { len, .. } => len,
        }
    }

    /// The piece `skip` bytes in, `len` bytes long (within this one).
    pub(super) fn part(&self, skip: usize, len: usize) -> Reach {
        match self {
            Reach::Map { map, offset, .. } => Reach::Map {
                map: std::sync::Arc::clone(map),
                offset: offset + skip,
                len,
            },
            &Reach::Process { tgid, addr, .. } => Reach::Process {
                tgid,
                addr: addr + skip as u64,
                len,
            },
        }
    }

    /// Whether this piece and `other` share a byte (the same BO's mapping, or the same
    /// process's addresses).
    pub(super) fn overlaps(&self, other: &Reach) -> bool {
        let (a, b) = match (self, other) {
            (
                Reach::Map { map, offset, .. },
                Reach::Map {
                    map: m, offset: o, ..
                },
            ) if std::sync::Arc::ptr_eq(map, m) => (*offset as u64, *o as u64),
            (
                &Reach::Process { tgid, addr, .. },
                &Reach::Process {
                    tgid: t, addr: a, ..
                },
            ) if tgid == t => (addr, a),
            _ => return false,
        };
        self.len() > 0
            && other.len() > 0
            && a < b.saturating_add(other.len() as u64)
            && b < a.saturating_add(self.len() as u64)
    }

    /// Appends `next` to `self` when it follows it (the same mapping or process, the next
    /// bytes): `next` back otherwise.
    fn join(&mut self, next: Reach) -> Option<Reach> {
        match (&mut *self, &next) {
            (
                Reach::Map { map, offset, len },
                Reach::Map {
                    map: m,
                    offset: o,
                    len: l,
                },
            ) if std::sync::Arc::ptr_eq(map, m) && *offset + *len == *o => {
                *len += l;
                None
            }
            (
                Reach::Process { tgid, addr, len },
                &Reach::Process {
                    tgid: t,
                    addr: a,
                    len: l,
                },
            ) if *tgid == t && addr.checked_add(*len as u64) == Some(a) => {
                *len += l;
                None
            }
            _ => Some(next),
        }
    }
}

/// Where one piece of an access is moved: bytes the model keeps (`backing`, `offset`, read
/// under the lock held as `State`), or memory of process `tgid` at an address.
enum Side<'a> {
    Model(&'a super::process::State, u64, u64),
    Process(i32, u64),
}

/// One GPU-view access for the worker thread.
enum Job {
    Read {
        tgid: i32,
        gpu_id: u32,
        va: u64,
        len: usize,
        reply: mpsc::SyncSender<Result<Vec<u8>, GpuFault>>,
    },
    Write {
        tgid: i32,
        gpu_id: u32,
        va: u64,
        data: Vec<u8>,
        reply: mpsc::SyncSender<Result<(), GpuFault>>,
    },
}

/// The thread GPU-view accesses run on.
///
/// A GPU-view access may read `/proc/<pid>/maps` (SVM) while it holds the model's lock. Called
/// from a thread the emulator filters (an attached test thread), that `open` would itself wait
/// for the supervisor — which may be waiting for the same lock: a deadlock. The worker is
/// started with the model, before any filter is installed, so its syscalls are plain ones.
#[derive(Debug)]
pub(crate) struct Worker {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Worker {
    /// Starts the thread; it ends when the model is dropped.
    pub(crate) fn start(model: Weak<Driver>) -> Worker {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("kfd-emu-gpu-view".into())
            .spawn(move || {
                crate::own::mark();
                for job in rx {
                    let Some(model) = model.upgrade() else { break };
                    match job {
                        Job::Read {
                            tgid,
                            gpu_id,
                            va,
                            len,
                            reply,
                        } => {
                            let mut buf = vec![0u8; len];
                            let r = model.read_here(tgid, gpu_id, va, &mut buf).map(|()| buf);
                            let _ = reply.send(r);
                        }
                        Job::Write {
                            tgid,
                            gpu_id,
                            va,
                            data,
                            reply,
                        } => {
                            let _ = reply.send(model.write_here(tgid, gpu_id, va, &data));
                        }
                    }
                }
            });
        // Without a thread the accesses run on the caller's thread, as before.
        Worker {
            jobs: Mutex::new(spawned.ok().map(|_| tx)),
        }
    }

    fn sender(&self) -> Option<mpsc::Sender<Job>> {
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Driver {
    /// [`Model::gpu_read`](super::Model::gpu_read), its jobs sent to `view`.
    pub(super) fn gpu_read(
        &self,
        view: &Worker,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), GpuFault> {
        let Some(jobs) = view.sender() else {
            return self.read_here(tgid, gpu_id, va, buf);
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Read {
            tgid,
            gpu_id,
            va,
            len: buf.len(),
            reply,
        };
        if jobs.send(job).is_err() {
            return self.read_here(tgid, gpu_id, va, buf);
        }
        match answer.recv() {
            Ok(result) => result.map(|bytes| buf.copy_from_slice(&bytes)),
            Err(_) => self.read_here(tgid, gpu_id, va, buf),
        }
    }

    /// [`gpu_read`](Self::gpu_read) on the calling thread.
    pub(super) fn read_here(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), GpuFault> {
        self.read_as(tgid, gpu_id, va, buf, true)
    }

    /// [`read_here`](Self::read_here) of a speculative access (an instruction prefetch
    /// beyond the instruction being fetched): a fault is returned but not reported (no SMI
    /// record), as the hardware reports only faults of accesses a wave makes.
    pub(super) fn peek_here(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), GpuFault> {
        self.read_as(tgid, gpu_id, va, buf, false)
    }

    fn read_as(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
        report: bool,
    ) -> Result<(), GpuFault> {
        if let Some((map, off)) = self.small_window(tgid, gpu_id, va, buf.len(), false) {
            let _busy = self.dev.clock.busy();
            if map.read_at(off, buf).is_ok() {
                return Ok(());
            }
        }
        self.copy(
            tgid,
            gpu_id,
            va,
            buf.len(),
            false,
            report,
            |side, range| match side {
                Side::Model(st, backing, offset) => {
                    st.backing_read(backing, offset, &mut buf[range])
                }
                Side::Process(tgid, addr) => {
                    super::objects::remote_read(tgid, addr, &mut buf[range])
                }
            },
        )
    }

    /// Where the GPU page holding `va` of GPU `gpu_id` of process `tgid` lives, as far as a
    /// dispatch's translation cache (`kernel`) may remember it: the model's own bytes (a VRAM
    /// or GTT BO's memfd), process memory the GPU maps now (a USERPTR BO with pages, an SVM
    /// page whose PTE is valid on this GPU), or neither. Translates only: no fault is taken or
    /// reported, no SVM page migrates — the first access to a page goes through
    /// [`read_here`](Self::read_here) / [`write_here`](Self::write_here), which apply the
    /// retry-fault path, and is asked about again after.
    pub(super) fn page_route(&self, tgid: i32, gpu_id: u32, va: u64) -> Route {
        let page = va & !(super::memory::PAGE_SIZE - 1);
        let mut st = self.lock();
        let Some(process) = st.procs.get(&tgid) else {
            return Route::Unmapped;
        };
        let Some(gpu) = process
            .pdds
            .iter()
            .position(|p| p.gpu_id == gpu_id && gpu_id != 0)
        else {
            return Route::Unmapped;
        };
        let Some((start, m)) = process.pdds[gpu].vm.lookup(page) else {
            // SVM memory (`translate`: after the BO mappings), the process's own pages.
            return match super::svm::gpu_mapped(process, gpu, page) {
                Some(writable) => Route::Process {
                    owner: tgid,
                    addr: page,
                    writable,
                    span: page..page.saturating_add(super::memory::PAGE_SIZE),
                },
                None => Route::Unmapped,
            };
        };
        if process.userptrs.no_pages.contains(&m.backing) {
            return Route::Unmapped;
        }
        let offset = m.offset + (page - start);
        let Some(backing) = st.backings.get(&m.backing) else {
            return Route::Other;
        };
        match &backing.store {
            super::objects::Store::Memfd(_) => match bo_map(&mut st, m.backing) {
                Some(map) => Route::Memfd {
                    map,
                    offset,
                    writable: m.writable,
                    span: start..m.end,
                },
                None => Route::Other,
            },
            &super::objects::Store::UserPtr { tgid: owner, addr } => match addr.checked_add(offset)
            {
                Some(addr) => Route::Process {
                    owner,
                    addr,
                    writable: m.writable,
                    span: start..m.end,
                },
                None => Route::Other,
            },
            super::objects::Store::Kfd { .. } => Route::Other,
        }
    }

    /// [`Model::gpu_write`](super::Model::gpu_write), its jobs sent to `view`.
    pub(super) fn gpu_write(
        &self,
        view: &Worker,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &[u8],
    ) -> Result<(), GpuFault> {
        let Some(jobs) = view.sender() else {
            return self.write_here(tgid, gpu_id, va, buf);
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Write {
            tgid,
            gpu_id,
            va,
            data: buf.to_vec(),
            reply,
        };
        if jobs.send(job).is_err() {
            return self.write_here(tgid, gpu_id, va, buf);
        }
        match answer.recv() {
            Ok(result) => result,
            Err(_) => self.write_here(tgid, gpu_id, va, buf),
        }
    }

    /// [`gpu_write`](Self::gpu_write) on the calling thread.
    pub(super) fn write_here(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &[u8],
    ) -> Result<(), GpuFault> {
        if let Some((map, off)) = self.small_window(tgid, gpu_id, va, buf.len(), true) {
            let _busy = self.dev.clock.busy();
            if map.write(off, buf).is_ok() {
                return Ok(());
            }
        }
        self.copy(
            tgid,
            gpu_id,
            va,
            buf.len(),
            true,
            true,
            |side, range| match side {
                Side::Model(st, backing, offset) => st.backing_write(backing, offset, &buf[range]),
                Side::Process(tgid, addr) => super::objects::remote_write(tgid, addr, &buf[range]),
            },
        )
    }

    /// Where the bytes of each access `(va, len, write)` of `accesses` are, as GPU `gpu_id` of
    /// process `tgid` reaches them, translated under one take of the model's lock for an engine
    /// that then moves them itself without it (the SDMA engine's copies and fills): a VRAM or
    /// GTT BO's bytes through its long-lived mapping ([`bo_maps`](super::bo_maps), made on
    /// first use and kept with the backing — a peer GPU's VRAM BO mapped in this GPU's VM
    /// too), a USERPTR BO's and SVM memory as the process's own addresses, pieces that follow
    /// one another joined. Translation is [`read_here`](Self::read_here)'s and
    /// [`write_here`](Self::write_here)'s (SVM retry faults, migrations), but it reports no
    /// VM fault: `None` when an access faults, reaches memory only the GPU view moves (the
    /// driver's own: doorbells, the MMIO page), a BO whose memfd the host will not map, or
    /// when this engine's queue was destroyed. The caller then makes the access through
    /// `read_here`/`write_here`, which fault and report as ever.
    pub(super) fn reach(
        &self,
        tgid: i32,
        gpu_id: u32,
        accesses: &[(u64, usize, bool)],
    ) -> Option<Vec<Vec<Reach>>> {
        let reached = {
            let mut st = self.lock();
            // Checked under the lock: DESTROY_QUEUE removes the queue under it first.
            if super::queues::cancelled() {
                return None;
            }
            let mut reached = Vec::with_capacity(accesses.len());
            for &(va, len, write) in accesses {
                let pieces = self
                    .access(&mut st, tgid, gpu_id, va, len, write, false)
                    .ok()?;
                let mut out: Vec<Reach> = Vec::new();
                for p in pieces {
                    let r = match p {
                        Piece::Backing {
                            backing,
                            offset,
                            len,
                        } => match st.backing_user(backing, offset).ok()? {
                            Some((owner, addr)) => Reach::Process {
                                tgid: owner,
                                addr,
                                len,
                            },
                            None => Reach::Map {
                                map: bo_map(&mut st, backing).filter(|m| {
                                    offset
                                        .checked_add(len as u64)
                                        .is_some_and(|end| end <= m.len() as u64)
                                })?,
                                offset: usize::try_from(offset).ok()?,
                                len,
                            },
                        },
                        Piece::User { addr, len } => Reach::Process { tgid, addr, len },
                    };
                    match out.last_mut() {
                        Some(last) => {
                            if let Some(r) = last.join(r) {
                                out.push(r);
                            }
                        }
                        None => out.push(r),
                    }
                }
                reached.push(out);
            }
            reached
        };
        // Memory a fault moved to VRAM is hidden from the CPU before the access is seen.
        self.cpu.sync();
        Some(reached)
    }

    /// Translates `[va, va + len)` under the model's lock and moves its bytes with `copy`.
    /// The bytes the model keeps (VRAM, GTT) are moved under the lock, in address order up
    /// to the first that fails; a process's own memory (USERPTR BOs, SVM ranges) before that
    /// point is moved only after the lock is dropped, so that an access that blocks there (a
    /// page behind a userfaultfd nobody serves, a hung FUSE mapping) holds up only this
    /// access, not every process's ioctls. The fault reported is the first in address order.
    /// The process can change its memory (or free the USERPTR BO) meanwhile, as it can while
    /// a real GPU reads it: the access then reaches what the process has at that address.
    /// On an engine thread whose queue was destroyed no piece is moved
    /// ([`queues::cancelled`](super::queues::cancelled)).
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        len: usize,
        write: bool,
        report: bool,
        mut copy: impl FnMut(Side<'_>, Range<usize>) -> Result<(), Errno>,
    ) -> Result<(), GpuFault> {
        // The emulator's own time moving the bytes is not the machine's (`ClockMode::Program`).
        let _busy = self.dev.clock.busy();
        let fail = |at: u64, e| fault(gpu_id, at, write, GpuFaultReason::Backing(e));
        // An engine whose queue was destroyed (while this access waited on memory, say)
        // starts no access: it is discarded (`ECANCELED`; the engine drops the fault).
        let cancelled = |at: u64| {
            super::queues::cancelled()
                .then(|| fail(at, Errno::CANCELED))
                .map_or(Ok(()), Err)
        };
        // Under the lock: the model's pieces, and where the process's pieces are.
        let mut outside = Vec::new();
        let mut failed = None;
        {
            let mut st = self.lock();
            // Checked under the lock: DESTROY_QUEUE removes the queue under it first.
            cancelled(va)?;
            let pieces = self.access(&mut st, tgid, gpu_id, va, len, write, report)?;
            let mut done = 0usize;
            let mut at = va;
            for p in pieces {
                let range = done..done + p.len();
                let r = match p {
                    Piece::Backing {
                        backing, offset, ..
                    } => match st.backing_user(backing, offset) {
                        Ok(Some((owner, addr))) => {
                            outside.push((at, owner, addr, range));
                            Ok(())
                        }
                        Ok(None) => copy(Side::Model(&st, backing, offset), range),
                        Err(e) => Err(e),
                    },
                    Piece::User { addr, .. } => {
                        outside.push((at, tgid, addr, range));
                        Ok(())
                    }
                };
                if let Err(e) = r {
                    failed = Some(fail(at, e));
                    break;
                }
                done += p.len();
                at += p.len() as u64;
            }
        }
        // Memory a fault moved to VRAM is hidden from the CPU before the access is seen.
        self.cpu.sync();
        // Without the lock: the process's pieces before the first failure, each run of
        // pieces that follow one another in the access and in the same process's memory
        // moved in one go (one `process_vm_readv`/`writev` for a run of SVM pages rather than
        // one per page); a run that fails is moved again piece by piece, so that the fault
        // reported is its first piece's that fails.
        for run in runs(&outside) {
            let (at, owner, addr, _) = run[0];
            let whole = run[0].3.start..run[run.len() - 1].3.end;
            cancelled(at)?;
            if run.len() == 1 || copy(Side::Process(owner, addr), whole).is_err() {
                for &(at, owner, addr, ref range) in run {
                    cancelled(at)?;
                    copy(Side::Process(owner, addr), range.clone()).map_err(|e| fail(at, e))?;
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Walks the page tables over `[va, va + len)`, handling SVM faults; a VM fault is
    /// reported to the GPU's SMI clients when `report`.
    #[allow(clippy::too_many_arguments)]
    fn access(
        &self,
        st: &mut super::process::State,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        len: usize,
        write: bool,
        report: bool,
    ) -> Result<Vec<Piece>, GpuFault> {
        let Some(process) = st.procs.get(&tgid) else {
            return Err(fault(gpu_id, va, write, GpuFaultReason::NoProcess));
        };
        let Some(gpu) = process
            .pdds
            .iter()
            .position(|p| p.gpu_id == gpu_id && gpu_id != 0)
        else {
            return Err(fault(gpu_id, va, write, GpuFaultReason::UnknownGpu));
        };
        let result = self.translate(st, tgid, gpu, va, len, write);
        if let Err(f) = &result
            && report
            && matches!(
                f.reason,
                GpuFaultReason::NotMapped | GpuFaultReason::ReadOnly | GpuFaultReason::NoAccess
            )
        {
            super::svm::report_vm_fault(&self.dev, st, tgid, gpu);
        }
        result
    }

    /// The pieces of `[va, va + len)` as GPU index `gpu` sees them: BO mappings first, then
    /// SVM memory page by page.
    fn translate(
        &self,
        st: &mut super::process::State,
        tgid: i32,
        gpu: usize,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<Vec<Piece>, GpuFault> {
        let gpu_id = self.dev.cfg.machine.gpus()[gpu].gpu_id;
        let mut pieces = Vec::new();
        let mut vmas = None;
        let mut at = va;
        let mut left = len as u64;
        while left > 0 {
            let mapping = st
                .procs
                .get(&tgid)
                .and_then(|p| p.pdds.get(gpu))
                .and_then(|pdd| pdd.vm.lookup(at));
            if let Some((start, m)) = mapping {
                if write && !m.writable {
                    return Err(fault(gpu_id, at, write, GpuFaultReason::ReadOnly));
                }
                // A USERPTR BO whose memory was unmapped has no pages (see `addrspace`).
                if st
                    .procs
                    .get(&tgid)
                    .is_some_and(|p| p.userptrs.no_pages.contains(&m.backing))
                {
                    return Err(fault(gpu_id, at, write, GpuFaultReason::NotMapped));
                }
                let chunk = (m.end - at).min(left);
                pieces.push(Piece::Backing {
                    backing: m.backing,
                    offset: m.offset + (at - start),
                    len: chunk as usize,
                });
                at += chunk;
                left -= chunk;
                continue;
            }
            super::svm::gpu_access(self, st, tgid, gpu, at, write, &mut vmas)
                .map_err(|reason| fault(gpu_id, at, write, reason))?;
            let chunk = (super::memory::PAGE_SIZE - at % super::memory::PAGE_SIZE).min(left);
            pieces.push(Piece::User {
                addr: at,
                len: chunk as usize,
            });
            at += chunk;
            left -= chunk;
        }
        Ok(pieces)
    }
}

/// Accesses of at most this many bytes that lie in one VRAM or GTT BO mapping are moved
/// through the BO's long-lived mapping ([`Driver::small_window`]): the packets, signals,
/// pointers, descriptors and kernarg segments the engines read and write. Larger ones (bulk
/// copies) keep `pread`/`pwrite`, which leave a BO's holes unallocated.
const SMALL_ACCESS: usize = 256;

impl Driver {
    /// Where the 8 bytes at `va` of GPU `gpu_id` of process `tgid` lie in a VRAM or GTT BO's
    /// long-lived mapping (its map and offset), for the doorbell watcher (`doorbells`), which
    /// reads a queue's write pointer there with no system call; `None` where they lie
    /// elsewhere (the engine's own polling reads them).
    pub(super) fn wptr_window(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
    ) -> Option<(Arc<BoMap>, usize)> {
        self.small_window(tgid, gpu_id, va, 8, false)
    }

    /// The long-lived mapping of the VRAM or GTT BO that GPU `gpu_id` of process `tgid`
    /// maps over all of `[va, va + len)` (writable when `write`), and the offset of `va` in
    /// it, for an access of at most [`SMALL_ACCESS`] bytes: what [`read_here`](Self::read_here)
    /// and [`write_here`](Self::write_here) move without a system call. `None` (the access
    /// takes the general path, which faults, reports and reaches process memory) for anything
    /// else: a larger access, one not in one such BO, a USERPTR or SVM page, a read-only
    /// mapping written, a USERPTR BO without pages, or an engine whose queue was destroyed
    /// (the general path discards its access). The translation is the general path's
    /// (`translate`: the GPU's BO mappings first), under the model's lock; the bytes move
    /// after it is dropped, as the general path moves a process's.
    fn small_window(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        len: usize,
        write: bool,
    ) -> Option<(Arc<BoMap>, usize)> {
        if len == 0 || len > SMALL_ACCESS || super::queues::cancelled() {
            return None;
        }
        let mut st = self.lock();
        let process = st.procs.get(&tgid)?;
        let pdd = process
            .pdds
            .iter()
            .find(|p| p.gpu_id == gpu_id && gpu_id != 0)?;
        let (start, m) = pdd.vm.lookup(va)?;
        let end = va.checked_add(len as u64)?;
        if end > m.end || (write && !m.writable) || process.userptrs.no_pages.contains(&m.backing) {
            return None;
        }
        let backing = m.backing;
        let offset = m.offset.checked_add(va - start)?;
        if !matches!(
            st.backings.get(&backing)?.store,
            super::objects::Store::Memfd(_)
        ) {
            return None;
        }
        let map = bo_map(&mut st, backing)?;
        let off = usize::try_from(offset).ok()?;
        (off.checked_add(len)? <= map.len()).then_some((map, off))
    }
}

/// The long-lived mapping of backing `id`'s memfd ([`State::bo_maps`]), made on first use;
/// `None` for a backing that is not a memfd, or a mapping the host refuses.
fn bo_map(st: &mut State, id: u64) -> Option<Arc<BoMap>> {
    if let Some(map) = st.bo_maps.get(&id) {
        return Some(Arc::clone(map));
    }
    let backing = st.backings.get(&id)?;
    let super::objects::Store::Memfd(fd) = &backing.store else {
        return None;
    };
    let map = Arc::new(BoMap::map(Arc::clone(fd), backing.size)?);
    st.bo_maps.insert(id, Arc::clone(&map));
    Some(map)
}

/// The process pieces of an access (`(va, process, address, bytes of the access)`, in
/// access order) cut into runs that are contiguous in the access and in one process's
/// memory, at most [`RUN_BYTES`] each.
fn runs(
    pieces: &[(u64, i32, u64, Range<usize>)],
) -> impl Iterator<Item = &[(u64, i32, u64, Range<usize>)]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let first = pieces.get(start)?;
        let mut end = start + 1;
        while let Some(next) = pieces.get(end) {
            let prev = &pieces[end - 1];
            let follows = next.1 == first.1
                && next.3.start == prev.3.end
                && prev.2.checked_add(prev.3.len() as u64) == Some(next.2)
                && next.3.end - first.3.start <= RUN_BYTES;
            if !follows {
                break;
            }
            end += 1;
        }
        let run = &pieces[start..end];
        start = end;
        Some(run)
    })
}

/// The most bytes of process memory one run of [`runs`] moves in one call.
const RUN_BYTES: usize = 4 << 20;

fn fault(gpu_id: u32, va: u64, write: bool, reason: GpuFaultReason) -> GpuFault {
    GpuFault {
        gpu_id,
        va,
        write,
        reason,
    }
}
