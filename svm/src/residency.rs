//! [`ResidencyMap`]: where a trace's pages lived over time, as a bounded grid of address rows
//! × time columns, computed in one sweep over the records.
//!
//! The address axis is the trace's *touched* address space: per process, the union of every
//! range a migration or an unmap covered and every page a fault hit (so ranges used in place,
//! which fault but never migrate, have rows too; overlapping ranges merge, abutting ones stay
//! apart), with the gaps between them removed. Each
//! stretch of that union gets rows in proportion to its size (a 64 MiB range 32 times the
//! height of a 2 MiB one); a stretch smaller than a row still covers the row it falls in.
//!
//! Residency is drawn only where the trace says it: a cell is empty until the first migration
//! that covers it starts (from then its pages are known to be at that migration's source), and
//! takes each covering migration's destination from that migration's end. Faults carry no
//! location (the kernel's fault lines name the GPU, not where the pages were), so rows only
//! faults touched stay empty but carry fault marks ([`ResidencyMap::faults`]).
//!
//! Cost: the records are sorted once (O(n log n)); each migration then visits the rows it
//! covers (at most [`ResidencyMap::rows`]), so the sweep is O(n · rows) with a small constant
//! and memory O(n + rows · cols). The output is bounded by the grid: at most `rows · cols`
//! [`Block`]s (a row's state changes are kept at column resolution: within one column the last
//! state wins) and at most `2 · rows · cols` fault marks, whatever the number of records.

use std::collections::{BTreeSet, HashMap};

use crate::records::{KfdKind, KfdRecord};

/// The page a fault address is widened to on the address axis (rocprofv3's 4 KiB).
const FAULT_PAGE: u64 = 4096;

/// A contiguous stretch of one process's touched address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The process.
    pub pid: u32,
    /// The first byte.
    pub start: u64,
    /// The end (exclusive).
    pub end: u64,
    /// Where the stretch begins on the compressed axis (the bytes of all stretches before it).
    pub offset: u64,
}

/// Cells of consecutive rows and columns with the same residency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The first row.
    pub row0: u32,
    /// The end row (exclusive).
    pub row1: u32,
    /// The first column.
    pub col0: u32,
    /// The end column (exclusive).
    pub col1: u32,
    /// Where the pages were (a node; `None`: no agent, the undefined location).
    pub agent: Option<u32>,
}

/// A fault in the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FaultMark {
    /// The row of the faulting address.
    pub row: u32,
    /// The column of the fault's start.
    pub col: u32,
    /// Whether the fault migrated pages (else it only updated the mapping).
    pub migrated: bool,
}

/// The residency grid of a trace; see the module notes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResidencyMap {
    /// Rows of the grid (address).
    pub rows: u32,
    /// Columns of the grid (time).
    pub cols: u32,
    /// The first start over all records (column 0 begins here).
    pub t0: u64,
    /// The last end over all records (column `cols` ends here).
    pub t1: u64,
    /// The touched address space, ordered by (pid, start).
    pub extents: Vec<Extent>,
    /// The bytes of all extents (the compressed axis' length).
    pub total_bytes: u64,
    /// Known residency, in row order.
    pub blocks: Vec<Block>,
    /// Faults, one per (cell, kind).
    pub faults: Vec<FaultMark>,
}

