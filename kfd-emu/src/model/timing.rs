//! The timing model (a Device-layer leaf): what a migration, a GPU fault, a prefetch and an
//! SDMA copy would take on the emulated machine, and the model's clock.
//!
//! * [`Timing`] holds the cost parameters: defaults calibrated to published figures (each
//!   field says its source, or that none is published), overridable with a `key = value` file
//!   (`kfd-emu run --timing FILE`, [`Timing::from_file`]).
//! * [`Costs`] applies them to one machine: each GPU's link to system memory (the topology's
//!   `io_links`: type, `max_bandwidth` in MB/s, `min_latency` in ns) and its peer links.
//!   A migration of `bytes` over a link costs
//!   `migrate_setup_ns + latency + ceil(bytes * 1000 / effective MB/s)` ns, where the
//!   effective bandwidth is the link's `max_bandwidth` times the link kind's efficiency.
//! * [`Clock`] is the model's time. It always counts the modeled time ([`Clock::modeled_ns`]);
//!   in [`ClockMode::Model`] it is also the time SMI records, GET_CLOCK_COUNTERS and
//!   WAIT_EVENTS timeouts show (`CLOCK_BOOTTIME` at start plus the modeled time), so a trace
//!   recorded on the emulator has the shape it would have on that machine. In
//!   [`ClockMode::Wall`] (the default) they show the host's `CLOCK_BOOTTIME`.
//!
//! The SDMA engine's copies are timed by [`Costs::sdma_copy_ns`] (then [`Clock::advance`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kfd_ioctl::topology::{IoLink, IoLinkType};

use crate::machine::Machine;

/// The cost parameters of the timing model. Bandwidths are MB/s (10^6 bytes per second, as
/// the topology's `max_bandwidth`), times ns, efficiencies percent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// Share of a PCIe link's `max_bandwidth` a DMA copy reaches, percent. Default 80: the
    /// kernel's `amdgpu_amdkfd_get_pcie_bandwidth_mbytes` reports lanes × raw per-lane rate
    /// (32000 MB/s for PCIe 4.0 x16), while 128b/130b encoding (PCIe 3.0+ base spec, 98.5%)
    /// and TLP/DLLP overhead at a 256-byte max payload leave about 90% (the protocol ceiling);
    /// achieved host-to-device copies on PCIe 4.0 x16 are commonly quoted at 25–28 GB/s, i.e.
    /// 80–87%. We found no AMD publication of a measured figure to cite: 80% is the low end
    /// of the commonly quoted range.
    pub pcie_efficiency_pct: u64,
    /// Share of an xGMI link's `max_bandwidth` a copy reaches, percent. Default 80. The kernel
    /// reports 50000 MB/s per MI200 link (`amdgpu_amdkfd_get_xgmi_bandwidth_mbytes`: x16 ×
    /// 25 Gbps / 8 per direction), matching AMD's MI250X/MI210 data sheets (100 GB/s peak per
    /// Infinity Fabric link, both directions); MI300X's data sheet gives 128 GB/s per link
    /// (64 GB/s per direction). No published figure for the achieved share: 80% is our
    /// assumption, the same as PCIe.
    pub xgmi_efficiency_pct: u64,
    /// Bandwidth used when a link reports `max_bandwidth` 0 (old kernels, hand-made trees),
    /// MB/s. Default 16000: PCIe 3.0 x16 raw (8 GT/s × 16 lanes × 128/130 / 8 ≈ 15754 MB/s,
    /// the kernel rounds to 16000 in its gen3 factor).
    pub default_link_mbps: u64,
    /// Fixed cost of one migration piece (`migrate_vma_setup`, `migrate_vma_pages`,
    /// `migrate_vma_finalize`, the MMU-notifier invalidation), ns. Default 10000. No figure is
    /// published for amdkfd; 10 µs is our assumption of the order of a few page-table walks
    /// and TLB flushes.
    pub migrate_setup_ns: u64,
    /// Cost of servicing one GPU retry fault before any migration (interrupt, IH ring,
    /// `svm_range_restore_pages`, page-table update, TLB flush), ns. Default 25000. No figure
    /// is published for amdkfd; the UVM study of Allen and Ge (SC'21, "In-Depth Analyses of
    /// Unified Virtual Memory System for GPU Accelerated Computing") measures fault batch
    /// service of tens of microseconds on NVIDIA GPUs, and we take 25 µs from that order.
    pub fault_service_ns: u64,
    /// Fixed cost of a prefetch (`svm_range_set_attr` with a PREFETCH_LOC that migrates:
    /// range split, the migration worker's setup), ns, besides the migration itself. Default
    /// 5000. No figure is published; our assumption.
    pub prefetch_setup_ns: u64,
    /// Fixed cost of one SDMA copy (packet submission, fence), ns. Default 3000. No figure is
    /// published; our assumption.
    pub sdma_setup_ns: u64,
    /// An SDMA engine's own throughput cap, MB/s; the copy goes at the lower of this and the
    /// link's effective bandwidth. Default 0 (no cap: the link bounds the copy). AMD publishes
    /// no per-engine figure.
    pub sdma_max_mbps: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pcie_efficiency_pct: 80,
            xgmi_efficiency_pct: 80,
            default_link_mbps: 16000,
            migrate_setup_ns: 10_000,
            fault_service_ns: 25_000,
            prefetch_setup_ns: 5_000,
            sdma_setup_ns: 3_000,
            sdma_max_mbps: 0,
        }
    }
}

