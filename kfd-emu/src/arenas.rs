//! One malloc arena per thread, so that the emulator's threads never wait for a filtered
//! thread's allocator lock.
//!
//! glibc makes `mprotect`, `madvise(MADV_DONTNEED)`, `munmap` and `brk` calls from inside
//! `malloc` and `free` (growing, trimming and deleting a heap) while it holds the lock of the
//! thread's arena. Those calls are notified, so an attached thread can sit in one holding its
//! arena's lock until a supervisor worker answers; a worker that then allocates from the same
//! arena would wait for it forever. Arenas are shared only once glibc's limit (8 per CPU) is
//! reached, which a test process with many threads does reach: this raises the limit, before
//! the supervisor and the model start their threads, so that each new thread gets an arena of
//! its own (an arena is reused only after its last thread ended). Seen as a hang of a worker
//! on the arena lock of an attached thread stopped in `mprotect`.
//!
//! The emulator's own threads no longer use glibc's arenas at all (`crate::own`); this keeps
//! the process's other threads (other tests) off the attached thread's arena.

/// Raises glibc's arena limit (`M_ARENA_MAX`) for the whole process, once.
pub(crate) fn one_per_thread() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        // SAFETY: mallopt takes two integers and changes allocator tuning only; it is safe to
        // call at any time, from any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1 << 16);
        }
    });
}
