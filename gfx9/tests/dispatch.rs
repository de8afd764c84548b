//! The dispatcher against kernels LLVM 19 assembles with `.amdhsa_kernel` directives: the
//! descriptor LLVM writes parses to what the directives said, every wave of a grid starts with
//! the registers AMDGPUUsage's "Initial Kernel Execution State" gives it (checked through the
//! observer hook), workgroups run on several threads, `s_barrier` joins a workgroup's waves,
//! and errors name the wave and pc.

mod common;

use common::TestMemory;
use kfd_gfx9::dispatch::{
    DescriptorError, Dispatch, DispatchError, KernelDescriptor, NoObserver, Observer, RunOptions,
    Scratch, run,
};
use kfd_gfx9::exec::{Apertures, ExecError, Target, Wave};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the kernel descriptor is placed (its code at [`common::CODE`]).
const DESC: u64 = 0x1_8000_0000;

/// Every user and system SGPR and all three work-item ids.
const ALL_SGPRS: &str = "
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_queue_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_user_sgpr_dispatch_id 1
  .amdhsa_user_sgpr_flat_scratch_init 1
  .amdhsa_user_sgpr_private_segment_size 1
  .amdhsa_system_sgpr_private_segment_wavefront_offset 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_sgpr_workgroup_id_y 1
  .amdhsa_system_sgpr_workgroup_id_z 1
  .amdhsa_system_sgpr_workgroup_info 1
  .amdhsa_system_vgpr_workitem_id 2
  .amdhsa_private_segment_fixed_size 48
  .amdhsa_group_segment_fixed_size 1000
  .amdhsa_kernarg_size 24
  .amdhsa_float_denorm_mode_32 3
  .amdhsa_float_round_mode_32 1
  .amdhsa_ieee_mode 1
  .amdhsa_dx10_clamp 1";

/// Assembles kernel `k` (`body`, then `directives` in its `.amdhsa_kernel` block) for `mcpu`
/// and returns its `.text` and its 64-byte descriptor (`.rodata`); `None` without LLVM 19.
fn kernel(mcpu: &str, body: &str, directives: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let accum = if matches!(mcpu, "gfx90a" | "gfx942") {
        ".amdhsa_accum_offset 4"
    } else {
        ""
    };
    let src = format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--{mcpu}\"\n.text\n.globl k\n.p2align 8\n\
         .type k,@function\nk:\n{body}\n.rodata\n.p2align 6\n.amdhsa_kernel k\n\
         .amdhsa_next_free_vgpr 32\n.amdhsa_next_free_sgpr 32\n{accum}\n{directives}\n\
         .end_amdhsa_kernel\n"
    );
    let text = common::assemble_for(mcpu, &src)?;
    // The descriptor: the same object's .rodata.
    let dir = std::env::temp_dir().join(format!(
        "kfd-gfx9-kd-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (s, o, b) = (dir.join("k.s"), dir.join("k.o"), dir.join("kd.bin"));
    std::fs::write(&s, &src).unwrap();
    let ok = Command::new("llvm-mc-19")
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-filetype=obj",
            "-o",
        ])
        .arg(&o)
        .arg(&s)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let ok = Command::new("llvm-objcopy-19")
        .args(["-O", "binary", "--only-section=.rodata"])
        .arg(&o)
        .arg(&b)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let kd = std::fs::read(&b).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(kd.len(), 64, "one descriptor");
    Some((text, kd))
}

/// A memory with the kernel's code at CODE and its descriptor at DESC, the descriptor's entry
/// offset filled in as the linker would (in the object it is a relocation).
fn load(text: &[u8], kd: &[u8]) -> (TestMemory, KernelDescriptor) {
    let mem = TestMemory::with_code(text);
    let mut kd = kd.to_vec();
    let offset = common::CODE.wrapping_sub(DESC) as i64;
    kd[16..24].copy_from_slice(&offset.to_le_bytes());
    let mut page = kd.clone();
    page.resize(4096, 0);
    mem.map(DESC, page);
    let parsed = KernelDescriptor::parse(&kd).expect("LLVM's descriptor parses");
    assert_eq!(parsed.entry(DESC), common::CODE);
    (mem, parsed)
}

