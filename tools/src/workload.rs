//! `kfdtool workload PATTERN`: the classic HMM access patterns on one SVM range, with no code
//! to write — sequential streaming, random, strided, a stencil with reuse, CPU↔GPU ping-pong
//! and a working set larger than VRAM — and what they made the driver do.
//!
//! # The GPU's accesses
//!
//! On a gfx9 GPU (gfx906, gfx908, gfx90a, gfx94x: what [`kernels`] is encoded for) each
//! access is a kernel dispatch on an AQL queue ([`kfd_queue::Kernel`], no code object): a
//! "read" of a block runs the read kernel, whose work-items each load one dword of the block
//! and store it in a system-memory buffer the CPU then checks; a "write" runs the write
//! kernel, whose work-items each store one dword. A work-item touches one dword per 4 KiB
//! page (every page the block spans: what faults and migrations see; `--touch line`: one per
//! 64-byte line, 16 times the work-items and the emulator's time). Dispatches are batched (up
//! to 32, each packet with the barrier bit, so they run in order; the last one's completion
//! signal is waited for), and a CPU phase waits for the batch before it.
//!
//! Other GPUs (gfx10 and later, or an ISA the topology does not name) and `--engine sdma` use
//! SDMA copies between the range and a small buffer in system memory (a read copies a block
//! out of the range, a write copies one in); the summary's `engine:` line says which, and why.
//!
//! Either way, with XNACK on every access to a page the GPU does not map is a retry fault the
//! driver serves as the kernel does (`svm_range_restore_pages`): migrating the granule to the
//! GPU or mapping it in place, evicting other ranges when VRAM is full. With XNACK off the
//! kernel maps the range only on the GPUs with ACCESS or ACCESS_IN_PLACE
//! (`svm_range_validate_and_map`; a prefetch alone maps nothing), so with `--access none` the
//! first access is a VM fault, reported as [`WorkloadError::VmFault`] (the kernel stops the
//! process's queues on the GPU, `kfd_dqm_evict_pasid`, and the run ends).
//!
//! # The CPU's accesses and the data
//!
//! The CPU's accesses are plain loads and stores, which on pages in VRAM fault them back
//! (`svm_migrate_to_ram`). With kernels the data is checked: before the pattern (and any
//! prefetch) the CPU writes every dword the kernels touch (`base + i` for the `i`th of a
//! block); each GPU write stores a new base; each GPU read's gathered dwords must be the
//! block's current ones; a CPU phase (ping-pong's touch, the final check of ping-pong and
//! oversubscribe) reads every touched dword of every block and stores one per page back.
//! Wrong bytes end the run with [`WorkloadError::Data`] and the offset. With SDMA the final
//! check reads the marker each block's first word holds.
//!
//! # Output
//!
//! The summary counts the process's own SMI records (no `ALL_PROCESS` needed): migrations and
//! bytes per direction and trigger, GPU page faults, GPU unmaps, queue evictions. `--trace
//! DIR` records the same run with `kfdtool trace` in every format (rocpd, CSV, JSON, Perfetto,
//! SVG) and its summary, by running `kfdtool trace --format ... --out DIR -- kfdtool workload
//! ...` (on a machine without `/dev/kfd` both run under the same embedded emulator).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use kfd_ioctl::abi::{AllocMemFlags, SmiEventMask};
use kfd_ioctl::mem::Reservation;
use kfd_ioctl::smi::{MigrateTrigger, Record};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Kfd, SmiEvents};
use kfd_queue::{QueueContext, SdmaEngine, SdmaQueue};
use kfd_svm::{Access, Location, SvmAttrs, SvmBuffer};

use crate::info::human_bytes;
use crate::parse::parse_u32;

mod kernels;

/// An access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// The GPU reads every block in order, each iteration.
    Sequential,
    /// The GPU reads as many blocks as the range has, at random (a seeded xorshift).
    Random,
    /// The GPU reads one block every `--stride` bytes.
    Strided,
    /// For each block the GPU reads it and its two neighbours, then writes it (reuse).
    Stencil,
    /// The GPU writes every block, then the CPU reads and writes every page: each round moves
    /// the range to the GPU and back.
    PingPong,
    /// A working set larger than VRAM (by default 2 × the GPU's VRAM): the GPU writes every
    /// block each iteration, then the CPU checks every block.
    Oversubscribe,
}

/// A location for `--preferred` and `--prefetch`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Place {
    /// System memory.
    System,
    /// The GPU's VRAM.
    Gpu,
}

