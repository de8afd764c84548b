//! Global wave sync (`ds_gws_*`) in kernels LLVM 19 assembles, run by the dispatcher: each
//! instruction's effect on the resource it names (`M0[21:16] + OFFSET`), semaphores that keep
//! a read-modify-write of thousands of single-wave workgroups on two threads exact
//! (kfdtest's `KFDGWSTest.Semaphore` in small), barriers across workgroups and across the
//! waves of one, on one thread (the dispatcher parks blocked workgroups and starts the ones
//! that release them), waves of one dispatch released by another dispatch's `sema_v` or
//! `sema_release_all` (another queue's, sharing the GPU's GWS), cancellation of a dispatch
//! whose waves wait forever, and the error of a queue without GWS.

mod common;

use common::{DATA, TestMemory};
use kfd_gfx9::dispatch::{
    Dispatch, DispatchError, KernelDescriptor, NoObserver, Observer, RunOptions, Scratch, run,
};
use kfd_gfx9::exec::{Apertures, ExecError, Fault, Memory, Target};
use kfd_gfx9::gws::Gws;
use kfd_gfx9::{DsOp, Opcode, decode};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A test memory with (or without) the GPU's GWS resources.
struct WithGws<'a> {
    mem: &'a TestMemory,
    gws: Option<&'a Gws>,
}

impl Memory for WithGws<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.mem.read(addr, buf)
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.mem.write(addr, data)
    }
    fn atomic(&self, addr: u64, size: u8, f: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        self.mem.atomic(addr, size, f)
    }
    fn gws(&self) -> Option<&Gws> {
        self.gws
    }
}

