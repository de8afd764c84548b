//! The emulator's own threads share no lock with the threads they serve.
//!
//! In attach mode ([`crate::supervisor::attach`]) the supervisor serves a thread of its own
//! process. That thread makes notified calls (`mprotect`, `munmap`, `madvise`, `brk`, file
//! `mmap`, `open`, ioctls) while it holds process-wide locks: glibc's `malloc` grows and trims
//! its arena with `mprotect`/`madvise`/`munmap` holding the arena lock, `dlopen` opens and maps
//! files holding the loader lock, pthread unmaps cached stacks holding the stack-cache lock,
//! libtest's output capture and Rust's stdout/stderr grow their buffers holding their mutex.
//! And glibc's `fork`, from *any* thread of the process, takes every malloc arena in turn and
//! so waits, holding the ones it took, for the arena of a thread stopped in a notified call.
//! Any of those locks a supervisor thread needs to answer is a deadlock: the answer is what
//! the lock holder waits for.
//!
//! So the threads of the emulator (supervisor, workers, reaper, tracer, engines, GPU-view and
//! restore workers: every thread the crate starts) are **own threads**, marked with [`mark`]
//! as their first act, and on them:
//!
//! - **Memory** comes from a private heap, not glibc's: one address range reserved with a
//!   single `mmap(MAP_NORESERVE)` ([`REGION`] bytes), carved into power-of-two blocks with a
//!   free list per size. Its one lock is a spin lock held only for list and pointer updates,
//!   never across a syscall or a wait, so its holder always lets go. The crate's
//!   `#[global_allocator]` (cargo feature `own-heap`, on by default) routes every Rust
//!   allocation of an own thread there and everything else to [`System`]; a block is freed
//!   to where its address says it came from. glibc's `fork` does not know this heap, so it
//!   never holds it.
//! - **Freeing glibc memory** (a `Vec` a test thread made, dropped by a worker) would take
//!   that block's arena lock: an own thread instead pushes the block onto a lock-free list
//!   that the **helper** thread frees. The helper may wait on an arena; nothing waits for it.
//! - **Starting a thread** needs glibc's allocator and stack cache (`pthread_create`):
//!   a thread wanted while serving is started by the helper ([`spawn_later`]); the caller
//!   does not wait for it.
//! - **Messages** go to fd 2 with one `write(2)` (`elog!`, see [`log`]), never through Rust's `Stderr`
//!   lock or libtest's output capture (which own threads inherit from the test thread that
//!   started them).
//! - They read no environment variable, take no backtrace, `dlopen` nothing.
//!
//! After a `fork`, the child has only the forking thread: the private heap may have been
//! mid-update by a thread that is gone, so the child (marked by a `pthread_atfork` child
//! handler) leaves it alone: its own threads allocate from glibc, private blocks it frees are
//! left as they are.
//!
//! Without the feature (for a binary that declares its own global allocator), own threads
//! allocate and free through that allocator, and attach mode can deadlock as described above
//! when the process forks, or prints from another thread, while an attached thread waits.
//!
//! - A **panic** on them (a bug, caught per call by the supervisor) is reported by a wrapper
//!   around the process's panic hook, installed with the helper, with one `write(2)` and no
//!   backtrace; other threads' panics go to the hook that was there.
//!
//! The private heap's range counts toward `RLIMIT_AS` (64 GiB of address space, none of it
//! committed until used).
//!
//! Residual: a thread started while serving (a worker replacing one stuck in a long call, a
//! restore worker) waits for a `fork` in progress in another thread, which may itself wait
//! for a served thread's arena; the served call is then answered by the worker already
//! running, once its long call ends. The first worker of an attach runs before the attached
//! thread goes on (see `supervisor::attach`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// The private heap's address range: reserved, not committed (`MAP_NORESERVE`); pages are
/// used as blocks are first written, and a freed block of 256 KiB or more is
/// given back with `madvise(MADV_DONTNEED)`.
pub const REGION: usize = 64 << 30;

/// Blocks this big or bigger are returned to the kernel when freed.
const RETURN_FROM: usize = 256 << 10;

/// Smallest block (a free block holds the list's next pointer).
const MIN_BLOCK: usize = 16;

/// Blocks are aligned to their size up to this; a layout that asks for more goes to
/// [`System`].
const MAX_ALIGN: usize = 64 << 10;

