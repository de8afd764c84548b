//! User-mode queues (the state of `kfd_process_queue_manager.c` and the device queue
//! manager's SDMA bookkeeping): a process's queues by id, what each is made of, and how far
//! the engine got in it. The ioctls are in [`queue_ioctls`](super::queue_ioctls), the engines
//! that run queues in [`scheduler`](super::scheduler).

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rustix::io::Errno;

/// `KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`: the queue-slot bitmap of a process.
pub(super) const MAX_QUEUES_PER_PROCESS: u32 = 1024;
/// `pqm_create_queue`'s `max_queues = 127` (the HWS limit on a process's queues per GPU).
pub(super) const MAX_QUEUES_PER_PDD: usize = 127;
/// `max_num_of_queues_per_device` (the `amdgpu.max_num_of_queues_per_device` default).
pub(super) const MAX_QUEUES_PER_DEVICE: usize = 4096;
/// `KFD_QUEUE_DOORBELL_MIRROR_OFFSET`: the distance of an SDMA engine's odd queues' doorbells.
pub(super) const DOORBELL_MIRROR_OFFSET: u32 = 512;

/// What engine a queue runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Engine {
    /// A compute (CP) queue; AQL when `aql`.
    Compute { aql: bool },
    /// An SDMA queue: engine id (PCIe engines first, then xGMI) and queue on it.
    Sdma { engine: u32, queue: u32 },
}

/// Why a queue stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    /// A VM fault at this address.
    VmFault(u64),
    /// A packet the engine cannot process (its header dword).
    BadPacket(u32),
    /// An AQL packet the packet processor refuses, with the CP's error code for the runtime
    /// (`queue_error`).
    QueueError(u32),
    /// Evicted with the process's other queues on the GPU after a VM fault of one of them.
    Evicted,
    /// A PM4 dispatch (DISPATCH_DIRECT / DISPATCH_INDIRECT, its header dword): the model
    /// runs no shaders.
    CannotDispatch(u32),
}

/// What a PM4 compute queue's CP keeps between rounds ([`pm4`](super::pm4)): the registers
/// its SET_*_REG and register WRITE_DATA packets wrote, and the indirect buffers it is in.
#[derive(Debug, Clone, Default)]
pub(super) struct Pm4State {
    /// Register values by dword register offset.
    pub regs: BTreeMap<u32, u32>,
    /// The indirect buffers being run, outermost first: (GPU address, dwords, dwords done).
    pub ibs: Vec<(u64, u32, u32)>,
}

/// One queue (`struct queue` with its `queue_properties`).
#[derive(Debug, Clone)]
pub(super) struct Queue {
    pub gpu: usize,
    pub engine: Engine,
    pub ring_va: u64,
    pub ring_size: u64,
    pub rptr_va: u64,
    pub wptr_va: u64,
    pub percentage: u32,
    pub priority: u32,
    /// The doorbell's byte offset in the process's doorbell slice of the GPU.
    pub doorbell: u64,
    pub cu_mask: Vec<u32>,
    pub gws: u32,
    /// The BO handles whose GPU mappings the queue holds (`kfd_queue_acquire_buffers` takes a
    /// `queue_refcount` on each; newer kernels only).
    pub held: Vec<u64>,
    /// What the engine consumed (the read pointer it writes back): bytes for SDMA, packets
    /// for AQL, dwords for PM4.
    pub consumed: u64,
    pub stopped: Option<Stopped>,
    /// A PM4 queue's CP state (unused by other queues).
    pub pm4: Pm4State,
}

/// A process's queues, by queue id (`pqm->queues` and its slot bitmap).
#[derive(Debug, Default)]
pub(super) struct Queues {
    pub by_id: BTreeMap<u32, Queue>,
}

impl Queues {
    /// The lowest free queue id (`find_available_queue_slot`); `None` when all
    /// `KFD_MAX_NUM_OF_QUEUES_PER_PROCESS` are taken.
    pub(super) fn free_id(&self) -> Option<u32> {
        (0..MAX_QUEUES_PER_PROCESS).find(|id| !self.by_id.contains_key(id))
    }

    /// Queue `id` (`pqm_get_user_queue`); `missing` (each ioctl says its own errno) when the
    /// process has none.
    pub(super) fn get_mut(&mut self, id: u32, missing: Errno) -> Result<&mut Queue, Errno> {
        self.by_id.get_mut(&id).ok_or(missing)
    }

    /// Whether a queue on GPU index `gpu` holds the mapping of BO `handle` there.
    pub(super) fn hold(&self, gpu: usize, handle: u64) -> bool {
        self.by_id
            .values()
            .any(|q| q.gpu == gpu && q.held.contains(&handle))
    }

    /// Queues on GPU index `gpu`.
    pub(super) fn on_gpu(&self, gpu: usize) -> usize {
        self.by_id.values().filter(|q| q.gpu == gpu).count()
    }
}

/// How the engines are told to look for work now (a doorbell the model cannot see being
/// written, a new queue, a waiter that wants to see completion).
#[derive(Debug, Default)]
pub(super) struct Kick {
    count: Mutex<u64>,
    cond: Condvar,
    /// Held by whoever runs the engines (their threads, or a waiter running them first), so
    /// that no packet runs twice, and by what changes a queue under them.
    pass: Mutex<()>,
}

impl Kick {
    /// Keeps the engines out until the guard drops: between two packets, as a preemption.
    pub(super) fn hold_engines(&self) -> MutexGuard<'_, ()> {
        self.pass.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes every engine.
    pub(super) fn kick(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count = count.wrapping_add(1);
        self.cond.notify_all();
    }

    /// The current kick count.
    pub(super) fn count(&self) -> u64 {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout` for a kick after the count `seen`.
    pub(super) fn wait(&self, seen: u64, timeout: Duration) {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .cond
            .wait_timeout_while(count, timeout, |c| *c == seen)
            .unwrap_or_else(|e| e.into_inner());
    }
}
