//! User-mode queues (the state of `kfd_process_queue_manager.c` and the device queue
//! manager's SDMA bookkeeping): a process's queues by id, what each is made of, and how far
//! the engine got in it; and each queue's [`Runner`], the part its engine thread shares with
//! the ioctls that preempt it (DESTROY_QUEUE, UPDATE_QUEUE, a process's teardown) without any
//! lock that is held while process memory is touched. The ioctls are in
//! [`queue_ioctls`](super::queue_ioctls), the engines that run queues in
//! [`scheduler`](super::scheduler).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::io::Errno;

/// `KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`: the queue-slot bitmap of a process.
pub(super) const MAX_QUEUES_PER_PROCESS: u32 = 1024;
/// `pqm_create_queue`'s `max_queues = 127` (the HWS limit on a process's queues per GPU).
pub(super) const MAX_QUEUES_PER_PDD: usize = 127;
/// `pqm_create_queue`'s `max_queues` on GC 9.4.3 ("No HWS limit on GFX 9.4.3": 255).
pub(super) const MAX_QUEUES_PER_PDD_GC_9_4_3: usize = 255;

/// `pqm_create_queue` (`kfd_process_queue_manager.c`): how many queues a process may have on
/// a GPU of `gfx_target_version` `target` — 255 on GC 9.4.3 (gfx940, gfx941, gfx942), else
/// the HWS limit of 127.
pub(super) fn max_queues_per_pdd(target: kfd_ioctl::topology::GfxTargetVersion) -> usize {
    if matches!(target.raw(), Some(90400..=90402)) {
        MAX_QUEUES_PER_PDD_GC_9_4_3
    } else {
        MAX_QUEUES_PER_PDD
    }
}
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
    /// An AQL packet the packet processor refuses, or a kernel whose wave trapped or hit an
    /// illegal instruction, with the error code for the runtime (`queue_error`, `kernel`).
    QueueError(u32),
    /// Evicted with the process's other queues on the GPU after a VM fault of one of them,
    /// or created on the GPU after such a fault (`create_queue_cpsch` with `qpd->evicted`
    /// raised): never restored while the process lives.
    Evicted,
    /// A PM4 dispatch (DISPATCH_DIRECT / DISPATCH_INDIRECT, its header dword) the CP cannot
    /// start: no threads per group, a descriptor the interpreter cannot run, too little
    /// scratch, a non-zero start without FORCE_START_AT_000 (`kernel::run_pm4`).
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
    /// GWS entries the queue was given (ALLOC_QUEUE_GWS: `q->gws`), 0 for none.
    pub gws: u32,
    /// The BO handles whose GPU mappings the queue holds (`kfd_queue_acquire_buffers` takes a
    /// `queue_refcount` on each; newer kernels only).
    pub held: Vec<u64>,
    /// What the engine consumed (the read pointer it writes back): bytes for SDMA, packets
    /// for AQL, dwords for PM4.
    pub consumed: u64,
    pub stopped: Option<Stopped>,
    /// The context save area (`ctx_save_restore_area_address` and its size), whose header
    /// names the runtime's error payload and event (`kfd_send_exception_to_runtime`).
    pub ctx_save: (u64, u32),
    /// `queue_properties.exception_status`: the queue exceptions raised for the debugger
    /// (`KFD_EC_MASK_QUEUE` bits, `kfd_dbg_ev_raise`).
    pub exception_status: u64,
    /// The queue type the debugger's snapshot reports (`set_queue_type_for_user`:
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE`, `_COMPUTE_AQL`, `_SDMA` or `_SDMA_XGMI`).
    pub user_type: u32,
    /// Suspended by the debugger (SUSPEND_QUEUES, `q->properties.is_suspended`).
    pub suspended: bool,
    /// A PM4 queue's CP state (unused by other queues).
    pub pm4: Pm4State,
    /// The queue's engine side (see [`Runner`]).
    pub runner: Arc<Runner>,
}

impl Queue {
    /// `QUEUE_IS_ACTIVE` (`kfd_priv.h`) of the properties the ioctls set: a ring with a size
    /// and an address, and a share of the GPU above 0 (a queue's eviction, `is_evicted`, is
    /// [`Stopped::Evicted`] here, which keeps it from running whatever this says).
    pub(super) fn is_active(&self) -> bool {
        self.ring_size > 0 && self.ring_va != 0 && self.percentage > 0
    }
}

/// A process's queues, by queue id (`pqm->queues` and its slot bitmap).
#[derive(Debug, Default)]
pub(super) struct Queues {
    pub by_id: BTreeMap<u32, Queue>,
    /// When an ioctl of the process last woke its engines ([`Queues::due_kick`]).
    pub kicked: Option<Instant>,
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

    /// The engines an ioctl of the process made at `now` wakes: every queue's, unless an
    /// ioctl woke them less than [`IOCTL_KICK_EVERY`] ago (they are polling fast since).
    pub(super) fn due_kick(&mut self, now: Instant) -> Vec<Arc<Runner>> {
        if self.by_id.is_empty()
            || self
                .kicked
                .is_some_and(|at| now.saturating_duration_since(at) < IOCTL_KICK_EVERY)
        {
            return Vec::new();
        }
        self.kicked = Some(now);
        self.by_id.values().map(|q| Arc::clone(&q.runner)).collect()
    }

    /// Queues on GPU index `gpu`.
    pub(super) fn on_gpu(&self, gpu: usize) -> usize {
        self.by_id.values().filter(|q| q.gpu == gpu).count()
    }
}

/// How an engine is told to look for work now (its doorbell or write pointer changed, as
/// the doorbell watcher saw: `doorbells`; an ioctl of its process, which may come right
/// after a doorbell write; a queue made active or destroyed; a waiter of its process that
/// wants to see completions). It only wakes the engine: nothing waits for an engine here.
#[derive(Debug, Default)]
pub(super) struct Kick {
    count: Mutex<u64>,
    cond: Condvar,
}

impl Kick {
    /// Wakes the engine.
    pub(super) fn kick(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count = count.wrapping_add(1);
        self.cond.notify_all();
    }

    /// The current kick count.
    pub(super) fn count(&self) -> u64 {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout` for a kick after the count `seen`: whether one came.
    pub(super) fn wait(&self, seen: u64, timeout: Duration) -> bool {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (count, _) = self
            .cond
            .wait_timeout_while(count, timeout, |c| *c == seen)
            .unwrap_or_else(|e| e.into_inner());
        *count != seen
    }
}

