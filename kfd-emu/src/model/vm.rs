//! A process's GPU virtual address space on one GPU: which VA ranges map which bytes.

use std::collections::BTreeMap;

/// One GPU mapping: `[start, end)` shows `backing` from byte `offset` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mapping {
    /// One past the last mapped byte.
    pub end: u64,
    /// The backing store (see [`objects`](super::objects)).
    pub backing: u64,
    /// Where in the backing `start` is.
    pub offset: u64,
    /// Whether the PTEs are writable (the BO has `WRITABLE`).
    pub writable: bool,
    /// The BO handle that made the mapping.
    pub handle: u64,
}

impl Mapping {
    /// Whether this is one of the VM's DRM file's GEM_VA mappings (its `handle` holds the GEM
    /// handle, whose upper half, a KFD handle's gpu_id, is 0).
    pub(super) fn is_gem(&self) -> bool {
        self.handle >> 32 == 0
    }
}

/// The mappings of one VM, by start address.
#[derive(Debug, Default)]
pub(super) struct Vm {
    maps: BTreeMap<u64, Mapping>,
}

/// The largest GPU VA + 1 of a 48-bit VM (`max_pfn << 12`).
pub(super) const VM_SIZE: u64 = 1 << 48;

impl Vm {
    /// Whether `[start, end)` overlaps a mapping (`amdgpu_vm_it_iter_first`).
    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        if let Some((_, m)) = self.maps.range(..end).next_back() {
            return m.end > start;
        }
        false
    }

    /// The first mapping (by start) that overlaps `[start, end)`, as `(start, end)`
    /// (`amdgpu_vm_it_iter_first` returning a node).
    pub(super) fn first_overlap(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        if let Some((&s, m)) = self.maps.range(..start).next_back()
            && m.end > start
        {
            return Some((s, m.end));
        }
        self.maps.range(start..end).next().map(|(&s, m)| (s, m.end))
    }

    /// Adds a mapping at `start`; the caller checked [`overlaps`](Self::overlaps).
    pub(super) fn insert(&mut self, start: u64, mapping: Mapping) {
        self.maps.insert(start, mapping);
    }

    /// Removes every mapping `handle` made; returns how many.
    pub(super) fn remove_handle(&mut self, handle: u64) -> usize {
        let before = self.maps.len();
        self.maps.retain(|_, m| m.handle != handle);
        before - self.maps.len()
    }

    /// Keeps only the mappings `keep` says yes to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, &Mapping) -> bool) {
        self.maps.retain(|&s, m| keep(s, m));
    }

    /// The mapping that contains `va`, with its start.
    pub(super) fn lookup(&self, va: u64) -> Option<(u64, Mapping)> {
        let (&start, &m) = self.maps.range(..=va).next_back()?;
        (va < m.end).then_some((start, m))
    }

    /// Every mapping, by start.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Mapping)> + '_ {
        self.maps.iter().map(|(&s, m)| (s, m))
    }

    /// How many mappings there are.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.maps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(end: u64, handle: u64) -> Mapping {
        Mapping {
            end,
            backing: 0,
            offset: 0,
            writable: true,
            handle,
        }
    }

    #[test]
    fn overlap_is_half_open() {
        let mut vm = Vm::default();
        vm.insert(0x1000, m(0x3000, 1));
        assert!(vm.overlaps(0x2000, 0x2001));
        assert!(vm.overlaps(0x0, 0x1001));
        assert!(!vm.overlaps(0x3000, 0x4000));
        assert!(!vm.overlaps(0x0, 0x1000));
        assert_eq!(vm.lookup(0x2fff).map(|(s, _)| s), Some(0x1000));
        assert_eq!(vm.lookup(0x3000), None);
        assert_eq!(vm.remove_handle(1), 1);
        assert_eq!(vm.len(), 0);
    }
}
