//! The address-range bookkeeping of a provider: the pieces handed out (what `free`, `split`
//! and `merge` act on) over the chunks that back them (what KFD and `mmap` hand out).
//!
//! A chunk is one backing object — a buffer object over a CPU range, or an SVM range — that
//! KFD cannot split. Pieces are tracked over chunks: `alloc` makes a chunk and one piece
//! covering its bytes; `split` and `merge` only reshape pieces; a chunk counts the bytes of it
//! that live pieces cover and is released when that count reaches zero. So the halves of a
//! split can be freed in any order, and a merge of pieces over two chunks frees both when the
//! merged piece is freed.
//!
//! Both maps are `BTreeMap`s keyed by start address: finding a piece by its pointer, or the
//! piece or chunk that contains an address, is O(log n).

use std::collections::BTreeMap;

use super::error::{Error, Result};

/// A chunk and the bytes of it that live pieces cover.
#[derive(Debug)]
pub(crate) struct Slot<C> {
    /// The bytes the chunk backs, from its base (the allocation's size, not page rounded).
    pub len: usize,
    /// How many of those bytes live pieces cover.
    live: usize,
    /// The backing object.
    pub chunk: C,
}

/// Why a pointer given to `free` is not a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// No piece contains the address.
    Unknown,
    /// The address is inside the piece starting at `start`.
    Interior { start: usize },
    /// The piece starts there but is `tracked` bytes long.
    Size { tracked: usize },
}

/// What [`Tracker::remove`] took out.
#[derive(Debug)]
pub(crate) struct Removed<C> {
    /// The size of the removed piece.
    pub size: usize,
    /// The chunks that no live piece covers any more, with their bases.
    pub emptied: Vec<(usize, C)>,
}

/// Pieces over chunks (see the module docs).
#[derive(Debug)]
pub(crate) struct Tracker<C> {
    pieces: BTreeMap<usize, usize>,
    chunks: BTreeMap<usize, Slot<C>>,
}

impl<C> Default for Tracker<C> {
    fn default() -> Self {
        Tracker {
            pieces: BTreeMap::new(),
            chunks: BTreeMap::new(),
        }
    }
}

impl<C> Tracker<C> {
    /// Adds a fresh chunk backing `[base, base + len)` and one piece covering it.
    pub(crate) fn insert(&mut self, base: usize, len: usize, chunk: C) {
        debug_assert!(len > 0 && self.chunk_containing(base).is_none());
        self.pieces.insert(base, len);
        self.chunks.insert(
            base,
            Slot {
                len,
                live: len,
                chunk,
            },
        );
    }

    /// The number of live pieces.
    pub(crate) fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// The number of live chunks.
    pub(crate) fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The piece `(start, size)` that contains `addr`.
    pub(crate) fn piece_containing(&self, addr: usize) -> Option<(usize, usize)> {
        let (&start, &size) = self.pieces.range(..=addr).next_back()?;
        (addr - start < size).then_some((start, size))
    }

    /// The chunk `(base, slot)` whose bytes contain `addr`.
    pub(crate) fn chunk_containing(&self, addr: usize) -> Option<(usize, &Slot<C>)> {
        let (&base, slot) = self.chunks.range(..=addr).next_back()?;
        (addr - base < slot.len).then_some((base, slot))
    }

    /// [`Tracker::chunk_containing`], mutably.
    pub(crate) fn chunk_containing_mut(&mut self, addr: usize) -> Option<(usize, &mut Slot<C>)> {
        let (&base, slot) = self.chunks.range_mut(..=addr).next_back()?;
        (addr - base < slot.len).then_some((base, slot))
    }

    /// Checks that `ptr` is the start of a piece of exactly `size` bytes (any size when
    /// `size` is `None`) and returns its size.
    pub(crate) fn check_piece(&self, ptr: usize, size: Option<usize>) -> Result<usize, Miss> {
        match self.pieces.get(&ptr) {
            Some(&tracked) if size.is_none_or(|s| s == tracked) => Ok(tracked),
            Some(&tracked) => Err(Miss::Size { tracked }),
            None => Err(match self.piece_containing(ptr) {
                Some((start, _)) => Miss::Interior { start },
                None => Miss::Unknown,
            }),
        }
    }

