//! The SVM range tree (the kernel's `svms->objects` interval tree): ranges by start page, each
//! with its attributes and the state of every page in it.
//!
//! Ranges never overlap and are never merged. Every lookup is a `BTreeMap` range query, so an
//! operation touching `k` ranges costs `O(log n + k)`.

use std::collections::BTreeMap;

use super::super::memory::PAGE_SIZE;

use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_FLAG_COHERENT, KFD_IOCTL_SVM_FLAG_HOST_ACCESS, KFD_IOCTL_SVM_LOCATION_UNDEFINED,
};

/// The granularity of a range nobody set (`amdgpu.svm_default_granularity`'s default).
pub(super) const DEFAULT_GRANULARITY: u8 = 9;
/// The flags of a range nobody set.
pub(super) const DEFAULT_FLAGS: u32 = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT;

/// The attributes of a range (GPUs as bits of their index in the machine, which is also the
/// pdd index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Attrs {
    pub preferred: u32,
    pub prefetch: u32,
    pub flags: u32,
    pub granularity: u8,
    /// `bitmap_access`.
    pub access: u64,
    /// `bitmap_aip` (access in place).
    pub aip: u64,
}

impl Attrs {
    /// `svm_range_set_default_attributes`, with the access bitmap of the process's XNACK mode.
    pub(super) fn defaults(access: u64) -> Attrs {
        Attrs {
            preferred: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            prefetch: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            flags: DEFAULT_FLAGS,
            granularity: DEFAULT_GRANULARITY,
            access,
            aip: 0,
        }
    }
}

/// One page of a range: where its bytes are (by the kernel's bookkeeping) and which GPUs have
/// a PTE for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct PageState {
    /// 0 for system memory, else the gpu_id whose VRAM holds it.
    pub loc: u32,
    /// GPUs (bits of the index) whose page tables map it.
    pub mapped: u64,
    /// GPUs whose PTE for it is writable.
    pub writable: u64,
}

/// The pages of a range as runs of equal state: `(first page offset, state)`, ascending, the
/// first at 0; a run ends where the next begins (the last at `len`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pages {
    len: u64,
    runs: Vec<(u64, PageState)>,
}

impl Pages {
    /// `len` pages in system memory, mapped nowhere.
    pub(super) fn new(len: u64) -> Pages {
        Pages {
            len,
            runs: vec![(0, PageState::default())],
        }
    }

    /// The index of the run holding page `off`.
    fn run_of(&self, off: u64) -> usize {
        self.runs.partition_point(|&(first, _)| first <= off) - 1
    }

    /// Makes a run begin at `off` (`off < len`).
    fn cut(&mut self, off: u64) {
        let i = self.run_of(off);
        if self.runs[i].0 != off {
            let state = self.runs[i].1;
            self.runs.insert(i + 1, (off, state));
        }
    }

    /// Merges neighbouring runs that became equal.
    fn coalesce(&mut self) {
        self.runs.dedup_by(|next, prev| next.1 == prev.1);
    }

    /// Applies `f` to the pages `[from, to]` (offsets, inclusive).
    pub(super) fn update(&mut self, from: u64, to: u64, mut f: impl FnMut(&mut PageState)) {
        debug_assert!(from <= to && to < self.len);
        self.cut(from);
        if to + 1 < self.len {
            self.cut(to + 1);
        }
        for run in &mut self.runs {
            if run.0 >= from && run.0 <= to {
                f(&mut run.1);
            }
        }
        self.coalesce();
    }

    /// The runs over `[from, to]`, clipped: `(first, last, state)`.
    pub(super) fn runs(
        &self,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = (u64, u64, PageState)> + '_ {
        let start = self.run_of(from);
        self.runs[start..]
            .iter()
            .enumerate()
            .map(move |(k, &(first, state))| {
                let end = self
                    .runs
                    .get(start + k + 1)
                    .map_or(self.len, |&(next, _)| next);
                (first.max(from), (end - 1).min(to), state)
            })
            .take_while(move |&(first, _, _)| first <= to)
    }

    /// The state of page `off`.
    pub(super) fn get(&self, off: u64) -> PageState {
        self.runs[self.run_of(off)].1
    }