/// How long a preemption (DESTROY_QUEUE, a deactivating UPDATE_QUEUE) waits for the packet the
/// engine is on. The kernel's HWS unmap waits `queue_preemption_timeout_ms` (9 s by default)
/// for the preemption fence and then resets the GPU (`unmap_queues_cpsch` in
/// `kfd_device_queue_manager.c`); the model's engines reach a packet boundary within a
/// bounded slice unless an access blocks (a page nobody serves), and then waiting longer
/// helps nobody: the ioctl goes on, and the blocked access is discarded when it returns.
pub(super) const PREEMPT_TIMEOUT: Duration = Duration::from_millis(20);

/// The shortest time between two wake-ups of a process's engines by its ioctls: an ioctl
/// storm wakes each engine at most this often (a woken engine polls fast for a while anyway:
/// `scheduler`).
pub(super) const IOCTL_KICK_EVERY: Duration = Duration::from_millis(1);

/// The engine side of one queue, shared by the queue's engine thread and the ioctls that
/// preempt it. The engine runs one packet (or one bounded piece of a large one) at a time
/// between [`Runner::begin`] and the end of the guard; a preemption marks the queue and waits
/// (at most [`PREEMPT_TIMEOUT`]) for that packet to end. The mutex here is this queue's alone
/// and never held across a memory access, so a blocked access holds up only this queue.
#[derive(Debug, Default)]
pub(super) struct Runner {
    state: Mutex<RunState>,
    ended: Condvar,
    /// [`RunState::gone`], readable without the mutex by every access of the engine.
    gone: AtomicBool,
    /// [`RunState::inactive`], read without the mutex at every pause point of a dispatch
    /// ([`Runner::pause_point`]).
    paused: AtomicBool,
    /// Wakes the dispatch threads held at a pause point (the queue active again, or gone).
    resumed: Condvar,
    /// Wakes the queue's engine thread.
    pub kick: Kick,
    /// What the queue's kernel dispatches keep from one to the next (`kernel`): the
    /// dispatch threads' code caches and wave state, as a CU keeps its instruction cache
    /// ([`kfd_gfx9::dispatch::Pool`]); dropped with the queue.
    pub dispatch_pool: kfd_gfx9::dispatch::Pool,
}

#[derive(Debug, Default)]
struct RunState {
    /// Destroyed (DESTROY_QUEUE, or its process went): no packet starts, no access lands.
    gone: bool,
    /// Inactive (`QUEUE_IS_ACTIVE` false): no packet starts until it is active again.
    inactive: bool,
    /// Evicted with its process (`q->properties.is_evicted`, `evict_process_queues_cpsch`
    /// for a TTM eviction, `evict`): no packet starts until the restore worker resumes it.
    evicted: bool,
    /// The engine is inside a packet.
    in_packet: bool,
    /// The packet is a kernel dispatch whose threads stop at pause points
    /// ([`Runner::dispatching`]).
    dispatching: bool,
    /// The dispatch's threads running waves now (started, not ended, not held at a pause
    /// point).
    executing: u32,
}

