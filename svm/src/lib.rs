//! `kfd-svm`: shared virtual memory (SVM/HMM) on AMD GPUs, safely, on top of `kfd-ioctl`.
//!
//! With SVM one pointer is valid on the CPU and on every GPU of the process. Attributes steer
//! where the pages live (system memory or a GPU's VRAM) and which GPUs may touch them; the
//! kernel migrates pages on prefetch and, with XNACK on, on GPU page faults, and reports what
//! it did as SMI events. This crate offers:
//!
//! * [`SvmAttrs`]: preferred and prefetch location, per-GPU [`Access`], flags, granularity,
//!   applied to a range in one `SET_ATTR` ioctl without heap allocation;
//!   [`get_attrs`]: everything `GET_ATTR` knows about a range, per-GPU access included, in one
//!   ioctl; [`prefetch`].
//! * [`SvmBuffer`]: anonymous memory that is mapped, registered and (on drop) unmapped by this
//!   crate, so working with it needs no `unsafe`.
//! * [`SmiEvent`]: the kernel's SMI text records decoded (and written back byte for byte);
//!   [`SmiStream`]: the events of one GPU, as they come; [`Timeline`]: a migration and fault
//!   timeline in Chrome-trace JSON for Perfetto; [`Pairing`]: the events paired into the
//!   records rocprofv3 (`--kfd-trace`) writes ([`KfdRecord`]), and [`Summary`]: what they say
//!   about migration bytes and throughput, faults and queue churn;
//!   [`ResidencyMap`](residency::ResidencyMap): where their pages lived over time, on a
//!   bounded grid (one sweep, near-linear in the records).
//!
//! # Tutorial
//!
//! Open KFD and acquire the GPUs, as for any KFD work:
//!
//! ```no_run
//! use kfd_ioctl::{Kfd, topology::Topology};
//!
//! let kfd = Kfd::open()?;
//! let topology = Topology::read()?;
//! let mut gpus = Vec::new();
//! for node in topology.gpus() {
//!     let Some(gpu_id) = node.gpu_id() else { continue };
//!     kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)?;
//!     gpus.push(gpu_id);
//! }
//! # Ok::<(), kfd_ioctl::Error>(())
//! ```
//!
//! XNACK decides what a GPU does on a page that is not mapped for it: with XNACK on it faults
//! and the kernel migrates or maps the page (HMM); with it off every GPU with access is mapped
//! up front and a missing page is a fatal VM fault. It is per process and can only change while
//! the process has no queues. This crate does not wrap it: use [`Kfd::xnack_mode`] and
//! [`Kfd::set_xnack_mode`] directly.
//!
//! ```no_run
//! # let kfd = kfd_ioctl::Kfd::open()?;
//! if !kfd.xnack_mode()? {
//!     // EPERM where a GPU of the process cannot retry faults.
//!     kfd.set_xnack_mode(true)?;
//! }
//! # Ok::<(), kfd_ioctl::Error>(())
//! ```
//!
//! An SVM buffer of 64 MiB that prefers the first GPU's VRAM, which that GPU may access (and
//! migrate toward) while the second may only map it where it is:
//!
//! ```no_run
//! use kfd_ioctl::abi::SvmFlags;
//! use kfd_svm::{Access, Location, SvmAttrs, SvmBuffer};
//! # let kfd = kfd_ioctl::Kfd::open()?;
//! # let gpus = [kfd_svm::GpuId(0x1a2b), kfd_svm::GpuId(0x3c4d)];
//!
//! let attrs = SvmAttrs::new()
//!     .preferred_location(Location::Gpu(gpus[0]))
//!     .access(gpus[0], Access::Access)
//!     .access(gpus[1], Access::AccessInPlace)
//!     .clear_flags(SvmFlags::COHERENT) // coarse grained: coherent at dispatch boundaries
//!     .granularity(9); // 2^9 pages = 2 MiB at a time
//! let mut buf = SvmBuffer::new(&kfd, 64 << 20, &attrs)?;
//! buf.copy_in(0, &[1, 2, 3, 4])?;
//!
//! // Move it all to VRAM now instead of on first touch.
//! buf.prefetch(Location::Gpu(gpus[0]))?;
//!
//! // Ask the kernel what it holds: the intersection over the range.
//! let info = buf.attrs(&gpus)?;
//! assert_eq!(info.preferred_location, Location::Gpu(gpus[0]));
//! assert_eq!(info.access_of(gpus[1]), Some(Access::AccessInPlace));
//!
//! // The CPU reading it faults the pages back to system memory, transparently.
//! let mut head = [0u8; 4];
//! buf.copy_out(0, &mut head)?;
//! assert_eq!(head, [1, 2, 3, 4]);
//! # Ok::<(), kfd_svm::Error>(())
//! ```
//!
//! Memory the caller maps itself can be registered too, but then the caller vouches for it:
//! [`SvmAttrs::apply`] and [`prefetch`] are `unsafe fn`s.
//!
//! Watch the migrations as they happen, and export them for Perfetto:
//!
//! ```no_run
//! use std::time::Duration;
//! use kfd_ioctl::abi::SmiEventMask;
//! use kfd_svm::{SmiStream, Timeline};
//! # let kfd = kfd_ioctl::Kfd::open()?;
//! # let gpu = 0x1a2b;
//!
//! let mut stream = SmiStream::open(
//!     &kfd,
//!     gpu,
//!     SmiEventMask::MIGRATE_START
//!         | SmiEventMask::MIGRATE_END
//!         | SmiEventMask::PAGE_FAULT_START
//!         | SmiEventMask::PAGE_FAULT_END,
//! )?;
//! // ... prefetch, run GPU work ...
//! let mut timeline = Timeline::new();
//! while let Some(event) = stream.next_event(Some(Duration::from_millis(100)))? {
//!     timeline.push(event);
//! }
//! timeline
//!     .write_chrome_trace(std::fs::File::create("trace.json").expect("create trace.json"))
//!     .expect("write trace.json");
//! # Ok::<(), kfd_svm::Error>(())
//! ```
//!
//! [`Kfd::xnack_mode`]: kfd_ioctl::Kfd::xnack_mode
//! [`Kfd::set_xnack_mode`]: kfd_ioctl::Kfd::set_xnack_mode