impl ResidencyMap {
    /// The map of `records` on a grid of `rows` × `cols` cells (each at least 1).
    pub fn new(records: &[KfdRecord], rows: u32, cols: u32) -> ResidencyMap {
        let rows = rows.max(1);
        let cols = cols.max(1);
        let mut map = ResidencyMap {
            rows,
            cols,
            ..ResidencyMap::default()
        };
        let Some(t0) = records.iter().map(|r| r.start_ns).min() else {
            return map;
        };
        map.t0 = t0;
        map.t1 = records.iter().map(|r| r.end_ns).max().unwrap_or(t0).max(t0);
        let moves =
            |r: &&KfdRecord| r.kind == KfdKind::PageMigrate && r.error_code == 0 && r.bytes() > 0;

        // The touched space: every interval, sorted, merged.
        let mut touched: Vec<(u32, u64, u64)> = Vec::new();
        for r in records {
            match r.kind {
                KfdKind::PageMigrate if r.error_code == 0 && r.bytes() > 0 => {
                    touched.push((r.pid, r.start_address, r.end_address));
                }
                KfdKind::EventUnmapFromGpu if r.bytes() > 0 => {
                    touched.push((r.pid, r.start_address, r.end_address));
                }
                KfdKind::PageFault => {
                    let page = r.start_address & !(FAULT_PAGE - 1);
                    touched.push((r.pid, page, page.saturating_add(FAULT_PAGE)));
                }
                _ => {}
            }
        }
        touched.sort_unstable();
        for (pid, start, end) in touched {
            match map.extents.last_mut() {
                // Overlapping only: ranges that merely abut stay apart (two buffers side by side
                // are two ranges).
                Some(e) if e.pid == pid && start < e.end => e.end = e.end.max(end),
                _ => map.extents.push(Extent {
                    pid,
                    start,
                    end,
                    offset: 0,
                }),
            }
        }
        let mut offset = 0u64;
        for e in &mut map.extents {
            e.offset = offset;
            offset = offset.saturating_add(e.end - e.start);
        }
        map.total_bytes = offset;
        if map.total_bytes == 0 {
            return map;
        }

        // Migrations as (time, phase, index): phase 0 is a start (the source becomes known
        // where nothing is), 1 an end (the destination takes over).
        let migrations: Vec<&KfdRecord> = records.iter().filter(moves).collect();
        let mut events: Vec<(u64, u8, u32)> = Vec::with_capacity(migrations.len() * 2);
        for (i, r) in migrations.iter().enumerate() {
            events.push((r.start_ns, 0, i as u32));
            events.push((r.end_ns.max(r.start_ns), 1, i as u32));
        }
        events.sort_unstable();

        // Per row: the current residency (None: unknown) and the column it holds since.
        let mut state: Vec<(Option<Option<u32>>, u32)> = vec![(None, 0); rows as usize];
        let mut runs: Vec<Vec<(u32, u32, Option<u32>)>> = vec![Vec::new(); rows as usize];
        for (t, phase, i) in events {
            let r = migrations[i as usize];
            let Some((row0, row1)) = map.rows_of(r.pid, r.start_address, r.end_address) else {
                continue;
            };
            let col = map.col_of(t);
            for row in row0..row1 {
                let (cur, since) = &mut state[row as usize];
                if phase == 0 {
                    if cur.is_none() {
                        *cur = Some(r.src_agent);
                        *since = col;
                    }
                    continue;
                }
                if *cur == Some(r.dst_agent) {
                    continue;
                }
                if let Some(agent) = *cur
                    && col > *since
                {
                    runs[row as usize].push((*since, col, agent));
                }
                *cur = Some(r.dst_agent);
                *since = col;
            }
        }
        for (row, (cur, since)) in state.iter().enumerate() {
            if let Some(agent) = *cur {
                runs[row].push((*since, cols, agent));
            }
        }

        // Rows with the same runs merge into one block.
        let mut open: HashMap<(u32, u32, Option<u32>), usize> = HashMap::new();
        for (row, row_runs) in runs.iter().enumerate() {
            let row = row as u32;
            let mut next = HashMap::with_capacity(row_runs.len());
            for &(col0, col1, agent) in row_runs {
                let key = (col0, col1, agent);
                match open.get(&key) {
                    Some(&b) if map.blocks[b].row1 == row => {
                        map.blocks[b].row1 = row + 1;
                        next.insert(key, b);
                    }
                    _ => {
                        map.blocks.push(Block {
                            row0: row,
                            row1: row + 1,
                            col0,
                            col1,
                            agent,
                        });
                        next.insert(key, map.blocks.len() - 1);
                    }
                }
            }
            open = next;
        }

        let mut faults = BTreeSet::new();
        for r in records.iter().filter(|r| r.kind == KfdKind::PageFault) {
            if let Some((row, _)) =
                map.rows_of(r.pid, r.start_address, r.start_address.saturating_add(1))
            {
                faults.insert(FaultMark {
                    row,
                    col: map.col_of(r.start_ns),
                    migrated: r.fault_migrated(),
                });
            }
        }
        map.faults = faults.into_iter().collect();
        map
    }

