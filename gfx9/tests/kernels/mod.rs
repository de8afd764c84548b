//! Loading and launching the compiled kernel corpus (`corpus.cl`) on kfd-gfx9's dispatcher,
//! without kfd-emu: shared by `tests/corpus.rs` and `benches/kernels.rs`.
//!
//! [`build`] compiles `corpus.cl` with `clang-19 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa
//! -mcpu=<gfx> -nogpulib -O2 -ffp-contract=off
//! -cl-fp32-correctly-rounded-divide-sqrt` (code object v5, LLVM 19's
//! default) and links it with `ld.lld-19 -shared`, as ROCm's own toolchain does. The shared
//! object is read by a small ELF64 reader ([`CodeObject::parse`]: program headers for the
//! loadable image, `.symtab` for the `NAME.kd` descriptors); the image has no dynamic
//! relocations (the corpus has no globals), so it loads at any base as it is.
//!
//! [`Launch::prepare`] lays out what ROCr and the CP would: the image at [`IMAGE`], the
//! kernarg segment at [`KERNARG`] (the explicit arguments at their natural alignment, then
//! code object v5's hidden arguments, AMDGPUUsage "Code Object V5 Metadata": counts of full
//! blocks, group sizes, remainders, global offsets, grid dims), an `hsa_kernel_dispatch_packet_t` at
//! [`PACKET`] for the dispatch ptr, buffers from [`BUFFERS`], and the queue's scratch with the
//! V# ROCr 5.2 builds for gfx9 (`AqlQueue::InitScratchSRD`: swizzled, ELEMENT_SIZE 4 bytes,
//! INDEX_STRIDE 64, ADD_TID_ENABLE).

#![allow(dead_code)]

use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, Scratch};
use kfd_gfx9::exec::{Apertures, Fault, Memory, Target};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

/// Where the code object's image is loaded.
pub const IMAGE: u64 = 0x1_0000_0000;
/// The kernarg segment.
pub const KERNARG: u64 = 0x3_0000_0000;
/// The dispatch packet.
pub const PACKET: u64 = 0x3_0001_0000;
/// Buffer `i` is at `BUFFERS + i * BUFFER_STRIDE`.
pub const BUFFERS: u64 = 0x4_0000_0000;
/// The spacing of buffers.
pub const BUFFER_STRIDE: u64 = 0x1000_0000;
/// The queue's scratch memory.
pub const SCRATCH: u64 = 0x7_0000_0000;
/// Scratch slots (waves holding scratch at once).
pub const SLOTS: u32 = 64;

/// A memory of fixed regions (set up before the dispatch), each behind its own lock; any
/// access outside them faults.
#[derive(Default)]
pub struct Mem {
    /// (start, length, bytes).
    regions: Vec<(u64, u64, Mutex<Vec<u8>>)>,
}

impl Mem {
    /// Maps `bytes` (padded to a page) at `addr`.
    pub fn map(&mut self, addr: u64, mut bytes: Vec<u8>) {
        bytes.resize(bytes.len().next_multiple_of(4096).max(4096), 0);
        self.regions
            .push((addr, bytes.len() as u64, Mutex::new(bytes)));
    }

    fn with<R>(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        let (start, _, bytes) = self
            .regions
            .iter()
            .find(|(start, size, _)| addr.wrapping_sub(*start) < *size)?;
        let off = usize::try_from(addr - start).ok()?;
        let mut b = bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        b.get_mut(off..off.checked_add(len)?).map(f)
    }

    /// `len` bytes at `addr` (panics when unmapped: a test helper).
    pub fn bytes(&self, addr: u64, len: usize) -> Vec<u8> {
        self.with(addr, len, |b| b.to_vec()).expect("mapped")
    }
}