/// Size classes: `MIN_BLOCK << k` for `k < CLASSES` covers the whole region.
const CLASSES: usize = 33;

/// What the current thread is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Any thread the crate did not start.
    Foreign,
    /// An emulator thread: private heap, glibc frees deferred to the helper.
    Own,
    /// The helper: private heap, frees glibc memory itself.
    Helper,
}

thread_local! {
    static KIND: Cell<Kind> = const { Cell::new(Kind::Foreign) };
}

fn kind() -> Kind {
    KIND.try_with(Cell::get).unwrap_or(Kind::Foreign)
}

/// Marks the calling thread as one of the emulator's own (see the module docs). Call it first
/// thing in every thread the crate starts.
pub fn mark() {
    let _ = KIND.try_with(|k| {
        if k.get() == Kind::Foreign {
            k.set(Kind::Own);
        }
    });
    Heap::get();
}

/// Whether the calling thread is one of the emulator's own.
pub fn is_own() -> bool {
    kind() != Kind::Foreign
}

/// Set in a forked child: the private heap is left alone there.
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" fn forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The private heap: a reserved range, a bump pointer and per-class free lists.
struct Heap {
    base: usize,
    end: usize,
}

/// The reserved range, once made (`0`: not yet; `usize::MAX`: could not be made).
static BASE: AtomicUsize = AtomicUsize::new(0);

/// The spin lock of the bump pointer and the free lists.
static LOCKED: AtomicBool = AtomicBool::new(false);
/// Next unused byte of the region (offset), under [`LOCKED`].
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Free-list heads per class, under [`LOCKED`].
static FREE: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];

/// Holds [`LOCKED`]; the holder never makes a syscall or waits, so spinning is short.
struct SpinGuard;

impl SpinGuard {
    fn lock() -> SpinGuard {
        let mut spins = 0u32;
        while LOCKED
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                // Not holding anything: let a preempted holder run.
                std::thread::yield_now();
            }
        }
        SpinGuard
    }
}

impl Drop for SpinGuard {
    fn drop(&mut self) {
        LOCKED.store(false, Ordering::Release);
    }
}

impl Heap {
    /// The heap, reserving its range on first use; `None` if it cannot be had.
    fn get() -> Option<Heap> {
        let mut base = BASE.load(Ordering::Acquire);
        if base == 0 {
            // SAFETY: an anonymous private mapping at an address of the kernel's choosing
            // touches no existing memory.
            let ptr = unsafe {
                libc::mmap(
                    null_mut(),
                    REGION,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            let made = if ptr == libc::MAP_FAILED {
                usize::MAX
            } else {
                ptr as usize
            };
            match BASE.compare_exchange(0, made, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    base = made;
                    if made != usize::MAX {
                        // SAFETY: registers a handler that only stores to an atomic.
                        unsafe {
                            libc::pthread_atfork(None, None, Some(forked_child));
                        }
                    }
                }
                Err(theirs) => {
                    if made != usize::MAX {
                        // SAFETY: the range was mapped just above and nothing uses it.
                        unsafe {
                            libc::munmap(ptr, REGION);
                        }
                    }
                    base = theirs;
                }
            }
        }
        (base != usize::MAX).then_some(Heap {
            base,
            end: base + REGION,
        })
    }

    fn contains(&self, ptr: usize) -> bool {
        ptr >= self.base && ptr < self.end
    }
}

/// The class of a block for `layout` (its size is `MIN_BLOCK << class`).
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > MAX_ALIGN {
        return None;
    }
    let size = layout.size().max(layout.align()).max(MIN_BLOCK);
    let block = size.checked_next_power_of_two()?;
    let class = (block / MIN_BLOCK).trailing_zeros() as usize;
    (class < CLASSES).then_some(class)
}

fn block_size(class: usize) -> usize {
    MIN_BLOCK << class
}