    /// How many pages of `[from, to]` satisfy `pred`.
    pub(super) fn count(&self, from: u64, to: u64, pred: impl Fn(&PageState) -> bool) -> u64 {
        self.runs(from, to)
            .filter(|(_, _, s)| pred(s))
            .map(|(a, b, _)| b - a + 1)
            .sum()
    }

    /// Splits at `at`: `self` keeps `[0, at)`, the result holds the rest, rebased to 0.
    fn split_off(&mut self, at: u64) -> Pages {
        self.cut(at);
        let i = self.run_of(at);
        let tail = self.runs.split_off(i);
        let tail = Pages {
            len: self.len - at,
            runs: tail.into_iter().map(|(first, s)| (first - at, s)).collect(),
        };
        self.len = at;
        tail
    }
}

/// One SVM range (`struct svm_range`), `[start, last]` in pages.
#[derive(Debug, Clone)]
pub(super) struct Range {
    pub last: u64,
    pub attrs: Attrs,
    /// `actual_loc`: the GPU whose VRAM holds (or held, for a split-off piece) pages of it.
    pub actual: u32,
    /// `mapped_to_gpu`.
    pub mapped_to_gpu: bool,
    /// Evicted by an invalidation, waiting for the restore worker.
    pub invalid: bool,
    /// When its VRAM BO was created ([`Svm::bo_clock`]): TTM's LRU order of the BOs.
    pub bo_seq: u64,
    /// `validate_timestamp`: the model clock's `CLOCK_BOOTTIME` ns when
    /// `svm_range_validate_and_map` last mapped it, 0 if never (a new range, a split-off
    /// piece: `svm_range_new` zero-allocates it).
    pub validated_ns: u64,
    pub pages: Pages,
}

impl Range {
    /// A new range of `npages` pages with `attrs`, all in system memory.
    pub(super) fn new(npages: u64, attrs: Attrs) -> Range {
        Range {
            last: 0,
            attrs,
            actual: 0,
            mapped_to_gpu: false,
            invalid: false,
            bo_seq: 0,
            validated_ns: 0,
            pages: Pages::new(npages),
        }
    }
}

/// The ranges of one process, by start page.
#[derive(Debug, Default)]
pub(super) struct RangeTree {
    map: BTreeMap<u64, Range>,
}

impl RangeTree {
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every range, by start.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Range)> + '_ {
        self.map.iter().map(|(&s, r)| (s, r))
    }

    /// Adds `[start, last]`; the caller made sure nothing overlaps it.
    pub(super) fn insert(&mut self, start: u64, last: u64, mut range: Range) {
        debug_assert_eq!(range.pages.len, last - start + 1);
        range.last = last;
        self.map.insert(start, range);
    }

    pub(super) fn remove(&mut self, start: u64) -> Option<Range> {
        self.map.remove(&start)
    }

    pub(super) fn get(&self, start: u64) -> Option<&Range> {
        self.map.get(&start)
    }

    pub(super) fn get_mut(&mut self, start: u64) -> Option<&mut Range> {
        self.map.get_mut(&start)
    }

    /// The range holding `page`, by start.
    pub(super) fn containing(&self, page: u64) -> Option<u64> {
        let (&start, r) = self.map.range(..=page).next_back()?;
        (page <= r.last).then_some(start)
    }

    /// The starts of the ranges overlapping `[start, last]`, ascending.
    pub(super) fn overlapping(&self, start: u64, last: u64) -> Vec<u64> {
        let mut keys = Vec::new();
        if start > last {
            return keys;
        }
        if let Some((&s, r)) = self.map.range(..start).next_back()
            && r.last >= start
        {
            keys.push(s);
        }
        keys.extend(self.map.range(start..=last).map(|(&s, _)| s));
        keys
    }

    /// Whether any range overlaps `[start, last]`.
    pub(super) fn overlaps(&self, start: u64, last: u64) -> bool {
        if start > last {
            return false;
        }
        if let Some((_, r)) = self.map.range(..start).next_back()
            && r.last >= start
        {
            return true;
        }
        self.map.range(start..=last).next().is_some()
    }

    /// The start of the first range after `page`.
    pub(super) fn next_after(&self, page: u64) -> Option<u64> {
        self.map.range(page + 1..).next().map(|(&s, _)| s)
    }

    /// The last page of the last range that starts at or before `page`.
    pub(super) fn last_of_previous(&self, page: u64) -> Option<u64> {
        self.map.range(..=page).next_back().map(|(_, r)| r.last)
    }

    /// `svm_range_split`: splits the range holding `page` so that a range starts at `page`
    /// (both pieces keep the attributes, the location and the mapping state); returns whether
    /// it split.
    pub(super) fn split_at(&mut self, page: u64) -> bool {
        let Some(start) = self.containing(page) else {
            return false;
        };
        if start == page {
            return false;
        }
        let Some(head) = self.map.get_mut(&start) else {
            return false;
        };
        let tail = Range {
            last: head.last,
            attrs: head.attrs,
            actual: head.actual,
            mapped_to_gpu: head.mapped_to_gpu,
            invalid: head.invalid,
            bo_seq: head.bo_seq,
            validated_ns: 0,
            pages: head.pages.split_off(page - start),
        };
        head.last = page - 1;
        self.map.insert(page, tail);
        true
    }
}