fn dispatch(target: Target, kd: KernelDescriptor, grid: [u32; 3], wg: [u32; 3]) -> Dispatch {
    Dispatch {
        target,
        kd,
        entry: kd.entry(DESC),
        grid,
        workgroup: wg,
        kernarg: 0x3_0000_1000,
        dispatch_ptr: 0x3_0000_2040,
        queue_ptr: 0x3_0000_3000,
        dispatch_id: 0x1_2345_6789,
        private_segment_size: 46,
        group_segment_size: 1000,
        scratch: Scratch {
            srd: [0x1111, 0x2222, 0x3333, 0x4444],
            base: 0x7_0000_0000,
            wave_bytes: 4096,
            slots: 64,
        },
        apertures: Apertures {
            shared_base: 0x1000_0000_0000_0000,
            private_base: 0x2000_0000_0000_0000,
            ..Apertures::default()
        },
        user_data: None,
    }
}

/// Records every wave's start state.
#[derive(Default)]
struct Recorder {
    waves: Mutex<BTreeMap<([u32; 3], u32), Wave>>,
}

impl Observer for Recorder {
    fn wave_start(&self, workgroup: [u32; 3], wave: u32, state: &Wave) {
        let old = self
            .waves
            .lock()
            .unwrap()
            .insert((workgroup, wave), state.clone());
        assert!(old.is_none(), "wave {workgroup:?}/{wave} started twice");
    }
}

#[test]
fn llvm_descriptor_parses_to_what_the_directives_say() {
    let Some((_, kd)) = kernel("gfx90a", "s_endpgm", ALL_SGPRS) else {
        return;
    };
    let kd = KernelDescriptor::parse(&kd).unwrap();
    assert_eq!(kd.group_segment_fixed_size, 1000);
    assert_eq!(kd.private_segment_fixed_size, 48);
    assert_eq!(kd.kernarg_size, 24);
    assert_eq!(kd.enabled_user_sgprs(), 15);
    assert_eq!(kd.user_sgpr_count(), 15);
    assert_eq!(kd.system_sgprs(), 5);
    assert_eq!(kd.workgroup_id(), [true; 3]);
    assert!(kd.workgroup_info() && kd.private_segment());
    assert_eq!(kd.workitem_id_vgprs(), 3);
    // MODE: round mode 32 = 1 (bits 0-1), denorm 32 = 3 (bits 4-5), 16/64 denorm LLVM's
    // default 3 (bits 6-7), DX10 clamp (8), IEEE (9).
    let mode = kd.mode();
    assert_eq!(mode & 0x3, 1);
    assert_eq!(mode >> 4 & 0xf, 0xf);
    assert_eq!(mode >> 8 & 3, 3);
}

#[test]
fn descriptor_errors_are_typed() {
    assert_eq!(
        KernelDescriptor::parse(&[0; 63]),
        Err(DescriptorError::Short(63))
    );
    let mut kd = [0u8; 64];
    kd[56] = 0; // no user SGPRs
    kd[57] = 1 << 2; // bit 10: wave32
    assert_eq!(KernelDescriptor::parse(&kd), Err(DescriptorError::Wave32));
    // The entry offset need not be 256-aligned (a descriptor is 64-byte aligned), the code
    // is: the CP drops the address's low 8 bits (COMPUTE_PGM_LO holds it shifted by 8).
    let mut kd = [0u8; 64];
    kd[16..24].copy_from_slice(&0x1080i64.to_le_bytes());
    let parsed = KernelDescriptor::parse(&kd).unwrap();
    assert_eq!(parsed.entry(0x7000_0680), 0x7000_1700);
    assert_eq!(parsed.entry(0x7000_0640), 0x7000_1600);
    let mut kd = [0u8; 64];
    kd[56] = 0x0b; // private segment buffer, dispatch ptr, kernarg ptr: 8 SGPRs
    kd[52] = 4 << 1; // USER_SGPR_COUNT 4
    assert_eq!(
        KernelDescriptor::parse(&kd),
        Err(DescriptorError::UserSgprs {
            needed: 8,
            count: 4
        })
    );
    let mut kd = [0u8; 64];
    kd[53] = 3 << 3; // ENABLE_VGPR_WORKITEM_ID 3
    assert_eq!(
        KernelDescriptor::parse(&kd),
        Err(DescriptorError::WorkItemIds)
    );
}

