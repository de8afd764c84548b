//! `kfd-ring`: mirrored ("magic") ring mappings on the host and on AMD GPUs over KFD, and an
//! SPSC byte ring on top.
//!
//! A mirrored mapping presents one buffer of `capacity` bytes three times, back to back —
//! `[prev][base][next]` — so code can read or write up to a whole capacity before or after any
//! point of the ring with plain pointers: a copy across the wrap point is one `memcpy`, never
//! two. This is IREE's AMDGPU vmem ringbuffer design (`shared/ref/anchors.md` §2), built here
//! on raw KFD ioctls (`shared/ref/kfd-abi.md` §7).
//!
//! | type | memory | who sees the mirror |
//! | --- | --- | --- |
//! | [`HostMirror`] | a sealed memfd mapped 3× into a `PROT_NONE` reservation | the CPU, in any process that maps the memfd |
//! | [`GpuHostRing`] | a [`HostMirror`] + USERPTR buffer objects or an SVM range | the CPU, and the chosen GPUs at the same addresses |
//! | [`DeviceRing`] | one buffer object of a GPU pool, dma-buf exported and imported at its two neighbouring GPU VAs | the chosen GPUs; the CPU too (large-BAR VRAM) through three render-node mappings |
//!
//! Every capacity is a power of two and a multiple of the allocation granule (the page, or
//! 2 MiB for VRAM or huge pages: [`ring_capacity`]); every base is page aligned (so 64-byte
//! aligned). Who may touch a GPU ring is said with IREE's [`AccessMode`]s, turned into per-GPU
//! [`Right`]s; KFD has no write-only right, so write-only becomes read-write (see
//! [`AccessMode`]). Which memory to use comes from the topology: [`MemoryPool::find`] picks a
//! coarse- or fine-grained pool of a GPU and says which ([`MemoryPool`]'s `Display`).
//!
//! On any [`Mirrored`] mapping, [`SpscRing`] is a single-producer single-consumer ring of
//! variable-size records whose payloads are always contiguous: `reserve(n)`, `commit`;
//! `peek`, `release`. Over a [`HostMirror`] its header lives in the memfd, so two processes
//! can share it; each role is claimed once, across processes too.
//!
//! # Shared memory
//! Ring memory is shared with another agent — a peer process mapping the same memfd, another
//! mapping in this process, a GPU, another thread — so, following rust-vmm's `vm-memory`, safe
//! functions hand it out as a [`VolatileSlice`] (read and written with volatile copies:
//! [`VolatileSlice::copy_from`], [`VolatileSlice::copy_to`], the [`Bytes`] methods), never as
//! `&[u8]`/`&mut [u8]`. Plain slices come from `unsafe` accessors
//! ([`Producer::reserve_slice`], [`Consumer::peek_slice`]) whose `# Safety` says what the
//! caller promises about the other agents. What a peer writes into the shared header is
//! untrusted: impossible positions or record lengths are a [`RingCorrupt`], never a panic or
//! an access outside the ring. A memfd taken from outside must be sealed against shrinking
//! and growing ([`Error::Unsealed`]), so mapping it cannot end in `SIGBUS`.
//!
//! # Tutorial
//!
//! ## A host ring
//! ```
//! use kfd_ring::{HostMirror, Mirrored};
//!
//! let ring = HostMirror::new(64 << 10)?; // 64 KiB, page granule
//! let cap = ring.capacity();
//! let base = ring.base().as_ptr();
//! // Fill the buffer through the base view...
//! let fill: Vec<u8> = (0..cap).map(|i| i as u8).collect();
//! ring.write(0, &fill)?;
//! // ...and the neighbouring views show the same bytes.
//! // SAFETY: [base - cap, base + 2 cap) is mapped while `ring` lives.
//! unsafe {
//!     assert_eq!(*base.offset(-1), *base.add(cap - 1));
//!     assert_eq!(*base.add(cap), *base);
//!     assert_eq!(*base.add(cap + 1), *base.add(1));
//! }
//! # Ok::<(), kfd_ring::Error>(())
//! ```
//!
//! ## An SPSC ring between two threads
//! ```
//! use kfd_ring::{HostMirror, SpscRing};
//!
//! let (mut tx, mut rx) = SpscRing::new(HostMirror::new(1 << 16)?)?.split()?;
//! let sender = std::thread::spawn(move || {
//!     for i in 0..1000u32 {
//!         let record = vec![i as u8; (i % 700) as usize];
//!         while tx.push(&record).is_err() {
//!             std::hint::spin_loop();
//!         }
//!     }
//! });
//! let mut seen = 0u32;
//! let mut record = Vec::new();
//! while seen < 1000 {
//!     // Copied out of the shared memory in one volatile copy, even when the record crosses
//!     // the end of the buffer.
//!     if rx.pop_into(&mut record)? {
//!         assert_eq!(record.len(), (seen % 700) as usize);
//!         assert!(record.iter().all(|&b| b == seen as u8));
//!         seen += 1;
//!     }
//! }
//! sender.join().unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where every agent of the ring is trusted to follow the protocol, the `unsafe` slice
//! accessors skip the copy:
//! ```
//! use kfd_ring::{HostMirror, SpscRing};
//!
//! let (mut tx, mut rx) = SpscRing::new(HostMirror::new(4096)?)?.split()?;
//! // SAFETY: this process is the ring's only user: no one else maps its memfd.
//! unsafe { tx.reserve_slice(3)? }.copy_from_slice(b"abc");
//! tx.commit();
//! // SAFETY: as above; the producer leaves committed records alone.
//! let sum: u32 = unsafe { rx.peek_slice()? }.map_or(0, |r| r.iter().map(|&b| u32::from(b)).sum());
//! assert_eq!(sum, 97 + 98 + 99); // 'a' + 'b' + 'c'
//! rx.release();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! For two processes, hand [`HostMirror::memfd`] to the other one, which maps it with
//! [`HostMirror::from_memfd`] and joins with [`SpscRing::new`]; one side takes
//! [`SpscRing::into_producer`], the other [`SpscRing::into_consumer`]. Each role is claimed in
//! the shared header (with the claimer's process id) and given back on drop, so a second
//! producer or consumer anywhere is refused with [`Error::RoleTaken`]; the role of a process
//! that died holding it is taken over with the `unsafe` [`SpscRing::into_producer_reclaimed`]
//! or [`SpscRing::into_consumer_reclaimed`].
//!
//! ## A GPU-visible host ring and a device-local ring
//! ```no_run
//! use kfd_ioctl::{Kfd, topology::Topology};
//! use kfd_ring::{AccessMode, DeviceRing, GpuHostRing, Granularity, HostMirror, MemoryPool};
//!
//! let kfd = Kfd::open()?;
//! let topo = Topology::read()?;
//! let gpus: Vec<(u32, u32)> = topo
//!     .gpus()
//!     .filter_map(|n| Some((n.gpu_id()?.get(), n.properties.drm_render_minor as u32)))
//!     .collect();
//! for &(gpu_id, minor) in &gpus {
//!     kfd.acquire_vm(gpu_id, minor)?;
//! }
//! let owner = gpus[0].0;
//! let peers: Vec<u32> = gpus[1..].iter().map(|g| g.0).collect();
//!
//! // The owner writes, the others read: per-GPU read-only through USERPTR buffer objects.
//! let access = AccessMode::ExclusiveProducer.rights(owner, &peers);
//! let host = GpuHostRing::userptr(&kfd, HostMirror::new(1 << 20)?, &access, Granularity::Fine)?;
//! println!("GPUs see the host ring at {:#x}", host.gpu_base());
//!
//! // A ring in the owner's VRAM, mapped for the CPU too when the VRAM is host accessible.
//! let pool = MemoryPool::find(&topo, owner, Granularity::Coarse)?;
//! println!("chose {pool}");
//! let device = DeviceRing::new(&kfd, &pool, 1 << 20, &access, pool.host_accessible)?;
//! println!("device ring at GPU VA {:#x}, {} bytes", device.gpu_base(), device.capacity());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Emulation
//! Without an AMD GPU, run under `kfd-emu` (the workspace's tests do): the same ioctls and
//! mmaps land in its model, whose GPU-side view (`Model::gpu_read`/`gpu_write`) lets tests
//! check what a GPU sees at the ring's GPU addresses.

mod access;
mod capacity;
mod device;
mod error;
mod gpu_host;
mod host;
mod pool;
mod spsc;
mod sys;

pub use access::{AccessMode, GpuAccess, Right};
pub use capacity::{Granule, TWO_MIB, ring_capacity};
pub use device::{DeviceCpuView, DeviceRing, GpuView};
pub use error::{Error, Result};
pub use gpu_host::{GpuHostRing, HostRingBacking};
pub use host::{HostMirror, Mirrored};
pub use pool::{Granularity, Location, MemoryPool};
pub use spsc::{Consumer, Producer, RECORD_HEADER, ReserveError, RingCorrupt, SpscRing};
/// Volatile access to shared memory (rust-vmm's `vm-memory`): what this crate hands out for
/// ring bytes another agent may write at the same time.
pub use vm_memory::{Bytes, VolatileSlice};
