//! The host mirrored mapping: one memfd mapped three times, back to back, into a reserved
//! range.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use memfd::{FileSeal, HugetlbSize, MemfdOptions};
use vm_memory::VolatileSlice;

use crate::capacity::{Granule, ring_capacity};
use crate::error::{Error, Result};
use crate::sys::Reservation;

/// Memory presented as `[prev][base][next]`: three consecutive views of one buffer of
/// [`capacity`](Mirrored::capacity) bytes, so `base[i - cap]`, `base[i]` and `base[i + cap]`
/// are the same byte and any run of up to `capacity` bytes starting in `[base - cap, base +
/// cap)` is contiguous.
///
/// # Safety
/// An implementor guarantees, for as long as the value lives:
/// - `base() - capacity() .. base() + 2 * capacity()` is mapped readable and writable for the
///   CPU, and byte `base() + i` for `i` in `0..capacity()` is the same memory as
///   `base() + i - capacity()` and `base() + i + capacity()`;
/// - `capacity()` is a power of two of at least 4096, and `base()` is 64-byte aligned;
/// - `control()`, when `Some((ptr, len))`, is `len` readable and writable bytes outside the
///   ring, 128-byte aligned, zero when the ring was made, and the same memory in every mapping
///   of the same ring (in every process that maps it).
///
/// The memory is shared: other mappings, processes, GPUs and threads may write it at any
/// time, so the provided methods reach it through volatile accesses ([`VolatileSlice`]) only.
pub unsafe trait Mirrored {
    /// The first byte of the middle view.
    fn base(&self) -> NonNull<u8>;
    /// The size of one view in bytes.
    fn capacity(&self) -> usize;
    /// A control area shared by every mapping of the ring, for a ring header; `None` when
    /// the mapping has none (the SPSC ring then keeps its header in process memory).
    fn control(&self) -> Option<(NonNull<u8>, usize)> {
        None
    }

    /// The `len` bytes at `base + offset` (`offset` may be negative, down to `-capacity`) as a
    /// [`VolatileSlice`]: one contiguous run even when it crosses from one view into the next.
    ///
    /// The memory is shared (with a peer process, another mapping of the same memory, a GPU,
    /// another thread), so it is never a plain slice here: read and write it with
    /// [`VolatileSlice::copy_to`]/[`copy_from`](VolatileSlice::copy_from) or the
    /// [`Bytes`](vm_memory::Bytes) methods.
    fn volatile(&self, offset: isize, len: usize) -> Result<VolatileSlice<'_>> {
        let at = mirror_range(self, offset, len)?;
        // SAFETY: the range is inside the mapped views (checked), which stay mapped while
        // `self` is borrowed (trait contract); every access this crate makes to ring memory
        // from safe code is volatile (through `VolatileSlice`), and plain references exist
        // only under the contracts of the `unsafe` accessors.
        Ok(unsafe { VolatileSlice::new(at, len) })
    }

    /// Copies `data` to `base + offset` (see [`volatile`](Self::volatile)), as one volatile
    /// copy even when it crosses from one view into the next.
    ///
    /// For setting up and inspecting a ring; concurrent users go through a protocol such as
    /// the [`SpscRing`](crate::SpscRing).
    fn write(&self, offset: isize, data: &[u8]) -> Result<()> {
        self.volatile(offset, data.len())?.copy_from(data);
        Ok(())
    }

    /// Copies `out.len()` bytes from `base + offset` into `out` (see [`write`](Self::write)).
    fn read(&self, offset: isize, out: &mut [u8]) -> Result<()> {
        self.volatile(offset, out.len())?.copy_to(out);
        Ok(())
    }
}

