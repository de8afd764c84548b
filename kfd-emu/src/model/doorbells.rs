//! Doorbells the model sees without a system call: each process's doorbell slices (in its
//! `/dev/kfd` memfd, `Process::doorbell_offset`) mapped once, read-only and shared, into the
//! emulator ([`DoorbellMap`], read by [`Doorbell::read`]: an SDMA engine takes its write
//! pointer from it, `sdma::run_queue`), and the driver's doorbell watcher ([`Watch`]), one
//! thread that turns a program's doorbell write into its queue's kick.
//!
//! On the hardware a doorbell write is a store to the GPU's doorbell BAR, which the
//! doorbell's engine sees at once (`amdgpu_doorbell.h`; the CP's MQD names the doorbell it
//! answers, `cp_hqd_pq_doorbell_control` in `kfd_mqd_manager_v9.c`). In the model it is a
//! store to a memfd page the program maps: nothing tells the model of it, so an engine with
//! nothing to run polls (`scheduler`), and a program that rings and then only spins (ROCr's
//! active signal waits) waits for the next poll. The watcher closes that gap without a system
//! call per look: every engine that found nothing to run hands the watcher what it read
//! before its turn ([`Bell`]: its doorbell, and what it consumed as against its write pointer
//! where that lies in a BO the model maps, `bo_maps`), and the watcher reads them through the
//! mappings (atomic loads) every [`LOOK_FAST`] while doorbells change, backing off to every
//! [`LOOK_IDLE`] while nothing changes, and kicks the engine of each queue whose doorbell or
//! write pointer changed, once per change. The write pointer matters for AQL queues: ROCr
//! rings a new queue's first packet with index 0, the value its doorbell already holds
//! (`AqlQueue::StoreRelaxed` writes the packet index), but it moves `write_dispatch_id` first.
//!
//! Its cost, which does not depend on the host's speed: while no queue is watched (none idle
//! and runnable) the thread waits on a condition, with no wake-up at all; while queues are
//! watched and nothing changes it wakes at most `1 s / LOOK_IDLE` = 5000 times a second
//! (counted: [`Watch::passes`], `tests/model_engine_latency.rs`), whatever the number of
//! queues, each wake-up a few atomic loads per watched queue.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::bo_maps::BoMap;
use super::files;
use super::queues::Runner;

/// How soon the watcher looks again after it saw a change.
pub(super) const LOOK_FAST: Duration = Duration::from_micros(25);
/// The watcher's slowest look, while watched doorbells do not change (doubling from
/// [`LOOK_FAST`]): a doorbell rung after an idle spell is seen within this.
pub(super) const LOOK_IDLE: Duration = Duration::from_micros(200);

/// A process's doorbell slices, mapped read-only and shared from its `/dev/kfd` memfd, for
/// the process's life (held by the process and by the engines and watch entries of its
/// queues; unmapped when the last goes, after its teardown).
#[derive(Debug)]
pub(super) struct DoorbellMap {
    ptr: *mut u8,
    len: usize,
    /// Where the mapping starts in the memfd.
    start: u64,
    /// The memfd (no mapping outlives the file it maps).
    _fd: Arc<OwnedFd>,
}

// SAFETY: the mapping is process-wide memory, unmapped only by `drop`; its bytes are only
// ever read, with atomic loads (`read`), so any thread may use it.
unsafe impl Send for DoorbellMap {}
// SAFETY: as for Send.
unsafe impl Sync for DoorbellMap {}