/// A block of `class` from the private heap, or null when the region is used up.
fn heap_alloc(heap: &Heap, class: usize) -> *mut u8 {
    let size = block_size(class);
    let _guard = SpinGuard::lock();
    let head = FREE[class].load(Ordering::Relaxed);
    if head != 0 {
        // SAFETY: a free block of this class starts with the next block's address, written
        // by `heap_free`; the block is ours (in the region, on the list, under the lock).
        let next = unsafe { *(head as *const usize) };
        FREE[class].store(next, Ordering::Relaxed);
        return head as *mut u8;
    }
    // Blocks are aligned to their size (up to MAX_ALIGN), so any layout of this class fits.
    let align = size.min(MAX_ALIGN);
    let next = NEXT.load(Ordering::Relaxed);
    let start = (heap.base + next).next_multiple_of(align);
    let Some(end) = start.checked_add(size) else {
        return null_mut();
    };
    if end > heap.end {
        return null_mut();
    }
    NEXT.store(end - heap.base, Ordering::Relaxed);
    start as *mut u8
}

/// Puts a block of `class` back on its free list.
fn heap_free(ptr: *mut u8, class: usize) {
    let size = block_size(class);
    if size >= RETURN_FROM {
        // Outside the lock: a syscall. The block is still ours until it is on the list.
        // SAFETY: the block lies in the private region and is not in use any more.
        unsafe {
            libc::madvise(ptr.cast(), size, libc::MADV_DONTNEED);
        }
    }
    let _guard = SpinGuard::lock();
    // SAFETY: the block is at least MIN_BLOCK bytes and aligned to 8; it is free.
    unsafe {
        *(ptr as *mut usize) = FREE[class].load(Ordering::Relaxed);
    }
    FREE[class].store(ptr as usize, Ordering::Relaxed);
}

/// glibc blocks that own threads freed, for the helper to `free`.
static DEFERRED: AtomicPtr<u8> = AtomicPtr::new(null_mut());
/// Bumped (and woken) whenever there is work for the helper; a futex word.
static HELPER_SEQ: AtomicU32 = AtomicU32::new(0);
/// Whether the helper runs (until then own threads free glibc memory themselves).
static HELPER_RUNS: AtomicBool = AtomicBool::new(false);
/// Threads to start, for the helper.
static SPAWNS: AtomicPtr<SpawnJob> = AtomicPtr::new(null_mut());

fn wake_helper() {
    HELPER_SEQ.fetch_add(1, Ordering::Release);
    // SAFETY: FUTEX_WAKE on a static word; no memory is read through the pointer but the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            HELPER_SEQ.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// Hands a glibc block to the helper.
fn defer_free(ptr: *mut u8) {
    let mut head = DEFERRED.load(Ordering::Relaxed);
    loop {
        // SAFETY: glibc gives every block at least 24 usable bytes, aligned to 16: the block
        // is no longer in use and holds the list's next pointer until the helper frees it.
        unsafe {
            *(ptr as *mut *mut u8) = head;
        }
        match DEFERRED.compare_exchange_weak(head, ptr, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => head = now,
        }
    }
    wake_helper();
}

struct SpawnJob {
    next: *mut SpawnJob,
    name: &'static str,
    work: Box<dyn FnOnce() + Send>,
}

/// Starts the helper thread (once per process). Call it where no filter is installed yet and
/// nothing is being served: [`crate::supervisor::attach`] does.
pub fn start_helper() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        install_panic_hook();
        let started = std::thread::Builder::new()
            .name("kfd-emu-helper".into())
            .spawn(helper);
        if started.is_ok() {
            HELPER_RUNS.store(true, Ordering::Release);
        } else {
            elog!("kfd-emu: no helper thread; own threads free glibc memory themselves");
        }
    });
}

/// Wraps the process's panic hook: a panic on an own thread (a bug the supervisor catches per
/// call) is reported with [`log`], without a backtrace; other threads' panics go to the hook
/// that was in place. (std's default hook writes into libtest's output capture or through
/// `Stderr`, and a backtrace takes the loader's lock: locks a served thread may hold.)
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_own() {
            previous(info);
            return;
        }
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let name = std::thread::current()
            .name()
            .unwrap_or("an emulator thread")
            .to_owned();
        match info.location() {
            Some(at) => elog!("kfd-emu: thread '{name}' panicked at {at}: {payload}"),
            None => elog!("kfd-emu: thread '{name}' panicked: {payload}"),
        }
    }));
}