/// The address of `len` bytes at `base + offset`, checked to lie in `[base - capacity, base
/// + 2 × capacity)` and to be at most one capacity long.
fn mirror_range<M: Mirrored + ?Sized>(ring: &M, offset: isize, len: usize) -> Result<*mut u8> {
    let cap = ring.capacity() as isize;
    let fits = len <= ring.capacity()
        && offset >= -cap
        && offset
            .checked_add(len as isize)
            .is_some_and(|end| end <= 2 * cap);
    if !fits {
        return Err(Error::Capacity {
            requested: len,
            reason: "the access is outside [base - capacity, base + 2 × capacity) or longer than the capacity",
        });
    }
    Ok(ring.base().as_ptr().wrapping_offset(offset))
}

/// A new memfd of `size` bytes (huge pages for [`Granule::HugeTlb2M`]), sealed against
/// shrinking, growing and further sealing.
fn create_sealed_memfd(size: usize, granule: Granule) -> Result<memfd::Memfd> {
    let hugetlb = (granule == Granule::HugeTlb2M).then_some(HugetlbSize::Huge2MB);
    let name = format!(
        "kfd-ring-{}-{}",
        std::process::id(),
        NEXT_NAME.fetch_add(1, Ordering::Relaxed)
    );
    #[cfg(test)]
    LAST_NAME.set(name.clone());
    let memfd = MemfdOptions::new()
        .allow_sealing(true)
        .close_on_exec(true)
        .hugetlb(hugetlb)
        .create(&name)
        .map_err(Error::Memfd)?;
    rustix::fs::ftruncate(memfd.as_file(), size as u64).map_err(|errno| Error::Map {
        op: "ftruncate",
        addr: 0,
        len: size,
        errno,
    })?;
    // Hugetlbfs memfds take seals too (Linux 4.16 and later), and need them as much: a peer
    // holding the fd could otherwise truncate it under our mappings.
    memfd
        .add_seals(&[FileSeal::SealShrink, FileSeal::SealGrow, FileSeal::SealSeal])
        .map_err(Error::Memfd)?;
    Ok(memfd)
}

/// Checks that `memfd` can neither shrink nor grow: the seals that make mapping it safe.
fn check_seals(memfd: &memfd::Memfd) -> Result<()> {
    let seals = memfd.seals().map_err(Error::Memfd)?;
    let missing = match (
        seals.contains(&FileSeal::SealShrink),
        seals.contains(&FileSeal::SealGrow),
    ) {
        (true, true) => return Ok(()),
        (false, true) => "F_SEAL_SHRINK",
        (true, false) => "F_SEAL_GROW",
        (false, false) => "F_SEAL_SHRINK and F_SEAL_GROW",
    };
    Err(Error::Unsealed { missing })
}

