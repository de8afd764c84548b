//! [`GpuId`], a KFD GPU id shown the way the kernel and this crate's messages show it: hex.

use std::fmt;
use std::str::FromStr;

/// A KFD GPU id: the `gpu_id` of a topology node, the GPU an ioctl names. `Display` and
/// `Debug` both print it in hex (`0x7396`), as every message of these crates and `kfdtool`
/// do, so a value logged with `{:?}` reads the same as in an error.
///
/// It is the type of GPU ids throughout the public API of `kfd-ioctl`, `kfd-queue`,
/// `kfd-svm` and `kfd-provider`: [`Node::gpu_id`](crate::topology::Node::gpu_id),
/// [`BufferObject::gpu_id`](crate::BufferObject::gpu_id),
/// [`Apertures::gpu_id`](crate::Apertures::gpu_id),
/// [`Location::Gpu`](crate::Location::Gpu), the error types. Methods that take one GPU take
/// `impl Into<GpuId>` and lists take `&[impl Into<GpuId> + Copy]`, so a `u32` from elsewhere
/// (a command line, a sysfs file) passes unchanged (an empty list then needs its type:
/// `&[] as &[GpuId]`). Only the raw ABI structs
/// ([`abi`](crate::abi)) keep the plain `u32` the kernel reads: convert with
/// [`GpuId::get`] / `u32::from` and `GpuId::from` there. A `GpuId` compares equal to the
/// `u32` it wraps.
///
/// ```
/// use kfd_ioctl::GpuId;
///
/// let gpu = GpuId::from(29590);
/// assert_eq!(gpu.to_string(), "0x7396");
/// assert_eq!(format!("{gpu:?}"), "0x7396");
/// assert_eq!("0x7396".parse::<GpuId>(), Ok(gpu));
/// assert_eq!("29590".parse::<GpuId>(), Ok(gpu));
/// assert!(gpu == 0x7396);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct GpuId(pub u32);

impl GpuId {
    /// The raw id the ioctls take.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Debug for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl From<u32> for GpuId {
    fn from(raw: u32) -> GpuId {
        GpuId(raw)
    }
}

impl From<GpuId> for u32 {
    fn from(id: GpuId) -> u32 {
        id.0
    }
}

impl PartialEq<u32> for GpuId {
    fn eq(&self, other: &u32) -> bool {
        self.0 == *other
    }
}

impl PartialEq<GpuId> for u32 {
    fn eq(&self, other: &GpuId) -> bool {
        *self == other.0
    }
}

/// A string that is not a GPU id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a GPU id (hex with 0x, as kfdtool prints it, or decimal)")]
pub struct ParseGpuIdError(pub String);

impl FromStr for GpuId {
    type Err = ParseGpuIdError;

    /// `0x7396` (hex, as printed) or `29590` (decimal, as sysfs writes it).
    fn from_str(s: &str) -> Result<GpuId, ParseGpuIdError> {
        let t = s.trim();
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => t.parse::<u32>(),
        };
        parsed.map(GpuId).map_err(|_| ParseGpuIdError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_are_hex_and_parse_round_trips() {
        for raw in [0u32, 1, 0x7396, u32::MAX] {
            let id = GpuId(raw);
            assert_eq!(id.to_string(), format!("{raw:#x}"));
            assert_eq!(format!("{id:?}"), format!("{raw:#x}"));
            assert_eq!(id.to_string().parse::<GpuId>(), Ok(id));
            assert_eq!(raw.to_string().parse::<GpuId>(), Ok(id));
        }
        assert!("0x".parse::<GpuId>().is_err());
        assert!("gpu".parse::<GpuId>().is_err());
        assert!("0x1_0000_0000".parse::<GpuId>().is_err());
    }
}