fn helper() {
    let _ = KIND.try_with(|k| k.set(Kind::Helper));
    Heap::get();
    loop {
        let seen = HELPER_SEQ.load(Ordering::Acquire);
        let mut block = DEFERRED.swap(null_mut(), Ordering::Acquire);
        while !block.is_null() {
            // SAFETY: pushed by `defer_free`: a glibc block whose first word is the next one.
            let next = unsafe { *(block as *const *mut u8) };
            // SAFETY: the block came from glibc's malloc (System) and nobody uses it.
            unsafe { libc::free(block.cast()) };
            block = next;
        }
        let mut job = SPAWNS.swap(null_mut(), Ordering::Acquire);
        while !job.is_null() {
            // SAFETY: pushed by `spawn_later` from a leaked Box, taken off the list once.
            let SpawnJob { next, name, work } = *unsafe { Box::from_raw(job) };
            let started = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    mark();
                    work();
                });
            if started.is_err() {
                elog!("kfd-emu: no thread for {name}");
            }
            job = next;
        }
        if HELPER_SEQ.load(Ordering::Acquire) == seen {
            // SAFETY: FUTEX_WAIT on a static word with the value last seen; returns at once
            // if it changed.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    HELPER_SEQ.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    seen,
                    null_mut::<libc::timespec>(),
                );
            }
        }
    }
}

/// Runs `work` on a new own thread named `name`, started by the helper: the caller does not
/// wait for `pthread_create` (which needs glibc's allocator and stack cache). Without a
/// helper (no attach in this process) the thread is started here.
pub fn spawn_later(name: &'static str, work: impl FnOnce() + Send + 'static) {
    if !HELPER_RUNS.load(Ordering::Acquire) || FORKED.load(Ordering::Relaxed) {
        let started = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                mark();
                work();
            });
        if started.is_err() {
            elog!("kfd-emu: no thread for {name}");
        }
        return;
    }
    let job = Box::into_raw(Box::new(SpawnJob {
        next: null_mut(),
        name,
        work: Box::new(work),
    }));
    let mut head = SPAWNS.load(Ordering::Relaxed);
    loop {
        // SAFETY: `job` is ours until the exchange publishes it.
        unsafe { (*job).next = head };
        match SPAWNS.compare_exchange_weak(head, job, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => head = now,
        }
    }
    wake_helper();
}

/// A one-shot signal whose wait neither allocates nor makes a call the filter notifies (a
/// `futex` wait): an attached thread can wait on it before anything serves it.
#[derive(Debug, Default)]
pub struct Latch {
    open: AtomicU32,
}

impl Latch {
    /// Opens the latch and wakes its waiters.
    pub fn open(&self) {
        self.open.store(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a word of `self`, which outlives the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.open.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }

    /// What opens the latch when dropped (when the work it was handed to is done, or
    /// dropped without running: then nothing waits forever).
    pub fn opener(self: &std::sync::Arc<Self>) -> Opener {
        Opener(std::sync::Arc::clone(self))
    }

    /// Waits until the latch is open.
    pub fn wait(&self) {
        while self.open.load(Ordering::Acquire) == 0 {
            // SAFETY: FUTEX_WAIT on a word of `self` with the value seen; returns at once if
            // it changed.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.open.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    null_mut::<libc::timespec>(),
                );
            }
        }
    }
}

/// Opens its [`Latch`] when dropped.
#[derive(Debug)]
pub struct Opener(std::sync::Arc<Latch>);

impl Drop for Opener {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Writes one message line to fd 2 with a single `write(2)` (see the module docs); the
/// message is formatted into memory first (the private heap on an own thread).
pub fn log(args: fmt::Arguments<'_>) {
    let mut line = fmt::format(args);
    line.push('\n');
    let mut bytes = line.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice of `bytes.len()` bytes.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        match usize::try_from(n) {
            Ok(0) => break,
            Ok(n) => bytes = &bytes[n.min(bytes.len())..],
            Err(_) if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => break,
        }
    }
}

/// `eprintln!` for the emulator's own threads: [`log`] (one raw `write(2)` to fd 2).
macro_rules! elog {
    ($($arg:tt)*) => {
        $crate::own::log(format_args!($($arg)*))
    };
}
pub(crate) use elog;

/// The global allocator of the `own-heap` feature: own threads allocate from the private
/// heap, everyone else from [`System`]; each block is freed where its address says it came
/// from (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct OwnHeap;