/// Distinguishes the memfds of one process in `/proc/<pid>/maps` and `/proc/<pid>/fd`.
static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
thread_local! {
    /// The memfd name of the last ring this thread tried to make.
    static LAST_NAME: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// A host mirrored mapping: a sealed memfd mapped three times into one `PROT_NONE`
/// reservation (`[prev][base][next]`), followed by a control area.
///
/// Layout of the reservation: `3 × capacity` bytes of views, then the control area (one
/// granule) mapped from the memfd's tail. The memfd holds `capacity + granule` bytes and is
/// sealed against growing and shrinking, so a second process can map the same ring
/// ([`HostMirror::from_memfd`]) without fearing `SIGBUS`.
///
/// Teardown is in the order IREE's vmem ringbuffer uses: each view is replaced by the
/// `PROT_NONE` reservation again, then the memory is released (the memfd closed), then the
/// address range is freed. A construction that fails part way leaves nothing behind: the
/// reservation and the memfd are owned values dropped on the error path.
///
/// ```
/// use kfd_ring::{HostMirror, Mirrored};
///
/// let ring = HostMirror::new(10_000)?;
/// let cap = ring.capacity();
/// assert_eq!(cap, 16384);
/// // A write across the end of the base view...
/// ring.write(cap as isize - 2, b"wrap")?;
/// // ...lands at the start of the ring, as one copy.
/// let mut head = [0u8; 2];
/// ring.read(0, &mut head)?;
/// assert_eq!(&head, b"ap");
/// # Ok::<(), kfd_ring::Error>(())
/// ```
#[derive(Debug)]
pub struct HostMirror {
    // Fields drop in declaration order after `Drop::drop` has unmapped the views: the memfd
    // first (releasing the memory), then the reservation (freeing the address range).
    memfd: memfd::Memfd,
    reservation: Reservation,
    capacity: usize,
    control_len: usize,
    granule: Granule,
}

impl HostMirror {
    /// A mirrored mapping of at least `min_capacity` bytes in page granules.
    pub fn new(min_capacity: usize) -> Result<HostMirror> {
        HostMirror::with_granule(min_capacity, Granule::Page)
    }

    /// A mirrored mapping of at least `min_capacity` bytes, rounded up to `granule` and to a
    /// power of two (see [`ring_capacity`]).
    pub fn with_granule(min_capacity: usize, granule: Granule) -> Result<HostMirror> {
        let capacity = ring_capacity(min_capacity, granule)?;
        let control_len = granule.bytes()?;
        let memfd = create_sealed_memfd(capacity + control_len, granule)?;
        HostMirror::map(memfd, capacity, control_len, granule)
    }

    /// Maps the ring of another [`HostMirror`] (in this or another process) from its memfd,
    /// made with the same `granule`.
    ///
    /// The memfd must be sealed against shrinking and growing (`F_SEAL_SHRINK` and
    /// `F_SEAL_GROW`, as every ring made by [`HostMirror`] is, huge-page rings included), so
    /// its size stays what was checked here and no access to the mapping can fault with
    /// `SIGBUS`; else [`Error::Unsealed`].
    pub fn from_memfd(fd: OwnedFd, granule: Granule) -> Result<HostMirror> {
        let memfd = memfd::Memfd::try_from_fd(fd).map_err(|_| Error::NotARing {
            reason: "the file is not a memfd",
        })?;
        check_seals(&memfd)?;
        let control_len = granule.bytes()?;
        let stat = rustix::fs::fstat(memfd.as_file()).map_err(|errno| Error::Map {
            op: "fstat",
            addr: 0,
            len: 0,
            errno,
        })?;
        let capacity = usize::try_from(stat.st_size)
            .ok()
            .and_then(|size| size.checked_sub(control_len))
            .filter(|&cap| cap.is_power_of_two() && cap >= control_len)
            .ok_or(Error::NotARing {
                reason: "its size is not a power-of-two capacity plus one granule",
            })?;
        HostMirror::map(memfd, capacity, control_len, granule)
    }

    fn map(
        memfd: memfd::Memfd,
        capacity: usize,
        control_len: usize,
        granule: Granule,
    ) -> Result<HostMirror> {
        let total = 3 * capacity + control_len;
        let reservation =
            Reservation::new(total, granule.bytes()?).map_err(|errno| Error::Map {
                op: "reserve",
                addr: 0,
                len: total,
                errno,
            })?;
        let fd = memfd.as_file().as_fd();
        let views = [
            (0, capacity, 0),
            (capacity, capacity, 0),
            (2 * capacity, capacity, 0),
            (3 * capacity, control_len, capacity as u64),
        ];
        for (offset, len, file_offset) in views {
            // SAFETY: the reservation is new and ours; no reference into it exists yet.
            unsafe { reservation.map_fixed(offset, len, fd, file_offset) }.map_err(|errno| {
                Error::Map {
                    op: "mmap",
                    addr: reservation.addr().as_ptr() as usize + offset,
                    len,
                    errno,
                }
            })?;
        }
        Ok(HostMirror {
            memfd,
            reservation,
            capacity,
            control_len,
            granule,
        })
    }

    /// The memfd, to hand to another process (see [`HostMirror::from_memfd`]).
    pub fn memfd(&self) -> BorrowedFd<'_> {
        self.memfd.as_file().as_fd()
    }

    /// The granule the ring was made with.
    pub fn granule(&self) -> Granule {
        self.granule
    }

    /// The first byte of the `[prev]` view: `base() - capacity()`.
    pub fn prev(&self) -> NonNull<u8> {
        self.reservation.addr()
    }

    /// The first byte of the `[next]` view: `base() + capacity()`.
    pub fn next(&self) -> NonNull<u8> {
        // SAFETY: inside the reservation (two capacities from its start).
        unsafe { self.reservation.addr().add(2 * self.capacity) }
    }
}

