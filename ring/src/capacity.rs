//! Ring capacities: a power of two, and a multiple of the allocation granule.

use crate::error::{Error, Result};
use crate::sys::page_size;

/// 2 MiB: the huge-page size, and the recommended allocation granule of dGPU VRAM pools.
pub const TWO_MIB: usize = 2 << 20;

/// The allocation granule a ring's capacity is rounded up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Granule {
    /// The system page size (4 KiB on x86-64).
    #[default]
    Page,
    /// A power-of-two multiple of the page size, e.g. [`TWO_MIB`] for GPU VRAM, whose large
    /// PTEs want 2 MiB (IREE rounds to the pool's recommended granule the same way).
    Bytes(usize),
    /// 2 MiB huge pages: the host memfd is made with `MFD_HUGETLB | MFD_HUGE_2MB`, so the
    /// system must have 2 MiB huge pages reserved (`vm.nr_hugepages`).
    HugeTlb2M,
}

impl Granule {
    /// The granule in bytes, checked to be a power-of-two multiple of the page size.
    pub fn bytes(self) -> Result<usize> {
        let bytes = match self {
            Granule::Page => page_size(),
            Granule::Bytes(n) => n,
            Granule::HugeTlb2M => TWO_MIB,
        };
        if !bytes.is_power_of_two() || bytes < page_size() {
            return Err(Error::Granule {
                granule: bytes,
                reason: "must be a power of two of at least the page size",
            });
        }
        Ok(bytes)
    }
}

/// The capacity of a ring asked to hold at least `min_capacity` bytes: rounded up to the
/// granule, then to a power of two (so positions wrap with a mask).
///
/// ```
/// use kfd_ring::{Granule, TWO_MIB, ring_capacity};
///
/// assert_eq!(ring_capacity(1, Granule::Page)?, 4096);
/// assert_eq!(ring_capacity(5000, Granule::Page)?, 8192);
/// assert_eq!(ring_capacity(1 << 20, Granule::Bytes(TWO_MIB))?, TWO_MIB);
/// assert_eq!(ring_capacity(3 << 20, Granule::Bytes(TWO_MIB))?, 4 << 20);
/// # Ok::<(), kfd_ring::Error>(())
/// ```
pub fn ring_capacity(min_capacity: usize, granule: Granule) -> Result<usize> {
    let granule = granule.bytes()?;
    if min_capacity == 0 {
        return Err(Error::Capacity {
            requested: min_capacity,
            reason: "a ring holds at least one byte",
        });
    }
    // Three mirrors of the capacity must fit the address space.
    min_capacity
        .max(granule)
        .checked_next_power_of_two()
        .filter(|cap| cap.checked_mul(3).is_some())
        .ok_or(Error::Capacity {
            requested: min_capacity,
            reason: "three power-of-two mirrors of it do not fit the address space",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_powers_of_two_multiples_of_the_granule() {
        let page = page_size();
        for (min, granule, want) in [
            (1, Granule::Page, page),
            (page, Granule::Page, page),
            (page + 1, Granule::Page, 2 * page),
            (3 * page, Granule::Page, 4 * page),
            (1, Granule::Bytes(TWO_MIB), TWO_MIB),
            (TWO_MIB + 1, Granule::Bytes(TWO_MIB), 2 * TWO_MIB),
            (5 * TWO_MIB, Granule::HugeTlb2M, 8 * TWO_MIB),
        ] {
            let cap = ring_capacity(min, granule).unwrap();
            assert_eq!(cap, want, "min {min} granule {granule:?}");
            assert!(cap.is_power_of_two() && cap >= min);
            assert!(cap.is_multiple_of(granule.bytes().unwrap()));
        }
    }

    #[test]
    fn bad_granules_and_capacities_are_refused() {
        assert!(matches!(
            ring_capacity(1, Granule::Bytes(3 * page_size())),
            Err(Error::Granule { .. })
        ));
        assert!(matches!(
            ring_capacity(1, Granule::Bytes(512)),
            Err(Error::Granule { .. })
        ));
        assert!(matches!(
            ring_capacity(0, Granule::Page),
            Err(Error::Capacity { .. })
        ));
        assert!(matches!(
            ring_capacity(usize::MAX / 2, Granule::Page),
            Err(Error::Capacity { .. })
        ));
    }
}