    /// The position of `address` of process `pid` on the compressed axis.
    pub fn offset_of(&self, pid: u32, address: u64) -> Option<u64> {
        let i = self
            .extents
            .partition_point(|e| (e.pid, e.start) <= (pid, address));
        let e = self.extents.get(i.checked_sub(1)?)?;
        (e.pid == pid && address < e.end).then(|| e.offset + (address - e.start))
    }

    /// The (pid, address) at `offset` on the compressed axis.
    pub fn address_at(&self, offset: u64) -> Option<(u32, u64)> {
        let i = self.extents.partition_point(|e| e.offset <= offset);
        let e = self.extents.get(i.checked_sub(1)?)?;
        let address = e.start + (offset - e.offset);
        (address < e.end).then_some((e.pid, address))
    }

    /// The rows (start, end exclusive, at least one) the range `start..end` of `pid` covers.
    fn rows_of(&self, pid: u32, start: u64, end: u64) -> Option<(u32, u32)> {
        let a = self.offset_of(pid, start)?;
        let b = a + (end.max(start + 1) - start);
        let rows = u128::from(self.rows);
        let total = u128::from(self.total_bytes);
        let row0 = (u128::from(a) * rows / total) as u32;
        let row1 = (u128::from(b) * rows).div_ceil(total) as u32;
        Some((row0.min(self.rows - 1), row1.clamp(row0 + 1, self.rows)))
    }

    /// The column of time `t` (the last column for the end of the trace).
    pub fn col_of(&self, t: u64) -> u32 {
        let span = u128::from(self.t1.saturating_sub(self.t0).max(1));
        let c = u128::from(t.saturating_sub(self.t0)) * u128::from(self.cols) / span;
        (c as u32).min(self.cols - 1)
    }

    /// The time (ns since `t0`) where column `col` begins.
    pub fn col_ns(&self, col: u32) -> u64 {
        let span = u128::from(self.t1.saturating_sub(self.t0));
        (span * u128::from(col) / u128::from(self.cols)) as u64
    }

    /// The places residency was drawn in, sorted.
    pub fn agents(&self) -> Vec<Option<u32>> {
        let set: BTreeSet<Option<u32>> = self.blocks.iter().map(|b| b.agent).collect();
        set.into_iter().collect()
    }
}

