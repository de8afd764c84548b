//! VRAM overcommitted by SVM ranges on the mi210x8 preset, as kfdtest's
//! `KFDSVMRangeTest.VramOvercommitTest` and `VramOvercommitGiantRangeTest`
//! (`KFDSVMRangeTest.cpp`) do it: VRAM + 1 GiB of private anonymous memory registered with
//! prefetch and preferred location on the GPU and access for it, in 512 MiB ranges or one
//! range, with XNACK off (/0) and on (/1). On the kernel every call succeeds:
//! * with XNACK off every range counts against the system-memory limit
//!   (`svm_range_add` → `amdgpu_amdkfd_reserve_mem_limit(USERPTR)`), which
//!   `amdgpu_amdkfd_gpuvm_init_mem_limits` sizes from the machine's RAM: 2 × 256 GiB on the
//!   preset, so 65 GiB fits (the test skips on machines where it would not);
//! * the migration of a range that does not fit in VRAM fails (`ENOSPC` from the KFD VRAM
//!   limit in `svm_migrate_ram_to_vram`, or `ENOMEM` when TTM may not evict the process's own
//!   SVM BOs), and `svm_range_trigger_migration` returns 0 all the same (upstream
//!   1e214f7faaf5, "If migrating to VRAM fails, driver can fall back to using system memory
//!   seamlessly"): the range stays in system memory, mapped there.

mod model_svm_support;

use std::sync::Arc;

use model_svm_support::*;

const GIB: u64 = 1 << 30;
/// kfdtest's `BufSize`.
const BUF: u64 = 512 * MIB;

/// Registers VRAM + 1 GiB on the first GPU of mi210x8 as kfdtest does (`giant`: one range;
/// else 512 MiB ranges) with XNACK `xnack`; every call must succeed, the VRAM the ranges hold
/// stays within the GPU's, and what does not fit stays in system memory.
fn overcommit(xnack: bool, giant: bool) {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(xnack).expect("SET_XNACK_MODE");
        let vram = view.machine().gpus()[0].vram_size;
        let ram = view.machine().system_memory();
        // The test's own precondition (it skips otherwise): VRAM + 1 GiB <= RAM / 2.
        assert_eq!(ram, 512 * GIB, "the preset's 2 x 256 GiB");
        assert!(vram + GIB <= ram / 2, "{vram} bytes of VRAM");
        // kfdtest's sizes: one range of VRAM + 1 GiB, or as many 512 MiB ranges as it holds.
        let total = if giant {
            vram + GIB
        } else {
            (vram + GIB) / BUF * BUF
        };
        assert!(total > vram);
        // kfdtest's RegisterSVMRange: prefetch, preferred, flags 0, access.
        let attrs = [prefetch(g), preferred(g), set_flags(0), access(g)];
        let mut mems = Vec::new();
        if giant {
            let mem = Anon::new(total);
            assert_eq!(
                svm_set(&kfd, mem.addr, total, &attrs),
                Ok(()),
                "XNACK {xnack}: one {total}-byte range"
            );
            mems.push(mem);
        } else {
            for i in 0..total / BUF {
                let mem = Anon::new(BUF);
                assert_eq!(
                    svm_set(&kfd, mem.addr, BUF, &attrs),
                    Ok(()),
                    "XNACK {xnack}: range {i} of {}",
                    total / BUF
                );
                mems.push(mem);
            }
        }
        let usage = view.svm_vram_usage(g);
        assert!(usage <= vram, "{usage} bytes of VRAM");
        assert!(usage > 0, "what fits migrated");
        let ranges = view.svm_ranges(pid());
        let bytes = |loc: u32| {
            ranges
                .iter()
                .filter(|r| r.actual_loc == loc)
                .map(|r| r.size)
                .sum::<u64>()
        };
        assert_eq!(bytes(g), usage, "the ranges in VRAM hold its BOs");
        assert!(
            bytes(0) >= total - vram,
            "what does not fit stays in system memory: {} of {total}",
            bytes(0)
        );
        assert_eq!(bytes(0) + bytes(g), total, "every byte registered");
        assert!(
            ranges
                .iter()
                .all(|r| r.prefetch_loc == g && r.preferred_loc == g),
            "the locations asked for are kept"
        );
        drop(mems);
    })
    .expect("attach");
}

#[test]
fn vram_overcommit_by_ranges_with_xnack_off_falls_back_to_system_memory() {
    overcommit(false, false);
}

#[test]
fn vram_overcommit_by_ranges_with_xnack_on_falls_back_to_system_memory() {
    overcommit(true, false);
}

#[test]
fn vram_overcommit_by_one_giant_range_with_xnack_off_falls_back_to_system_memory() {
    overcommit(false, true);
}

#[test]
fn vram_overcommit_by_one_giant_range_with_xnack_on_falls_back_to_system_memory() {
    overcommit(true, true);
}
