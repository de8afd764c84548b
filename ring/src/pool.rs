//! Memory-pool selection from the KFD topology, as IREE's
//! `iree_hal_amdgpu_find_{coarse,fine}_global_memory_pool` do over ROCr's pools.

use std::fmt;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::{HeapType, Topology};

use crate::capacity::TWO_MIB;
use crate::error::{Error, Result};
use crate::sys::page_size;

/// How coherent a pool's memory is between the GPU and its peers (and the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// Coarse-grained: coherence only at dispatch boundaries; the fastest GPU access.
    Coarse,
    /// Fine-grained: coherent while kernels run (the `COHERENT` allocation flag, as
    /// libhsakmt sets for a non-coarse-grained allocation).
    Fine,
}

/// Where a pool's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// The GPU's own VRAM.
    Device,
    /// System memory the GPU reaches over its link.
    System,
}

/// A memory pool of one GPU, found in the topology, and how to allocate from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPool {
    /// The GPU.
    pub gpu_id: u32,
    /// VRAM or system memory.
    pub location: Location,
    /// Coarse or fine grained.
    pub granularity: Granularity,
    /// The heap of the memory bank behind the pool.
    pub heap: HeapType,
    /// Whether the CPU can map the memory (system memory; VRAM only behind a large BAR).
    pub host_accessible: bool,
    /// Whether host access to the memory is cache coherent: always for system memory; for
    /// VRAM only on GPUs with `HSA_CAP_FLAGS_COHERENTHOSTACCESS` (e.g. MI300A).
    pub coherent_host: bool,
    /// The `ALLOC_MEMORY_OF_GPU` flags for a writable allocation from this pool (the domain,
    /// `WRITABLE`, `COHERENT` when fine grained, `PUBLIC` when host accessible VRAM).
    pub alloc_flags: AllocMemFlags,
    /// The recommended allocation granule: 2 MiB for VRAM (large PTEs; ROCr reports 2048 KB
    /// for dGPU VRAM pools), the page size for system memory.
    pub granule: usize,
}

impl MemoryPool {
    /// The GPU's global pool of `granularity`: its VRAM when it has any, else (an APU, or a
    /// GPU without VRAM banks) system memory, like IREE's pool search on an agent.
    pub fn find(topology: &Topology, gpu_id: u32, granularity: Granularity) -> Result<MemoryPool> {
        MemoryPool::device(topology, gpu_id, granularity)
            .or_else(|_| MemoryPool::system(topology, gpu_id, granularity))
    }

    /// The GPU's VRAM pool of `granularity`.
    pub fn device(
        topology: &Topology,
        gpu_id: u32,
        granularity: Granularity,
    ) -> Result<MemoryPool> {
        let node = gpu_node(topology, gpu_id, "device")?;
        let bank = node
            .mem_banks
            .iter()
            .find(|b| b.heap() == HeapType::FrameBufferPublic)
            .or_else(|| node.mem_banks.iter().find(|b| b.heap().is_vram()))
            .filter(|b| b.size_in_bytes > 0)
            .ok_or(Error::NoPool {
                gpu_id,
                what: "device",
                reason: "the GPU has no frame-buffer memory bank",
            })?;
        let heap = bank.heap();
        let host_accessible = heap == HeapType::FrameBufferPublic;
        let mut alloc_flags =
            AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::NO_SUBSTITUTE;
        if host_accessible {
            alloc_flags |= AllocMemFlags::PUBLIC;
        }
        if granularity == Granularity::Fine {
            alloc_flags |= AllocMemFlags::COHERENT;
        }
        Ok(MemoryPool {
            gpu_id,
            location: Location::Device,
            granularity,
            heap,
            host_accessible,
            coherent_host: node.capability().coherent_host_access(),
            alloc_flags,
            granule: TWO_MIB,
        })
    }

    /// The GPU's system-memory pool of `granularity` (GTT).
    pub fn system(
        topology: &Topology,
        gpu_id: u32,
        granularity: Granularity,
    ) -> Result<MemoryPool> {
        gpu_node(topology, gpu_id, "system")?;
        let mut alloc_flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        if granularity == Granularity::Fine {
            alloc_flags |= AllocMemFlags::COHERENT;
        }
        Ok(MemoryPool {
            gpu_id,
            location: Location::System,
            granularity,
            heap: HeapType::System,
            host_accessible: true,
            coherent_host: true,
            alloc_flags,
            granule: page_size(),
        })
    }
}

fn gpu_node<'t>(
    topology: &'t Topology,
    gpu_id: u32,
    what: &'static str,
) -> Result<&'t kfd_ioctl::topology::Node> {
    topology
        .node_by_gpu_id(gpu_id)
        .filter(|n| n.is_gpu())
        .ok_or(Error::NoPool {
            gpu_id,
            what,
            reason: "no GPU node with that gpu_id in the topology",
        })
}

