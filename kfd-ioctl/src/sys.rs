//! The fenced unsafe layer: issuing an ioctl on an argument struct, and mapping a device range.
//!
//! Arguments are plain data (`IntoBytes + FromBytes`: no invalid bit patterns after the kernel
//! writes them back). Some also hold addresses the kernel reads or writes through (the
//! aperture array of GET_PROCESS_APERTURES_NEW, the device list of MAP/UNMAP, the metadata
//! buffer of GET_DMABUF_INFO, the tile-config arrays, the USERPTR address, the SVM range):
//! those go through the `unsafe` [`ioctl_with_pointers`] and [`ioctl_bytes`], whose callers
//! state at each call site why every such address is valid. The safe [`ioctl`] takes only
//! the argument structs marked [`PointerFree`].

use std::ffi::c_void;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
use rustix::mm::{Advice, MapFlags, ProtFlags};
use zerocopy::{FromBytes, IntoBytes};

/// One ioctl call on a caller-owned argument buffer.
struct Call<'a, T: ?Sized> {
    opcode: Opcode,
    arg: &'a mut T,
}

// SAFETY: `opcode` is the caller's, `as_ptr` points at a live `T` that the kernel may read and
// write (`IS_MUTATING`), and the output is the raw return value, which needs no pointer.
unsafe impl<T: ?Sized> Ioctl for Call<'_, T> {
    type Output = IoctlOutput;
    const IS_MUTATING: bool = true;

    fn opcode(&self) -> Opcode {
        self.opcode
    }

    fn as_ptr(&mut self) -> *mut c_void {
        (&raw mut *self.arg).cast()
    }

    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut c_void) -> rustix::io::Result<IoctlOutput> {
        Ok(out)
    }
}

/// How many times one ioctl is issued at most when the kernel keeps answering `EINTR` or
/// `EAGAIN` (libhsakmt retries forever; a signal storm or a stuck device must not hang us).
pub(crate) const MAX_ATTEMPTS: u32 = 32;

/// How long retries of one ioctl may take in all, whatever [`MAX_ATTEMPTS`] allows.
pub(crate) const MAX_RETRY_TIME: Duration = Duration::from_secs(1);

/// The first pause after an `EAGAIN`; it doubles up to [`MAX_EAGAIN_PAUSE`].
const FIRST_EAGAIN_PAUSE: Duration = Duration::from_micros(10);

/// The longest pause between two attempts after `EAGAIN`.
const MAX_EAGAIN_PAUSE: Duration = Duration::from_millis(10);

/// A failed ioctl: the last errno, and how many times the call was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What the kernel said the last time.
    pub errno: Errno,
    /// How many times the ioctl was issued (1 when it was not retried).
    pub attempts: u32,
}

impl Failure {
    /// Whether the call gave up on `EINTR`/`EAGAIN` after retrying.
    pub fn gave_up_retrying(&self) -> bool {
        self.attempts > 1 && is_retryable(self.errno)
    }
}

fn is_retryable(errno: Errno) -> bool {
    matches!(errno, Errno::INTR | Errno::AGAIN)
}

/// Issues `issue` until it answers something other than `EINTR`/`EAGAIN`, at most
/// [`MAX_ATTEMPTS`] times and for at most [`MAX_RETRY_TIME`]: `EINTR` is retried at once (the
/// signal was handled), `EAGAIN` after a pause that doubles each time.
#[inline]
fn retry(mut issue: impl FnMut() -> Result<i32, Errno>) -> Result<i32, Failure> {
    // The clock is read from the first retry on: a call that succeeds or fails for good costs
    // nothing more.
    let mut started = None;
    let mut pause = FIRST_EAGAIN_PAUSE;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let errno = match issue() {
            Ok(value) => return Ok(value),
            Err(errno) => errno,
        };
        if !is_retryable(errno) {
            return Err(Failure { errno, attempts });
        }
        let elapsed = started.get_or_insert_with(Instant::now).elapsed();
        if attempts >= MAX_ATTEMPTS || elapsed >= MAX_RETRY_TIME {
            return Err(Failure { errno, attempts });
        }
        if errno == Errno::AGAIN {
            std::thread::sleep(pause.min(MAX_RETRY_TIME - elapsed));
            pause = (pause * 2).min(MAX_EAGAIN_PAUSE);
        }
    }
}