impl Memory for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.with(addr, buf.len(), |b| buf.copy_from_slice(b))
            .ok_or(Fault { addr, write: false })
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.with(addr, data.len(), |b| b.copy_from_slice(data))
            .ok_or(Fault { addr, write: true })
    }

    fn atomic(&self, addr: u64, size: u8, f: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        let size = usize::from(size);
        if !(size == 4 || size == 8) || !addr.is_multiple_of(size as u64) {
            return Err(Fault { addr, write: true });
        }
        self.with(addr, size, |b| {
            let mut raw = [0u8; 8];
            raw[..size].copy_from_slice(b);
            let old = u64::from_le_bytes(raw);
            b.copy_from_slice(&f(old).to_le_bytes()[..size]);
            old
        })
        .ok_or(Fault { addr, write: true })
    }
}

/// A linked code object: its loadable image (from address 0) and its symbols.
#[derive(Debug)]
pub struct CodeObject {
    /// The PT_LOAD segments at their virtual addresses, zero-filled between and after.
    pub image: Vec<u8>,
    /// Symbol name → virtual address.
    pub symbols: HashMap<String, u64>,
}

fn u16_at(b: &[u8], o: usize) -> Result<u16, String> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn u32_at(b: &[u8], o: usize) -> Result<u32, String> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes(s.try_into().unwrap()))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn u64_at(b: &[u8], o: usize) -> Result<u64, String> {
    b.get(o..o + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn usize_at(b: &[u8], o: usize) -> Result<usize, String> {
    usize::try_from(u64_at(b, o)?).map_err(|e| e.to_string())
}

impl CodeObject {
    /// Reads an ELF64 little-endian shared object for AMDGPU (`EM_AMDGPU` 224): the System V
    /// gABI's header, program header and section header layouts.
    pub fn parse(elf: &[u8]) -> Result<Self, String> {
        if elf.get(..4) != Some(b"\x7fELF") || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
            return Err("not an ELF64 little-endian file".into());
        }
        if u16_at(elf, 18)? != 224 {
            return Err("not an AMDGPU ELF".into());
        }
        let (phoff, shoff) = (usize_at(elf, 32)?, usize_at(elf, 40)?);
        let (phentsize, phnum) = (usize::from(u16_at(elf, 54)?), usize::from(u16_at(elf, 56)?));
        let (shentsize, shnum) = (usize::from(u16_at(elf, 58)?), usize::from(u16_at(elf, 60)?));
        let mut image = Vec::new();
        for i in 0..phnum {
            let ph = phoff + i * phentsize;
            if u32_at(elf, ph)? != 1 {
                continue; // not PT_LOAD
            }
            let (off, vaddr) = (usize_at(elf, ph + 8)?, usize_at(elf, ph + 16)?);
            let (filesz, memsz) = (usize_at(elf, ph + 32)?, usize_at(elf, ph + 40)?);
            if image.len() < vaddr + memsz {
                image.resize(vaddr + memsz, 0);
            }
            let src = elf
                .get(off..off + filesz)
                .ok_or("a segment past the file's end")?;
            image[vaddr..vaddr + filesz].copy_from_slice(src);
        }
        let mut symbols = HashMap::new();
        for i in 0..shnum {
            let sh = shoff + i * shentsize;
            let ty = u32_at(elf, sh + 4)?;
            if ty == 4 || ty == 9 {
                return Err("the code object has relocations".into()); // SHT_RELA, SHT_REL
            }
            if ty != 2 {
                continue; // not SHT_SYMTAB
            }
            let (off, size) = (usize_at(elf, sh + 24)?, usize_at(elf, sh + 32)?);
            let strtab = shoff + u32_at(elf, sh + 40)? as usize * shentsize;
            let str_off = usize_at(elf, strtab + 24)?;
            for s in (off..off + size).step_by(24) {
                let name = str_off + u32_at(elf, s)? as usize;
                let end = elf[name..]
                    .iter()
                    .position(|&c| c == 0)
                    .ok_or("an unterminated name")?;
                let name = String::from_utf8_lossy(&elf[name..name + end]).into_owned();
                symbols.insert(name, u64_at(elf, s + 8)?);
            }
        }
        Ok(Self { image, symbols })
    }
}

/// The mcpu name of a target.
pub fn mcpu(target: Target) -> &'static str {
    match target {
        Target::Gfx906 => "gfx906",
        Target::Gfx908 => "gfx908",
        Target::Gfx90a => "gfx90a",
        Target::Gfx942 => "gfx942",
        Target::Gfx11 => "gfx1100",
    }
}