/// The GPU's access to the range.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AccessArg {
    /// ACCESS: faults migrate toward the GPU.
    Access,
    /// ACCESS_IN_PLACE: faults map the pages where they are.
    InPlace,
    /// No access attribute: with XNACK on the kernel gives every GPU access by default
    /// (`svm_range_new`); with XNACK off the range is not mapped on the GPU, whose first access
    /// is a VM fault.
    None,
}

/// How many dwords of a block each kernel touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Touch {
    /// One dword per 4 KiB page: every page the block spans, which is what faults and
    /// migrations see.
    Page,
    /// One dword per 64-byte cache line (16 times the work-items, and the emulator's time).
    Line,
}

/// What runs the GPU's accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// Kernels on an AQL queue (gfx9 GPUs).
    Kernel,
    /// SDMA copies.
    Sdma,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// `kfdtool workload`'s arguments.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The access pattern.
    #[arg(value_enum)]
    pattern: Pattern,
    /// Bytes of the range (K, M, G suffixes; default 16M, for oversubscribe 2 × VRAM).
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// Bytes each GPU access copies (a multiple of 4 KiB).
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    block: u64,
    /// Bytes between the blocks of the strided pattern (default 4 blocks).
    #[arg(long, value_parser = parse_size)]
    stride: Option<u64>,
    /// How many times the pattern runs (1 to 10000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    iterations: u32,
    /// Migration granularity, log2 of pages (0 to 63; the kernel's default is 9, 2 MiB).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    granularity: Option<u8>,
    /// Retry faults (XNACK) for the process.
    #[arg(long, value_enum, default_value = "on")]
    xnack: OnOff,
    /// The range's preferred location.
    #[arg(long, value_enum)]
    preferred: Option<Place>,
    /// Prefetch the range there before the pattern runs.
    #[arg(long, value_enum)]
    prefetch: Option<Place>,
    /// The GPU's access.
    #[arg(long, value_enum, default_value = "access")]
    access: AccessArg,
    /// The GPU (default: the first).
    #[arg(long, value_parser = parse_u32)]
    gpu: Option<u32>,
    /// What runs the GPU's accesses (default: kernels on gfx9 GPUs, else SDMA copies).
    #[arg(long, value_enum)]
    engine: Option<EngineArg>,
    /// What a kernel touches of each block: one dword per page, or per 64-byte line.
    #[arg(long, value_enum, default_value = "page")]
    touch: Touch,
    /// Seed of the random pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Record the run with `kfdtool trace` in every format into this directory (it must
    /// exist), and print the trace's summary.
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
}

/// A size in bytes: a number with an optional K, M or G (powers of 1024).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is no size (a number, then K, M or G)"))?;
    n.checked_mul(1 << shift)
        .filter(|&b| b > 0 && b <= 1 << 40)
        .ok_or_else(|| format!("{text:?} is out of range: from 1 byte to 1 TiB"))
}

/// One access of the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The GPU copies the block at this offset out of the range.
    GpuRead(u64),
    /// The GPU copies the scratch block into the range at this offset.
    GpuWrite(u64),
    /// The CPU reads and writes a word of every page.
    CpuTouch,
}

/// The accesses of one iteration of `pattern` over `blocks` blocks of `block` bytes.
fn iteration(pattern: Pattern, blocks: u64, block: u64, stride: u64, rng: &mut u64) -> Vec<Op> {
    let at = |i: u64| i * block;
    match pattern {
        Pattern::Sequential => (0..blocks).map(|i| Op::GpuRead(at(i))).collect(),
        Pattern::Random => (0..blocks)
            .map(|_| {
                // xorshift64
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                Op::GpuRead(at(*rng % blocks))
            })
            .collect(),
        Pattern::Strided => {
            let size = blocks * block;
            (0..size.div_ceil(stride))
                .map(|k| Op::GpuRead((k * stride) / block * block))
                .collect()
        }
        Pattern::Stencil => (0..blocks)
            .flat_map(|i| {
                let lo = i.saturating_sub(1);
                let hi = (i + 1).min(blocks - 1);
                [
                    Op::GpuRead(at(lo)),
                    Op::GpuRead(at(i)),
                    Op::GpuRead(at(hi)),
                    Op::GpuWrite(at(i)),
                ]
            })
            .collect(),
        Pattern::PingPong => (0..blocks)
            .map(|i| Op::GpuWrite(at(i)))
            .chain([Op::CpuTouch])
            .collect(),
        Pattern::Oversubscribe => (0..blocks).map(|i| Op::GpuWrite(at(i))).collect(),
    }
}