/// An ioctl argument struct with no field the kernel follows into this process's memory:
/// issuing an ioctl on it can touch no memory but its own bytes.
///
/// # Safety
/// Implement only for structs where, for every opcode this crate issues with them, no field
/// is an address the kernel reads or writes through.
pub(crate) unsafe trait PointerFree: IntoBytes + FromBytes {}

/// Marks the pointer-free argument structs.
macro_rules! pointer_free {
    ($($(#[$why:meta])* $ty:ident,)*) => {
        $(
            $(#[$why])*
            // SAFETY: checked against the struct's fields in `abi` and the kernel's handler:
            // none is an address the kernel dereferences.
            unsafe impl PointerFree for crate::abi::$ty {}
        )*
    };
}

pointer_free! {
    kfd_ioctl_get_version_args,
    kfd_ioctl_acquire_vm_args,
    /// `alternate_aperture_base` is a GPU address the kernel programs, not one it follows.
    kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_import_dmabuf_args,
    kfd_ioctl_export_dmabuf_args,
    kfd_ioctl_set_xnack_mode_args,
    kfd_ioctl_get_available_memory_args,
    kfd_ioctl_smi_events_args,
    /// `r_debug` is stored for a debugger to read later, never dereferenced by the kernel.
    kfd_ioctl_runtime_enable_args,
    kfd_ioctl_get_clock_counters_args,
    /// `event_page_offset` is a BO handle, not an address.
    kfd_ioctl_create_event_args,
    kfd_ioctl_destroy_event_args,
    kfd_ioctl_set_event_args,
    kfd_ioctl_reset_event_args,
    kfd_ioctl_destroy_queue_args,
    /// `ring_base_address` is the queue's own ring, which the queue's owner keeps alive.
    kfd_ioctl_update_queue_args,
    kfd_ioctl_alloc_queue_gws_args,
}

/// Issues `ioctl(fd, opcode, arg)` on a pointer-free argument, retrying `EINTR` and `EAGAIN`
/// as [`retry`] does.
///
/// The opcode's size field must not exceed `size_of::<T>()` — the kernel copies that many bytes
/// in and out of `arg`. Checked here, so a wrong opcode is an `EINVAL`, not an overrun.
pub(crate) fn ioctl<T: PointerFree>(
    fd: BorrowedFd<'_>,
    opcode: Opcode,
    arg: &mut T,
) -> Result<i32, Failure> {
    // SAFETY: `T: PointerFree`: the kernel follows no address in `arg`.
    unsafe { ioctl_with_pointers(fd, opcode, arg) }
}

/// [`ioctl`] on an argument that may hold addresses the kernel reads or writes through.
///
/// # Safety
/// Every address in `arg` that the kernel follows for `opcode` must point to memory valid for
/// what the kernel does there (reads, writes or both) over the whole length it uses — as the
/// kernel's handler computes it from the other fields — for the whole call; memory it writes
/// must hold no live Rust reference and accept any bytes.
pub(crate) unsafe fn ioctl_with_pointers<T: IntoBytes + FromBytes>(
    fd: BorrowedFd<'_>,
    opcode: Opcode,
    arg: &mut T,
) -> Result<i32, Failure> {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { ioctl_bytes(fd, opcode, arg.as_mut_bytes()) }
}

/// Issues `ioctl(fd, opcode, buf)` on a byte buffer (variable-size arguments such as SVM's),
/// with the same size check and retries as [`ioctl`].
///
/// # Safety
/// As for [`ioctl_with_pointers`], for the addresses the bytes of `buf` hold.
#[inline]
pub(crate) unsafe fn ioctl_bytes(
    fd: BorrowedFd<'_>,
    opcode: Opcode,
    buf: &mut [u8],
) -> Result<i32, Failure> {
    if crate::abi::ioc_size(opcode) > buf.len() {
        return Err(Failure {
            errno: Errno::INVAL,
            attempts: 0,
        });
    }
    retry(|| {
        let call = Call {
            opcode,
            arg: &mut *buf,
        };
        // SAFETY: `buf` is a live, exclusively borrowed byte buffer at least as long as the size
        // encoded in `opcode` (checked above); any bytes the kernel writes are valid `u8`s, and
        // for `ioctl` they are the bytes of a `FromBytes` value, valid in any pattern. The
        // addresses inside `buf` are the caller's to vouch for.
        unsafe { rustix::ioctl::ioctl(fd, call) }
    })
}

/// A `MAP_SHARED` mapping of `len` bytes of `fd` at `offset`, readable and writable, that a
/// forked child does not inherit (`MADV_DONTFORK`, as the kernel's `VM_DONTCOPY` on KFD BO
/// mappings): a child's KFD is a new process, without the parent's buffer objects.
pub(crate) fn mmap_shared(
    fd: BorrowedFd<'_>,
    offset: u64,
    len: usize,
) -> Result<NonNull<u8>, Errno> {
    // SAFETY: a fresh mapping at an address the kernel chooses (no MAP_FIXED) cannot alias any
    // existing Rust object; the caller owns the returned range until `munmap`.
    let ptr = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            offset,
        )?
    };
    let Some(ptr) = NonNull::new(ptr.cast::<u8>()) else {
        return Err(Errno::NOMEM);
    };
    // SAFETY: advice on the mapping made above, which nothing else references yet.
    let advised = unsafe { rustix::mm::madvise(ptr.as_ptr().cast(), len, Advice::LinuxDontFork) };
    if let Err(errno) = advised {
        // SAFETY: the mapping made above, referenced by nothing.
        unsafe { munmap(ptr, len) };
        return Err(errno);
    }
    Ok(ptr)
}

/// Unmaps a range returned by [`mmap_shared`].
///
/// # Safety
/// `ptr`/`len` must be exactly a mapping returned by [`mmap_shared`] that nothing references
/// any more.
pub(crate) unsafe fn munmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: guaranteed by the caller. munmap of our own mapping fails only on bad arguments,
    // which the caller's contract excludes; there is nothing useful to do with an error in Drop.
    let _ = unsafe { rustix::mm::munmap(ptr.as_ptr().cast(), len) };
}