/// The expected work-item ids of `lane` of `wave` in a workgroup of `size`.
fn ids(size: [u32; 3], wave: u32, lane: usize) -> Option<[u32; 3]> {
    let i = u64::from(wave) * 64 + lane as u64;
    let items = size.iter().map(|&n| u64::from(n)).product::<u64>();
    (i < items).then(|| {
        let (sx, sy) = (u64::from(size[0]), u64::from(size[1]));
        [(i % sx) as u32, (i / sx % sy) as u32, (i / sx / sy) as u32]
    })
}

#[test]
fn every_wave_starts_with_the_abi_registers() {
    let Some((text, kd)) = kernel("gfx90a", "s_endpgm", ALL_SGPRS) else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    // 3 x 3 x 2 workgroups, the last in X and Y partial: 70 = 32 + 32 + 6, 5 = 2 + 2 + 1.
    let d = dispatch(Target::Gfx90a, kd, [70, 5, 2], [32, 2, 1]);
    let rec = Recorder::default();
    let stats = run(&d, &mem, &RunOptions { threads: 3 }, &rec).expect("runs");
    assert_eq!(stats.workgroups, 18);
    let waves = rec.waves.into_inner().unwrap();
    let mut expect_waves = 0;
    for z in 0..2u32 {
        for y in 0..3u32 {
            for x in 0..3u32 {
                let size: [u32; 3] = [if x == 2 { 6 } else { 32 }, if y == 2 { 1 } else { 2 }, 1];
                let items = size[0] * size[1];
                let n = items.div_ceil(64);
                for wave in 0..n {
                    expect_waves += 1;
                    let w = &waves[&([x, y, z], wave)];
                    assert_eq!(w.pc, common::CODE);
                    let s = &w.sgpr;
                    assert_eq!(s[0..4], [0x1111, 0x2222, 0x3333, 0x4444], "SRD");
                    assert_eq!(s[4..6], [0x0000_2040, 3], "dispatch ptr");
                    assert_eq!(s[6..8], [0x0000_3000, 3], "queue ptr");
                    assert_eq!(s[8..10], [0x0000_1000, 3], "kernarg ptr");
                    assert_eq!(s[10..12], [0x2345_6789, 1], "dispatch id");
                    assert_eq!(s[12..14], [0, 7], "flat scratch init");
                    assert_eq!(s[14], 48, "private segment size, dword-rounded");
                    assert_eq!(s[15..18], [x, y, z], "workgroup ids");
                    assert_eq!(s[18], u32::from(wave == 0) << 31 | n, "workgroup info");
                    // The scratch slot: one per wave of the thread's workgroup.
                    assert_eq!(s[19] % 4096, 0);
                    assert!(s[19] / 4096 < 64, "a slot within the queue's");
                    assert_eq!(w.apertures.scratch_base, 0x7_0000_0000 + u64::from(s[19]));
                    assert_eq!(w.apertures.shared_base, 0x1000_0000_0000_0000);
                    for lane in 0..64 {
                        let on = w.exec >> lane & 1 == 1;
                        match ids(size, wave, lane) {
                            Some([ix, iy, iz]) => {
                                assert!(on, "lane {lane} of a live work-item is on");
                                assert_eq!(
                                    w.vgpr[0][lane],
                                    ix | iy << 10 | iz << 20,
                                    "packed ids of lane {lane}"
                                );
                            }
                            None => assert!(!on, "lane {lane} past the workgroup is off"),
                        }
                    }
                }
            }
        }
    }
    assert_eq!(waves.len(), expect_waves);
    assert_eq!(stats.waves, expect_waves as u64);
    // Waves of one workgroup never share a scratch slot.
    for z in 0..2u32 {
        for y in 0..3u32 {
            for x in 0..3u32 {
                let offsets: Vec<u32> = (0..2)
                    .filter_map(|wv| waves.get(&([x, y, z], wv)).map(|w| w.sgpr[19]))
                    .collect();
                let mut dedup = offsets.clone();
                dedup.dedup();
                assert_eq!(offsets, dedup);
            }
        }
    }
}