/// What the SMI records of the run add up to.
#[derive(Debug, Default)]
struct Tally {
    /// (to the GPU?, trigger) → (migrations, pages).
    migrations: BTreeMap<(bool, String), (u64, u64)>,
    gpu_faults: u64,
    gpu_faults_migrated: u64,
    unmaps: u64,
    queue_evictions: u64,
}

impl Tally {
    fn drain(&mut self, smi: &mut SmiEvents, pid: u32) -> Result<(), Box<dyn std::error::Error>> {
        while let Some(line) = smi.read_line()? {
            let Ok(record) = Record::parse(&line) else {
                continue;
            };
            match record {
                Record::MigrateEnd {
                    pid: p,
                    npages,
                    to,
                    trigger,
                    ..
                } if p == pid => {
                    let name = match trigger {
                        MigrateTrigger::Prefetch => "prefetch",
                        MigrateTrigger::PageFaultGpu => "GPU fault",
                        MigrateTrigger::PageFaultCpu => "CPU fault",
                        MigrateTrigger::TtmEviction => "TTM eviction",
                        _ => "other",
                    };
                    let to_gpu = !matches!(to, kfd_ioctl::Location::System);
                    let e = self
                        .migrations
                        .entry((to_gpu, name.to_owned()))
                        .or_default();
                    e.0 += 1;
                    e.1 += npages;
                }
                Record::PageFaultStart { pid: p, .. } if p == pid => self.gpu_faults += 1,
                Record::PageFaultEnd {
                    pid: p, migrated, ..
                } if p == pid => self.gpu_faults_migrated += u64::from(migrated),
                Record::UnmapFromGpu { pid: p, .. } if p == pid => self.unmaps += 1,
                Record::QueueEviction { pid: p, .. } if p == pid => self.queue_evictions += 1,
                _ => {}
            }
        }
        Ok(())
    }
}

/// How long one SDMA copy, or one batch of kernels, may take (a loaded machine, an emulator).
const COPY_TIMEOUT: Duration = Duration::from_secs(120);

/// What the workload reports instead of a summary.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The GPU's access took a VM fault: the range (or the page) is not mapped on the GPU and
    /// no retry fault can map it (XNACK off and no ACCESS / prefetch). The queue stopped, as
    /// the kernel stops every queue of the process on the GPU.
    #[error(
        "the GPU's {engine} took a VM fault at {va:#x} on gpu {gpu}: the range is not mapped \
         on the GPU{hint}"
    )]
    VmFault {
        /// "kernel" or "SDMA copy".
        engine: &'static str,
        /// The GPU.
        gpu: kfd_ioctl::GpuId,
        /// The faulting page.
        va: u64,
        /// What would map it.
        hint: &'static str,
    },
    /// A check of the data failed: the GPU or the CPU read something other than what was last
    /// written there.
    #[error(
        "{who} read {got:#010x} at byte {offset:#x} of the range, expected {want:#010x}: data lost"
    )]
    Data {
        /// "the GPU" or "the CPU".
        who: &'static str,
        /// The byte offset in the range.
        offset: u64,
        /// What was read.
        got: u32,
        /// What was last written there.
        want: u32,
    },
    /// `--engine kernel` on a GPU the workload has no kernels for.
    #[error("--engine kernel: {0}")]
    NoKernels(String),
    /// A bad combination of options.
    #[error("{0}")]
    Usage(String),
}

/// A VM fault from a queue wait as [`WorkloadError::VmFault`]; other errors as they are.
fn vm_fault(e: kfd_queue::Error, engine: &'static str, xnack: OnOff) -> Box<dyn std::error::Error> {
    match e {
        kfd_queue::Error::VmFault(f) | kfd_queue::Error::QueueDead(f) => {
            Box::new(WorkloadError::VmFault {
                engine,
                gpu: f.gpu_id,
                va: f.va,
                // With XNACK off the kernel maps a range only on the GPUs with ACCESS or
                // ACCESS_IN_PLACE (`svm_range_validate_and_map`); a prefetch alone maps
                // nothing.
                hint: if xnack == OnOff::Off {
                    " (XNACK is off: only --access access or in-place maps it; a prefetch does not)"
                } else {
                    ""
                },
            })
        }
        other => Box::new(other),
    }
}

/// The value the workload's data holds at touched dword `i` of a block whose base is
/// `base` (the write kernel stores `value + i`).
fn word(base: u32, i: u64) -> u32 {
    base.wrapping_add(i as u32)
}

/// The base of block `block` after the pass `pass` wrote it (pass 0: the CPU's
/// initialisation).
fn base(pass: u32, block: u64) -> u32 {
    pass.wrapping_add(1).wrapping_mul(0x9e37_79b9) ^ (block as u32).wrapping_mul(0x85eb_ca6b)
}

