//! The workload's GPU side as kernels: two small gfx9 kernels assembled with
//! [`kfd_gfx9::asm`] and run on an AQL queue ([`kfd_queue::Kernel`]).
//!
//! * **read** (kernargs: `src` u64 at 0, `out` u64 at 8, `shift` u32 at 16): work-item `i`
//!   loads the dword at `src + (i << shift)` and stores it at `out + 4 i`, so the CPU can check
//!   what the GPU read.
//! * **write** (kernargs: `dst` u64 at 0, `value` u32 at 8, `shift` u32 at 12): work-item `i`
//!   stores `value + i` at `dst + (i << shift)`.
//!
//! A block of `block` bytes is one dispatch of `block >> shift` work-items in workgroups of
//! [`WORKGROUP`]; `shift` is 6 (one dword per 64 bytes, every cache line of the block) or 12
//! (one per 4 KiB page). Offsets are 32-bit (the SADDR form of GLOBAL: an SGPR base plus a
//! VGPR offset), so a block is at most [`MAX_BLOCK`]. The kernels are XNACK-replay safe: no
//! load's address or destination registers are reused before `s_waitcnt` has seen it
//! complete, and the scalar loads do not overwrite their base (AMDGPUUsage "Memory Model",
//! what LLVM's `xnack+` code generation keeps).
//!
//! The register setup is AMDGPUUsage's "Initial Kernel Execution State": the kernarg
//! segment pointer in `s[0:1]` (`ENABLE_SGPR_KERNARG_SEGMENT_PTR`, USER_SGPR_COUNT 2), the
//! work-group id X in `s2`, the work-item id X in `v0` (bits 0–9 on gfx90a/gfx942, which
//! pack the ids; masked for all).

use kfd_gfx9::Operand::{Int, Literal, Sgpr};
use kfd_gfx9::asm::{self, DescriptorBuilder, Program, Saddr};
use kfd_gfx9::exec::Target;
use kfd_ioctl::topology::GfxTargetVersion;

/// Work-items per workgroup (four waves).
pub const WORKGROUP: u32 = 256;
/// The largest block a dispatch covers (32-bit offsets).
pub const MAX_BLOCK: u64 = 1 << 30;
/// The kernarg bytes of either kernel.
pub const KERNARG_BYTES: u64 = 24;

/// The interpreter's (and the encoder's) target for a GPU's ISA: the gfx9 GPUs whose
/// encodings these kernels use; `None` for any other (gfx10 and later, older gfx9).
pub fn target(gfx: GfxTargetVersion) -> Option<Target> {
    match (gfx.major, gfx.minor, gfx.stepping) {
        (9, 0, 6) => Some(Target::Gfx906),
        (9, 0, 8) => Some(Target::Gfx908),
        (9, 0, 10) => Some(Target::Gfx90a),
        (9, 4, 0..=2) => Some(Target::Gfx942),
        _ => None,
    }
}

/// The common prologue: `v1` = the work-item's global id X.
fn global_id(p: &mut Program) -> asm::Result<()> {
    p.push(asm::v_and_b32(0, Literal(0x3ff), 0)?)
        .push(asm::s_lshl_b32(
            Sgpr(3),
            Sgpr(2),
            Int(WORKGROUP.trailing_zeros() as i8),
        )?)
        .push(asm::v_add_u32(1, Sgpr(3), 0)?);
    Ok(())
}

/// The read kernel's machine words.
///
/// # Errors
/// None in practice (every operand is in range); the encoder's typed error otherwise.
pub fn read_code() -> asm::Result<Vec<u32>> {
    let mut p = Program::new();
    p.push(asm::s_load_dwordx4(4, 0, 0)?) // s[4:5] src, s[6:7] out
        .push(asm::s_load_dword(8, 0, 16)?); // s8 shift
    global_id(&mut p)?;
    p.push(asm::s_waitcnt(None, None, Some(0))?)
        .push(asm::v_lshlrev_b32(2, Sgpr(8), 1)?) // i << shift
        .push(asm::v_lshlrev_b32(3, Int(2), 1)?) // 4 i
        .push(asm::global_load_dword(4, 2, Saddr::Sgpr(4), 0)?)
        .push(asm::s_waitcnt(Some(0), None, None)?)
        .push(asm::global_store_dword(3, 4, Saddr::Sgpr(6), 0)?)
        .push(asm::s_waitcnt(Some(0), None, None)?)
        .push(asm::s_endpgm());
    p.finish()
}

