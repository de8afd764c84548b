//! Shared by the execution tests: assemble a snippet with LLVM 19, run it as one wave over a
//! plain memory, and look at the registers and memory it left.
//!
//! `run("s_mov_b32 s0, 7\ns_endpgm", |_| {})` assembles the text with
//! `llvm-mc-19 -triple amdgcn-amd-amdhsa -mcpu=<target> -filetype=obj` (labels and branches
//! resolve), extracts `.text` with `llvm-objcopy-19`, places it at [`CODE`] in a [`TestMemory`]
//! and steps one wave from there until `s_endpgm`, an error or [`MAX_STEPS`]. LLVM missing is a
//! skip outside CI and a failure under `CI=true` (`kfd_skip::prerequisite`).

#![allow(dead_code)]

#[cfg(target_arch = "x86_64")]
pub mod fpu;

use kfd_gfx9::exec::{CodeCache, Ctx, ExecError, Fault, Flow, Memory, Target, Wave, step};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Where the snippet's code is placed.
pub const CODE: u64 = 0x1_0000_0000;
/// Where tests put data (a 1 MiB region is mapped there by [`TestMemory::with_data`]).
pub const DATA: u64 = 0x2_0000_0000;
/// Steps before a run is called a hang.
pub const MAX_STEPS: usize = 1_000_000;

/// A sparse memory of mapped regions (start → bytes); any access outside them faults.
#[derive(Default)]
pub struct TestMemory {
    regions: Mutex<BTreeMap<u64, Vec<u8>>>,
}

impl TestMemory {
    /// A memory holding `code` at [`CODE`] and 1 MiB of zeros at [`DATA`].
    pub fn with_code(code: &[u8]) -> Self {
        let m = Self::default();
        let mut padded = code.to_vec();
        padded.resize(code.len().next_multiple_of(4096).max(4096), 0);
        m.map(CODE, padded);
        m.map(DATA, vec![0; 1 << 20]);
        m
    }

    /// Maps `bytes` at `addr`.
    pub fn map(&self, addr: u64, bytes: Vec<u8>) {
        self.regions.lock().unwrap().insert(addr, bytes);
    }

    /// Runs `f` on the region holding `addr..addr+len` and the offset of `addr` in it.
    fn with<R>(
        &self,
        addr: u64,
        len: usize,
        f: impl FnOnce(&mut Vec<u8>, usize) -> R,
    ) -> Option<R> {
        let mut regions = self.regions.lock().unwrap();
        let (&start, bytes) = regions.range_mut(..=addr).next_back()?;
        let off = (addr - start) as usize;
        if off.checked_add(len)? > bytes.len() {
            return None;
        }
        Some(f(bytes, off))
    }

    /// Reads `len` bytes (panics when unmapped: a test helper).
    pub fn bytes(&self, addr: u64, len: usize) -> Vec<u8> {
        self.with(addr, len, |b, o| b[o..o + len].to_vec())
            .expect("mapped")
    }

    /// Reads a u32.
    pub fn u32(&self, addr: u64) -> u32 {
        u32::from_le_bytes(self.bytes(addr, 4).try_into().unwrap())
    }

    /// Reads a u64.
    pub fn u64(&self, addr: u64) -> u64 {
        u64::from_le_bytes(self.bytes(addr, 8).try_into().unwrap())
    }

    /// Writes bytes (panics when unmapped).
    pub fn put(&self, addr: u64, data: &[u8]) {
        self.with(addr, data.len(), |b, o| {
            b[o..o + data.len()].copy_from_slice(data)
        })
        .expect("mapped");
    }
}