/// The corpus compiled and linked for `target`, once per process; `None` (a skip outside CI)
/// without clang-19 and ld.lld-19. Panics with the compiler's message when it fails.
pub fn build(target: Target) -> Option<Arc<CodeObject>> {
    build_at(target, "-O2")
}

/// [`build`] at another optimization level (`-O0`: every value through the stack in
/// scratch, calls not inlined), or with more options after it (`"-O2 -cl-denorms-are-zero"`).
pub fn build_at(target: Target, opt: &'static str) -> Option<Arc<CodeObject>> {
    let mut args: Vec<String> = vec!["-nogpulib".into()];
    args.extend(opt.split_whitespace().map(String::from));
    args.extend(
        [
            "-ffp-contract=off",
            "-cl-fp32-correctly-rounded-divide-sqrt",
        ]
        .map(String::from),
    );
    compile("corpus.cl", target, opt, &args)
}

/// `lds_dma.cl` (gfx942's loads to LDS through `__builtin_amdgcn_global_load_lds`) at -O2,
/// once per process; LLVM 19's post-RA machine scheduler crashes on it for gfx942, so that
/// pass is off for this file only.
pub fn build_lds_dma(target: Target) -> Option<Arc<CodeObject>> {
    let args: Vec<String> = ["-nogpulib", "-O2", "-mllvm", "-enable-post-misched=false"]
        .map(String::from)
        .to_vec();
    compile("lds_dma.cl", target, "lds_dma", &args)
}

/// `lds_dma_ir.ll` (MUBUF's and the gfx9 global loads' LDS bit, gfx942's
/// `global_load_lds_ushort`, from the LLVM intrinsics) at -O2, once per process, with the
/// same post-RA scheduler workaround.
pub fn build_lds_dma_ir(target: Target) -> Option<Arc<CodeObject>> {
    let args: Vec<String> = ["-nogpulib", "-O2", "-mllvm", "-enable-post-misched=false"]
        .map(String::from)
        .to_vec();
    compile("lds_dma_ir.ll", target, "lds_dma_ir", &args)
}

/// `gfx11.cl` for gfx1100 (wave32, LLVM's default there) at -O2, once per process.
pub fn build_gfx11() -> Option<Arc<CodeObject>> {
    let args: Vec<String> = ["-nogpulib", "-O2", "-ffp-contract=off"]
        .map(String::from)
        .to_vec();
    compile("gfx11.cl", Target::Gfx11, "gfx11", &args)
}

/// Where Debian's `rocm-device-libs` (ROCm 5.2.3) installs the device libraries' bitcode.
pub const DEVICE_LIBS: &str = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode";

/// `ocl.cl` compiled at -O2 against the ROCm device libraries (the OpenCL library: work-item
/// functions, ocml's math, ockl's sub-group operations); `None` (a skip outside CI) without
/// them. ROCm 5.2's libraries predate gfx942: for it the libraries are linked by hand with
/// the ISA-version bitcode of gfx940, its nearest.
pub fn build_ocl(target: Target) -> Option<Arc<CodeObject>> {
    if !Path::new(DEVICE_LIBS).join("ocml.bc").exists() {
        kfd_skip::prerequisite("the ROCm device libraries are missing (Debian rocm-device-libs)");
        return None;
    }
    let mut args: Vec<String> = vec!["-O2".into()];
    if target == Target::Gfx942 {
        args.push("-nogpulib".into());
        for lib in [
            "opencl",
            "ocml",
            "ockl",
            "oclc_isa_version_940",
            "oclc_abi_version_500",
            "oclc_wavefrontsize64_on",
            "oclc_daz_opt_off",
            "oclc_finite_only_off",
            "oclc_unsafe_math_off",
            "oclc_correctly_rounded_sqrt_on",
        ] {
            args.extend([
                "-Xclang".into(),
                "-mlink-builtin-bitcode".into(),
                "-Xclang".into(),
            ]);
            args.push(format!("{DEVICE_LIBS}/{lib}.bc"));
        }
    } else {
        args.push(format!("--rocm-device-lib-path={DEVICE_LIBS}"));
    }
    compile("ocl.cl", target, "ocl", &args)
}