impl fmt::Display for MemoryPool {
    /// Says which pool was chosen: `GPU 0x1b2c: fine-grained VRAM (frame buffer, public,
    /// host-accessible, non-coherent host access), granule 2048 KiB, flags …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grain = match self.granularity {
            Granularity::Coarse => "coarse-grained",
            Granularity::Fine => "fine-grained",
        };
        let (place, heap) = match (self.location, self.heap) {
            (Location::Device, HeapType::FrameBufferPublic) => ("VRAM", "frame buffer, public"),
            (Location::Device, _) => ("VRAM", "frame buffer, private"),
            (Location::System, _) => ("system memory", "system heap"),
        };
        write!(
            f,
            "GPU {:#x}: {grain} {place} ({heap}, {}, {} host access), granule {} KiB, flags {:?}",
            self.gpu_id,
            if self.host_accessible {
                "host-accessible"
            } else {
                "not host-accessible"
            },
            if self.coherent_host {
                "coherent"
            } else {
                "non-coherent"
            },
            self.granule / 1024,
            self.alloc_flags
        )
    }
}

#[cfg(test)]
mod tests {
    use kfd_ioctl::topology::{MemBank, Node, NodeProperties};

    use super::*;

    const GPU: u32 = 0x1234;

    /// A topology of one GPU node with the given memory banks and capability bits.
    fn gpu_with(banks: &[(HeapType, u64)], capability: u64) -> Topology {
        let properties = NodeProperties::from_entries(vec![
            ("simd_count".to_owned(), 416),
            ("capability".to_owned(), capability),
        ]);
        let node = Node {
            id: 1,
            gpu_id: Some(GPU),
            properties,
            mem_banks: banks
                .iter()
                .enumerate()
                .map(|(i, &(heap, size))| MemBank {
                    id: i as u32,
                    heap_type: heap.raw(),
                    size_in_bytes: size,
                    ..MemBank::default()
                })
                .collect(),
            ..Node::default()
        };
        Topology {
            nodes: vec![node],
            ..Topology::default()
        }
    }

    #[test]
    fn a_gpu_without_vram_banks_falls_back_to_system_pools() {
        let topo = gpu_with(&[], 0);
        for grain in [Granularity::Coarse, Granularity::Fine] {
            let pool = MemoryPool::find(&topo, GPU, grain).unwrap();
            assert_eq!(pool.granularity, grain);
            assert_eq!(pool.location, Location::System, "{pool}");
            assert!(pool.host_accessible && pool.coherent_host);
            assert_eq!(pool.granule, page_size());
            assert!(
                pool.alloc_flags
                    .contains(AllocMemFlags::GTT | AllocMemFlags::WRITABLE)
            );
            assert_eq!(
                pool.alloc_flags.contains(AllocMemFlags::COHERENT),
                grain == Granularity::Fine
            );
        }
        assert!(matches!(
            MemoryPool::device(&topo, GPU, Granularity::Coarse),
            Err(Error::NoPool { .. })
        ));
        assert!(matches!(
            MemoryPool::find(&topo, 0xdead, Granularity::Coarse),
            Err(Error::NoPool { .. })
        ));
    }

    #[test]
    fn public_vram_is_a_host_accessible_device_pool() {
        let topo = gpu_with(&[(HeapType::FrameBufferPublic, 64 << 30)], 0);
        let pool = MemoryPool::find(&topo, GPU, Granularity::Fine).unwrap();
        assert_eq!(pool.location, Location::Device);
        assert!(pool.host_accessible);
        assert!(!pool.coherent_host);
        assert_eq!(pool.granule, TWO_MIB);
        assert!(
            pool.alloc_flags
                .contains(AllocMemFlags::VRAM | AllocMemFlags::PUBLIC | AllocMemFlags::COHERENT)
        );
        let text = pool.to_string();
        assert!(text.contains("fine-grained VRAM"), "{text}");
        assert!(text.contains("host-accessible"), "{text}");
        let coarse = MemoryPool::find(&topo, GPU, Granularity::Coarse).unwrap();
        assert!(!coarse.alloc_flags.contains(AllocMemFlags::COHERENT));
    }

    #[test]
    fn private_vram_is_not_host_accessible_and_coherent_hosts_say_so() {
        let topo = gpu_with(
            &[(HeapType::FrameBufferPrivate, 16 << 30)],
            u64::from(kfd_ioctl::topology::Capability::COHERENT_HOST_ACCESS.bits()),
        );
        let pool = MemoryPool::find(&topo, GPU, Granularity::Coarse).unwrap();
        assert_eq!(pool.location, Location::Device);
        assert!(!pool.host_accessible);
        assert!(!pool.alloc_flags.contains(AllocMemFlags::PUBLIC));
        assert!(pool.coherent_host);
        assert!(pool.to_string().contains("not host-accessible"));
    }
}
