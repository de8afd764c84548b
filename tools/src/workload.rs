//! `kfdtool workload PATTERN`: the classic HMM access patterns on one SVM range, with no code
//! to write — sequential streaming, random, strided, a stencil with reuse, CPU↔GPU ping-pong
//! and a working set larger than VRAM — and what they made the driver do.
//!
//! The GPU's accesses are SDMA copies between the range and a small buffer in system memory
//! (a "read" copies a block out of the range, a "write" copies one in), so with XNACK on every
//! access to a page the GPU does not map is a retry fault the driver serves as the kernel
//! does (`svm_range_restore_pages`): migrating the granule to the GPU or mapping it in place,
//! evicting other ranges when VRAM is full. The CPU's accesses are plain loads and stores, which
//! on pages in VRAM fault them back (`svm_migrate_to_ram`). When kfd-emu runs GPU code the same
//! patterns can become kernels; SDMA is what moves GPU data today.
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

/// How long one SDMA copy may take (a loaded machine, an emulator).
const COPY_TIMEOUT: Duration = Duration::from_secs(120);

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
    let vram_size: u64 = topology
        .gpus()
        .find(|n| n.gpu_id() == Some(gpu))
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

    let mut attrs = SvmAttrs::new().access(
        gpu,
        match args.access {
            AccessArg::Access => Access::Access,
            AccessArg::InPlace => Access::AccessInPlace,
        },
    );
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
    let base = range.addr();

    // The GPU's side of its copies: one block of system memory it maps.
    let block = usize::try_from(args.block)?;
    let space =
        Reservation::new(block, 2 << 20).map_err(|e| format!("reserving GPU addresses: {e}"))?;
    let scratch_va = space.addr().as_ptr() as u64;
    let scratch = kfd.alloc_memory_of_gpu(
        gpu,
        scratch_va,
        args.block,
        AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
    )?;
    kfd.map_memory_to_gpu(&scratch, &[gpu])?;
    let scratch_cpu = scratch.map_cpu()?;
    let context = QueueContext::new(&kfd, &topology)?;
    let mut queue = SdmaQueue::new(&context, gpu, SdmaEngine::Pcie, 64 << 10)?;

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

    let mut rng = args.seed.max(1);
    let (mut gpu_reads, mut gpu_writes, mut cpu_pages) = (0u64, 0u64, 0u64);
    let slice = range.as_volatile_slice();
    for it in 0..args.iterations {
        let marker = u64::from(it) + 1;
        scratch_cpu.write_slice(&marker.to_le_bytes(), 0)?;
        for op in iteration(args.pattern, blocks, args.block, stride, &mut rng) {
            match op {
                Op::GpuRead(off) => {
                    let c = queue.copy(scratch_va, base + off, args.block)?;
                    queue.wait(c, COPY_TIMEOUT)?;
                    gpu_reads += 1;
                }
                Op::GpuWrite(off) => {
                    let c = queue.copy(base + off, scratch_va, args.block)?;
                    queue.wait(c, COPY_TIMEOUT)?;
                    gpu_writes += 1;
                }
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
            tally.drain(&mut smi, pid)?;
        }
    }
    if matches!(args.pattern, Pattern::PingPong | Pattern::Oversubscribe) {
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
        tally.drain(&mut smi, pid)?;
    }
    let elapsed = started.elapsed();

    let name = |v: &dyn Fn() -> Option<clap::builder::PossibleValue>| {
        v().map_or_else(String::new, |p| p.get_name().to_owned())
    };
    println!(
        "workload {}: {} range at {base:#x}, {} blocks of {}, {} iteration(s), XNACK {}, \
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
    println!(
        "accesses: {gpu_reads} GPU reads, {gpu_writes} GPU writes (SDMA), {cpu_pages} CPU page \
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
    drop(queue);
    kfd.unmap_memory_from_gpu(&scratch, &[gpu])?;
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
