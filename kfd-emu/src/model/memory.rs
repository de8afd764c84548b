//! Memory accounting (`amdgpu_amdkfd_reserve_mem_limit`) and the range allocator of the DRM
//! vma offset managers.

use std::collections::BTreeMap;

use kfd_ioctl::abi::AllocMemFlags;
use rustix::io::Errno;

/// The page size the model (and the kernel on x86_64) works in.
pub(super) const PAGE_SIZE: u64 = 4096;

/// `VRAM_AVAILABLITY_ALIGN`: AVAILABLE_MEMORY reports, and VRAM is accounted, in 2 MiB steps.
pub(super) const VRAM_ALIGN: u64 = 1 << 21;

/// Rounds `value` up to a multiple of `align` (a power of two); `None` on overflow.
pub(super) fn align_up(value: u64, align: u64) -> Option<u64> {
    Some(value.checked_add(align - 1)? & !(align - 1))
}

/// The KFD memory limits of a machine, as `amdgpu_amdkfd_gpuvm_init_mem_limits` and
/// `ESTIMATE_PT_SIZE` compute them from the RAM size (`si_meminfo`'s `totalram`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// `max_system_mem_limit`: GTT and USERPTR together.
    pub system: u64,
    /// `max_ttm_mem_limit`: GTT.
    pub ttm: u64,
    /// VRAM held back for page tables.
    pub pt_reserve: u64,
}

impl Limits {
    /// The limits of the host kfd-emu runs on (its `sysinfo` RAM).
    pub(super) fn of_host() -> Limits {
        let si = rustix::system::sysinfo();
        Limits::of_ram(si.totalram.saturating_mul(u64::from(si.mem_unit.max(1))))
    }

    /// The limits of the emulated machine: the kernel sizes them from the RAM it runs on, and
    /// the machine's RAM is what its topology says (the CPU nodes' system-memory banks, which
    /// the NUMA nodes' `meminfo` report too: `kfd_fill_mem_info_for_cpu` counts the node's
    /// managed pages, `si_meminfo` all of them), so that a preset's 2 × 256 GiB counts as such
    /// on a smaller host; a topology whose CPU nodes give no memory has the host's.
    pub(super) fn of_machine(machine: &crate::machine::Machine) -> Limits {
        match machine.system_memory() {
            0 => Limits::of_host(),
            ram => Limits::of_ram(ram),
        }
    }

    /// The limits of a machine with `ram` bytes of RAM.
    pub(super) fn of_ram(ram: u64) -> Limits {
        // AMDGPU_RESERVE_MEM_LIMIT = 1.5 GiB.
        let reserve = 3u64 << 29;
        let mut system = ram - (ram >> 6);
        if system < 2 * reserve {
            system >>= 1;
        } else {
            system -= reserve;
        }
        Limits {
            system,
            // ttm_tt_pages_limit: half of RAM by default.
            ttm: ram / 2,
            // ESTIMATE_PT_SIZE: max(RAM >> 14, AMDGPU_VM_RESERVED_VRAM = 8 MiB).
            pt_reserve: (ram >> 14).max(8 << 20),
        }
    }
}

/// What `amdgpu_amdkfd_reserve_mem_limit` charges for an allocation with `flags`: the first
/// of GTT, VRAM, USERPTR (in that order, as the kernel tests them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Charge {
    pub system: u64,
    pub ttm: u64,
    pub vram: u64,
}

impl Charge {
    /// The charge of `size` bytes with `flags` on a GPU that is (`apu`) or is not an
    /// `apu_prefer_gtt` APU, where `amdgpu_amdkfd_reserve_mem_limit` charges a VRAM
    /// allocation to system and TTM memory too, as it is a GTT BO; `None` for flags the kernel
    /// rejects ("Invalid BO type": ENOMEM).
    pub(super) fn on(flags: AllocMemFlags, size: u64, apu: bool) -> Option<Charge> {
        let zero = Charge {
            system: 0,
            ttm: 0,
            vram: 0,
        };
        if flags.intersects(AllocMemFlags::GTT) {
            Some(Charge {
                system: size,
                ttm: size,
                ..zero
            })
        } else if flags.intersects(AllocMemFlags::VRAM) {
            let system = if apu { size } else { 0 };
            Some(Charge {
                system,
                ttm: system,
                vram: size,
            })
        } else if flags.intersects(AllocMemFlags::USERPTR) {
            Some(Charge {
                system: size,
                ..zero
            })
        } else if flags.intersects(AllocMemFlags::DOORBELL | AllocMemFlags::MMIO_REMAP) {
            Some(zero)
        } else {
            None
        }
    }
}