/// A read dispatch whose gathered dwords are checked once its batch completed.
struct PendingRead {
    /// Offset of its slot in the output buffer.
    out_at: u64,
    /// Offset of the block in the range.
    offset: u64,
    /// The block's base when the read was queued.
    base: u32,
}

/// The GPU's side as kernels on an AQL queue (see [`kernels`]).
struct KernelSide {
    queue: kfd_queue::AqlQueue,
    read: kfd_queue::Kernel,
    write: kfd_queue::Kernel,
    signal: kfd_queue::Signal,
    out: kfd_ioctl::Memory,
    /// Bytes of one read's output.
    out_per_read: u64,
    /// Dispatches per batch.
    batch: usize,
    /// The queued packets and the reads among them.
    packets: Vec<kfd_queue::KernelDispatch>,
    reads: Vec<PendingRead>,
    /// log2 of the bytes between touched dwords.
    shift: u32,
    /// Work-items per block.
    items: u64,
    /// Each block's base (its touched dword `i` holds `base + i`).
    bases: Vec<u32>,
    xnack: OnOff,
}

impl KernelSide {
    #[allow(clippy::too_many_arguments)]
    fn new(
        kfd: &Kfd,
        context: &std::sync::Arc<QueueContext>,
        gpu: kfd_ioctl::GpuId,
        target: kfd_gfx9::exec::Target,
        block: u64,
        shift: u32,
        blocks: u64,
        xnack: OnOff,
    ) -> Result<KernelSide, Box<dyn std::error::Error>> {
        if block > kernels::MAX_BLOCK {
            return Err(WorkloadError::Usage(format!(
                "--block {} is larger than a kernel's {} (32-bit offsets)",
                human_bytes(block),
                human_bytes(kernels::MAX_BLOCK)
            ))
            .into());
        }
        let descriptor = kernels::descriptor(target)?;
        let bytes = |w: Vec<u32>| -> Vec<u8> { w.iter().flat_map(|d| d.to_le_bytes()).collect() };
        let slots = 64;
        let read = kfd_queue::Kernel::new(
            context,
            gpu,
            &descriptor,
            &bytes(kernels::read_code()?),
            kernels::KERNARG_BYTES,
            slots,
        )?;
        let write = kfd_queue::Kernel::new(
            context,
            gpu,
            &descriptor,
            &bytes(kernels::write_code()?),
            kernels::KERNARG_BYTES,
            slots,
        )?;
        let items = block >> shift;
        let out_per_read = (4 * items).next_multiple_of(256);
        // At most half the ring and the kernarg slots; at most 8 MiB of gathered reads.
        let batch = usize::try_from(((8 << 20) / out_per_read).clamp(1, 32))?;
        let out = kfd.alloc_memory(
            gpu,
            (out_per_read * batch as u64).next_multiple_of(4096),
            AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
            &[gpu],
        )?;
        Ok(KernelSide {
            queue: kfd_queue::AqlQueue::new(context, gpu, 64)?,
            read,
            write,
            signal: kfd_queue::Signal::new(context, gpu, 0)?,
            out,
            out_per_read,
            batch,
            packets: Vec::new(),
            reads: Vec::new(),
            shift,
            items,
            bases: (0..blocks).map(|b| base(0, b)).collect(),
            xnack,
        })
    }

    /// Queues the kernel of `op` (pass `pass`) over the range at `range_va`; runs the batch
    /// when it is full.
    fn push(
        &mut self,
        op: Op,
        pass: u32,
        range_va: u64,
        block: u64,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let grid = [u32::try_from(self.items)?, 1, 1];
        let wg = [
            u16::try_from(self.items.min(u64::from(kernels::WORKGROUP)))?,
            1,
            1,
        ];
        match op {
            Op::GpuRead(off) => {
                let out_at = self.reads.len() as u64 * self.out_per_read;
                let args = kernels::read_args(range_va + off, self.out.va() + out_at, self.shift);
                self.packets.push(self.read.packet(grid, wg, &args, None)?);
                self.reads.push(PendingRead {
                    out_at,
                    offset: off,
                    base: self.bases[usize::try_from(off / block)?],
                });
            }
            Op::GpuWrite(off) => {
                let b = off / block;
                let value = base(pass + 1, b);
                let args = kernels::write_args(range_va + off, value, self.shift);
                self.packets.push(self.write.packet(grid, wg, &args, None)?);
                self.bases[usize::try_from(b)?] = value;
            }
            Op::CpuTouch => return self.flush(),
        }
        if self.packets.len() >= self.batch || self.reads.len() >= self.batch {
            self.flush()?;
        }
        Ok(())
    }

