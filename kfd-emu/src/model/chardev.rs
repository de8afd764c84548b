//! The chardev layer's vocabulary: the context of one ioctl being answered and access to its
//! argument in the kernel buffer (what `kfd_ioctl` in `kfd_chardev.c` hands every handler).
//!
//! Handlers import this module, never the dispatcher that calls them.

use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::driver::Driver;
use crate::backend::Caller;

/// One ioctl being answered.
pub(super) struct Ctx<'a> {
    pub m: &'a Driver,
    pub caller: &'a dyn Caller,
    /// The KFD process of the `/dev/kfd` file (the caller, once the dispatcher checked).
    pub tgid: i32,
    pub serial: u64,
}

/// The largest `kcalloc` the kernel can satisfy (`KMALLOC_MAX_SIZE`, 4 MiB on x86_64): an
/// ioctl whose argument asks the kernel to copy a larger array fails with `ENOMEM`.
pub(super) const KMALLOC_MAX: u64 = 4 << 20;

/// The argument struct at the start of the kernel buffer (which is at least its size).
pub(super) fn get<T: FromBytes + Default>(buf: &[u8]) -> T {
    T::read_from_prefix(buf).map(|(v, _)| v).unwrap_or_default()
}

/// Stores the argument struct back at the start of the kernel buffer.
pub(super) fn put<T: IntoBytes + Immutable>(buf: &mut [u8], value: &T) {
    let bytes = value.as_bytes();
    if let Some(dst) = buf.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// The native-endian `u32` at byte `at` of an argument buffer (0 past its end).
pub(super) fn u32_at(buf: &[u8], at: usize) -> u32 {
    buf.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

/// The native-endian `u64` at byte `at` of an argument buffer (0 past its end).
pub(super) fn u64_at(buf: &[u8], at: usize) -> u64 {
    buf.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// Stores `v` at byte `at` of an argument buffer (nothing past its end).
pub(super) fn set_u32(buf: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = buf.get_mut(at..at + 4) {
        dst.copy_from_slice(&v.to_ne_bytes());
    }
}

/// Stores `v` at byte `at` of an argument buffer (nothing past its end).
pub(super) fn set_u64(buf: &mut [u8], at: usize, v: u64) {
    if let Some(dst) = buf.get_mut(at..at + 8) {
        dst.copy_from_slice(&v.to_ne_bytes());
    }
}