/// The device-wide and system-wide counters the charges go to.
#[derive(Debug, Default)]
pub(super) struct Accounts {
    pub system_used: u64,
    pub ttm_used: u64,
    /// Per GPU: `vram_used` (page-aligned sizes) and `vram_used_aligned` (2 MiB steps; page
    /// steps on an APU).
    pub vram: Vec<(u64, u64)>,
    /// Per GPU: whether it is an `apu_prefer_gtt` APU (set once, from the machine).
    pub apu: Vec<bool>,
}

impl Accounts {
    pub(super) fn new(gpus: usize) -> Accounts {
        Accounts {
            system_used: 0,
            ttm_used: 0,
            vram: vec![(0, 0); gpus],
            apu: vec![false; gpus],
        }
    }

    /// What `vram_used_aligned` counts for `vram` bytes on GPU `gpu`: 2 MiB steps
    /// (`VRAM_AVAILABLITY_ALIGN`), the bytes themselves on an `apu_prefer_gtt` APU
    /// (`amdgpu_amdkfd_reserve_mem_limit`); `None` on overflow.
    fn aligned(&self, gpu: usize, vram: u64) -> Option<u64> {
        if self.apu.get(gpu).copied().unwrap_or(false) {
            Some(vram)
        } else {
            align_up(vram, VRAM_ALIGN)
        }
    }

    /// Reserves `charge` on GPU `gpu` whose VRAM is `vram_size`; ENOMEM past a limit.
    pub(super) fn reserve(
        &mut self,
        limits: &Limits,
        gpu: usize,
        vram_size: u64,
        charge: Charge,
    ) -> Result<(), Errno> {
        let over =
            |used: u64, need: u64, limit: u64| used.checked_add(need).is_none_or(|t| t > limit);
        let (vram_used, _) = self.vram[gpu];
        let vram_limit = vram_size.saturating_sub(limits.pt_reserve);
        if over(self.system_used, charge.system, limits.system)
            || over(self.ttm_used, charge.ttm, limits.ttm)
            || over(vram_used, charge.vram, vram_limit)
        {
            return Err(Errno::NOMEM);
        }
        let aligned = self.aligned(gpu, charge.vram).ok_or(Errno::NOMEM)?;
        self.system_used += charge.system;
        self.ttm_used += charge.ttm;
        self.vram[gpu].0 += charge.vram;
        self.vram[gpu].1 += aligned;
        Ok(())
    }

    /// Gives back what [`reserve`](Self::reserve) took.
    pub(super) fn unreserve(&mut self, gpu: usize, charge: Charge) {
        let aligned = self.aligned(gpu, charge.vram).unwrap_or(charge.vram);
        self.system_used = self.system_used.saturating_sub(charge.system);
        self.ttm_used = self.ttm_used.saturating_sub(charge.ttm);
        let (used, used_aligned) = &mut self.vram[gpu];
        *used = used.saturating_sub(charge.vram);
        *used_aligned = used_aligned.saturating_sub(aligned);
    }

    /// Reserves `bytes` of system memory only (what the kernel charges as USERPTR: SVM ranges
    /// with XNACK off); ENOMEM past the limit.
    pub(super) fn reserve_system(&mut self, limits: &Limits, bytes: u64) -> Result<(), Errno> {
        match self.system_used.checked_add(bytes) {
            Some(total) if total <= limits.system => {
                self.system_used = total;
                Ok(())
            }
            _ => Err(Errno::NOMEM),
        }
    }

    /// Gives back what [`reserve_system`](Self::reserve_system) took.
    pub(super) fn unreserve_system(&mut self, bytes: u64) {
        self.system_used = self.system_used.saturating_sub(bytes);
    }