#[test]
fn gfx908_gets_one_vgpr_per_work_item_id_and_few_sgprs() {
    let Some((text, kd)) = kernel(
        "gfx908",
        "s_endpgm",
        ".amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
         .amdhsa_system_sgpr_workgroup_id_y 1\n\
         .amdhsa_system_vgpr_workitem_id 1",
    ) else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    // LLVM 19 enables the private segment buffer for gfx908 by default (4 user SGPRs), then
    // the kernarg ptr; system SGPRs: workgroup id X (on by default), Y.
    let d = dispatch(Target::Gfx908, kd, [16, 16, 1], [8, 8, 1]);
    let rec = Recorder::default();
    run(&d, &mem, &RunOptions { threads: 1 }, &rec).expect("runs");
    let waves = rec.waves.into_inner().unwrap();
    assert_eq!(waves.len(), 4);
    let w = &waves[&([1, 1, 0], 0)];
    let user = kd.user_sgpr_count() as usize;
    assert_eq!(user, kd.enabled_user_sgprs() as usize);
    assert_eq!(w.sgpr[user - 2..user], [0x1000, 3], "kernarg ptr last");
    assert_eq!(w.sgpr[user..user + 2], [1, 1], "workgroup id x, y");
    assert_eq!(w.sgpr[user + 2], 0, "nothing more");
    assert_eq!(w.exec, u64::MAX);
    for lane in 0..64 {
        assert_eq!(w.vgpr[0][lane], lane as u32 % 8, "v0 = x");
        assert_eq!(w.vgpr[1][lane], lane as u32 / 8, "v1 = y");
        assert_eq!(w.vgpr[2][lane], 0, "z not enabled");
    }
}

#[test]
fn waves_meet_at_s_barrier_and_the_dispatch_ends() {
    // Four waves per workgroup through two barriers (EXEC is never zero at the start: the
    // branch falls through).
    let Some((text, kd)) = kernel(
        "gfx90a",
        "s_cbranch_execz done\n s_barrier\n s_mov_b32 s20, 1\n s_barrier\n done:\n s_endpgm",
        ".amdhsa_system_sgpr_workgroup_info 1",
    ) else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let d = dispatch(Target::Gfx90a, kd, [256 * 8, 1, 1], [256, 1, 1]);
    let stats = run(&d, &mem, &RunOptions { threads: 2 }, &NoObserver).expect("runs");
    assert_eq!(stats.workgroups, 8);
    assert_eq!(stats.waves, 32);
    // Each wave: branch, barrier, mov, barrier, endpgm.
    assert_eq!(stats.instructions, 32 * 5);
}