    /// Removes the piece at `ptr` ([`Tracker::check_piece`] first) and returns its size and
    /// the chunks no live piece covers any more, with their bases.
    pub(crate) fn remove(&mut self, ptr: usize, size: Option<usize>) -> Result<Removed<C>, Miss> {
        let size = self.check_piece(ptr, size)?;
        self.pieces.remove(&ptr);
        let end = ptr + size;
        let mut emptied = Vec::new();
        for (&base, slot) in self.chunks.range_mut(..end).rev() {
            let chunk_end = base + slot.len;
            if chunk_end <= ptr {
                break;
            }
            let covered = chunk_end.min(end) - base.max(ptr);
            slot.live -= covered;
            if slot.live == 0 {
                emptied.push(base);
            }
        }
        let emptied = emptied
            .into_iter()
            .filter_map(|base| self.chunks.remove(&base).map(|slot| (base, slot.chunk)))
            .collect();
        Ok(Removed { size, emptied })
    }

    /// Splits the piece at `ptr` of `total` bytes into `first` bytes at `ptr` and the rest
    /// after them, with UMF's rules: the API layer's (`first` and `total` non-zero,
    /// `first < total`) and the tracking layer's (the piece's size is `total`).
    pub(crate) fn split(&mut self, ptr: usize, total: usize, first: usize) -> Result<()> {
        if total == 0 || first == 0 {
            return Err(Error::invalid("split: the sizes must not be zero"));
        }
        if first >= total {
            return Err(Error::invalid(format!(
                "split: the first piece ({first} bytes) must be smaller than the total ({total} bytes)"
            )));
        }
        match self.check_piece(ptr, Some(total)) {
            Ok(_) => {}
            Err(Miss::Size { tracked }) => {
                return Err(Error::invalid(format!(
                    "split: the allocation at {ptr:#x} is {tracked} bytes, not {total}"
                )));
            }
            Err(_) => {
                return Err(Error::invalid(format!(
                    "split: {ptr:#x} is not the start of an allocation of this provider"
                )));
            }
        }
        self.pieces.insert(ptr, first);
        self.pieces.insert(ptr + first, total - first);
        Ok(())
    }

    /// Merges the adjacent pieces at `low` and `high` into one of `total` bytes at `low`,
    /// with UMF's rules: the API layer's (`total` non-zero, `low < high`,
    /// `high - low < total`) and the tracking layer's (both are pieces, `high` starts where
    /// `low` ends, and their sizes add up to `total`).
    pub(crate) fn merge(&mut self, low: usize, high: usize, total: usize) -> Result<()> {
        if total == 0 {
            return Err(Error::invalid("merge: the total size must not be zero"));
        }
        if low >= high {
            return Err(Error::invalid(format!(
                "merge: the low piece {low:#x} must be below the high piece {high:#x}"
            )));
        }
        if high - low >= total {
            return Err(Error::invalid(format!(
                "merge: {high:#x} - {low:#x} is not less than the total size {total}"
            )));
        }
        let piece = |at: usize, which: &str| {
            self.pieces.get(&at).copied().ok_or_else(|| {
                Error::invalid(format!(
                    "merge: the {which} piece {at:#x} is not the start of an allocation of this provider"
                ))
            })
        };
        let low_size = piece(low, "low")?;
        let high_size = piece(high, "high")?;
        if low + low_size != high {
            return Err(Error::invalid(format!(
                "merge: the pieces are not adjacent ({low:#x} + {low_size} != {high:#x})"
            )));
        }
        if low_size + high_size != total {
            return Err(Error::invalid(format!(
                "merge: the pieces' sizes {low_size} + {high_size} do not add up to {total}"
            )));
        }
        self.pieces.remove(&high);
        self.pieces.insert(low, total);
        Ok(())
    }

