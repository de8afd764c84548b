//! The fenced unsafe layer: issuing an ioctl on an argument struct, and mapping a device range.
//!
//! Everything here takes plain-data arguments (`IntoBytes + FromBytes`: no pointers the kernel
//! could misread as references, no invalid bit patterns after the kernel writes them back), so
//! the safe layer never needs `unsafe` itself.

use std::ffi::c_void;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use rustix::io::Errno;
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
use rustix::mm::{MapFlags, ProtFlags};
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

/// Issues `ioctl(fd, opcode, arg)`, retrying on `EINTR` and `EAGAIN` as libhsakmt does.
///
/// The opcode's size field must not exceed `size_of::<T>()` — the kernel copies that many bytes
/// in and out of `arg`. Checked here, so a wrong opcode is an `EINVAL`, not an overrun.
pub(crate) fn ioctl<T: IntoBytes + FromBytes>(
    fd: BorrowedFd<'_>,
    opcode: Opcode,
    arg: &mut T,
) -> Result<i32, Errno> {
    if crate::abi::ioc_size(opcode) > size_of::<T>() {
        return Err(Errno::INVAL);
    }
    loop {
        let call = Call {
            opcode,
            arg: &mut *arg,
        };
        // SAFETY: `arg` is a live, exclusively borrowed plain-data value of at least the size
        // encoded in `opcode` (checked above); every bit pattern the kernel writes back into it
        // is a valid `T` (`FromBytes`). The fd is borrowed for the duration of the call.
        match unsafe { rustix::ioctl::ioctl(fd, call) } {
            Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
            other => return other,
        }
    }
}

/// Issues `ioctl(fd, opcode, buf)` on a byte buffer (variable-size arguments such as SVM's),
/// with the same size check and retries as [`ioctl`].
pub(crate) fn ioctl_bytes(
    fd: BorrowedFd<'_>,
    opcode: Opcode,
    buf: &mut [u8],
) -> Result<i32, Errno> {
    if crate::abi::ioc_size(opcode) > buf.len() {
        return Err(Errno::INVAL);
    }
    loop {
        let call = Call {
            opcode,
            arg: &mut *buf,
        };
        // SAFETY: `buf` is a live, exclusively borrowed byte buffer at least as long as the size
        // encoded in `opcode` (checked above); any bytes the kernel writes are valid `u8`s.
        match unsafe { rustix::ioctl::ioctl(fd, call) } {
            Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
            other => return other,
        }
    }
}

/// A `MAP_SHARED` mapping of `len` bytes of `fd` at `offset`, readable and writable.
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
    NonNull::new(ptr.cast()).ok_or(Errno::NOMEM)
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

/// Copies `src` into device memory at `dst` with volatile-free `memcpy` semantics.
///
/// # Safety
/// `dst..dst+src.len()` must be inside a live mapping that is writable.
pub(crate) unsafe fn copy_to_mapping(dst: *mut u8, src: &[u8]) {
    // SAFETY: the caller guarantees the destination range; a device mapping cannot overlap a
    // Rust slice we hold.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) }
}

/// Copies device memory at `src` into `dst`.
///
/// # Safety
/// `src..src+dst.len()` must be inside a live mapping that is readable.
pub(crate) unsafe fn copy_from_mapping(dst: &mut [u8], src: *const u8) {
    // SAFETY: the caller guarantees the source range; it cannot overlap `dst`.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
}