/// The write kernel's machine words.
///
/// # Errors
/// As [`read_code`].
pub fn write_code() -> asm::Result<Vec<u32>> {
    let mut p = Program::new();
    p.push(asm::s_load_dwordx2(4, 0, 0)?) // s[4:5] dst
        .push(asm::s_load_dwordx2(6, 0, 8)?); // s6 value, s7 shift
    global_id(&mut p)?;
    p.push(asm::s_waitcnt(None, None, Some(0))?)
        .push(asm::v_lshlrev_b32(2, Sgpr(7), 1)?) // i << shift
        .push(asm::v_add_u32(4, Sgpr(6), 1)?) // value + i
        .push(asm::global_store_dword(2, 4, Saddr::Sgpr(4), 0)?)
        .push(asm::s_waitcnt(Some(0), None, None)?)
        .push(asm::s_endpgm());
    p.finish()
}

/// Either kernel's descriptor for `target` (the entry offset is the loader's,
/// [`kfd_queue::Kernel::new`]).
///
/// # Errors
/// As [`read_code`].
pub fn descriptor(target: Target) -> asm::Result<[u8; 64]> {
    DescriptorBuilder::new(target)
        .vgprs(8)
        // s0-s8, and what LLVM reserves (VCC, FLAT_SCRATCH, XNACK_MASK).
        .sgprs(16)
        .kernarg_segment_ptr()
        .kernarg_size(KERNARG_BYTES as u32)
        .build()
}

/// The read kernel's arguments.
pub fn read_args(src: u64, out: u64, shift: u32) -> Vec<u8> {
    let mut a = Vec::with_capacity(KERNARG_BYTES as usize);
    a.extend(src.to_le_bytes());
    a.extend(out.to_le_bytes());
    a.extend(shift.to_le_bytes());
    a
}