// SAFETY: every block handed out is either System's (with System's guarantees) or a private
// block of at least the layout's size, aligned to at least its alignment, used by nobody else
// until freed; frees are routed by address to the allocator that made the block.
unsafe impl GlobalAlloc for OwnHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if kind() != Kind::Foreign
            && !FORKED.load(Ordering::Relaxed)
            && let Some(heap) = Heap::get()
            && let Some(class) = class_of(layout)
        {
            let ptr = heap_alloc(&heap, class);
            if !ptr.is_null() {
                return ptr;
            }
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if kind() != Kind::Foreign
            && !FORKED.load(Ordering::Relaxed)
            && let Some(heap) = Heap::get()
            && let Some(class) = class_of(layout)
        {
            let ptr = heap_alloc(&heap, class);
            if !ptr.is_null() {
                // Blocks of RETURN_FROM bytes or more are fresh or were given back with
                // MADV_DONTNEED: they read as zeros already.
                if block_size(class) < RETURN_FROM {
                    // SAFETY: the block holds at least `layout.size()` bytes and is ours.
                    unsafe { std::ptr::write_bytes(ptr, 0, layout.size()) };
                }
                return ptr;
            }
        }
        // SAFETY: forwarded with the caller's layout (calloc: big zeroed blocks stay
        // untouched pages).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let base = BASE.load(Ordering::Acquire);
        if base != 0
            && base != usize::MAX
            && (ptr as usize) >= base
            && (ptr as usize) < base + REGION
        {
            if FORKED.load(Ordering::Relaxed) {
                return;
            }
            if let Some(class) = class_of(layout) {
                heap_free(ptr, class);
            }
            return;
        }
        if kind() == Kind::Own
            && HELPER_RUNS.load(Ordering::Acquire)
            && !FORKED.load(Ordering::Relaxed)
        {
            defer_free(ptr);
            return;
        }
        // SAFETY: a System block, freed with its layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let private = Heap::get().is_some_and(|heap| heap.contains(ptr as usize));
        if !private && kind() == Kind::Foreign {
            // SAFETY: a System block reallocated by a thread that may use System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller guarantees a non-zero new size and a valid alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if private
            && !FORKED.load(Ordering::Relaxed)
            && kind() != Kind::Foreign
            && class_of(layout).is_some()
            && class_of(layout) == class_of(new_layout)
        {
            return ptr;
        }
        // SAFETY: a fresh block of the new layout.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(feature = "own-heap")]
#[global_allocator]
static GLOBAL: OwnHeap = OwnHeap;

#[cfg(test)]
mod tests {
    use super::*;

    /// An own thread's blocks come from the private region; a foreign thread's do not; a
    /// block crosses threads and is freed where it came from.
    #[cfg(feature = "own-heap")]
    #[test]
    fn own_threads_allocate_privately() {
        start_helper();
        let foreign = vec![1u8; 100];
        let (private, from_foreign) = std::thread::spawn(move || {
            mark();
            let v = vec![7u8; 5000];
            // A foreign block dropped here goes to the helper.
            drop(foreign);
            let mut grown: Vec<u8> = Vec::new();
            for i in 0..100_000u32 {
                grown.push(i as u8);
            }
            (v, grown)
        })
        .join()
        .unwrap();
        let heap = Heap::get().expect("the region is reserved");
        assert!(heap.contains(private.as_ptr() as usize));
        assert!(heap.contains(from_foreign.as_ptr() as usize));
        assert!(private.iter().all(|&b| b == 7));
        assert!(from_foreign.iter().enumerate().all(|(i, &b)| b == i as u8));
        // Zeroed blocks read as zeros, reused ones included, small and large.
        std::thread::spawn(|| {
            mark();
            for size in [24, 5000, 1 << 20] {
                for _ in 0..3 {
                    let mut v = vec![0u8; size];
                    assert!(v.iter().all(|&b| b == 0), "{size}");
                    v.fill(0xa5);
                }
            }
        })
        .join()
        .unwrap();
        let mine = vec![0u8; 5000];
        assert!(!heap.contains(mine.as_ptr() as usize));
        // Freed here, on a foreign thread, into the private heap.
        drop(private);
        drop(from_foreign);
    }

    #[test]
    fn classes_cover_size_and_alignment() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(17, 8)), Some(1));
        assert_eq!(class_of(l(8, 64)), Some(2));
        assert_eq!(block_size(class_of(l(5000, 8)).unwrap()), 8192);
        assert_eq!(class_of(l(REGION * 2, 8)), None);
    }
}