/// A process's SVM state (`struct svm_range_list`).
#[derive(Debug, Default)]
pub(in crate::model) struct Svm {
    pub(super) ranges: RangeTree,
    /// Queues were evicted for an invalidation and the restore worker has not run yet.
    pub(super) evicted: bool,
    /// Pages moved between system memory and VRAM since the supervisor was last told
    /// (`svm::cpu`).
    pub(super) cpu_dirty: bool,
    /// Counts the VRAM BOs created for the ranges (their [`Range::bo_seq`]).
    pub(super) bo_clock: u64,
}

impl Svm {
    /// How many bytes the process's ranges cover.
    pub(super) fn bytes(&self) -> u64 {
        self.ranges
            .iter()
            .map(|(start, r)| (r.last - start + 1) * PAGE_SIZE)
            .sum()
    }

    /// Whether the process has no range.
    pub(in crate::model) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The memory the ranges cover, as `[start, end)` byte spans (neighbouring ranges
    /// joined), ascending.
    pub(in crate::model) fn spans(&self) -> Vec<(u64, u64)> {
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for (start, r) in self.ranges.iter() {
            let (s, e) = (start * PAGE_SIZE, (r.last + 1) * PAGE_SIZE);
            match spans.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => spans.push((s, e)),
            }
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(n: u64) -> Range {
        Range::new(n, Attrs::defaults(0))
    }

    #[test]
    fn pages_update_split_and_count() {
        let mut p = Pages::new(10);
        p.update(2, 4, |s| s.loc = 7);
        assert_eq!(p.count(0, 9, |s| s.loc == 7), 3);
        assert_eq!(p.get(4).loc, 7);
        assert_eq!(p.get(5).loc, 0);
        p.update(5, 5, |s| s.loc = 7);
        assert_eq!(p.runs.len(), 3, "equal neighbours coalesce: {:?}", p.runs);
        let tail = p.split_off(3);
        assert_eq!((p.len, tail.len), (3, 7));
        assert_eq!(tail.get(0).loc, 7);
        assert_eq!(tail.get(2).loc, 7);
        assert_eq!(tail.get(3).loc, 0);
        let runs: Vec<_> = tail.runs(1, 5).collect();
        assert_eq!(runs.first().map(|r| (r.0, r.1)), Some((1, 2)));
        assert_eq!(runs.last().map(|r| (r.0, r.1)), Some((3, 5)));
    }

    #[test]
    fn tree_overlap_queries_and_splits() {
        let mut t = RangeTree::default();
        t.insert(10, 19, range(10));
        t.insert(20, 29, range(10));
        t.insert(40, 49, range(10));
        assert_eq!(t.overlapping(15, 40), vec![10, 20, 40]);
        assert_eq!(t.overlapping(30, 39), Vec::<u64>::new());
        assert!(t.overlaps(19, 19) && !t.overlaps(30, 39));
        assert_eq!(t.containing(29), Some(20));
        assert_eq!(t.containing(30), None);
        assert_eq!(t.next_after(20), Some(40));
        assert_eq!(t.last_of_previous(35), Some(29));
        assert!(t.split_at(25));
        assert!(!t.split_at(25), "already a boundary");
        assert_eq!(t.get(20).map(|r| r.last), Some(24));
        assert_eq!(t.get(25).map(|r| (r.last, r.pages.len)), Some((29, 5)));
        assert_eq!(t.len(), 4);
    }
}