impl DoorbellMap {
    /// Maps `len` bytes of `fd` (a process's memfd) at `start` (page-aligned); `None` when
    /// `len` is 0, the file is shorter, or the host refuses (the engines `pread` then).
    pub(super) fn map(fd: Arc<OwnedFd>, start: u64, len: u64) -> Option<DoorbellMap> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        let size = u64::try_from(rustix::fs::fstat(&*fd).ok()?.st_size).ok()?;
        if start.checked_add(len as u64)? > size {
            return None;
        }
        // SAFETY: a new shared read-only mapping, at an address the kernel picks, of bytes the
        // file has (checked above; the memfd is sealed against shrinking, `files::memfd`): it
        // aliases no Rust object, and it is unmapped only by `drop`.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::SHARED,
                &*fd,
                start,
            )
        }
        .ok()?;
        super::host_calls::mapped();
        Some(DoorbellMap {
            ptr: ptr.cast(),
            len,
            start,
            _fd: fd,
        })
    }

    /// The `size`-byte (4 or 8) doorbell at byte `at` of the memfd, with one relaxed atomic
    /// load (no system call); `None` outside the map, misaligned, or of another size.
    pub(super) fn read(&self, at: u64, size: usize) -> Option<u64> {
        let off = usize::try_from(at.checked_sub(self.start)?).ok()?;
        if off.checked_add(size)? > self.len || !off.is_multiple_of(size) {
            return None;
        }
        // SAFETY: `off..off + size` is within the live map (checked above) and aligned to
        // `size` (the map is page-aligned).
        let at = unsafe { self.ptr.add(off) };
        let value = match size {
            // SAFETY: `at` is 4 bytes of the map, 4-aligned; `AtomicU32` has `u32`'s size. A
            // relaxed load of at most 4 bytes is sound on read-only memory on every target
            // (`std::sync::atomic`, "Atomic accesses to read-only memory").
            4 => u64::from(unsafe { &*at.cast::<AtomicU32>() }.load(Ordering::Relaxed)),
            8 if cfg!(target_pointer_width = "64") => {
                // SAFETY: `at` is 8 bytes of the map, 8-aligned; on 64-bit targets a relaxed
                // 8-byte load is sound on read-only memory (the same section).
                unsafe { &*at.cast::<AtomicU64>() }.load(Ordering::Relaxed)
            }
            _ => return None,
        };
        // What the producer wrote before its doorbell (the packets) is read after it.
        std::sync::atomic::fence(Ordering::Acquire);
        Some(value)
    }
}