/// The largest timing file read (a few dozen `key = value` lines is what one holds).
const TIMING_FILE_LIMIT: u64 = 64 << 10;

/// A timing file that cannot be used: names the file, the line and the key.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    /// The file cannot be read.
    #[error("cannot read the timing file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line that is not `key = value`.
    #[error("{}:{line}: expected `key = value`, found {text:?}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A key the model does not know.
    #[error("{}:{line}: unknown key {key:?} (known: {})", path.display(), Timing::KEYS.join(", "))]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
    },
    /// A value that is not a number in range for its key.
    #[error("{}:{line}: bad value {value:?} for key {key:?}: {why}", path.display())]
    BadValue {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl Timing {
    /// The keys a timing file may set (the field names).
    pub const KEYS: &'static [&'static str] = &[
        "pcie_efficiency_pct",
        "xgmi_efficiency_pct",
        "default_link_mbps",
        "migrate_setup_ns",
        "fault_service_ns",
        "prefetch_setup_ns",
        "sdma_setup_ns",
        "sdma_max_mbps",
    ];

    fn field(&mut self, key: &str) -> Option<&mut u64> {
        Some(match key {
            "pcie_efficiency_pct" => &mut self.pcie_efficiency_pct,
            "xgmi_efficiency_pct" => &mut self.xgmi_efficiency_pct,
            "default_link_mbps" => &mut self.default_link_mbps,
            "migrate_setup_ns" => &mut self.migrate_setup_ns,
            "fault_service_ns" => &mut self.fault_service_ns,
            "prefetch_setup_ns" => &mut self.prefetch_setup_ns,
            "sdma_setup_ns" => &mut self.sdma_setup_ns,
            "sdma_max_mbps" => &mut self.sdma_max_mbps,
            _ => return None,
        })
    }

    /// Reads a timing file: the defaults with the file's `key = value` lines applied (blank
    /// lines and `#` comments ignored; values are unsigned integers, `_` separators allowed).
    pub fn from_file(path: &Path) -> Result<Timing, TimingError> {
        // A regular file of at most 64 KiB: a FIFO or a device is refused, never waited on.
        let read = |source: std::io::Error| TimingError::Read {
            path: path.to_owned(),
            source,
        };
        let bytes = kfd_ioctl::topology::read_regular_file(path, TIMING_FILE_LIMIT).map_err(
            |e| match e {
                kfd_ioctl::topology::TopologyError::Io { source, .. } => read(source),
                other => read(std::io::Error::other(other.to_string())),
            },
        )?;
        let text = String::from_utf8(bytes)
            .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        Timing::parse(&text, path)
    }

    /// Parses the text of a timing file; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Timing, TimingError> {
        let mut t = Timing::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let Some((key, value)) = content.split_once('=') else {
                return Err(TimingError::Syntax {
                    path: path.to_owned(),
                    line,
                    text: raw.to_owned(),
                });
            };
            let (key, value) = (key.trim(), value.trim());
            let bad = |why| TimingError::BadValue {
                path: path.to_owned(),
                line,
                key: key.to_owned(),
                value: value.to_owned(),
                why,
            };
            let parsed: u64 = value
                .replace('_', "")
                .parse()
                .map_err(|_| bad("not an unsigned integer"))?;
            if key.ends_with("_pct") && !(1..=100).contains(&parsed) {
                return Err(bad("a percentage must be 1 to 100"));
            }
            if key == "default_link_mbps" && parsed == 0 {
                return Err(bad("a bandwidth must be positive"));
            }
            if key.ends_with("_ns") && parsed > MAX_COST_NS {
                return Err(bad("more than an hour"));
            }
            let Some(slot) = t.field(key) else {
                return Err(TimingError::UnknownKey {
                    path: path.to_owned(),
                    line,
                    key: key.to_owned(),
                });
            };
            *slot = parsed;
        }
        Ok(t)
    }
}