#[test]
fn an_illegal_instruction_names_its_wave_and_pc() {
    let Some((text, kd)) = kernel("gfx90a", "s_nop 0\n.long 0xffffffff\ns_endpgm", "") else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let d = dispatch(Target::Gfx90a, kd, [64, 1, 1], [64, 1, 1]);
    match run(&d, &mem, &RunOptions { threads: 1 }, &NoObserver) {
        Err(DispatchError::Wave {
            workgroup,
            wave,
            error: ExecError::Decode { pc, .. },
        }) => {
            assert_eq!((workgroup, wave), ([0, 0, 0], 0));
            assert_eq!(pc, common::CODE + 4);
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn an_unmapped_entry_is_a_fetch_fault_and_stops_every_thread() {
    let Some((text, kd)) = kernel("gfx90a", "s_endpgm", "") else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let mut d = dispatch(Target::Gfx90a, kd, [64 * 100, 1, 1], [64, 1, 1]);
    d.entry = 0x9_0000_0000;
    let rec = Recorder::default();
    match run(&d, &mem, &RunOptions { threads: 4 }, &rec) {
        Err(DispatchError::Wave {
            error: ExecError::Memory { pc, fault },
            ..
        }) => {
            assert_eq!(pc, 0x9_0000_0000);
            assert_eq!(fault.addr, 0x9_0000_0000);
        }
        other => panic!("expected a fetch fault, got {other:?}"),
    }
    // No thread went on through the grid after the first fault.
    assert!(rec.waves.lock().unwrap().len() < 100);
}

#[test]
fn bad_sizes_and_missing_scratch_are_refused_before_any_wave() {
    let Some((text, kd)) = kernel("gfx90a", "s_endpgm", ALL_SGPRS) else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let rec = Recorder::default();
    let opts = RunOptions { threads: 1 };
    let d = dispatch(Target::Gfx90a, kd, [0, 1, 1], [64, 1, 1]);
    assert!(matches!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Invalid(_))
    ));
    let d = dispatch(Target::Gfx90a, kd, [64, 64, 1], [64, 32, 1]);
    assert!(matches!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Invalid(_))
    ));
    // 2^96 workgroups: refused, not an overflow.
    let d = dispatch(Target::Gfx90a, kd, [u32::MAX; 3], [1, 1, 1]);
    assert!(matches!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Invalid(_))
    ));
    let mut d = dispatch(Target::Gfx90a, kd, [64, 1, 1], [64, 1, 1]);
    d.group_segment_size = 65 << 10;
    assert!(matches!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Invalid(_))
    ));
    // 46 bytes per item (48 rounded) x 64 lanes = 3072 per wave; a queue without scratch.
    let mut d = dispatch(Target::Gfx90a, kd, [64, 1, 1], [64, 1, 1]);
    d.scratch = Scratch::default();
    assert_eq!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Scratch {
            needed: 3072,
            have: 0
        })
    );
    d.scratch = Scratch {
        wave_bytes: 2048,
        slots: 8,
        ..Scratch::default()
    };
    assert_eq!(
        run(&d, &mem, &opts, &rec),
        Err(DispatchError::Scratch {
            needed: 3072,
            have: 2048
        })
    );
    assert!(rec.waves.lock().unwrap().is_empty());
}

/// Cancels after `after` waves started.
struct CancelAfter {
    started: AtomicUsize,
    after: usize,
}

impl Observer for CancelAfter {
    fn wave_start(&self, _: [u32; 3], _: u32, _: &Wave) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }
    fn cancelled(&self) -> bool {
        self.started.load(Ordering::SeqCst) >= self.after
    }
}

#[test]
fn an_observer_cancels_a_dispatch() {
    // An endless loop: only cancellation ends it.
    let Some((text, kd)) = kernel("gfx90a", "l:\n s_branch l", "") else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let d = dispatch(Target::Gfx90a, kd, [64 * 10, 1, 1], [64, 1, 1]);
    let obs = CancelAfter {
        started: AtomicUsize::new(0),
        after: 2,
    };
    assert_eq!(
        run(&d, &mem, &RunOptions { threads: 2 }, &obs),
        Err(DispatchError::Cancelled)
    );
}