// SAFETY: `map` placed the same `capacity` bytes of the memfd at the three consecutive
// thirds of the reservation, read-write; the capacity is a power of two of at least one
// page; the base is page aligned; the control area is the memfd's tail (zero at creation, the
// same in every process mapping the memfd), page aligned and outside the views. All of it
// stays mapped until drop.
unsafe impl Mirrored for HostMirror {
    fn base(&self) -> NonNull<u8> {
        // SAFETY: one capacity into the reservation.
        unsafe { self.reservation.addr().add(self.capacity) }
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn control(&self) -> Option<(NonNull<u8>, usize)> {
        // SAFETY: three capacities into the reservation, where the control area is mapped.
        let at = unsafe { self.reservation.addr().add(3 * self.capacity) };
        Some((at, self.control_len))
    }
}

impl Drop for HostMirror {
    fn drop(&mut self) {
        // Views first, while the range stays reserved; the fields then drop the memfd and the
        // reservation, in that order.
        // SAFETY: we are being dropped, so no borrow of us (and no reference into the views)
        // is live.
        let _ = unsafe {
            self.reservation
                .unmap_to_reserved(0, self.reservation.len())
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::page_size;
    use kfd_ioctl::mem::testing::fail_map_after;

    /// The lines of `/proc/self/maps` that map the memfd called `name`.
    fn maps_of(name: &str) -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter(|l| {
                l.contains(&format!("/memfd:{name} "))
                    || l.ends_with(&format!("/memfd:{name} (deleted)"))
            })
            .count()
    }

    /// The open descriptors of this process that are the memfd called `name`.
    fn fds_of(name: &str) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| {
                target
                    .to_string_lossy()
                    .starts_with(&format!("/memfd:{name} "))
            })
            .count()
    }