/// Migrations per cell of a [`ResidencyMap`]'s grid: how often the pages of each stretch of
/// the address axis moved in each time column (the thrashing view). A successful migration
/// counts once in every row its range covers, in the column of its end. Returns the cells
/// with a count, as (row, col, count), in row order; at most `rows · cols` of them. O(n ·
/// rows).
pub fn migration_density(map: &ResidencyMap, records: &[KfdRecord]) -> Vec<(u32, u32, u32)> {
    let mut counts: std::collections::BTreeMap<(u32, u32), u32> = std::collections::BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.kind == KfdKind::PageMigrate && r.error_code == 0 && r.bytes() > 0)
    {
        let Some((row0, row1)) = map.rows_of(r.pid, r.start_address, r.end_address) else {
            continue;
        };
        let col = map.col_of(r.end_ns);
        for row in row0..row1 {
            let c = counts.entry((row, col)).or_default();
            *c = c.saturating_add(1);
        }
    }
    counts.into_iter().map(|((r, c), n)| (r, c, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migrate(start: u64, end: u64, t: (u64, u64), src: u32, dst: u32) -> KfdRecord {
        KfdRecord {
            kind: KfdKind::PageMigrate,
            operation: 0,
            start_ns: t.0,
            end_ns: t.1,
            pid: 1,
            agent: None,
            src_agent: Some(src),
            dst_agent: Some(dst),
            prefetch_agent: None,
            preferred_agent: None,
            start_address: start,
            end_address: end,
            error_code: 0,
            count: 0,
        }
    }

    fn fault(address: u64, t: u64, operation: u32) -> KfdRecord {
        KfdRecord {
            kind: KfdKind::PageFault,
            operation,
            agent: Some(1),
            start_address: address,
            end_address: address,
            start_ns: t,
            end_ns: t + 10,
            ..migrate(0, 0, (0, 0), 0, 0)
        }
    }

    #[test]
    fn rows_are_proportional_and_residency_starts_where_the_trace_says() {
        const MIB: u64 = 1 << 20;
        // A 2 MiB range, a gap, a 6 MiB range; the second migrates only at t = 500.
        let r = [
            migrate(0x1000_0000, 0x1000_0000 + 2 * MIB, (0, 100), 0, 1),
            migrate(0x2000_0000, 0x2000_0000 + 6 * MIB, (500, 1000), 0, 1),
        ];
        let m = ResidencyMap::new(&r, 8, 10);
        assert_eq!(m.total_bytes, 8 * MIB);
        assert_eq!(m.extents.len(), 2);
        assert_eq!(m.offset_of(1, 0x2000_0000), Some(2 * MIB));
        assert_eq!(m.address_at(2 * MIB + 5), Some((1, 0x2000_0005)));
        assert_eq!(m.offset_of(1, 0x1800_0000), None);
        // Rows 0..2 are the 2 MiB range, rows 2..8 the 6 MiB one.
        let blocks: Vec<(u32, u32, u32, u32, Option<u32>)> = m
            .blocks
            .iter()
            .map(|b| (b.row0, b.row1, b.col0, b.col1, b.agent))
            .collect();
        assert_eq!(
            blocks,
            [
                (0, 2, 0, 1, Some(0)),
                (0, 2, 1, 10, Some(1)),
                // Unknown before 500: nothing drawn in columns 0..5.
                (2, 8, 5, 9, Some(0)),
                (2, 8, 9, 10, Some(1)),
            ]
        );
    }

    #[test]
    fn ranges_used_in_place_have_rows_and_fault_marks_but_no_residency() {
        let r = [
            migrate(0, 0x10000, (0, 100), 0, 1),
            fault(0x80_0123, 200, 1),
            fault(0x80_0456, 300, 0),
        ];
        let m = ResidencyMap::new(&r, 17, 3);
        assert_eq!(m.extents.len(), 2);
        assert_eq!(m.total_bytes, 0x11000);
        // 16 rows for the 64 KiB range, one for the faulting page.
        assert!(m.blocks.iter().all(|b| b.row1 <= 16), "{:?}", m.blocks);
        assert_eq!(
            m.faults,
            [
                FaultMark {
                    row: 16,
                    col: 1,
                    migrated: false
                },
                FaultMark {
                    row: 16,
                    col: 2,
                    migrated: true
                },
            ]
        );
    }

    #[test]
    fn nested_migrations_stay_within_the_grid() {
        // n nested ranges alternating between two places: quadratic stretches before, now at
        // most rows × cols blocks.
        let n = 5000u64;
        let r: Vec<KfdRecord> = (0..n)
            .map(|i| {
                let half = (i + 1) * 4096;
                let (s, d) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
                migrate(
                    0x1_0000_0000 - half,
                    0x1_0000_0000 + half,
                    (i * 10, i * 10 + 5),
                    s,
                    d,
                )
            })
            .collect();
        let m = ResidencyMap::new(&r, 64, 80);
        assert!(m.blocks.len() <= 64 * 80, "{}", m.blocks.len());
        // Every cell is covered once at most: the blocks of a row do not overlap.
        let mut cells = vec![0u32; 64 * 80];
        for b in &m.blocks {
            for row in b.row0..b.row1 {
                for col in b.col0..b.col1 {
                    cells[(row * 80 + col) as usize] += 1;
                }
            }
        }
        assert!(cells.iter().all(|&c| c <= 1));
        // Row 0 (the outer 156 pages of each side) is known only from the start of the first
        // migration reaching it, number n - 157, at 48 430 ns: column 77 of 80.
        let row0: Vec<&Block> = m.blocks.iter().filter(|b| b.row0 == 0).collect();
        assert!(!row0.is_empty());
        assert!(row0.iter().all(|b| b.col0 >= 77), "{row0:?}");
    }

    #[test]
    fn thrashing_counts_migrations_per_cell() {
        // One 2 MiB range bouncing four times in the first half, once in the second.
        let mut r: Vec<KfdRecord> = (0..4u64)
            .map(|i| {
                migrate(
                    0,
                    2 << 20,
                    (i * 10, i * 10 + 5),
                    (i % 2) as u32,
                    1 - (i % 2) as u32,
                )
            })
            .collect();
        r.push(migrate(0, 2 << 20, (90, 100), 0, 1));
        let m = ResidencyMap::new(&r, 2, 2);
        let d = migration_density(&m, &r);
        assert_eq!(d, [(0, 0, 4), (0, 1, 1), (1, 0, 4), (1, 1, 1)]);
    }
}
