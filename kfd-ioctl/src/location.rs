//! Where SVM pages live, as SVM attributes and SMI event records name it: [`Location`].

use std::fmt;

use crate::{GpuId, abi};

/// A memory location as SVM attributes and SMI events name it: system memory, a GPU's VRAM,
/// or "undefined".
///
/// The raw encoding is a `u32`: `0` is system memory
/// ([`KFD_IOCTL_SVM_LOCATION_SYSMEM`](abi::KFD_IOCTL_SVM_LOCATION_SYSMEM)), `0xffff_ffff` is
/// undefined ([`KFD_IOCTL_SVM_LOCATION_UNDEFINED`](abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED)),
/// anything else is a `gpu_id` (the topology's `gpu_id`, never a node index).
///
/// [`Location::from_raw`] and [`Location::to_raw`] are inverse bijections as long as
/// `Gpu(id)` is only built with a real `gpu_id` (never 0 or `0xffff_ffff`); `from_raw` never
/// produces those two.
///
/// ```
/// use kfd_ioctl::{GpuId, Location};
///
/// assert_eq!(Location::from_raw(0), Location::System);
/// assert_eq!(Location::from_raw(0x1a2b), Location::Gpu(GpuId(0x1a2b)));
/// assert_eq!(Location::Undefined.to_raw(), 0xffff_ffff);
/// assert_eq!(Location::Gpu(GpuId(0x1a2b)).to_string(), "gpu 0x1a2b");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// System memory (`KFD_IOCTL_SVM_LOCATION_SYSMEM`, 0).
    #[doc(alias = "KFD_IOCTL_SVM_LOCATION_SYSMEM")]
    System,
    /// The VRAM of the GPU with this `gpu_id`.
    Gpu(GpuId),
    /// No location: as a preferred location, "no preference"; in a GET answer, "the pages of
    /// the range disagree" (`KFD_IOCTL_SVM_LOCATION_UNDEFINED`, `0xffff_ffff`).
    #[doc(alias = "KFD_IOCTL_SVM_LOCATION_UNDEFINED")]
    Undefined,
}

impl Location {
    /// Decodes the kernel's `u32`.
    pub const fn from_raw(raw: u32) -> Location {
        match raw {
            abi::KFD_IOCTL_SVM_LOCATION_SYSMEM => Location::System,
            abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED => Location::Undefined,
            gpu_id => Location::Gpu(GpuId(gpu_id)),
        }
    }

    /// Encodes as the kernel's `u32`.
    pub const fn to_raw(self) -> u32 {
        match self {
            Location::System => abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
            Location::Undefined => abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            Location::Gpu(gpu_id) => gpu_id.get(),
        }
    }

    /// The `gpu_id` when this is a GPU's VRAM.
    pub const fn gpu_id(self) -> Option<GpuId> {
        match self {
            Location::Gpu(gpu_id) => Some(gpu_id),
            _ => None,
        }
    }
}

impl From<u32> for Location {
    fn from(raw: u32) -> Location {
        Location::from_raw(raw)
    }
}

impl From<Location> for u32 {
    fn from(location: Location) -> u32 {
        location.to_raw()
    }
}

impl fmt::Debug for Location {
    /// `System`, `Gpu(0x1a2b)`, `Undefined`: the GPU id in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::System => f.write_str("System"),
            Location::Gpu(gpu_id) => write!(f, "Gpu({gpu_id})"),
            Location::Undefined => f.write_str("Undefined"),
        }
    }
}

impl fmt::Display for Location {
    /// `system`, `gpu 0x1a2b` or `undefined`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::System => f.write_str("system"),
            Location::Gpu(gpu_id) => write!(f, "gpu {gpu_id}"),
            Location::Undefined => f.write_str("undefined"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_locations_round_trip() {
        for raw in [0, 1, 0x1a2b, 0xffff_fffe, 0xffff_ffff] {
            assert_eq!(Location::from_raw(raw).to_raw(), raw);
        }
        assert_eq!(Location::from_raw(0xffff_ffff), Location::Undefined);
        assert_eq!(Location::Gpu(GpuId(7)).gpu_id(), Some(GpuId(7)));
        assert_eq!(Location::System.gpu_id(), None);
    }
}