/// The write kernel's arguments.
pub fn write_args(dst: u64, value: u32, shift: u32) -> Vec<u8> {
    let mut a = Vec::with_capacity(KERNARG_BYTES as usize);
    a.extend(dst.to_le_bytes());
    a.extend(value.to_le_bytes());
    a.extend(shift.to_le_bytes());
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_gfx9::dispatch::{self, Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch};
    use kfd_gfx9::exec::{Apertures, Fault, Memory};
    use std::sync::Mutex;

    /// One flat region of memory at `BASE`.
    struct Flat(Mutex<Vec<u8>>);
    const BASE: u64 = 0x10_0000_0000;

    impl Flat {
        fn span(&self, addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
            let off = usize::try_from(addr.checked_sub(BASE)?).ok()?;
            let end = off.checked_add(len)?;
            (end <= self.0.lock().unwrap().len()).then_some(off..end)
        }
        fn u32_at(&self, addr: u64) -> u32 {
            let r = self.span(addr, 4).expect("mapped");
            u32::from_le_bytes(self.0.lock().unwrap()[r].try_into().unwrap())
        }
    }

    impl Memory for Flat {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            let r = self
                .span(addr, buf.len())
                .ok_or(Fault { addr, write: false })?;
            buf.copy_from_slice(&self.0.lock().unwrap()[r]);
            Ok(())
        }
        fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
            let r = self
                .span(addr, data.len())
                .ok_or(Fault { addr, write: true })?;
            self.0.lock().unwrap()[r].copy_from_slice(data);
            Ok(())
        }
        fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
            Err(Fault { addr, write: true })
        }
    }

    /// Runs `code` with `args` over `grid` work-items on `mem` (descriptor at BASE, code at
    /// BASE + 256, kernargs at BASE + 0x1000).
    fn run(target: Target, mem: &Flat, code: &[u32], args: &[u8], grid: u32) {
        let mut kd = descriptor(target).unwrap();
        kd[16..24].copy_from_slice(&256i64.to_le_bytes());
        mem.write(BASE, &kd).unwrap();
        let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.write(BASE + 256, &bytes).unwrap();
        mem.write(BASE + 0x1000, args).unwrap();
        let kd = KernelDescriptor::parse(&kd).unwrap();
        let d = Dispatch {
            target,
            kd,
            entry: kd.entry(BASE),
            grid: [grid, 1, 1],
            workgroup: [WORKGROUP.min(grid), 1, 1],
            kernarg: BASE + 0x1000,
            dispatch_ptr: 0,
            queue_ptr: 0,
            dispatch_id: 0,
            private_segment_size: 0,
            group_segment_size: 0,
            scratch: Scratch::default(),
            apertures: Apertures::default(),
            user_data: None,
        };
        dispatch::run(&d, mem, &RunOptions { threads: 1 }, &NoObserver).expect("runs");
    }

    /// The write kernel stores `value + i` at every 64th byte (or page) of the block and
    /// nothing else; the read kernel gathers the same dwords back.
    #[test]
    fn the_kernels_write_and_read_one_dword_per_64_bytes_or_per_page() {
        for target in [Target::Gfx906, Target::Gfx90a, Target::Gfx942] {
            for shift in [6u32, 12] {
                let mem = Flat(Mutex::new(vec![0; 3 << 20]));
                let block = BASE + (1 << 20);
                let out = BASE + (2 << 20);
                let items = (1u32 << 20) >> shift;
                run(
                    target,
                    &mem,
                    &write_code().unwrap(),
                    &write_args(block, 1000, shift),
                    items,
                );
                for i in 0..items {
                    let at = block + (u64::from(i) << shift);
                    assert_eq!(
                        mem.u32_at(at),
                        1000 + i,
                        "{target:?} shift {shift} item {i}"
                    );
                    assert_eq!(
                        mem.u32_at(at + 4),
                        0,
                        "only one dword per {} bytes",
                        1 << shift
                    );
                }
                run(
                    target,
                    &mem,
                    &read_code().unwrap(),
                    &read_args(block, out, shift),
                    items,
                );
                for i in 0..items {
                    assert_eq!(mem.u32_at(out + 4 * u64::from(i)), 1000 + i);
                }
                assert_eq!(mem.u32_at(out + 4 * u64::from(items)), 0, "past the grid");
            }
        }
    }

    /// Every register the kernels name is inside what the descriptor allocates: 8 ArchVGPRs
    /// (no AGPRs), 16 SGPRs of which the top 6 are VCC, FLAT_SCRATCH and XNACK_MASK's (an
    /// operand names its first register; the widest, `s[4:7]`, ends below s10 too).
    #[test]
    fn the_kernels_stay_in_the_registers_their_descriptor_allocates() {
        use kfd_gfx9::Operand;
        for code in [read_code().unwrap(), write_code().unwrap()] {
            let mut at = 0;
            while at < code.len() {
                let inst = kfd_gfx9::decode(&code[at..]).unwrap();
                for op in inst.dst.iter().chain(&inst.src) {
                    match *op {
                        Operand::Sgpr(n) => assert!(n < 10, "{inst:?}"),
                        Operand::Vgpr(n) => assert!(n < 8, "{inst:?}"),
                        _ => {}
                    }
                }
                at += usize::from(inst.dwords);
            }
        }
        for target in [Target::Gfx90a, Target::Gfx942] {
            let kd = descriptor(target).unwrap();
            assert_eq!(kd[44] & 0x3f, 1, "ACCUM_OFFSET 8: v0-v7 are ArchVGPRs");
        }
    }

    #[test]
    fn gfx9_gpus_get_kernels_and_others_do_not() {
        let v = |major, minor, stepping| GfxTargetVersion {
            major,
            minor,
            stepping,
        };
        assert_eq!(target(v(9, 4, 2)), Some(Target::Gfx942));
        assert_eq!(target(v(9, 0, 10)), Some(Target::Gfx90a));
        assert_eq!(target(v(9, 0, 0)), None);
        assert_eq!(target(v(11, 0, 0)), None);
    }
}
