//! Global wave sync (GWS): the GPU-wide semaphores and barriers the `ds_gws_*` instructions
//! reach ("AMD Instinct MI200 ISA" and "Vega ISA", the DS opcode table's GWS entries 152–157,
//! all "GDS only").
//!
//! A GPU has [`GWS_ENTRIES`] resources (64 on gfx9: amdgpu's `adev->gds.gws_size`, which
//! `kfd_gws_init` hands to KFD whole). Each is a counter that an instruction treats as a
//! semaphore or as a barrier:
//!
//! * `ds_gws_init` sets the counter to the first active lane's DATA0 (for a barrier, the
//!   number of waves that will wait on it, minus one: LLVM's `llvm.amdgcn.ds.gws.init`);
//! * `ds_gws_sema_v` adds one, `ds_gws_sema_br` adds the first active lane's DATA0 (bulk
//!   release);
//! * `ds_gws_sema_p` waits until the counter is above zero, then takes one;
//! * `ds_gws_sema_release_all` sets the counter to the number of waves waiting in `sema_p`,
//!   which releases them all;
//! * `ds_gws_barrier` waits until enough waves arrived: a wave that finds the counter above
//!   zero takes one and waits; the wave that finds it at zero is the last one: it re-arms the
//!   counter with its DATA0 and releases every wave waiting on the resource (the guide's
//!   "flag" that flips per phase is [`Gws`]'s per-resource generation here).
//!
//! The resource is `(M0[21:16] + OFFSET) mod 64` (LLVM's `SelectDS_GWS`: "the resource id
//! offset is computed as (`<isa opaque base> + M0[21:16] + offset field) % 64`"; the opaque base
//! is the queue's first GWS entry, always 0 under KFD: `kfd_ioctl_alloc_queue_gws` returns
//! `first_gws = 0`).
//!
//! Where it differs: hardware queues waiting waves in order and hands a released count to
//! the first; here a count goes to a waiting wave before any wave that arrives after it (a
//! `sema_p` that finds waves queued queues too), but among the waiting waves to the first
//! that polls ([`Gws::poll`]), not the first that arrived (a program cannot tell: no order is
//! promised between waves of different workgroups). The counter is 32 bits (the guide does not give its width).
//! `ds_gws_init` leaves waves already waiting on a barrier waiting.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// GWS resources of a gfx9 GPU (amdgpu's `gws_size`, 64 on every gfx9 part).
pub const GWS_ENTRIES: usize = 64;

/// One resource's state.
#[derive(Debug, Clone, Copy, Default)]
struct Resource {
    /// The counter the instructions set, add to and take from.
    counter: u32,
    /// Waves waiting in `ds_gws_sema_p` (the guide's `wave_in_queue`).
    queued: u32,
    /// Barrier phases completed: a barrier waiter is released when it changes.
    generation: u64,
}

/// What a GWS instruction does ([`Gws::execute`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GwsOp {
    /// `ds_gws_init`: the counter is the value.
    Init,
    /// `ds_gws_sema_v`: the counter plus one.
    SemaV,
    /// `ds_gws_sema_br`: the counter plus the value.
    SemaBr,
    /// `ds_gws_sema_p`: wait for the counter above zero, take one.
    SemaP,
    /// `ds_gws_sema_release_all`: the counter is the number of waves waiting.
    SemaReleaseAll,
    /// `ds_gws_barrier`: wait for the other waves of the barrier (value: their number, minus
    /// one, for the next phase).
    Barrier,
}

/// A wave waiting on a GWS resource: what [`Gws::poll`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GwsWait {
    /// The resource.
    pub rid: u8,
    /// What it waits for.
    pub kind: WaitKind,
}

/// What a waiting wave waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// `ds_gws_sema_p`: the counter above zero.
    Semaphore,
    /// `ds_gws_barrier`: the barrier phase it arrived in (the resource's generation then)
    /// to end.
    Barrier(u64),
}

/// The GWS resources of one GPU, shared by every dispatch of the queues that have GWS: the
/// embedder (kfd-emu: one per device) owns it and hands it to the interpreter through
/// [`Memory::gws`](crate::exec::Memory::gws).
#[derive(Debug)]
pub struct Gws {
    state: Mutex<State>,
    /// Notified on every change a waiter may be waiting for.
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    resources: [Resource; GWS_ENTRIES],
    /// Changes so far (a waiter that saw `epoch` sleeps until it moves).
    epoch: u64,
}

impl Default for Gws {
    fn default() -> Self {
        Self::new()
    }
}