/// A PM4-style dispatch of the code at [`common::CODE`]: `s[0:1]` = [`DATA`] (user data),
/// then `extra` (user data too), then the workgroup id X; `groups` workgroups of `items`
/// work-items.
fn dispatch(target: Target, groups: u32, items: u32, extra: &[u32]) -> Dispatch {
    // RSRC2: USER_SGPR_COUNT, TGID_X_EN.
    let count = 2 + extra.len() as u32;
    let kd = KernelDescriptor::from_registers(0, count << 1 | 1 << 7, 0).expect("descriptor");
    let mut user = [0u32; 16];
    user[0] = DATA as u32;
    user[1] = (DATA >> 32) as u32;
    user[2..2 + extra.len()].copy_from_slice(extra);
    Dispatch {
        target,
        kd,
        entry: common::CODE,
        grid: [groups * items, 1, 1],
        workgroup: [items, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: Some(user),
    }
}

/// Runs `asm` (for `mcpu`) as `groups` × `items` on `threads` threads with `gws`; `None`
/// without LLVM.
fn go(
    mcpu: &str,
    asm: &str,
    groups: u32,
    items: u32,
    threads: usize,
    gws: Option<&Gws>,
    obs: &dyn Observer,
) -> Option<(TestMemory, Result<kfd_gfx9::dispatch::Stats, DispatchError>)> {
    let target = match mcpu {
        "gfx942" => Target::Gfx942,
        _ => Target::Gfx90a,
    };
    let code = common::assemble_for(mcpu, asm)?;
    let mem = TestMemory::with_code(&code);
    let result = run(
        &dispatch(target, groups, items, &[]),
        &WithGws { mem: &mem, gws },
        &RunOptions { threads },
        obs,
    );
    Some((mem, result))
}

#[test]
fn each_gws_opcode_decodes_from_llvm() {
    for mcpu in ["gfx90a", "gfx942"] {
        let Some(code) = common::assemble_for(
            mcpu,
            "ds_gws_init v0 offset:3 gds\nds_gws_sema_v offset:1 gds\nds_gws_sema_br v2 gds\n\
             ds_gws_sema_p gds\nds_gws_sema_release_all offset:5 gds\nds_gws_barrier v4 gds",
        ) else {
            return;
        };
        let words: Vec<u32> = code
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want = [
            (DsOp::DsGwsInit, 3),
            (DsOp::DsGwsSemaV, 1),
            (DsOp::DsGwsSemaBr, 0),
            (DsOp::DsGwsSemaP, 0),
            (DsOp::DsGwsSemaReleaseAll, 5),
            (DsOp::DsGwsBarrier, 0),
        ];
        for (i, (op, offset)) in want.into_iter().enumerate() {
            let inst = decode(&words[2 * i..]).expect("decodes");
            assert_eq!(inst.op, Opcode::Ds(op), "{mcpu} #{i}");
            assert!(inst.mods.gds, "{mcpu} {op:?}: GDS");
            assert_eq!(inst.imm, offset, "{mcpu} {op:?}: offset");
        }
    }
}

#[test]
fn each_op_changes_the_resource_m0_and_offset_name() {
    let gws = Gws::new();
    // Resource (M0[21:16] + OFFSET) mod 64: M0 = 3 << 16 with offset 2 is resource 5;
    // M0 = 63 << 16 (and junk in the other bits) with offset 3 is resource 2.
    let asm = "
        s_mov_b32 m0, 3 << 16
        v_mov_b32 v0, 7
        v_mov_b32 v2, 10
        ds_gws_init v0 offset:2 gds          // r5 = 7
        ds_gws_sema_v offset:2 gds           // r5 = 8
        ds_gws_sema_br v2 offset:2 gds       // r5 = 18
        ds_gws_sema_p offset:2 gds           // r5 = 17
        s_mov_b32 m0, 0xffffffff
        ds_gws_init v2 offset:3 gds          // r2 = 10
        ds_gws_sema_release_all offset:6 gds // r5 = 0: no wave queued
        s_mov_b32 m0, 0
        v_mov_b32 v0, 0
        s_mov_b64 exec, 2
        v_mov_b32 v0, 33
        ds_gws_init v0 offset:9 gds          // r9 = lane 1's 33, not lane 0's 0
        s_endpgm";
    let Some((_, result)) = go("gfx90a", asm, 1, 64, 1, Some(&gws), &NoObserver) else {
        return;
    };
    result.expect("runs");
    assert_eq!(
        gws.counter(5),
        0,
        "release_all with no wave queued empties it"
    );
    assert_eq!(gws.counter(2), 10, "M0[21:16] = 63, offset 3: resource 2");
    assert_eq!(gws.counter(9), 33, "DATA0 of the first lane EXEC enables");
    let gws = Gws::new();
    let Some((_, result)) = go(
        "gfx90a",
        "s_mov_b32 m0, 0\nv_mov_b32 v0, 7\nds_gws_init v0 offset:4 gds\nds_gws_sema_v offset:4 gds\n\
         v_mov_b32 v2, 10\nds_gws_sema_br v2 offset:4 gds\nds_gws_sema_p offset:4 gds\ns_endpgm",
        1,
        64,
        1,
        Some(&gws),
        &NoObserver,
    ) else {
        return;
    };
    result.expect("runs");
    assert_eq!(gws.counter(4), 7 + 1 + 10 - 1);
}

/// kfdtest's `GwsAtomicIncreaseIsa` (gfx9 branch) with a long critical section: a scalar
/// load, an add, a 600-instruction delay and a scalar store under `ds_gws_sema_p` /
/// `ds_gws_sema_v` on resource 0 initialised to 1.
const INCREMENT: &str = "
    s_mov_b32 m0, 0
    s_nop 0
    ds_gws_sema_p offset:0 gds
    s_waitcnt 0
    s_load_dword s16, s[0:1], 0x0 glc
    s_waitcnt 0
    s_add_u32 s16, s16, 1
    s_mov_b32 s20, 200
delay:
    s_sub_u32 s20, s20, 1
    s_cmp_lg_u32 s20, 0
    s_cbranch_scc1 delay
    s_store_dword s16, s[0:1], 0x0 glc
    s_waitcnt lgkmcnt(0)
    ds_gws_sema_v offset:0 gds
    s_waitcnt 0
    s_endpgm";

#[test]
fn a_semaphore_keeps_many_workgroups_increments_exact() {
    for mcpu in ["gfx90a", "gfx942"] {
        let gws = Gws::new();
        // GwsInitIsa: the semaphore's count from memory.
        let init = "s_mov_b32 m0, 0\ns_load_dword s16, s[0:1], 0x0 glc\ns_waitcnt 0\n\
                    v_mov_b32 v0, s16\nds_gws_init v0 offset:0 gds\ns_endpgm";
        let Some(code) = common::assemble_for(mcpu, init) else {
            return;
        };
        let target = if mcpu == "gfx942" {
            Target::Gfx942
        } else {
            Target::Gfx90a
        };
        let mem = TestMemory::with_code(&code);
        mem.put(DATA, &1u32.to_le_bytes());
        run(
            &dispatch(target, 1, 1, &[]),
            &WithGws {
                mem: &mem,
                gws: Some(&gws),
            },
            &RunOptions { threads: 1 },
            &NoObserver,
        )
        .expect("init runs");
        assert_eq!(gws.counter(0), 1);
        let groups = 2000;
        let Some((mem, result)) = go(mcpu, INCREMENT, groups, 1, 2, Some(&gws), &NoObserver) else {
            return;
        };
        let stats = result.expect("runs");
        assert_eq!(stats.workgroups, u64::from(groups));
        assert_eq!(
            mem.u32(DATA),
            groups,
            "{mcpu}: every increment kept (0 in memory, one per workgroup)"
        );
        assert_eq!((gws.counter(0), gws.queued(0)), (1, 0), "{mcpu}");
    }
}

/// Each wave of the grid adds 1 to DATA, waits at GWS barrier 7 (its value for the next
/// phase in `s2`: the grid's waves minus one), then stores what DATA holds at
/// DATA + 4 × (1 + its wave number in the grid); the workgroup id is in `s3`, two waves a
/// workgroup.
const BARRIER: &str = "
    s_mov_b32 m0, 0
    v_mov_b32 v1, 0
    v_mov_b32 v2, 1
    v_mov_b32 v6, s2
    s_mov_b64 s[10:11], exec
    s_mov_b64 exec, 1
    global_atomic_add v1, v2, s[0:1]
    s_waitcnt vmcnt(0)
    s_mov_b64 exec, s[10:11]
    ds_gws_barrier v6 offset:7 gds
    s_waitcnt 0
    s_load_dword s12, s[0:1], 0x0 glc
    s_waitcnt 0
    v_mov_b32 v4, s12
    v_lshrrev_b32 v5, 6, v0
    s_lshl_b32 s13, s3, 1
    v_add_u32 v5, s13, v5
    v_add_u32 v5, 1, v5
    v_lshlrev_b32 v5, 2, v5
    s_mov_b64 exec, 1
    global_store_dword v5, v4, s[0:1]
    s_endpgm";

/// Cancels a dispatch still running at its instant (a deadlock fails the test, not hangs it).
struct Deadline(std::time::Instant);

impl Observer for Deadline {
    fn cancelled(&self) -> bool {
        std::time::Instant::now() > self.0
    }
}

/// Runs [`BARRIER`] as `groups` workgroups of two waves on `threads` threads and checks
/// every wave saw every other wave's add.
fn grid_barrier(groups: u32, threads: usize) {
    let gws = Gws::new();
    let waves = groups * 2;
    let Some(code) = common::assemble_for("gfx90a", BARRIER) else {
        return;
    };
    let mem = TestMemory::with_code(&code);
    // What the runtime's init kernel does before a cooperative launch.
    gws.execute(kfd_gfx9::gws::GwsOp::Init, 7, waves - 1);
    let stats = run(
        &dispatch(Target::Gfx90a, groups, 128, &[waves - 1]),
        &WithGws {
            mem: &mem,
            gws: Some(&gws),
        },
        &RunOptions { threads },
        &Deadline(std::time::Instant::now() + std::time::Duration::from_secs(120)),
    )
    .expect("runs (cancelled: the waves did not all get through the barrier in 120 s)");
    assert_eq!(stats.waves, u64::from(waves));
    assert_eq!(mem.u32(DATA), waves);
    for w in 0..waves {
        assert_eq!(
            mem.u32(DATA + 4 * (1 + u64::from(w))),
            waves,
            "{groups} workgroups, {threads} thread(s): wave {w} saw every wave's add after \
             the barrier"
        );
    }
    assert_eq!(gws.counter(7), waves - 1, "re-armed");
}

#[test]
fn a_barrier_holds_every_wave_of_the_grid_until_the_last_arrives() {
    // 12 workgroups of 2 waves: all resident at once on one thread (24 waves), and on two.
    grid_barrier(12, 1);
    grid_barrier(12, 2);
}

#[test]
fn a_grid_barrier_of_more_waves_than_a_thread_keeps_gets_them_all_resident() {
    // 150 workgroups of 2 waves: 300 waves, more than RESIDENT_WAVES per thread; the stalled
    // threads take more wave slots until the whole grid is resident.
    const { assert!(300 > 2 * kfd_gfx9::dispatch::RESIDENT_WAVES) };
    grid_barrier(150, 1);
    grid_barrier(150, 2);
}

/// Workgroups 0..15 wait on resource 1 (count 0); the last one releases them all with
/// `ds_gws_sema_br`: on one thread this needs the waiting workgroups parked.
const LAST_RELEASES: &str = "
    s_mov_b32 m0, 1 << 16
    s_cmp_eq_u32 s2, 15
    s_cbranch_scc1 last
    ds_gws_sema_p offset:0 gds
    s_waitcnt 0
    v_mov_b32 v1, 0
    v_mov_b32 v2, 1
    global_atomic_add v1, v2, s[0:1]
    s_endpgm
last:
    v_mov_b32 v4, 15
    ds_gws_sema_br v4 offset:0 gds
    s_endpgm";

#[test]
fn waiting_workgroups_do_not_starve_the_one_that_releases_them() {
    let gws = Gws::new();
    let Some((mem, result)) = go("gfx90a", LAST_RELEASES, 16, 1, 1, Some(&gws), &NoObserver) else {
        return;
    };
    result.expect("runs: the waiting workgroups were parked and the last one started");
    assert_eq!(mem.u32(DATA), 15);
    assert_eq!((gws.counter(1), gws.queued(1)), (0, 0));
}

/// Cancels once asked `after` times.
struct CancelAfter {
    asked: AtomicUsize,
    after: usize,
}

impl Observer for CancelAfter {
    fn cancelled(&self) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed) >= self.after
    }
}

