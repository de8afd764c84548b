//! `kfd-ioctl`: the KFD ABI and the one crate that issues KFD ioctls.
//!
//! * [`abi`] — `#[repr(C)]` mirrors of every struct, union, enum and constant of the uapi
//!   `linux/kfd_ioctl.h` at KFD 1.23, opcodes, flags and the minimum KFD minor of each.
//! * [`topology`] — the KFD sysfs topology tree, parsed and typed.
//! * [`Kfd`] — the safe handle on `/dev/kfd` with one method per memory-side ioctl.
#![warn(missing_docs)]

pub mod abi;
pub mod topology;

mod error;
mod kfd;
mod sys;

pub use error::{Errno, ErrnoName, Error, IoctlContext, Result, Version};
pub use kfd::{
    Apertures, BufferObject, CachePolicy, ClockCounters, CpuMapping, DmabufInfo, KFD_DEVICE_PATH,
    Kfd, MemoryPolicy, SVM_INLINE_ATTRS, SmiEvents, TileConfig, render_node_path,
};