#[test]
fn a_pm4_dispatch_gets_its_user_data_and_gfx942_its_flat_scratch() {
    let Some((text, _)) = kernel("gfx942", "s_endpgm", "") else {
        return;
    };
    // RSRC2: SCRATCH_EN, USER_SGPR 6, TGID_X_EN, TG_SIZE_EN, TIDIG_COMP_CNT 1 (kfdtest's
    // shader dispatch sets up the same fields).
    let rsrc2 = 1 | 6 << 1 | 1 << 7 | 1 << 10 | 1 << 11;
    let kd = KernelDescriptor::from_registers(0x004f_808d, rsrc2, 10).unwrap();
    assert_eq!(kd.enabled_user_sgprs(), 0);
    let mem = TestMemory::with_code(&text);
    let mut d = dispatch(Target::Gfx942, kd, [128, 2, 1], [64, 2, 1]);
    d.entry = common::CODE;
    d.private_segment_size = 16;
    d.user_data = Some(std::array::from_fn(|i| 0xA0 + i as u32));
    let rec = Recorder::default();
    run(&d, &mem, &RunOptions { threads: 1 }, &rec).expect("runs");
    let waves = rec.waves.into_inner().unwrap();
    assert_eq!(waves.len(), 4);
    for ((id, wave), w) in &waves {
        assert_eq!(
            w.sgpr[..6],
            [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5],
            "user data"
        );
        assert_eq!(w.sgpr[6], id[0], "workgroup id x");
        assert_eq!(w.sgpr[7], 2 | u32::from(*wave == 0) << 31, "workgroup info");
        let offset = w.sgpr[8];
        assert_eq!(w.sgpr[9], 0, "nothing past the wave offset");
        assert_eq!(
            w.flat_scratch,
            0x7_0000_0000 + u64::from(offset),
            "architected flat scratch"
        );
        // Packed ids on gfx942: y in bits 10-19.
        assert_eq!(w.vgpr[0][63] >> 10, *wave, "lane 63's y");
    }
}

/// A trap handler at `handler` (the first-level handler's effect: TTMP12 = STATUS, PC =
/// TBA), and every message with its M0; MSG_GET_DOORBELL answered with doorbell 0x2a.
struct TrapTo {
    handler: u64,
    traps: Mutex<Vec<(u16, u32, u32)>>,
    messages: Mutex<Vec<(u16, u32, bool)>>,
}

impl Observer for TrapTo {
    fn trap(&self, _: [u32; 3], _: u32, w: &mut Wave, trap_id: u16) -> bool {
        self.traps
            .lock()
            .unwrap()
            .push((trap_id, w.ttmp[0], w.ttmp[1]));
        w.ttmp[12] = w.read_hwreg(2);
        w.pc = self.handler;
        true
    }
    fn message(&self, _: [u32; 3], _: u32, w: &mut Wave, simm16: u16) {
        let privileged = w.read_hwreg(2) & 1 << 5 != 0;
        self.messages
            .lock()
            .unwrap()
            .push((simm16, w.m0, privileged));
        if simm16 & 0xf == 10 {
            w.exec = (w.exec & !0xffff_ffff) | 0x2a;
        }
    }
}