/// The largest fixed cost a timing file may set: an hour.
const MAX_COST_NS: u64 = 3_600_000_000_000;

impl fmt::Display for Timing {
    /// The parameters as a timing file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = self.clone();
        for key in Self::KEYS {
            let v = t.field(key).map_or(0, |v| *v);
            writeln!(f, "{key} = {v}")?;
        }
        Ok(())
    }
}

/// One link as the model times it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkCost {
    /// The effective bandwidth, MB/s (never 0).
    pub mbps: u64,
    /// The link's latency, ns (its `min_latency`; 0 when the topology says 0).
    pub latency_ns: u64,
}

impl LinkCost {
    /// Time to move `bytes` over the link: latency plus `ceil(bytes * 1000 / mbps)` ns
    /// (1 MB/s moves 10^-3 bytes per ns).
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        let ns = (u128::from(bytes) * 1000).div_ceil(u128::from(self.mbps.max(1)));
        self.latency_ns
            .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// The timing model applied to one machine.
#[derive(Debug, Clone)]
pub struct Costs {
    /// The parameters.
    pub timing: Timing,
    /// Per GPU index: its link to system memory.
    host_links: Vec<LinkCost>,
    /// Per GPU index: `(peer GPU index, link)` for each direct peer link.
    peer_links: Vec<Vec<(usize, LinkCost)>>,
}

impl Costs {
    /// The costs of `machine`'s links under `timing`.
    pub fn new(machine: &Machine, timing: Timing) -> Costs {
        let topo = machine.topology();
        let gpu_of_node = |node: u32| machine.gpus().iter().position(|g| g.node_id == node);
        let mut host_links = Vec::new();
        let mut peer_links = Vec::new();
        for gpu in machine.gpus() {
            let node = machine.node_of(gpu);
            let links = node.map(|n| n.io_links.as_slice()).unwrap_or_default();
            // The GPU's link to a CPU node (a PCIe link, or xGMI to the CPU of an MI300A).
            let host = links
                .iter()
                .find(|l| topo.node(l.node_to).is_some_and(|n| !n.is_gpu()))
                .map_or(
                    LinkCost {
                        mbps: timing.default_link_mbps,
                        latency_ns: 0,
                    },
                    |l| link_cost(&timing, l),
                );
            host_links.push(host);
            peer_links.push(
                links
                    .iter()
                    .filter_map(|l| Some((gpu_of_node(l.node_to)?, link_cost(&timing, l))))
                    .collect(),
            );
        }
        Costs {
            timing,
            host_links,
            peer_links,
        }
    }

    /// GPU `gpu`'s link to system memory (the default link for an index past the machine).
    pub fn host_link(&self, gpu: usize) -> LinkCost {
        self.host_links.get(gpu).copied().unwrap_or(LinkCost {
            mbps: self.timing.default_link_mbps,
            latency_ns: 0,
        })
    }