    fn name_of(ring: &HostMirror) -> String {
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&ring.memfd())
        ))
        .unwrap();
        let link = link.to_string_lossy();
        link.trim_start_matches("/memfd:")
            .trim_end_matches(" (deleted)")
            .to_owned()
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn the_three_views_alias_after_filling_through_the_base() {
        let ring = HostMirror::new(3 * page_size()).unwrap();
        let cap = ring.capacity();
        assert_eq!(cap, 4 * page_size());
        assert_eq!(
            ring.base().as_ptr() as usize % 64,
            0,
            "base is 64-byte aligned"
        );
        assert_eq!(
            ring.prev().as_ptr() as usize + cap,
            ring.base().as_ptr() as usize
        );
        assert_eq!(
            ring.base().as_ptr() as usize + cap,
            ring.next().as_ptr() as usize
        );
        let fill: Vec<u8> = (0..cap).map(|i| (i * 7 + i / 251) as u8).collect();
        ring.write(0, &fill).unwrap();
        let p = ring.base().as_ptr();
        // SAFETY: every index is inside [base - cap, base + 2cap), which the mirror maps.
        unsafe {
            assert_eq!(*p.offset(-1), *p.add(cap - 1));
            assert_eq!(*p.add(cap), *p);
            assert_eq!(*p.add(cap + 1), *p.add(1));
            assert_eq!(*p.sub(cap), *p);
            assert_eq!(*p.add(2 * cap - 1), *p.add(cap - 1));
        }
        let mut whole = vec![0u8; cap];
        for start in [-(cap as isize), -1, 1, cap as isize / 2, cap as isize] {
            ring.read(start, &mut whole).unwrap();
            let want: Vec<u8> = (0..cap)
                .map(|i| fill[(start + i as isize).rem_euclid(cap as isize) as usize])
                .collect();
            assert!(whole == want, "a full read from base{start:+} wraps");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn a_write_across_the_wrap_point_is_seen_at_both_ends() {
        let ring = HostMirror::new(1).unwrap();
        let cap = ring.capacity() as isize;
        ring.write(cap - 3, b"abcdef").unwrap();
        let mut tail = [0u8; 3];
        let mut head = [0u8; 3];
        ring.read(cap - 3, &mut tail).unwrap();
        ring.read(0, &mut head).unwrap();
        assert_eq!((&tail, &head), (b"abc", b"def"));
        ring.read(-3, &mut tail).unwrap();
        assert_eq!(&tail, b"abc", "the prev view shows the end of the ring");
        assert!(ring.write(2 * cap - 1, b"xy").is_err());
        assert!(ring.read(-cap - 1, &mut tail).is_err());
        assert!(ring.write(0, &vec![0; cap as usize + 1]).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn control_area_is_shared_by_a_second_mapping_of_the_memfd() {
        let ring = HostMirror::new(1).unwrap();
        let fd = ring.memfd().try_clone_to_owned().unwrap();
        let other = HostMirror::from_memfd(fd, Granule::Page).unwrap();
        assert_eq!(other.capacity(), ring.capacity());
        assert_ne!(other.base(), ring.base());
        ring.write(5, b"shared").unwrap();
        let mut out = [0u8; 6];
        other.read(5 + other.capacity() as isize, &mut out).unwrap();
        assert_eq!(&out, b"shared");
        let (a, len) = ring.control().unwrap();
        let (b, len_b) = other.control().unwrap();
        assert_eq!(len, len_b);
        // SAFETY: both control areas are mapped for `len` bytes; nothing else uses them here.
        unsafe {
            a.as_ptr().add(100).write_volatile(42);
            assert_eq!(b.as_ptr().add(100).read_volatile(), 42);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn a_foreign_file_is_not_a_ring() {
        let file = std::fs::File::open("/proc/self/maps").unwrap();
        assert!(matches!(
            HostMirror::from_memfd(file.into(), Granule::Page),
            Err(Error::NotARing { .. })
        ));
    }

    /// An unsealed memfd of `size` bytes, with sealing allowed (huge pages if asked).
    fn unsealed(size: usize, hugetlb: bool) -> std::io::Result<memfd::Memfd> {
        let memfd = MemfdOptions::new()
            .allow_sealing(true)
            .hugetlb(hugetlb.then_some(HugetlbSize::Huge2MB))
            .create("unsealed")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        rustix::fs::ftruncate(memfd.as_file(), size as u64)?;
        Ok(memfd)
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn a_memfd_without_both_size_seals_is_refused() {
        let size = 2 * page_size();
        for (seals, missing) in [
            (&[][..], "F_SEAL_SHRINK and F_SEAL_GROW"),
            (&[FileSeal::SealGrow][..], "F_SEAL_SHRINK"),
            (&[FileSeal::SealShrink][..], "F_SEAL_GROW"),
        ] {
            let memfd = unsealed(size, false).unwrap();
            memfd.add_seals(seals).unwrap();
            let err = HostMirror::from_memfd(memfd.into_file().into(), Granule::Page).unwrap_err();
            assert!(
                matches!(err, Error::Unsealed { missing: m } if m == missing),
                "{seals:?}: {err}"
            );
        }
    }

    /// An unsealed hugetlbfs memfd, which needs hugetlbfs in the kernel but no huge page
    /// reserved; the skip reason when hugetlbfs is missing.
    fn hugetlb_memfd(size: usize) -> Result<memfd::Memfd, String> {
        unsealed(size, true)
            .map_err(|e| format!("memfd_create(MFD_HUGETLB | MFD_HUGE_2MB) fails here: {e}"))
    }

    /// Regression: `from_memfd(fd, Granule::HugeTlb2M)` skipped the seal check, so a peer
    /// could shrink the file and the next safe `write` died with `SIGBUS`. The check needs no
    /// huge page reserved (it comes before any mapping), so it runs wherever hugetlbfs exists.
    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn an_unsealed_hugetlb_memfd_is_refused() {
        let memfd = match hugetlb_memfd(2 * crate::TWO_MIB) {
            Ok(memfd) => memfd,
            Err(why) => return kfd_skip::skip(why),
        };
        let err = HostMirror::from_memfd(memfd.into_file().into(), Granule::HugeTlb2M);
        assert!(
            matches!(err, Err(Error::Unsealed { .. })),
            "an unsealed hugetlb memfd: {err:?}"
        );
    }

    /// Sealing works on hugetlbfs (Linux 4.16 and later), so the crate seals its huge-page
    /// memfds too; no huge page needs to be reserved to check that.
    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn memfds_the_crate_makes_are_sealed_hugetlb_too() {
        let page = create_sealed_memfd(2 * page_size(), Granule::Page).unwrap();
        let mut grants = vec![("page", page)];
        match create_sealed_memfd(2 * crate::TWO_MIB, Granule::HugeTlb2M) {
            Ok(huge) => grants.push(("hugetlb", huge)),
            // Only acceptable where hugetlbfs itself is missing.
            Err(e) => match hugetlb_memfd(crate::TWO_MIB) {
                Ok(_) => panic!("sealing hugetlb: {e}"),
                Err(why) => kfd_skip::skip_part("the hugetlb memfd", &why),
            },
        }
        for (kind, memfd) in grants {
            let seals = memfd.seals().unwrap();
            for seal in [FileSeal::SealShrink, FileSeal::SealGrow, FileSeal::SealSeal] {
                assert!(seals.contains(&seal), "{kind}: {seal:?} missing");
            }
            assert_eq!(
                rustix::fs::ftruncate(memfd.as_file(), 0),
                Err(rustix::io::Errno::PERM),
                "{kind}: a peer cannot shrink it"
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn teardown_leaves_no_mapping_and_no_descriptor() {
        let ring = HostMirror::new(1).unwrap();
        let name = name_of(&ring);
        // The next view (file offset 0) and the control area (file offset `capacity`) follow
        // each other in the file too, so the kernel merges them into one VMA.
        assert_eq!(
            maps_of(&name),
            3,
            "three views, the last merged with the control area"
        );
        assert_eq!(fds_of(&name), 1);
        drop(ring);
        assert_eq!(maps_of(&name), 0);
        assert_eq!(fds_of(&name), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn huge_page_rings_alias_when_the_system_has_huge_pages() {
        match HostMirror::with_granule(1, Granule::HugeTlb2M) {
            Ok(ring) => {
                assert_eq!(ring.capacity(), crate::TWO_MIB);
                assert_eq!(ring.prev().as_ptr() as usize % crate::TWO_MIB, 0);
                ring.write(ring.capacity() as isize - 1, b"hp").unwrap();
                let mut b = [0u8; 1];
                ring.read(0, &mut b).unwrap();
                assert_eq!(&b, b"p");
            }
            // No 2 MiB pages reserved (`vm.nr_hugepages` is 0 on most machines);
            // `cargo xtask test` reserves them, so under CI=true this fails.
            Err(Error::Memfd(_) | Error::Map { .. }) => kfd_skip::prerequisite(
                "no 2 MiB huge pages available for a hugetlb memfd (vm.nr_hugepages)",
            ),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn a_failure_part_way_leaves_nothing_behind() {
        for fail_after in 0..4 {
            fail_map_after(Some(fail_after));
            let result = HostMirror::new(1);
            fail_map_after(None);
            assert!(
                matches!(result, Err(Error::Map { op: "mmap", .. })),
                "mapping {fail_after} fails: {result:?}"
            );
            let name = LAST_NAME.with_borrow(Clone::clone);
            assert_eq!(maps_of(&name), 0, "{name}: a view is left mapped");
            assert_eq!(fds_of(&name), 0, "{name}: the memfd is left open");
        }
    }
}