/// The id of the calling process, to tell the process that created an object from a forked
/// child that inherited it.
pub(crate) fn current_pid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the kernel that answers `errnos` in turn, then success.
    fn answers(errnos: &[Errno]) -> impl FnMut() -> Result<i32, Errno> + '_ {
        let mut next = errnos.iter();
        move || next.next().map_or(Ok(7), |&e| Err(e))
    }

    #[test]
    fn a_few_interruptions_are_retried_through() {
        assert_eq!(retry(answers(&[Errno::INTR; 3])), Ok(7));
        assert_eq!(
            retry(answers(&[Errno::AGAIN, Errno::INTR, Errno::AGAIN])),
            Ok(7)
        );
    }

    #[test]
    fn endless_interruptions_give_up_with_the_count() {
        let mut calls = 0;
        let failure = retry(|| {
            calls += 1;
            Err(Errno::INTR)
        })
        .unwrap_err();
        assert_eq!(failure.errno, Errno::INTR);
        assert_eq!(failure.attempts, calls);
        assert!(failure.attempts <= MAX_ATTEMPTS);
        assert!(failure.gave_up_retrying());
    }

    #[test]
    fn endless_eagain_backs_off_and_gives_up_in_bounded_time() {
        let started = Instant::now();
        let failure = retry(|| Err(Errno::AGAIN)).unwrap_err();
        assert_eq!(failure.errno, Errno::AGAIN);
        assert!((2..=MAX_ATTEMPTS).contains(&failure.attempts));
        // The pauses stop at the time bound (plus one pause of slack).
        assert!(started.elapsed() <= MAX_RETRY_TIME + MAX_EAGAIN_PAUSE * 2);
    }

    #[test]
    fn other_errors_are_not_retried() {
        let failure = retry(answers(&[Errno::NOMEM, Errno::INTR])).unwrap_err();
        assert_eq!(
            failure,
            Failure {
                errno: Errno::NOMEM,
                attempts: 1
            }
        );
        assert!(!failure.gave_up_retrying());
    }
}