#[test]
fn a_dispatch_waiting_forever_on_a_semaphore_can_be_cancelled() {
    let gws = Gws::new();
    let obs = CancelAfter {
        asked: AtomicUsize::new(0),
        after: 200,
    };
    let Some((_, result)) = go(
        "gfx90a",
        "s_mov_b32 m0, 0\nds_gws_sema_p offset:3 gds\ns_endpgm",
        4,
        64,
        2,
        Some(&gws),
        &obs,
    ) else {
        return;
    };
    assert_eq!(result.unwrap_err(), DispatchError::Cancelled);
    assert_eq!(gws.queued(3), 0, "the cancelled waves no longer queue");
}

#[test]
fn a_queue_without_gws_stops_at_the_instruction() {
    let Some((_, result)) = go(
        "gfx90a",
        "s_mov_b32 m0, 0\ns_nop 0\nds_gws_sema_v offset:0 gds\ns_endpgm",
        1,
        64,
        1,
        None,
        &NoObserver,
    ) else {
        return;
    };
    match result {
        Err(DispatchError::Wave {
            error: ExecError::Illegal { pc, .. },
            ..
        }) => assert_eq!(pc, common::CODE + 8),
        other => panic!("expected an illegal instruction, got {other:?}"),
    }
}

/// Each workgroup waits on semaphore 5 (count 0), then adds 1 to DATA.
const WAIT_ON_5: &str = "
    s_mov_b32 m0, 0
    ds_gws_sema_p offset:5 gds
    s_waitcnt 0
    v_mov_b32 v1, 0
    v_mov_b32 v2, 1
    s_mov_b64 exec, 1
    global_atomic_add v1, v2, s[0:1]
    s_waitcnt vmcnt(0)
    s_endpgm";