impl Drop for DoorbellMap {
    fn drop(&mut self) {
        super::host_calls::unmapped();
        // SAFETY: the mapping `map` made; no pointer into it outlives a `read`, which borrows
        // the map.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// Where one queue's doorbell is: its process's memfd and the byte there, with its size,
/// and the process's [`DoorbellMap`] when it could be made.
#[derive(Debug, Clone)]
pub(super) struct Doorbell {
    pub map: Option<Arc<DoorbellMap>>,
    pub memfd: Arc<OwnedFd>,
    pub at: u64,
    pub size: usize,
}

impl Doorbell {
    /// What the producer last rang the doorbell with: through the map (no system call), else
    /// one `pread` of the memfd.
    pub(super) fn read(&self) -> Option<u64> {
        if let Some(v) = self.map.as_ref().and_then(|m| m.read(self.at, self.size)) {
            return Some(v);
        }
        let mut value = [0u8; 8];
        files::read_at(self.memfd.as_fd(), self.at, &mut value[..self.size]).ok()?;
        Some(u64::from_le_bytes(value))
    }
}

/// What an engine that found nothing to run hands the watcher ([`Watch::arm`]).
#[derive(Debug)]
pub(super) struct Bell {
    /// The doorbell (through its map) and what the engine read of it before its turn.
    pub doorbell: (Arc<DoorbellMap>, u64, usize),
    pub rung: Option<u64>,
    /// The queue's write pointer, where it lies in a BO the model maps (its map and offset),
    /// and what the engine read of it before its turn (what the queue had consumed, when it
    /// could not read it then).
    pub wptr: Option<(Arc<BoMap>, usize)>,
    pub wptr_seen: u64,
    /// What the queue consumed (its read pointer).
    pub consumed: u64,
    /// An AQL queue (its doorbell is a packet index, not its write pointer).
    pub aql: bool,
}

impl Bell {
    /// The write pointer now, through its map.
    fn wptr(&self) -> Option<u64> {
        let (map, off) = self.wptr.as_ref()?;
        read_wptr(map, *off)
    }

    /// Whether the watcher will see the queue's next submission and nothing is pending: its
    /// write pointer lies in a map (so a producer that only writes it, and does not ring, is
    /// seen too) and says it consumed all there is, or, on a queue whose doorbell is its write
    /// pointer (SDMA, PM4: not `aql`, whose doorbell is the last packet's index), its doorbell
    /// does.
    pub(super) fn empty(&self) -> bool {
        match self.wptr() {
            Some(wptr) => wptr == self.consumed || (!self.aql && self.rung == Some(self.consumed)),
            None => false,
        }
    }
}

/// The 64-bit write pointer at `off` of `map` (relaxed atomic loads, no system call).
pub(super) fn read_wptr(map: &BoMap, off: usize) -> Option<u64> {
    let mut v = [0u8; 8];
    map.read_at(off, &mut v).ok()?;
    Some(u64::from_le_bytes(v))
}

/// The driver's doorbell watch (see the module docs): the queues watched, and the watcher
/// thread's state. Dropping it (with the driver) ends the thread.
#[derive(Debug, Default)]
pub(super) struct Watch {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    bells: Mutex<Bells>,
    /// Wakes the watcher when a queue is put under watch, or the watch ends.
    armed: Condvar,
    /// The watcher's passes (wake-ups), for the tests' count.
    passes: AtomicU64,
    /// The watcher thread runs (a queue's engine may back off further).
    alive: AtomicBool,
}

#[derive(Debug, Default)]
struct Bells {
    list: Vec<(Weak<Runner>, Bell)>,
    /// A watcher thread was started.
    started: bool,
    /// The driver went: the watcher ends.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Bells> {
        self.bells.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Watch {
    /// Puts `runner`'s queue under watch with what its engine read before a turn that found
    /// nothing (replacing what it had), starting the watcher on first use.
    pub(super) fn arm(&self, runner: &Arc<Runner>, bell: Bell) {
        let mut b = self.shared.lock();
        // The watcher waits on the condition only while nothing is watched.
        let wake = b.list.is_empty();
        match b
            .list
            .iter_mut()
            .find(|(r, _)| std::ptr::eq(r.as_ptr(), Arc::as_ptr(runner)))
        {
            Some(entry) => entry.1 = bell,
            None => b.list.push((Arc::downgrade(runner), bell)),
        }
        if !b.started {
            b.started = true;
            let shared = Arc::clone(&self.shared);
            crate::own::spawn_later("kfd-emu-doorbells", move || watcher(&shared));
        }
        drop(b);
        if wake {
            self.shared.armed.notify_one();
        }
    }

    /// Takes `runner`'s queue from the watch (it runs, cannot run, or is gone).
    pub(super) fn disarm(&self, runner: &Arc<Runner>) {
        self.shared
            .lock()
            .list
            .retain(|(r, _)| !std::ptr::eq(r.as_ptr(), Arc::as_ptr(runner)));
    }

    /// Whether the watcher thread runs.
    pub(super) fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::Acquire)
    }

    /// The watcher's passes so far (its wake-ups).
    pub(super) fn passes(&self) -> u64 {
        self.shared.passes.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.armed.notify_all();
    }
}

/// The watcher thread: each pass reads every watched doorbell and write pointer and kicks the
/// engines whose values changed (then remembers them: each change is told once); sleeps
/// [`LOOK_FAST`] after a pass that saw a change, doubling to [`LOOK_IDLE`] while none does,
/// and without a timeout while nothing is watched.
fn watcher(shared: &Shared) {
    // The looks need no precision: the host may group the watcher's wake-ups with others'
    // within the default slack (50 µs), which costs less than exact ones.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(50_000));
    shared.alive.store(true, Ordering::Release);
    let mut look = LOOK_FAST;
    loop {
        let mut kicks = Vec::new();
        {
            let mut b = shared.lock();
            while b.list.is_empty() && !b.closed {
                b = shared.armed.wait(b).unwrap_or_else(|e| e.into_inner());
            }
            if b.closed {
                shared.alive.store(false, Ordering::Release);
                return;
            }
            shared.passes.fetch_add(1, Ordering::Relaxed);
            b.list.retain(|(r, _)| r.strong_count() > 0);
            for (runner, bell) in &mut b.list {
                let (map, at, size) = &bell.doorbell;
                let rung = map.read(*at, *size);
                let mut changed = rung != bell.rung;
                bell.rung = rung;
                if let Some(wptr) = bell.wptr().filter(|&w| w != bell.wptr_seen) {
                    changed = true;
                    bell.wptr_seen = wptr;
                }
                if changed && let Some(r) = runner.upgrade() {
                    kicks.push(r);
                }
            }
        }
        look = if kicks.is_empty() {
            (look * 2).min(LOOK_IDLE)
        } else {
            LOOK_FAST
        };
        for r in kicks {
            r.kick.kick();
        }
        std::thread::sleep(look);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    /// A memfd of three pages whose doorbell slice is the middle page, and its map.
    fn slice() -> (Arc<OwnedFd>, DoorbellMap) {
        let fd = Arc::new(files::memfd("doorbells-test", 3 * PAGE).expect("memfd"));
        let map = DoorbellMap::map(Arc::clone(&fd), PAGE, PAGE).expect("map");
        (fd, map)
    }

    /// What a program writes to its doorbell page is read through the map, as 8- and 4-byte
    /// doorbells, at once (no system call); reads outside the slice, misaligned, or of another
    /// size are refused, and a `Doorbell` without a map reads the memfd instead.
    #[test]
    fn doorbells_read_through_the_map_and_refuse_what_is_not_a_doorbell() {
        let (fd, map) = slice();
        rustix::io::pwrite(&*fd, &0x1122_3344_5566_7788u64.to_le_bytes(), PAGE + 16)
            .expect("pwrite");
        assert_eq!(map.read(PAGE + 16, 8), Some(0x1122_3344_5566_7788));
        assert_eq!(map.read(PAGE + 16, 4), Some(0x5566_7788));
        assert_eq!(map.read(PAGE + 8, 8), Some(0), "a doorbell never rung");
        rustix::io::pwrite(&*fd, &42u64.to_le_bytes(), PAGE + 16).expect("pwrite");
        assert_eq!(map.read(PAGE + 16, 8), Some(42), "the program's next write");
        for (at, size) in [
            (0, 8),
            (PAGE - 8, 8),
            (2 * PAGE, 8),
            (2 * PAGE - 4, 8),
            (PAGE + 4, 8),
            (PAGE + 2, 4),
            (PAGE, 2),
            (PAGE, 16),
            (u64::MAX - 3, 4),
        ] {
            assert_eq!(map.read(at, size), None, "{at:#x}, {size} bytes");
        }
        let unmapped = Doorbell {
            map: None,
            memfd: Arc::clone(&fd),
            at: PAGE + 16,
            size: 8,
        };
        assert_eq!(unmapped.read(), Some(42));
        let mapped = Doorbell {
            map: Some(Arc::new(map)),
            ..unmapped
        };
        assert_eq!(mapped.read(), Some(42));
    }

    /// A slice past the memfd's end, or empty, is not mapped.
    #[test]
    fn a_slice_the_file_does_not_have_is_not_mapped() {
        let (fd, _) = slice();
        assert!(DoorbellMap::map(Arc::clone(&fd), 2 * PAGE, 2 * PAGE).is_none());
        assert!(DoorbellMap::map(Arc::clone(&fd), PAGE, 0).is_none());
        assert!(DoorbellMap::map(fd, u64::MAX - PAGE + 1, PAGE).is_none());
    }
}