impl Gws {
    /// A GPU's resources after reset: every counter 0, no wave waiting.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                resources: [Resource::default(); GWS_ENTRIES],
                epoch: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Executes `op` on resource `rid` (taken modulo [`GWS_ENTRIES`]) with `value` (the first
    /// active lane's DATA0, where the instruction has one). `None`: the wave goes on; a
    /// [`GwsWait`]: the wave waits until [`poll`](Self::poll) says it is released.
    pub fn execute(&self, op: GwsOp, rid: usize, value: u32) -> Option<GwsWait> {
        let rid = rid % GWS_ENTRIES;
        let mut st = self.lock();
        let r = &mut st.resources[rid];
        let mut wait = None;
        match op {
            GwsOp::Init => r.counter = value,
            GwsOp::SemaV => r.counter = r.counter.wrapping_add(1),
            GwsOp::SemaBr => r.counter = r.counter.wrapping_add(value),
            GwsOp::SemaReleaseAll => r.counter = r.queued,
            GwsOp::SemaP => {
                // Waves already queued are served first: a count goes to them, not to a
                // wave arriving after them.
                if r.counter > 0 && r.queued == 0 {
                    r.counter -= 1;
                } else {
                    r.queued += 1;
                    wait = Some(WaitKind::Semaphore);
                }
            }
            GwsOp::Barrier => {
                if r.counter == 0 {
                    // The last wave of the phase: re-arm and release the others.
                    r.generation = r.generation.wrapping_add(1);
                    r.counter = value;
                } else {
                    r.counter -= 1;
                    wait = Some(WaitKind::Barrier(r.generation));
                }
            }
        }
        st.epoch = st.epoch.wrapping_add(1);
        drop(st);
        self.changed.notify_all();
        wait.map(|kind| GwsWait {
            rid: rid as u8,
            kind,
        })
    }

    /// Whether the wave waiting as `wait` says is released now: for a semaphore, the counter
    /// was above zero and it took one; for a barrier, the phase it arrived in ended.
    pub fn poll(&self, wait: &GwsWait) -> bool {
        let mut st = self.lock();
        let r = &mut st.resources[usize::from(wait.rid) % GWS_ENTRIES];
        match wait.kind {
            WaitKind::Semaphore => {
                if r.counter == 0 {
                    return false;
                }
                r.counter -= 1;
                r.queued = r.queued.saturating_sub(1);
                st.epoch = st.epoch.wrapping_add(1);
                true
            }
            WaitKind::Barrier(generation) => r.generation != generation,
        }
    }

    /// A waiting wave went away without being released (its dispatch stopped): it no longer
    /// counts as queued on a semaphore.
    pub fn abandon(&self, wait: &GwsWait) {
        if wait.kind == WaitKind::Semaphore {
            let mut st = self.lock();
            let r = &mut st.resources[usize::from(wait.rid) % GWS_ENTRIES];
            r.queued = r.queued.saturating_sub(1);
        }
    }

    /// Changes so far: read it before polling, then [`wait_change`](Self::wait_change) from
    /// it, and no release in between is missed.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Blocks until a change after `seen` ([`epoch`](Self::epoch)) or `timeout`; returns the
    /// epoch then.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let st = self.lock();
        let (st, _) = self
            .changed
            .wait_timeout_while(st, timeout, |st| st.epoch == seen)
            .unwrap_or_else(PoisonError::into_inner);
        st.epoch
    }

    /// Resource `rid`'s counter now (tests and traces).
    pub fn counter(&self, rid: usize) -> u32 {
        self.lock().resources[rid % GWS_ENTRIES].counter
    }

    /// Waves waiting in `ds_gws_sema_p` on resource `rid` now.
    pub fn queued(&self, rid: usize) -> u32 {
        self.lock().resources[rid % GWS_ENTRIES].queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_counts_and_queues() {
        let g = Gws::new();
        assert_eq!(g.execute(GwsOp::Init, 65, 1), None);
        assert_eq!(g.counter(1), 1, "resource 65 is 1");
        assert_eq!(g.execute(GwsOp::SemaP, 1, 0), None);
        let w = g.execute(GwsOp::SemaP, 1, 0).expect("waits at 0");
        assert_eq!(g.queued(1), 1);
        assert!(!g.poll(&w));
        g.execute(GwsOp::SemaV, 1, 0);
        assert!(g.poll(&w), "released by V");
        assert_eq!((g.counter(1), g.queued(1)), (0, 0));
        let a = g.execute(GwsOp::SemaP, 1, 0).unwrap();
        let b = g.execute(GwsOp::SemaP, 1, 0).unwrap();
        g.execute(GwsOp::SemaReleaseAll, 1, 0);
        assert_eq!(g.counter(1), 2, "release_all: the counter is the queue");
        assert!(g.poll(&a) && g.poll(&b));
        assert!(!g.poll(&a), "each took one");
        g.execute(GwsOp::SemaBr, 1, 3);
        assert_eq!(g.counter(1), 3);
    }

    #[test]
    fn a_released_count_goes_to_a_queued_wave_before_a_later_one() {
        let g = Gws::new();
        let first = g.execute(GwsOp::SemaP, 0, 0).expect("waits at 0");
        g.execute(GwsOp::SemaV, 0, 0);
        let later = g
            .execute(GwsOp::SemaP, 0, 0)
            .expect("a wave arriving after a queued one queues");
        assert!(g.poll(&first), "the queued wave gets the count");
        assert!(!g.poll(&later));
        g.execute(GwsOp::SemaV, 0, 0);
        assert!(g.poll(&later));
        assert_eq!((g.counter(0), g.queued(0)), (0, 0));
    }

    #[test]
    fn a_barrier_releases_a_phase_and_rearms() {
        let g = Gws::new();
        g.execute(GwsOp::Init, 5, 2);
        let a = g
            .execute(GwsOp::Barrier, 5, 2)
            .expect("first of three waits");
        let b = g.execute(GwsOp::Barrier, 5, 2).expect("second waits");
        assert!(!g.poll(&a) && !g.poll(&b));
        assert_eq!(
            g.execute(GwsOp::Barrier, 5, 2),
            None,
            "the third goes through"
        );
        assert!(g.poll(&a) && g.poll(&b));
        assert_eq!(g.counter(5), 2, "re-armed for the next phase");
        let c = g.execute(GwsOp::Barrier, 5, 2).expect("next phase waits");
        assert!(!g.poll(&c));
    }
}