    /// The direct link from GPU `from` to GPU `to`, if there is one.
    pub fn peer_link(&self, from: usize, to: usize) -> Option<LinkCost> {
        self.peer_links
            .get(from)?
            .iter()
            .find(|(g, _)| *g == to)
            .map(|(_, l)| *l)
    }

    /// One migration piece of `bytes` between system memory and GPU `gpu`'s VRAM (either
    /// direction): the setup plus the transfer over the GPU's host link. A piece that moves
    /// no page costs the setup only.
    pub fn migration_ns(&self, gpu: usize, bytes: u64) -> u64 {
        let transfer = if bytes == 0 {
            0
        } else {
            self.host_link(gpu).transfer_ns(bytes)
        };
        self.timing.migrate_setup_ns.saturating_add(transfer)
    }

    /// The service of one GPU retry fault, besides the migration it causes.
    pub fn fault_ns(&self) -> u64 {
        self.timing.fault_service_ns
    }

    /// The setup of a prefetch that migrates, besides the migrations.
    pub fn prefetch_ns(&self) -> u64 {
        self.timing.prefetch_setup_ns
    }

    /// An SDMA copy of `bytes` from `src` to `dst` (`None`: system memory; `Some(i)`: GPU
    /// index `i`'s VRAM) run by an engine of GPU `engine`: the setup plus the transfer over
    /// the link it crosses (VRAM to VRAM on one GPU: no link, only the engine's cap; between
    /// GPUs: their direct link, else through system memory over both host links, bounded by
    /// the slower), at most `sdma_max_mbps` when that is set.
    pub fn sdma_copy_ns(
        &self,
        engine: usize,
        src: Option<usize>,
        dst: Option<usize>,
        bytes: u64,
    ) -> u64 {
        let link = match (src, dst) {
            (None, None) => self.host_link(engine),
            (Some(g), None) | (None, Some(g)) => self.host_link(g),
            (Some(a), Some(b)) if a == b => LinkCost {
                mbps: u64::MAX,
                latency_ns: 0,
            },
            (Some(a), Some(b)) => self.peer_link(a, b).unwrap_or_else(|| {
                let (la, lb) = (self.host_link(a), self.host_link(b));
                LinkCost {
                    mbps: la.mbps.min(lb.mbps),
                    latency_ns: la.latency_ns + lb.latency_ns,
                }
            }),
        };
        let mut link = link;
        if self.timing.sdma_max_mbps != 0 {
            link.mbps = link.mbps.min(self.timing.sdma_max_mbps);
        }
        if link.mbps == u64::MAX {
            // A copy within one GPU's VRAM with no engine cap: the setup only.
            return self.timing.sdma_setup_ns;
        }
        self.timing
            .sdma_setup_ns
            .saturating_add(link.transfer_ns(bytes))
    }
}

/// The effective cost of a topology link.
fn link_cost(timing: &Timing, l: &IoLink) -> LinkCost {
    let raw = if l.max_bandwidth == 0 {
        timing.default_link_mbps
    } else {
        u64::from(l.max_bandwidth)
    };
    let pct = match l.kind() {
        IoLinkType::Xgmi => timing.xgmi_efficiency_pct,
        _ => timing.pcie_efficiency_pct,
    };
    // u128: a timing file may set a huge default bandwidth.
    let effective = u128::from(raw) * u128::from(pct) / 100;
    LinkCost {
        mbps: u64::try_from(effective).unwrap_or(u64::MAX).max(1),
        latency_ns: u64::from(l.min_latency),
    }
}

/// Which time the model shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockMode {
    /// The host's `CLOCK_BOOTTIME` (the default).
    #[default]
    Wall,
    /// `CLOCK_BOOTTIME` when the model was made plus the modeled time: SMI records,
    /// GET_CLOCK_COUNTERS and WAIT_EVENTS timeouts advance only by the model.
    Model,
    /// The machine's time as a program would see it: the model's costs for what the driver
    /// and the GPU do, and the program's own time as it passed. `CLOCK_BOOTTIME` advances as
    /// the host's, except while the emulator works for the program (an ioctl, an MMU
    /// notifier, a CPU fault, a GPU access: [`Clock::busy`]), whose wall time is replaced by
    /// the modeled time.
    Program,
}