    /// Runs the queued kernels (in order: each packet has the barrier bit), waits for the
    /// last, and checks every dword the reads gathered.
    fn flush(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        let Some(last) = self.packets.last_mut() else {
            return Ok(());
        };
        last.completion_signal = self.signal.va();
        self.signal.store(1)?;
        for p in std::mem::take(&mut self.packets) {
            self.queue
                .dispatch(&p)
                .map_err(|e| vm_fault(e, "kernel", self.xnack))?;
        }
        self.signal
            .wait_zero(COPY_TIMEOUT)
            .map_err(|e| vm_fault(e, "kernel", self.xnack))?;
        let out = self.out.as_volatile_slice()?;
        for r in std::mem::take(&mut self.reads) {
            for i in 0..self.items {
                let got: u32 =
                    vm_memory::Bytes::read_obj(&out, usize::try_from(r.out_at + 4 * i)?)?;
                let want = word(r.base, i);
                if got != want {
                    return Err(WorkloadError::Data {
                        who: "the GPU",
                        offset: r.offset + (i << self.shift),
                        got,
                        want,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// The CPU's check of block `b` ([`cpu_check`]).
    fn cpu_check(
        &self,
        slice: &vm_memory::VolatileSlice<'_>,
        b: u64,
        block: u64,
        write: bool,
    ) -> Result<u64, Box<dyn std::error::Error>> {
        let base = self.bases[usize::try_from(b)?];
        cpu_check(slice, b * block, base, self.items, self.shift, write)
    }
}

/// The CPU reads the `items` dwords the kernels touch in the block at `offset` of the range
/// (one every `1 << shift` bytes) and checks each holds `base + i`; with `write` it stores the
/// first one of each page back (a CPU write of every page). Returns the pages touched.
///
/// # Errors
/// [`WorkloadError::Data`] naming the first dword that holds anything else.
fn cpu_check(
    slice: &vm_memory::VolatileSlice<'_>,
    offset: u64,
    base: u32,
    items: u64,
    shift: u32,
    write: bool,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut pages = 0;
    for i in 0..items {
        let at_offset = offset + (i << shift);
        let at = usize::try_from(at_offset)?;
        let got: u32 = vm_memory::Bytes::read_obj(slice, at)?;
        let want = word(base, i);
        if got != want {
            return Err(WorkloadError::Data {
                who: "the CPU",
                offset: at_offset,
                got,
                want,
            }
            .into());
        }
        if at_offset.is_multiple_of(4096) {
            pages += 1;
            if write {
                vm_memory::Bytes::write_obj(slice, got, at)?;
            }
        }
    }
    Ok(pages)
}

/// The engine the GPU's accesses run on.
enum Engine {
    /// Kernels for this ISA, touching one dword every `1 << shift` bytes.
    Kernels(kfd_gfx9::exec::Target, u32),
    /// SDMA copies; the reason when kernels were not chosen by `--engine`.
    Sdma(Option<String>),
}

/// `kfdtool workload`; `machine` is the `--machine` to pass on to `kfdtool trace`.
pub fn workload_cmd(
    args: &WorkloadArgs,
    machine: &str,
    vram: Option<u64>,
    clock: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(dir) = &args.trace {
        return traced(dir, machine, vram, clock);
    }
    let kfd = Kfd::open()?;
    let topology = Topology::read()?;
    let mut gpus = Vec::new();
    for node in topology.gpus() {
        if let Some(gpu_id) = node.gpu_id() {
            kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)?;
            gpus.push(gpu_id);
        }
    }
    let gpu = match args.gpu {
        Some(g) if gpus.contains(&kfd_ioctl::GpuId(g)) => kfd_ioctl::GpuId(g),
        Some(g) => return Err(format!("no GPU {g:#x}; the GPUs are {gpus:?}").into()),
        None => *gpus.first().ok_or("this machine has no GPU")?,
    };
    let node = topology.gpus().find(|n| n.gpu_id() == Some(gpu));
    let vram_size: u64 = node
        .map(|n| {
            n.mem_banks
                .iter()
                .filter(|b| b.heap().is_vram())
                .map(|b| b.size_in_bytes)
                .sum()
        })
        .unwrap_or(0);
    let page = 4096;
    if !args.block.is_multiple_of(page) {
        return Err("--block must be a multiple of 4 KiB".into());
    }
    let gfx = node.and_then(|n| n.gfx_target_version());
    let isa = gfx.map_or_else(|| "an unknown ISA".to_owned(), |v| v.to_string());
    let shift = match args.touch {
        Touch::Page => 12,
        Touch::Line => 6,
    };
    let engine = match (args.engine, gfx.and_then(kernels::target)) {
        (None | Some(EngineArg::Kernel), Some(t)) => Engine::Kernels(t, shift),
        (Some(EngineArg::Kernel), None) => {
            return Err(WorkloadError::NoKernels(format!(
                "gpu {gpu} has {isa}; the workload's kernels are gfx9 (gfx906, gfx908, gfx90a, \
                 gfx94x) code"
            ))
            .into());
        }
        (None, None) => Engine::Sdma(Some(format!(
            "gpu {gpu} has {isa}, not a gfx9 ISA the workload's kernels are encoded for"
        ))),
        (Some(EngineArg::Sdma), _) => Engine::Sdma(None),
    };
    let size = match (args.size, args.pattern) {
        (Some(s), _) => s,
        (None, Pattern::Oversubscribe) => 2 * vram_size,
        (None, _) => 16 << 20,
    }
    .next_multiple_of(args.block);
    let blocks = size / args.block;
    let stride = args.stride.unwrap_or(4 * args.block).max(1);
    kfd.set_xnack_mode(args.xnack == OnOff::On)
        .map_err(|e| format!("XNACK {:?}: {e}", args.xnack))?;

    let mut attrs = SvmAttrs::new();
    match args.access {
        AccessArg::Access => attrs = attrs.access(gpu, Access::Access),
        AccessArg::InPlace => attrs = attrs.access(gpu, Access::AccessInPlace),
        AccessArg::None => {}
    }
    let place = |p: Place| match p {
        Place::System => Location::System,
        Place::Gpu => Location::Gpu(gpu),
    };
    if let Some(p) = args.preferred {
        attrs = attrs.preferred_location(place(p));
    }
    if let Some(g) = args.granularity {
        attrs = attrs.granularity(g);
    }
    let len = usize::try_from(size)?;
    let mut range = SvmBuffer::new(&kfd, len, &attrs)?;
    let base_va = range.addr();
    let context = QueueContext::new(&kfd, &topology)?;

    // The GPU's side: kernels, or SDMA copies from and to one block of system memory.
    let block = usize::try_from(args.block)?;
    let mut sdma = None;
    let mut kernels_side = None;
    match &engine {
        Engine::Kernels(target, shift) => {
            kernels_side = Some(KernelSide::new(
                &kfd, &context, gpu, *target, args.block, *shift, blocks, args.xnack,
            )?);
        }
        Engine::Sdma(_) => {
            let space = Reservation::new(block, 2 << 20)
                .map_err(|e| format!("reserving GPU addresses: {e}"))?;
            let scratch_va = space.addr().as_ptr() as u64;
            let scratch = kfd.alloc_memory_of_gpu(
                gpu,
                scratch_va,
                args.block,
                AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
            )?;
            kfd.map_memory_to_gpu(&scratch, &[gpu])?;
            let queue = SdmaQueue::new(&context, gpu, SdmaEngine::Pcie, 64 << 10)?;
            sdma = Some((space, scratch, scratch_va, queue));
        }
    }
    if let Some(k) = &kernels_side {
        let slice = range.as_volatile_slice();
        // The CPU writes every dword the kernels touch, so that each GPU read has a known
        // answer (before any prefetch: the pages start in system memory).
        for b in 0..blocks {
            for i in 0..k.items {
                let at = usize::try_from(b * args.block + (i << k.shift))?;
                vm_memory::Bytes::write_obj(&slice, word(k.bases[usize::try_from(b)?], i), at)?;
            }
        }
    }

    let mut smi = kfd.smi_events(gpu)?;
    smi.set_mask(
        SmiEventMask::MIGRATE_START
            | SmiEventMask::MIGRATE_END
            | SmiEventMask::PAGE_FAULT_START
            | SmiEventMask::PAGE_FAULT_END
            | SmiEventMask::QUEUE_EVICTION
            | SmiEventMask::QUEUE_RESTORE
            | SmiEventMask::UNMAP_FROM_GPU,
    )?;
    let pid = std::process::id();
    let mut tally = Tally::default();
    let started = Instant::now();
    if let Some(p) = args.prefetch {
        range.prefetch(place(p))?;
    }
    tally.drain(&mut smi, pid)?;

    let slice = range.as_volatile_slice();
    let mut rng = args.seed.max(1);
    let (mut gpu_reads, mut gpu_writes, mut cpu_pages) = (0u64, 0u64, 0u64);
    for it in 0..args.iterations {
        let marker = u64::from(it) + 1;
        if let Some((_, scratch, _, _)) = &sdma {
            scratch.map_cpu()?.write_slice(&marker.to_le_bytes(), 0)?;
        }
        for op in iteration(args.pattern, blocks, args.block, stride, &mut rng) {
            match op {
                Op::GpuRead(_) => gpu_reads += 1,
                Op::GpuWrite(_) => gpu_writes += 1,
                Op::CpuTouch => {}
            }
            if let Some(k) = &mut kernels_side {
                k.push(op, it, base_va, args.block)?;
                if op == Op::CpuTouch {
                    for b in 0..blocks {
                        cpu_pages += k.cpu_check(&slice, b, args.block, true)?;
                    }
                }
            } else if let Some((_, _, scratch_va, queue)) = &mut sdma {
                let xnack = args.xnack;
                let copy = |queue: &mut SdmaQueue, dst: u64, src: u64| {
                    let c = queue.copy(dst, src, args.block)?;
                    queue.wait(c, COPY_TIMEOUT)
                };
                match op {
                    Op::GpuRead(off) => copy(queue, *scratch_va, base_va + off)
                        .map_err(|e| vm_fault(e, "SDMA copy", xnack))?,
                    Op::GpuWrite(off) => copy(queue, base_va + off, *scratch_va)
                        .map_err(|e| vm_fault(e, "SDMA copy", xnack))?,
                    Op::CpuTouch => {
                        for p in (0..size).step_by(page as usize) {
                            let at = usize::try_from(p)?;
                            let mut word = [0u8; 8];
                            vm_memory::Bytes::read_slice(&slice, &mut word, at)?;
                            vm_memory::Bytes::write_slice(&slice, &word, at)?;
                            cpu_pages += 1;
                        }
                    }
                }
            }
            tally.drain(&mut smi, pid)?;
        }
        if let Some(k) = &mut kernels_side {
            k.flush()?;
            tally.drain(&mut smi, pid)?;
        }
    }
    if matches!(args.pattern, Pattern::PingPong | Pattern::Oversubscribe) {
        if let Some(k) = &kernels_side {
            // Every dword the kernels wrote holds what they wrote last: no write was lost.
            for b in 0..blocks {
                cpu_pages += k.cpu_check(&slice, b, args.block, false)?;
            }
        } else {
            // Every block holds the last iteration's marker: no write was lost.
            let want = u64::from(args.iterations);
            for i in 0..blocks {
                let mut word = [0u8; 8];
                vm_memory::Bytes::read_slice(&slice, &mut word, usize::try_from(i * args.block)?)?;
                cpu_pages += 1;
                if u64::from_le_bytes(word) != want {
                    return Err(format!(
                        "block {i} holds {} after the GPU wrote {want}: data lost",
                        u64::from_le_bytes(word)
                    )
                    .into());
                }
            }
        }
        tally.drain(&mut smi, pid)?;
    }
    let elapsed = started.elapsed();

    let name = |v: &dyn Fn() -> Option<clap::builder::PossibleValue>| {
        v().map_or_else(String::new, |p| p.get_name().to_owned())
    };
    println!(
        "workload {}: {} range at {base_va:#x}, {} blocks of {}, {} iteration(s), XNACK {}, \
         access {}, gpu {gpu} ({} VRAM)",
        name(&|| args.pattern.to_possible_value()),
        human_bytes(size),
        blocks,
        human_bytes(args.block),
        args.iterations,
        name(&|| args.xnack.to_possible_value()),
        name(&|| args.access.to_possible_value()),
        human_bytes(vram_size),
    );
    let how = match &engine {
        Engine::Kernels(_, shift) => {
            println!(
                "engine: kernels on {isa} (an AQL queue; each work-item reads or writes one dword \
                 every {} of a block)",
                human_bytes(1 << shift)
            );
            "kernels"
        }
        Engine::Sdma(reason) => {
            match reason {
                Some(r) => println!("engine: SDMA copies ({r})"),
                None => println!("engine: SDMA copies"),
            }
            "SDMA"
        }
    };
    println!(
        "accesses: {gpu_reads} GPU reads, {gpu_writes} GPU writes ({how}), {cpu_pages} CPU page \
         touches; {:.3} s",
        elapsed.as_secs_f64()
    );
    println!(
        "{:<10} {:<14} {:>10} {:>14}",
        "to", "trigger", "migrations", "bytes"
    );
    let (mut to_gpu, mut to_sys) = (0u64, 0u64);
    for ((gpu_bound, trigger), (count, pages)) in &tally.migrations {
        let bytes = pages * page;
        if *gpu_bound {
            to_gpu += bytes;
        } else {
            to_sys += bytes;
        }
        println!(
            "{:<10} {:<14} {:>10} {:>14}",
            if *gpu_bound { "gpu" } else { "system" },
            trigger,
            count,
            bytes
        );
    }
    println!("total: {to_gpu} bytes to the GPU, {to_sys} bytes to system memory");
    println!(
        "GPU page faults: {} ({} migrated); GPU unmaps: {}; queue evictions: {}",
        tally.gpu_faults, tally.gpu_faults_migrated, tally.unmaps, tally.queue_evictions
    );
    drop(kernels_side);
    if let Some((space, scratch, _, queue)) = sdma {
        drop(queue);
        kfd.unmap_memory_from_gpu(&scratch, &[gpu])?;
        drop(scratch);
        drop(space);
    }
    Ok(())
}

/// `--trace DIR`: the same workload under `kfdtool trace`, every format into `dir`.
fn traced(
    dir: &std::path::Path,
    machine: &str,
    vram: Option<u64>,
    clock: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    // This run's arguments without `--trace DIR` (or `--trace=DIR`).
    let mut inner = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--trace" {
            args.next();
            continue;
        }
        if a.to_string_lossy().starts_with("--trace=") {
            continue;
        }
        inner.push(a);
    }
    let mut command = std::process::Command::new(&exe);
    command.arg("--machine").arg(machine);
    if let Some(v) = vram {
        command.arg("--vram").arg(v.to_string());
    }
    if let Some(c) = clock {
        command.arg("--clock").arg(c);
    }
    command
        .args(["trace", "--format", "rocpd,csv,json,perfetto,svg", "--out"])
        .arg(dir)
        .arg("--")
        .arg(&exe)
        .args(inner);
    let status = command.status()?;
    if !status.success() {
        return Err(format!("kfdtool trace of the workload failed: {status}").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's check reads every touched dword: a block as the kernels leave it passes,
    /// and one wrong dword anywhere is a [`WorkloadError::Data`] naming its offset.
    #[test]
    fn the_cpu_check_finds_a_wrong_dword() {
        for shift in [6u32, 12] {
            let mut bytes = vec![0u8; 2 * 65536];
            let items = 65536u64 >> shift;
            let base = super::base(3, 1);
            for i in 0..items {
                let at = 65536 + (i << shift) as usize;
                bytes[at..at + 4].copy_from_slice(&word(base, i).to_le_bytes());
            }
            let slice = vm_memory::VolatileSlice::from(&mut bytes[..]);
            assert_eq!(
                cpu_check(&slice, 65536, base, items, shift, true).unwrap(),
                16,
                "one write per page"
            );
            let bad = 65536 + ((items - 1) << shift);
            vm_memory::Bytes::write_obj(&slice, 0xdead_beefu32, bad as usize).unwrap();
            let e = cpu_check(&slice, 65536, base, items, shift, false).unwrap_err();
            match e.downcast_ref::<WorkloadError>() {
                Some(WorkloadError::Data { offset, got, .. }) => {
                    assert_eq!((*offset, *got), (bad, 0xdead_beef));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn patterns_touch_the_blocks_they_name() {
        let mut rng = 1;
        assert_eq!(
            iteration(Pattern::Sequential, 3, 4096, 4096, &mut rng),
            [Op::GpuRead(0), Op::GpuRead(4096), Op::GpuRead(8192)]
        );
        assert_eq!(
            iteration(Pattern::Strided, 8, 4096, 3 * 4096, &mut rng),
            [Op::GpuRead(0), Op::GpuRead(3 * 4096), Op::GpuRead(6 * 4096)]
        );
        let stencil = iteration(Pattern::Stencil, 2, 4096, 4096, &mut rng);
        assert_eq!(
            stencil,
            [
                Op::GpuRead(0),
                Op::GpuRead(0),
                Op::GpuRead(4096),
                Op::GpuWrite(0),
                Op::GpuRead(0),
                Op::GpuRead(4096),
                Op::GpuRead(4096),
                Op::GpuWrite(4096),
            ]
        );
        let random = iteration(Pattern::Random, 16, 4096, 4096, &mut rng);
        assert_eq!(random.len(), 16);
        assert!(
            random
                .iter()
                .all(|op| matches!(op, Op::GpuRead(o) if *o < 16 * 4096))
        );
        assert_eq!(
            iteration(Pattern::PingPong, 2, 4096, 4096, &mut rng),
            [Op::GpuWrite(0), Op::GpuWrite(4096), Op::CpuTouch]
        );
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert!(parse_size("0").is_err() && parse_size("x").is_err());
    }
}