mod attrs;
mod buffer;
pub mod clock;
mod error;
mod location;
pub mod records;
pub mod residency;
mod stream;
pub mod summary;
mod timeline;

pub use attrs::{
    AttrList, FlagNames, INLINE_ATTRS, MAX_GRANULARITY, SvmAttr, SvmAttrs, SvmRangeInfo,
    check_range, get_attrs, page_range, prefetch, unregister,
};
pub use buffer::{HUGE_ALIGN, MapOptions, SvmBuffer};
pub use clock::{ClockFit, ClockSample};
pub use error::{Error, RangeProblem, Result};
/// The GPU id type of [`SvmAttr::Access`], [`Location::Gpu`] and [`SvmRangeInfo::access`].
pub use kfd_ioctl::GpuId;
/// SMI event records: the kernel's text lines, typed, parsed and written back (kfd-ioctl's
/// [`smi`](kfd_ioctl::smi) module, the one definition of the format, under this crate's names).
pub use kfd_ioctl::smi::{
    EvictionTrigger, MigrateTrigger, ParseError as SmiParseError, Record as SmiEvent, RestoreMark,
    UnmapTrigger,
};
pub use location::{Access, Location};
pub use records::{AgentMap, KfdKind, KfdRecord, Pairing};
pub use stream::{Pending, SmiStream};
pub use summary::Summary;
pub use timeline::{DEFAULT_PAGE_SIZE, EVENTS_TID, Timeline};