    /// AVAILABLE_MEMORY of GPU `gpu` (`amdgpu_amdkfd_get_available_memory`): the VRAM left
    /// (size − `vram_used_aligned` − the page-table reserve) in 2 MiB steps; on an
    /// `apu_prefer_gtt` APU the least of that and the system and TTM memory left, in pages.
    /// Never negative.
    pub(super) fn available(&self, limits: &Limits, gpu: usize, vram_size: u64) -> u64 {
        let free = vram_size
            .saturating_sub(self.vram[gpu].1)
            .saturating_sub(limits.pt_reserve);
        if self.apu.get(gpu).copied().unwrap_or(false) {
            let system = limits.system.saturating_sub(self.system_used);
            let ttm = limits.ttm.saturating_sub(self.ttm_used);
            free.min(system).min(ttm) & !(PAGE_SIZE - 1)
        } else {
            free & !(VRAM_ALIGN - 1)
        }
    }
}

/// Best-fit allocator of ranges (`drm_mm` with `DRM_MM_INSERT_BEST`: the smallest free range
/// that fits, used from its start; among equal ones the lowest, where the kernel takes the one
/// freed last).
#[derive(Debug)]
pub(super) struct Slices {
    /// Free ranges: start → length.
    free: BTreeMap<u64, u64>,
}

impl Slices {
    /// Ranges of `[start, end)`.
    pub(super) fn new(start: u64, end: u64) -> Slices {
        let mut free = BTreeMap::new();
        free.insert(start, end - start);
        Slices { free }
    }

    /// The start of a free range of `size` bytes.
    pub(super) fn alloc(&mut self, size: u64) -> Option<u64> {
        let (start, len) = self
            .free
            .iter()
            .filter(|&(_, &len)| len >= size)
            .min_by_key(|&(&start, &len)| (len, start))
            .map(|(&start, &len)| (start, len))?;
        self.free.remove(&start);
        if len > size {
            self.free.insert(start + size, len - size);
        }
        Some(start)
    }

    /// Returns `[offset, offset + size)`.
    pub(super) fn free(&mut self, mut offset: u64, mut size: u64) {
        if let Some((&next, &next_len)) = self.free.range(offset + size..).next()
            && next == offset + size
        {
            self.free.remove(&next);
            size += next_len;
        }
        if let Some((&prev, &prev_len)) = self.free.range(..offset).next_back()
            && prev + prev_len == offset
        {
            self.free.remove(&prev);
            offset = prev;
            size += prev_len;
        }
        self.free.insert(offset, size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_best_fit_and_coalesce() {
        let mut s = Slices::new(0x1000, 0x10_0000);
        let a = s.alloc(0x1000).expect("a");
        let b = s.alloc(0x3000).expect("b");
        let c = s.alloc(0x1000).expect("c");
        let d = s.alloc(0x2000).expect("d");
        assert_eq!((a, b, c, d), (0x1000, 0x2000, 0x5000, 0x6000));
        s.free(b, 0x3000);
        s.free(d, 0x2000);
        // Holes: b (3 pages) and d + the tail (the rest): a page goes to the smallest.
        assert_eq!(s.alloc(0x1000), Some(0x2000), "the smallest hole that fits");
        assert_eq!(s.alloc(0x2000), Some(0x3000), "what is left of it");
        s.free(a, 0x1000);
        s.free(c, 0x1000);
        s.free(0x2000, 0x1000);
        s.free(0x3000, 0x2000);
        assert_eq!(s.free.len(), 1, "everything coalesced");
        assert!(s.alloc(0x1000_0000).is_none());
    }

    #[test]
    fn vram_is_accounted_in_2_mib_steps() {
        let limits = Limits {
            system: 1 << 40,
            ttm: 1 << 40,
            pt_reserve: 8 << 20,
        };
        let mut acc = Accounts::new(1);
        let vram = 1 << 30;
        let before = acc.available(&limits, 0, vram);
        assert_eq!(before, (1 << 30) - (8 << 20));
        let small = Charge::on(AllocMemFlags::VRAM, 4096, false).expect("charge");
        acc.reserve(&limits, 0, vram, small).expect("reserve");
        assert_eq!(acc.available(&limits, 0, vram), before - VRAM_ALIGN);
        let huge = Charge::on(AllocMemFlags::VRAM, vram, false).expect("charge");
        assert_eq!(acc.reserve(&limits, 0, vram, huge), Err(Errno::NOMEM));
        acc.unreserve(0, small);
        assert_eq!(acc.available(&limits, 0, vram), before);
    }
}
