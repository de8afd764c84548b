//! Access modes (IREE's names) and the per-GPU rights they become.

/// Who may touch a GPU-visible ring, in the terms of IREE's vmem ringbuffer.
///
/// The *owner* is the GPU whose memory holds the ring (device-local) or that the ring is
/// made for (host); *peers* are the other GPUs given to [`AccessMode::rights`].
///
/// KFD has no write-only right: a GPU mapping is readable, and writable or not (`WRITABLE`
/// on a buffer object, the absence of `GPU_RO` on an SVM range). Where IREE grants
/// write-only (the peers of [`ExclusiveConsumer`](Self::ExclusiveConsumer), the owner of
/// [`ExclusiveProducer`](Self::ExclusiveProducer)), this crate grants [`Right::ReadWrite`]:
/// the nearest right that still lets the producer write. A read-only right stays read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[doc(alias = "IREE_HAL_AMDGPU_ACCESS_MODE_SHARED")]
pub enum AccessMode {
    /// Every GPU reads and writes.
    Shared,
    /// Only the owner, reading and writing; peers get nothing.
    Exclusive,
    /// The owner reads; peers write (write-only in IREE, read-write here).
    ExclusiveConsumer,
    /// The owner writes (write-only in IREE, read-write here); peers read.
    ExclusiveProducer,
}

/// What one GPU may do with a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Right {
    /// Read only: the GPU mapping is not writable, and a write is a VM fault.
    Read,
    /// Read and write.
    ReadWrite,
}

/// A GPU and its right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuAccess {
    /// The GPU (`gpu_id`).
    pub gpu_id: u32,
    /// What it may do.
    pub right: Right,
}

impl AccessMode {
    /// The rights `owner` and each of `peers` get; GPUs without a right are left out (they
    /// get no mapping at all). A peer equal to the owner, or listed twice, counts once.
    ///
    /// ```
    /// use kfd_ring::{AccessMode, GpuAccess, Right};
    ///
    /// let rights = AccessMode::ExclusiveProducer.rights(1, &[2, 3]);
    /// assert_eq!(rights, [
    ///     GpuAccess { gpu_id: 1, right: Right::ReadWrite }, // write-only, approximated
    ///     GpuAccess { gpu_id: 2, right: Right::Read },
    ///     GpuAccess { gpu_id: 3, right: Right::Read },
    /// ]);
    /// assert_eq!(AccessMode::Exclusive.rights(1, &[2]).len(), 1);
    /// ```
    pub fn rights(self, owner: u32, peers: &[u32]) -> Vec<GpuAccess> {
        let (owner_right, peer_right) = match self {
            AccessMode::Shared => (Right::ReadWrite, Some(Right::ReadWrite)),
            AccessMode::Exclusive => (Right::ReadWrite, None),
            AccessMode::ExclusiveConsumer => (Right::Read, Some(Right::ReadWrite)),
            AccessMode::ExclusiveProducer => (Right::ReadWrite, Some(Right::Read)),
        };
        let mut out = vec![GpuAccess {
            gpu_id: owner,
            right: owner_right,
        }];
        if let Some(right) = peer_right {
            for &gpu_id in peers {
                if out.iter().all(|a| a.gpu_id != gpu_id) {
                    out.push(GpuAccess { gpu_id, right });
                }
            }
        }
        out
    }
}

/// The GPUs of `access` with right `right`, in order.
pub(crate) fn with_right(access: &[GpuAccess], right: Right) -> Vec<u32> {
    access
        .iter()
        .filter(|a| a.right == right)
        .map(|a| a.gpu_id)
        .collect()
}

/// Checks that `access` names each GPU once.
pub(crate) fn check_unique(access: &[GpuAccess]) -> crate::Result<()> {
    for (i, a) in access.iter().enumerate() {
        if access[..i].iter().any(|b| b.gpu_id == a.gpu_id) {
            return Err(crate::Error::Access {
                reason: "a GPU is listed twice",
            });
        }
    }
    if access.is_empty() {
        return Err(crate::Error::Access {
            reason: "no GPU is given access",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(mode: AccessMode) -> Vec<(u32, Right)> {
        mode.rights(10, &[20, 10, 30, 20])
            .into_iter()
            .map(|a| (a.gpu_id, a.right))
            .collect()
    }

    #[test]
    fn modes_map_to_iree_rights_with_write_only_widened() {
        use Right::*;
        assert_eq!(
            table(AccessMode::Shared),
            [(10, ReadWrite), (20, ReadWrite), (30, ReadWrite)]
        );
        assert_eq!(table(AccessMode::Exclusive), [(10, ReadWrite)]);
        assert_eq!(
            table(AccessMode::ExclusiveConsumer),
            [(10, Read), (20, ReadWrite), (30, ReadWrite)]
        );
        assert_eq!(
            table(AccessMode::ExclusiveProducer),
            [(10, ReadWrite), (20, Read), (30, Read)]
        );
    }

    #[test]
    fn duplicate_and_empty_access_lists_are_refused() {
        let a = GpuAccess {
            gpu_id: 1,
            right: Right::Read,
        };
        assert!(check_unique(&[a, a]).is_err());
        assert!(check_unique(&[]).is_err());
        assert!(check_unique(&[a]).is_ok());
    }
}