#[test]
fn s_trap_runs_the_observers_trap_handler_which_returns_with_s_rfe() {
    // The handler (the shape of kfdtest's TrapHandlerIsa): asks for the doorbell, raises an
    // interrupt naming it, steps past the s_trap, restores STATUS (SCC with it) and returns.
    // After it the kernel reports SCC (set before the trap) through M0.
    let body = "s_branch main\n\
                handler:\n\
                s_mov_b32 exec_lo, 0x80000000\n\
                s_sendmsg 10\n\
                s_and_b32 ttmp3, exec_lo, 0xfff\n\
                s_or_b32 m0, ttmp3, 0x800\n\
                s_sendmsg sendmsg(MSG_INTERRUPT)\n\
                s_add_u32 ttmp0, ttmp0, 4\n\
                s_addc_u32 ttmp1, ttmp1, 0\n\
                s_and_b32 ttmp1, ttmp1, 0xffff\n\
                s_setreg_b32 hwreg(HW_REG_STATUS), ttmp12\n\
                s_rfe_b64 ttmp[0:1]\n\
                main:\n\
                s_cmp_eq_u32 0, 0\n\
                s_trap 2\n\
                s_cselect_b32 m0, 1, 2\n\
                s_sendmsg sendmsg(MSG_INTERRUPT)\n\
                s_endpgm";
    let Some((text, kd)) = kernel("gfx90a", body, "") else {
        return;
    };
    let (mem, kd) = load(&text, &kd);
    let d = dispatch(Target::Gfx90a, kd, [64, 1, 1], [64, 1, 1]);
    let obs = TrapTo {
        handler: common::CODE + 4,
        traps: Mutex::default(),
        messages: Mutex::default(),
    };
    run(&d, &mem, &RunOptions { threads: 1 }, &obs).expect("the wave goes on past the trap");
    // s_branch (4 bytes), the handler (56: four of its ten instructions carry a literal),
    // s_cmp (4): the s_trap is at CODE + 64.
    let at = common::CODE + 64;
    assert_eq!(
        *obs.traps.lock().unwrap(),
        [(2, at as u32, (at >> 32) as u32 | 2 << 16)]
    );
    assert_eq!(
        *obs.messages.lock().unwrap(),
        [
            (10, 0, true),
            (1, 0x82a, true),
            // Past the trap: SCC as it was (1), STATUS.PRIV cleared by s_rfe_b64.
            (1, 1, false),
        ]
    );
}

/// Cancels once asked `after` times; counts messages; a trap goes to CODE + 4.
struct CancelLater {
    asked: AtomicUsize,
    after: usize,
    messages: AtomicUsize,
}

impl Observer for CancelLater {
    fn cancelled(&self) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst) + 1 >= self.after
    }
    fn message(&self, _: [u32; 3], _: u32, _: &mut Wave, _: u16) {
        self.messages.fetch_add(1, Ordering::SeqCst);
    }
    fn trap(&self, _: [u32; 3], _: u32, w: &mut Wave, _: u16) -> bool {
        w.pc = common::CODE + 4;
        true
    }
}

#[test]
fn a_halted_wave_stays_halted_until_the_dispatch_is_cancelled() {
    // s_sethalt 1 outside the trap handler halts the wave: it never reaches the message or
    // s_endpgm, so only the cancel ends the dispatch; the same after a trap handler's
    // s_rfe_b64 with STATUS.HALT set (ROCr's handler parks a wave so).
    let handler = "s_branch main\n handler:\n \
                   s_setreg_imm32_b32 hwreg(HW_REG_STATUS), 0x2020\n \
                   s_add_u32 ttmp0, ttmp0, 4\n s_and_b32 ttmp1, ttmp1, 0xffff\n \
                   s_rfe_b64 ttmp[0:1]\n main:\n";
    for body in [
        "s_sethalt 1\n s_sendmsg sendmsg(MSG_INTERRUPT)\n s_endpgm".to_string(),
        format!("{handler} s_trap 1\n s_sendmsg sendmsg(MSG_INTERRUPT)\n s_endpgm"),
    ] {
        let Some((text, kd)) = kernel("gfx90a", &body, "") else {
            return;
        };
        let (mem, kd) = load(&text, &kd);
        let d = dispatch(Target::Gfx90a, kd, [64, 1, 1], [64, 1, 1]);
        let obs = CancelLater {
            asked: AtomicUsize::new(0),
            after: 5,
            messages: AtomicUsize::new(0),
        };
        assert_eq!(
            run(&d, &mem, &RunOptions { threads: 1 }, &obs),
            Err(DispatchError::Cancelled),
            "{body}"
        );
        assert_eq!(obs.messages.load(Ordering::SeqCst), 0, "{body}");
    }
}