/// Waves of one dispatch, every one queued on a semaphore before the next dispatch starts, are
/// released by another dispatch (another queue's, on other threads) sharing the GPU's GWS: by
/// `ds_gws_sema_release_all` (the counter becomes the 8 waiting waves) and by 8 workgroups'
/// `ds_gws_sema_v`.
#[test]
fn waves_parked_in_one_dispatch_are_released_by_another_dispatch() {
    for (release, groups) in [
        (
            "s_mov_b32 m0, 0\nds_gws_sema_release_all offset:5 gds\ns_endpgm",
            1,
        ),
        ("s_mov_b32 m0, 0\nds_gws_sema_v offset:5 gds\ns_endpgm", 8),
    ] {
        let gws = Gws::new();
        let (Some(wait_code), Some(release_code)) = (
            common::assemble_for("gfx90a", WAIT_ON_5),
            common::assemble_for("gfx90a", release),
        ) else {
            return;
        };
        let waiting = TestMemory::with_code(&wait_code);
        let releasing = TestMemory::with_code(&release_code);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                run(
                    &dispatch(Target::Gfx90a, 8, 64, &[]),
                    &WithGws {
                        mem: &waiting,
                        gws: Some(&gws),
                    },
                    &RunOptions { threads: 2 },
                    &Deadline(deadline),
                )
            });
            // Every wave of the first dispatch queued on the semaphore before the second
            // starts.
            while gws.queued(5) < 8 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the waves never queued"
                );
                std::thread::yield_now();
            }
            run(
                &dispatch(Target::Gfx90a, groups, 64, &[]),
                &WithGws {
                    mem: &releasing,
                    gws: Some(&gws),
                },
                &RunOptions { threads: 2 },
                &Deadline(deadline),
            )
            .expect("the releasing dispatch runs");
            let stats = waiter
                .join()
                .expect("no panic")
                .expect("released (cancelled: a wake-up from the other dispatch was lost)");
            assert_eq!(stats.workgroups, 8);
        });
        assert_eq!(
            waiting.u32(DATA),
            8,
            "{release}: every waiting wave went on"
        );
        assert_eq!((gws.counter(5), gws.queued(5)), (0, 0), "{release}");
    }
}