/// The wall time during which at least one [`Busy`] section was open.
#[derive(Debug, Default)]
struct BusyTime {
    open: u32,
    since_ns: u64,
    total_ns: u64,
}

/// An open section of emulator work (see [`ClockMode::Program`]); closes when dropped.
#[derive(Debug)]
pub struct Busy<'a> {
    clock: Option<&'a Clock>,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(clock) = self.clock {
            let mut b = clock.busy.lock().unwrap_or_else(|e| e.into_inner());
            b.open = b.open.saturating_sub(1);
            if b.open == 0 {
                let now = super::host::clock_ns(libc::CLOCK_BOOTTIME);
                b.total_ns += now.saturating_sub(b.since_ns);
            }
        }
    }
}

/// The model's clock: the modeled time, and in [`ClockMode::Model`] the time the model shows.
#[derive(Debug)]
pub struct Clock {
    mode: ClockMode,
    base_ns: u64,
    modeled: AtomicU64,
    /// What [`Clock::wait_until`] let pass (model and program modes).
    waited: AtomicU64,
    busy: Mutex<BusyTime>,
}

impl Default for Clock {
    /// A wall clock.
    fn default() -> Self {
        Clock::new(ClockMode::Wall)
    }
}

impl Clock {
    /// A clock in `mode`, its model time starting at the host's `CLOCK_BOOTTIME`.
    pub fn new(mode: ClockMode) -> Clock {
        Clock {
            mode,
            base_ns: super::host::clock_ns(libc::CLOCK_BOOTTIME),
            modeled: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            busy: Mutex::new(BusyTime::default()),
        }
    }