    /// Takes every chunk out, leaving the tracker empty.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (usize, C)> {
        self.pieces.clear();
        std::mem::take(&mut self.chunks)
            .into_iter()
            .map(|(base, slot)| (base, slot.chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    fn tracker_with(chunks: &[(usize, usize)]) -> Tracker<&'static str> {
        let mut t = Tracker::default();
        for &(base, len) in chunks {
            t.insert(base, len, "chunk");
        }
        t
    }

    #[test]
    fn lookups_tell_unknown_interior_and_wrong_size_apart() {
        let t = tracker_with(&[(0x10_000, 100)]);
        assert_eq!(t.check_piece(0x10_000, Some(100)), Ok(100));
        assert_eq!(t.check_piece(0x10_000, None), Ok(100));
        assert_eq!(
            t.check_piece(0x10_000, Some(99)),
            Err(Miss::Size { tracked: 100 })
        );
        assert_eq!(
            t.check_piece(0x10_000 + 99, None),
            Err(Miss::Interior { start: 0x10_000 })
        );
        assert_eq!(t.check_piece(0x10_000 + 100, None), Err(Miss::Unknown));
        assert_eq!(t.check_piece(1, None), Err(Miss::Unknown));
        assert_eq!(
            t.chunk_containing(0x10_000 + 99).map(|c| c.0),
            Some(0x10_000)
        );
        assert!(t.chunk_containing(0x10_000 + 100).is_none());
    }

    #[test]
    fn split_halves_free_the_chunk_only_when_both_are_gone() {
        let mut t = tracker_with(&[(0x10_000, 2 * PAGE)]);
        t.split(0x10_000, 2 * PAGE, PAGE).unwrap();
        assert_eq!(t.pieces(), 2);
        assert!(
            t.remove(0x10_000 + PAGE, Some(PAGE))
                .unwrap()
                .emptied
                .is_empty()
        );
        assert_eq!(t.chunks(), 1);
        let removed = t.remove(0x10_000, Some(PAGE)).unwrap();
        assert_eq!(removed.size, PAGE);
        assert_eq!(removed.emptied, vec![(0x10_000, "chunk")]);
        assert_eq!((t.pieces(), t.chunks()), (0, 0));
    }

    #[test]
    fn split_follows_the_api_and_tracking_rules() {
        let mut t = tracker_with(&[(0x10_000, 2 * PAGE)]);
        for (ptr, total, first) in [
            (0x10_000, 2 * PAGE, 0),
            (0x10_000, 0, PAGE),
            (0x10_000, 2 * PAGE, 2 * PAGE),
            (0x10_000, 2 * PAGE, 3 * PAGE),
            // The tracked size must equal the total.
            (0x10_000, 3 * PAGE, PAGE),
            // Only at an allocation's start.
            (0x10_000 + PAGE, PAGE, 64),
            (0x20_000, 2 * PAGE, PAGE),
        ] {
            let err = t.split(ptr, total, first).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
        assert_eq!(t.pieces(), 1);
    }

    #[test]
    fn merge_follows_the_api_and_tracking_rules() {
        let low = 0x10_000;
        let mut t = tracker_with(&[(low, 4 * PAGE)]);
        t.split(low, 4 * PAGE, PAGE).unwrap();
        t.split(low + PAGE, 3 * PAGE, PAGE).unwrap();
        // Pieces: [low, PAGE] [low+PAGE, PAGE] [low+2P, 2P].
        for (l, h, total) in [
            // UMF's example: high - low is not less than the total.
            (low, low + 2 * PAGE, PAGE),
            (low, low + PAGE, 0),
            (low + PAGE, low, 2 * PAGE),
            // Sizes do not add up.
            (low, low + PAGE, 3 * PAGE),
            // Not adjacent.
            (low, low + 2 * PAGE, 4 * PAGE),
            // Not pieces.
            (low + 64, low + PAGE, PAGE + 64),
        ] {
            let err = t.merge(l, h, total).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
        t.merge(low, low + PAGE, 2 * PAGE).unwrap();
        t.merge(low, low + 2 * PAGE, 4 * PAGE).unwrap();
        assert_eq!(t.check_piece(low, None), Ok(4 * PAGE));
        assert_eq!(t.remove(low, Some(4 * PAGE)).unwrap().emptied.len(), 1);
    }

    #[test]
    fn a_merge_across_two_chunks_frees_both_with_the_merged_piece() {
        let mut t = tracker_with(&[(0x10_000, PAGE), (0x10_000 + PAGE, PAGE)]);
        t.merge(0x10_000, 0x10_000 + PAGE, 2 * PAGE).unwrap();
        // Split again at a different place, then free the halves.
        t.split(0x10_000, 2 * PAGE, 100).unwrap();
        assert!(t.remove(0x10_000, Some(100)).unwrap().emptied.is_empty());
        let removed = t.remove(0x10_000 + 100, None).unwrap();
        assert_eq!(removed.size, 2 * PAGE - 100);
        let mut freed = removed.emptied;
        freed.sort();
        assert_eq!(freed, vec![(0x10_000, "chunk"), (0x10_000 + PAGE, "chunk")]);
        assert_eq!(t.chunks(), 0);
    }

    #[test]
    fn a_hundred_thousand_pieces_free_in_any_order() {
        const N: usize = 100_000;
        let base = 0x1000_0000;
        let mut t = tracker_with(&[(base, N * PAGE)]);
        for i in 0..N - 1 {
            t.split(base + i * PAGE, (N - i) * PAGE, PAGE).unwrap();
        }
        assert_eq!(t.pieces(), N);
        // A deterministic shuffle (multiplication by a unit mod N).
        let mut freed = Vec::new();
        for i in 0..N {
            let k = (i * 7919) % N;
            assert_eq!(
                t.check_piece(base + k * PAGE + 1, None),
                Err(Miss::Interior {
                    start: base + k * PAGE
                })
            );
            freed.extend(t.remove(base + k * PAGE, Some(PAGE)).unwrap().emptied);
        }
        assert_eq!(freed, vec![(base, "chunk")]);
    }
}