/// A packet the engine is running; dropping it ends the packet.
pub(super) struct InPacket<'a>(&'a Runner);

impl Drop for InPacket<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.in_packet = false;
        drop(st);
        self.0.ended.notify_all();
    }
}

impl Runner {
    /// A runner for a queue that starts active or not.
    pub(super) fn new(active: bool) -> Arc<Runner> {
        Arc::new(Runner {
            state: Mutex::new(RunState {
                inactive: !active,
                ..RunState::default()
            }),
            ..Runner::default()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a packet; `None` when the queue is destroyed or inactive (preempted).
    pub(super) fn begin(&self) -> Option<InPacket<'_>> {
        let mut st = self.lock();
        if st.gone || st.inactive || st.evicted {
            return None;
        }
        st.in_packet = true;
        Some(InPacket(self))
    }

    /// Whether the queue was destroyed.
    pub(super) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Whether the queue may run (not destroyed, active).
    pub(super) fn runnable(&self) -> bool {
        let st = self.lock();
        !st.gone && !st.inactive && !st.evicted
    }

    /// Evicts the queue with its process or resumes it (`evict_process_queues_cpsch` /
    /// `restore_process_queues_cpsch`). An eviction does not wait for the packet in flight:
    /// it runs where the model's lock is held, which that packet may need; the packet ends
    /// and no other starts (a kernel dispatch in flight runs to its end: the model cannot
    /// save its waves as CWSR does).
    pub(super) fn set_evicted(&self, evicted: bool) {
        self.lock().evicted = evicted;
        if !evicted {
            self.kick.kick();
        }
    }

    /// Destroys the queue (`destroy_queue_cpsch`: unmapped first), waiting at most
    /// [`PREEMPT_TIMEOUT`] for the packet in flight; `wait` false where the caller holds
    /// the model's lock (a teardown), which an engine inside a packet may need.
    pub(super) fn destroy(&self, wait: bool) {
        self.preempt(wait, |st| st.gone = true);
        // Its thread ends now rather than at its next poll.
        self.kick.kick();
    }

    /// Makes the queue active or not (`update_queue` of the device queue manager: an active
    /// queue is unmapped, then mapped again if it still is active). Deactivating waits for the
    /// packet in flight as [`destroy`](Self::destroy) does.
    pub(super) fn set_active(&self, active: bool) {
        self.preempt(!active, |st| st.inactive = !active);
        if active {
            self.kick.kick();
        }
    }

    fn preempt(&self, wait: bool, change: impl FnOnce(&mut RunState)) {
        let mut st = self.lock();
        change(&mut st);
        self.gone.store(st.gone, Ordering::Release);
        self.paused.store(st.inactive && !st.gone, Ordering::SeqCst);
        self.resumed.notify_all();
        if !wait {
            return;
        }
        let deadline = Instant::now() + PREEMPT_TIMEOUT;
        // A kernel dispatch (AQL's inside its packet, PM4's DISPATCH_DIRECT outside the
        // packet guard, which PM4 queues do not take) is preempted once every thread of it is
        // held at a pause point (its waves' state kept: the CP's context save); any other
        // packet, once it ends.
        while (st.in_packet || st.dispatching) && !(st.dispatching && st.executing == 0) {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            st = self
                .ended
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A kernel dispatch's side of preemption (`kernel.rs`'s dispatch hooks). On the hardware, a
/// queue made inactive is unmapped: the CP saves its waves' context (CWSR, the trap handler
/// writing the control stack and save area) and the unmap completes; mapped again, the waves
/// are restored and go on (`update_queue` → `unmap_queues_cpsch` / `map_queues_cpsch` in
/// `kfd_device_queue_manager.c`). Here the waves' state already lives in the dispatcher's
/// memory: a deactivating UPDATE_QUEUE marks the queue, each dispatch thread stops at its
/// next pause point (between quanta, `kfd_gfx9::dispatch::Observer::pause_point`), and the
/// ioctl returns once none runs a wave; activation lets them go on.
impl Runner {
    /// The engine starts (`true`) or ends running a kernel dispatch.
    pub(super) fn dispatching(&self, on: bool) {
        let mut st = self.lock();
        st.dispatching = on;
        st.executing = 0;
    }

    /// A thread of the running dispatch starts (`true`) or ends.
    pub(super) fn dispatch_thread(&self, start: bool) {
        let mut st = self.lock();
        if start {
            st.executing += 1;
        } else {
            st.executing = st.executing.saturating_sub(1);
            drop(st);
            self.ended.notify_all();
        }
    }

    /// A dispatch thread between quanta: held here while the queue is inactive (and not
    /// destroyed: a destroyed queue's dispatch is cancelled right after).
    pub(super) fn pause_point(&self) {
        if !self.paused.load(Ordering::SeqCst) {
            return;
        }
        let mut st = self.lock();
        if !st.inactive || st.gone {
            return;
        }
        st.executing = st.executing.saturating_sub(1);
        self.ended.notify_all();
        while st.inactive && !st.gone {
            st = self.resumed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.executing += 1;
    }
}

thread_local! {
    /// The queue whose engine runs on this thread, while it runs it.
    static RUNNING: RefCell<Option<Arc<Runner>>> = const { RefCell::new(None) };
}

/// Runs `f` as the engine of `runner`'s queue: every GPU-view access `f` makes checks
/// [`cancelled`] first.
pub(super) fn run_as<T>(runner: &Arc<Runner>, f: impl FnOnce() -> T) -> T {
    RUNNING.with(|r| *r.borrow_mut() = Some(Arc::clone(runner)));
    let out = f();
    RUNNING.with(|r| *r.borrow_mut() = None);
    out
}

/// Whether this thread is the engine of a queue that was destroyed: an access it makes now is
/// discarded (the queue was unmapped while the access was blocked).
pub(super) fn cancelled() -> bool {
    RUNNING.with(|r| r.borrow().as_ref().is_some_and(|r| r.is_gone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An evicted queue starts no packet and its engine idles, whatever its own activity
    /// says; the restore makes it runnable again and wakes its engine; eviction and the
    /// queue's own `QUEUE_IS_ACTIVE` are independent (a restore does not activate a queue
    /// UPDATE_QUEUE made inactive).
    #[test]
    fn eviction_stops_a_queue_until_the_restore() {
        let r = Runner::new(true);
        assert!(r.runnable() && r.begin().is_some());
        r.set_evicted(true);
        assert!(!r.runnable(), "evicted");
        assert!(r.begin().is_none(), "no packet starts");
        let seen = r.kick.count();
        r.set_evicted(false);
        assert!(r.kick.count() > seen, "the restore wakes the engine");
        assert!(r.runnable() && r.begin().is_some());

        r.set_active(false);
        r.set_evicted(true);
        r.set_evicted(false);
        assert!(!r.runnable(), "still inactive after the restore");
        r.set_active(true);
        assert!(r.runnable());
    }

    #[test]
    fn a_deactivated_dispatch_is_held_between_quanta_and_resumes_where_it_stopped() {
        // Inside a packet (an AQL KERNEL_DISPATCH) and outside one (a PM4 DISPATCH_DIRECT).
        for in_packet in [true, false] {
            deactivated_dispatch(in_packet);
        }
    }

    fn deactivated_dispatch(in_packet: bool) {
        use std::sync::atomic::AtomicU64;
        let r = Runner::new(true);
        let packet = in_packet.then(|| r.begin().expect("active"));
        r.dispatching(true);
        let turns = AtomicU64::new(0);
        std::thread::scope(|s| {
            // A dispatch thread: a quantum per turn, a pause point before each.
            s.spawn(|| {
                r.dispatch_thread(true);
                loop {
                    r.pause_point();
                    if r.is_gone() {
                        break;
                    }
                    turns.fetch_add(1, Ordering::SeqCst);
                    std::thread::yield_now();
                }
                r.dispatch_thread(false);
            });
            while turns.load(Ordering::SeqCst) < 3 {
                std::thread::yield_now();
            }
            // Deactivated: the update returns once the thread is held (not at the timeout),
            // and it runs no turn until activated.
            r.set_active(false);
            assert_eq!(
                r.lock().executing,
                0,
                "the update returned before the thread stopped"
            );
            let held = turns.load(Ordering::SeqCst);
            assert_eq!(
                r.lock().in_packet,
                in_packet,
                "the dispatch is where it was"
            );
            assert_eq!(turns.load(Ordering::SeqCst), held);
            r.set_active(true);
            while turns.load(Ordering::SeqCst) < held + 3 {
                std::thread::yield_now();
            }
            // Held again, then destroyed: the held thread wakes and ends.
            r.set_active(false);
            assert_eq!(r.lock().executing, 0);
            r.destroy(false);
        });
        assert_eq!(r.lock().executing, 0);
        r.dispatching(false);
        drop(packet);
        assert!(!r.lock().in_packet);
    }
}