    /// Opens a section of emulator work: in [`ClockMode::Program`] its wall time does not
    /// count (nested and concurrent sections count once); in the other modes nothing.
    pub fn busy(&self) -> Busy<'_> {
        if self.mode != ClockMode::Program {
            return Busy { clock: None };
        }
        let mut b = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        if b.open == 0 {
            b.since_ns = super::host::clock_ns(libc::CLOCK_BOOTTIME);
        }
        b.open += 1;
        Busy { clock: Some(self) }
    }

    /// [`ClockMode::Program`]'s time: the host's `CLOCK_BOOTTIME` since the start, less the
    /// busy wall time (a section still open counts up to now), plus the modeled time and the
    /// time waited ([`Clock::wait_until`]).
    fn program_ns(&self) -> u64 {
        let b = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let wall = super::host::clock_ns(libc::CLOCK_BOOTTIME);
        let busy = b.total_ns
            + if b.open > 0 {
                wall.saturating_sub(b.since_ns)
            } else {
                0
            };
        drop(b);
        let program = wall.saturating_sub(self.base_ns).saturating_sub(busy);
        self.base_ns
            .saturating_add(program)
            .saturating_add(self.modeled_ns())
            .saturating_add(self.waited_ns())
    }

    /// The mode.
    pub fn mode(&self) -> ClockMode {
        self.mode
    }

    /// Now, `CLOCK_BOOTTIME` ns: the host's, or (model mode) the start plus the modeled time
    /// and the time waited.
    pub fn now_ns(&self) -> u64 {
        match self.mode {
            ClockMode::Wall => super::host::clock_ns(libc::CLOCK_BOOTTIME),
            ClockMode::Model => self
                .base_ns
                .saturating_add(self.modeled_ns())
                .saturating_add(self.waited_ns()),
            ClockMode::Program => self.program_ns(),
        }
    }

    /// The `CLOCK_MONOTONIC_RAW` ns behind GET_CLOCK_COUNTERS' CPU and GPU counters: the
    /// host's, or (model mode) the model's time.
    pub fn raw_ns(&self) -> u64 {
        match self.mode {
            ClockMode::Wall => super::host::clock_ns(libc::CLOCK_MONOTONIC_RAW),
            ClockMode::Model | ClockMode::Program => self.now_ns(),
        }
    }

    /// The time modeled so far, ns (in both modes).
    pub fn modeled_ns(&self) -> u64 {
        self.modeled.load(Ordering::Relaxed)
    }

    /// Lets time pass until [`Clock::now_ns`] reaches `ns` (a GPU stalled, retrying an
    /// access): in model and program modes the clock moves on by the difference (called
    /// inside a [`Clock::busy`] section in program mode, whose wall time does not count),
    /// counted apart from the modeled costs ([`Clock::waited_ns`], not
    /// [`Clock::modeled_ns`]). On the wall clock nothing waits: the callers hold the model's
    /// lock, and sleeping under it would stall every other program's calls (the wall clock
    /// shows the emulator's own speed anyway, not the machine's: its records come sooner).
    pub fn wait_until(&self, ns: u64) {
        let now = self.now_ns();
        if now >= ns {
            return;
        }
        match self.mode {
            ClockMode::Wall => {}
            ClockMode::Model | ClockMode::Program => {
                let _ = self
                    .waited
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                        Some(t.saturating_add(ns - now))
                    });
            }
        }
    }

    /// The time [`Clock::wait_until`] let pass in model and program modes, ns.
    pub fn waited_ns(&self) -> u64 {
        self.waited.load(Ordering::Relaxed)
    }

    /// Advances the modeled time by `ns`.
    pub fn advance(&self, ns: u64) {
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .modeled
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(ns))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_clock_skips_busy_wall_time_and_adds_the_modeled_time() {
        let c = Clock::new(ClockMode::Program);
        let t1;
        {
            let _outer = c.busy();
            t1 = c.now_ns();
            let inner = c.busy();
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert_eq!(c.now_ns(), t1, "frozen while the emulator works");
            drop(inner);
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert_eq!(c.now_ns(), t1, "until the last section closes");
            c.advance(5_000);
            assert_eq!(c.now_ns(), t1 + 5_000, "the modeled time counts");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert!(
            c.now_ns() >= t1 + 5_000 + 10_000_000,
            "the program's own time counts"
        );
        // The other modes ignore busy sections.
        let m = Clock::new(ClockMode::Model);
        let before = m.now_ns();
        drop(m.busy());
        assert_eq!(m.now_ns(), before);
    }

    #[test]
    fn transfer_rounds_up_to_the_nanosecond() {
        let l = LinkCost {
            mbps: 3,
            latency_ns: 7,
        };
        assert_eq!(l.transfer_ns(1), 7 + 334);
        assert_eq!(l.transfer_ns(3), 7 + 1000);
    }

    #[test]
    fn file_keys_override_and_errors_name_file_line_and_key() {
        let p = Path::new("t.conf");
        let t = Timing::parse(
            "# c\n\nfault_service_ns = 1_000\npcie_efficiency_pct=50\n",
            p,
        )
        .expect("parse");
        assert_eq!((t.fault_service_ns, t.pcie_efficiency_pct), (1000, 50));
        assert_eq!(t.migrate_setup_ns, Timing::default().migrate_setup_ns);
        let round = Timing::parse(&t.to_string(), p).expect("round trip");
        assert_eq!(round, t);
        let e = Timing::parse("x\n", p).unwrap_err().to_string();
        assert!(e.starts_with("t.conf:1: expected"), "{e}");
        let e = Timing::parse("\nfault_ns = 3\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.conf:2: unknown key \"fault_ns\""), "{e}");
        let e = Timing::parse("sdma_setup_ns = -1", p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"sdma_setup_ns\"") && e.contains("t.conf:1"),
            "{e}"
        );
        // A link reporting 0 MB/s takes the default, and a huge default does not overflow.
        let huge = Timing::parse("default_link_mbps = 18446744073709551615", p).expect("parse");
        let zero = IoLink {
            link_type: 2,
            ..IoLink::default()
        };
        assert_eq!(link_cost(&huge, &zero).mbps, 14_757_395_258_967_641_292);
        assert_eq!(link_cost(&Timing::default(), &zero).mbps, 12_800);
        let e = Timing::parse("xgmi_efficiency_pct = 101", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("xgmi_efficiency_pct"), "{e}");
    }
}