/// `tests/kernels/<src>` (OpenCL C, or LLVM IR when it ends in `.ll`) compiled with `args` for
/// `target` and linked, once per process per (`target`, `key`).
fn compile(
    src: &str,
    target: Target,
    key: &'static str,
    args: &[String],
) -> Option<Arc<CodeObject>> {
    type Built = HashMap<(Target, &'static str), Arc<CodeObject>>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    for tool in ["clang-19", "ld.lld-19"] {
        if !Path::new("/usr/bin").join(tool).exists() {
            kfd_skip::prerequisite(format!("{tool} is missing (Debian clang-19, lld-19)"));
            return None;
        }
    }
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(obj) = built.get(&(target, key)) {
        return Some(obj.clone());
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kernels")
        .join(src);
    let dir = std::env::temp_dir().join(format!("kfd-gfx9-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stem = format!("{}{}", mcpu(target), key.replace(' ', ""));
    let (o, so) = (
        dir.join(format!("{stem}.o")),
        dir.join(format!("{stem}.so")),
    );
    // OpenCL C, or LLVM IR (`.ll`).
    let lang: &[&str] = if src.extension().is_some_and(|e| e == "ll") {
        &["-x", "ir"]
    } else {
        &["-x", "cl", "-cl-std=CL2.0"]
    };
    let out = Command::new("clang-19")
        .args(lang)
        .args(["-target", "amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={}", mcpu(target)))
        .args(args)
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&o)
        .output()
        .expect("clang-19 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("ld.lld-19")
        .arg("-shared")
        .arg(&o)
        .arg("-o")
        .arg(&so)
        .output()
        .expect("ld.lld-19 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let obj = Arc::new(CodeObject::parse(&std::fs::read(&so).unwrap()).expect("the ELF parses"));
    let _ = std::fs::remove_file(&o);
    let _ = std::fs::remove_file(&so);
    // Empty now (compiles run one at a time, under the lock).
    let _ = std::fs::remove_dir(&dir);
    built.insert((target, key), obj.clone());
    Some(obj)
}

/// A kernel argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// The address of buffer `i`.
    Buf(usize),
    /// A 32-bit value.
    U32(u32),
    /// An f32.
    F32(f32),
    /// A `__local` pointer argument: the LDS offset of the launch's dynamic LDS (past the
    /// kernel's static LDS, 16-aligned), as the runtime passes it.
    DynLds,
}

/// One launch of a corpus kernel.
pub struct Launch<'a> {
    /// The GPU.
    pub target: Target,
    /// The kernel's name.
    pub kernel: &'a str,
    /// Its explicit arguments.
    pub args: &'a [Arg],
    /// Its buffers' initial contents.
    pub buffers: Vec<Vec<u8>>,
    /// Work-items per dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup per dimension.
    pub workgroup: [u32; 3],
    /// Bytes of dynamic LDS (for an [`Arg::DynLds`]).
    pub dynamic_lds: u32,
}

/// The address of buffer `i`.
pub fn buffer(i: usize) -> u64 {
    BUFFERS + i as u64 * BUFFER_STRIDE
}

impl Launch<'_> {
    /// The memory and the dispatch, as ROCr and the CP would set them up.
    pub fn prepare(&self, obj: &CodeObject) -> (Mem, Dispatch) {
        let kd_at = *obj
            .symbols
            .get(&format!("{}.kd", self.kernel))
            .unwrap_or_else(|| panic!("no kernel {}", self.kernel));
        let kd_off = kd_at as usize;
        let kd = KernelDescriptor::parse_for(&obj.image[kd_off..kd_off + 64], self.target)
            .expect("descriptor");
        let mut mem = Mem::default();
        mem.map(IMAGE, obj.image.clone());
        // Explicit arguments, then v5's hidden ones from the next multiple of 8.
        let dyn_offset = kd.group_segment_fixed_size.next_multiple_of(16);
        let mut ka = Vec::new();
        for a in self.args {
            let bytes = match *a {
                Arg::Buf(i) => buffer(i).to_le_bytes().to_vec(),
                Arg::U32(v) => v.to_le_bytes().to_vec(),
                Arg::F32(v) => v.to_le_bytes().to_vec(),
                Arg::DynLds => dyn_offset.to_le_bytes().to_vec(),
            };
            ka.resize(ka.len().next_multiple_of(bytes.len()), 0);
            ka.extend(bytes);
        }
        ka.resize(ka.len().next_multiple_of(8), 0);
        // hidden_block_count_{x,y,z}: the full work-groups only (a partial last one is the
        // remainder's: clang's EmitAMDGPUWorkGroupSize and ockl's get_local_size read
        // `group_id < block_count ? group_size : remainder`).
        for d in 0..3 {
            ka.extend((self.grid[d] / self.workgroup[d]).to_le_bytes());
        }
        for w in self.workgroup {
            ka.extend((w as u16).to_le_bytes()); // hidden_group_size_{x,y,z}
        }
        for d in 0..3 {
            ka.extend(((self.grid[d] % self.workgroup[d]) as u16).to_le_bytes()); // remainder
        }
        ka.resize(ka.len() + 16, 0); // reserved
        ka.resize(ka.len() + 24, 0); // hidden_global_offset_{x,y,z}
        let dims = if self.grid[2] > 1 {
            3u16
        } else if self.grid[1] > 1 {
            2
        } else {
            1
        };
        ka.extend(dims.to_le_bytes()); // hidden_grid_dims
        ka.resize(ka.len().max(kd.kernarg_size as usize).max(256), 0);
        mem.map(KERNARG, ka);
        // hsa_kernel_dispatch_packet_t.
        let mut p = vec![0u8; 64];
        p[2..4].copy_from_slice(&dims.to_le_bytes());
        for d in 0..3 {
            p[4 + 2 * d..6 + 2 * d].copy_from_slice(&(self.workgroup[d] as u16).to_le_bytes());
            p[12 + 4 * d..16 + 4 * d].copy_from_slice(&self.grid[d].to_le_bytes());
        }
        p[24..28].copy_from_slice(&kd.private_segment_fixed_size.to_le_bytes());
        let group_segment_size = if self.dynamic_lds > 0 {
            dyn_offset + self.dynamic_lds
        } else {
            kd.group_segment_fixed_size
        };
        p[28..32].copy_from_slice(&group_segment_size.to_le_bytes());
        p[32..40].copy_from_slice(&(IMAGE + kd_at).to_le_bytes());
        p[40..48].copy_from_slice(&KERNARG.to_le_bytes());
        mem.map(PACKET, p);
        for (i, b) in self.buffers.iter().enumerate() {
            mem.map(buffer(i), b.clone());
        }
        let private = kd.private_segment_fixed_size.next_multiple_of(4);
        let wave_bytes = (u64::from(private) * 64).next_multiple_of(1024);
        let size = wave_bytes * u64::from(SLOTS);
        if size > 0 {
            mem.map(SCRATCH, vec![0; size as usize]);
        }
        let d = Dispatch {
            target: self.target,
            kd,
            entry: kd.entry(IMAGE + kd_at),
            grid: self.grid,
            workgroup: self.workgroup,
            kernarg: KERNARG,
            dispatch_ptr: PACKET,
            queue_ptr: 0,
            dispatch_id: 0,
            private_segment_size: private,
            group_segment_size,
            scratch: Scratch {
                srd: [
                    SCRATCH as u32,
                    (SCRATCH >> 32) as u32 | 1 << 31,
                    size as u32,
                    1 << 19 | 3 << 21 | 1 << 23,
                ],
                base: SCRATCH,
                wave_bytes,
                slots: if size > 0 { SLOTS } else { 0 },
            },
            apertures: Apertures {
                shared_base: 0x1000_0000_0000_0000,
                private_base: 0x2000_0000_0000_0000,
                ..Apertures::default()
            },
            user_data: None,
        };
        (mem, d)
    }
}