impl Memory for TestMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len();
        self.with(addr, len, |b, o| buf.copy_from_slice(&b[o..o + len]))
            .ok_or(Fault { addr, write: false })
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.with(addr, data.len(), |b, o| {
            b[o..o + data.len()].copy_from_slice(data)
        })
        .ok_or(Fault { addr, write: true })
    }

    fn atomic(&self, addr: u64, size: u8, f: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        let size = usize::from(size);
        if !(size == 4 || size == 8) || !addr.is_multiple_of(size as u64) {
            return Err(Fault { addr, write: true });
        }
        self.with(addr, size, |b, o| {
            let mut raw = [0u8; 8];
            raw[..size].copy_from_slice(&b[o..o + size]);
            let old = u64::from_le_bytes(raw);
            let new = f(old);
            b[o..o + size].copy_from_slice(&new.to_le_bytes()[..size]);
            old
        })
        .ok_or(Fault { addr, write: true })
    }
}

fn tool(name: &str) -> Option<PathBuf> {
    let p = Path::new("/usr/bin").join(name);
    if p.exists() {
        Some(p)
    } else {
        kfd_skip::prerequisite(format!("{name} is missing (Debian llvm-19)"));
        None
    }
}

/// The `.text` bytes of `asm` assembled for `mcpu`, or `None` (skipped) without LLVM 19.
/// Panics with llvm-mc's message when the snippet does not assemble.
pub fn assemble_for(mcpu: &str, asm: &str) -> Option<Vec<u8>> {
    let mc = tool("llvm-mc-19")?;
    let objcopy = tool("llvm-objcopy-19")?;
    let dir = std::env::temp_dir().join(format!(
        "kfd-gfx9-asm-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, obj, bin) = (dir.join("a.s"), dir.join("a.o"), dir.join("a.bin"));
    std::fs::write(&src, format!("{asm}\n")).unwrap();
    let out = Command::new(mc)
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-filetype=obj",
            "-o",
        ])
        .arg(&obj)
        .arg(&src)
        .output()
        .expect("llvm-mc runs");
    assert!(
        out.status.success(),
        "llvm-mc refused the snippet:\n{asm}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(objcopy)
        .args(["-O", "binary", "--only-section=.text"])
        .arg(&obj)
        .arg(&bin)
        .output()
        .expect("llvm-objcopy runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&bin).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

/// The `.text` bytes of `asm` for gfx90a.
pub fn assemble(asm: &str) -> Option<Vec<u8>> {
    assemble_for("gfx90a", asm)
}

/// How a run ended.
pub struct Run {
    /// The wave as it stopped.
    pub wave: Wave,
    /// The memory.
    pub mem: TestMemory,
    /// `Ok(flow)` the last flow (End normally), or the error.
    pub end: Result<Flow, ExecError>,
    /// The LDS (64 KiB).
    pub lds: Vec<u8>,
}

/// Assembles `asm` for gfx90a and runs it as one wave; `setup` prepares the wave and memory.
/// `None` when LLVM is missing (skipped).
pub fn run(asm: &str, setup: impl FnOnce(&mut Wave, &TestMemory)) -> Option<Run> {
    run_on(Target::Gfx90a, "gfx90a", asm, setup)
}

/// As [`run`], for another target.
pub fn run_on(
    target: Target,
    mcpu: &str,
    asm: &str,
    setup: impl FnOnce(&mut Wave, &TestMemory),
) -> Option<Run> {
    let code = assemble_for(mcpu, asm)?;
    let mem = TestMemory::with_code(&code);
    let mut wave = Wave::new(target, CODE);
    setup(&mut wave, &mem);
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::for_target(target);
    let mut end = Ok(Flow::Continue);
    for _ in 0..MAX_STEPS {
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        end = step(&mut wave, &mut ctx);
        match end {
            Ok(Flow::Continue | Flow::Barrier | Flow::Yield | Flow::Message(_)) => continue,
            _ => break,
        }
    }
    Some(Run {
        wave,
        mem,
        end,
        lds,
    })
}

/// Runs `asm` and asserts it ended with `s_endpgm`.
pub fn run_ok(asm: &str, setup: impl FnOnce(&mut Wave, &TestMemory)) -> Option<Run> {
    let r = run(asm, setup)?;
    assert_eq!(
        r.end,
        Ok(Flow::End),
        "the snippet did not reach s_endpgm:\n{asm}\n{:?}",
        r.wave
    );
    Some(r)
}
