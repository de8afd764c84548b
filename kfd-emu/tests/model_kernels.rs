//! Kernel dispatches on the model's AQL queues, through the `Backend` trait: a KERNEL_DISPATCH
//! of a kernel LLVM 19 assembles (`.amdhsa_kernel`) runs its waves on the gfx9 interpreter
//! and completes (read index past it, header INVALID, completion signal decremented); an
//! illegal instruction stops the queue with the code ROCr's trap handler writes (and is raised
//! as `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION` to a runtime that enabled exceptions); code the GPU
//! cannot reach is a VM fault with its page; a kernel that needs scratch the queue does not
//! have asks the runtime for it (code 1 in `queue_inactive_signal`, ROCr 5.2.3's
//! `DynamicScratchHandler` protocol) and runs once the runtime set the queue's scratch up and
//! stored 0; a destroyed queue's endless kernel is cancelled; a queue given GWS
//! (ALLOC_QUEUE_GWS) runs global wave sync semaphores across its workgroups, and one without
//! stops at the first GWS instruction. On rx7900xtx (gfx1100) the same queues run gfx11
//! wave32 code through kfd-gfx9's gfx11 front end, from AQL and from PM4 (`CS_W32_EN`).

mod model_support;

use std::process::Command;

use kfd_ioctl::abi::*;
use model_support::aql::*;
use model_support::{create, data, va, wait};

/// The MCPU of a preset's GPU.
fn mcpu(machine: &str) -> &'static str {
    match machine {
        "radeon-vii" => "gfx906",
        "mi100" => "gfx908",
        "mi210x8" => "gfx90a",
        "rx7900xtx" => "gfx1100",
        _ => "gfx942",
    }
}

/// `.text` and the 64-byte descriptor of kernel `k` (`body`, `directives`) for `mcpu`;
/// `None` (skipped) without LLVM 19.
fn kernel(mcpu: &str, body: &str, directives: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    if !std::path::Path::new("/usr/bin/llvm-mc-19").exists() {
        kfd_skip::prerequisite("llvm-mc-19 is missing (Debian llvm-19)");
        return None;
    }
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
    let dir = std::env::temp_dir().join(format!(
        "kfd-emu-kernels-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (s, o) = (dir.join("k.s"), dir.join("k.o"));
    std::fs::write(&s, &src).unwrap();
    let out = Command::new("llvm-mc-19")
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-filetype=obj",
            "-o",
        ])
        .arg(&o)
        .arg(&s)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |name: &str| {
        let bin = dir.join(format!("{name}.bin"));
        let ok = Command::new("llvm-objcopy-19")
            .args(["-O", "binary", &format!("--only-section={name}")])
            .arg(&o)
            .arg(&bin)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        std::fs::read(&bin).unwrap()
    };
    let (text, kd) = (section(".text"), section(".rodata"));
    let _ = std::fs::remove_dir_all(&dir);
    Some((text, kd))
}

/// An AQL queue on `machine`'s first GPU (see `model_support::aql`) with kernel `text`/`kd`
/// loaded: its descriptor at DESCRIPTOR (entry offset filled in as the linker would), its
/// code at CODE.
fn queue(machine: &str, text: &[u8], kd: &[u8]) -> Queue {
    queue_of_type(machine, text, kd, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)
}

/// As [`queue`], a queue of `queue_type` (AQL or PM4 compute).
fn queue_of_type(machine: &str, text: &[u8], kd: &[u8], queue_type: u32) -> Queue {
    let mut q = Queue::create(Setup {
        queue_type,
        ..Setup::aql(machine)
    });
    let mut kd = kd.to_vec();
    kd[16..24].copy_from_slice(&((CODE - DESCRIPTOR) as i64).to_le_bytes());
    q.bo.bytes()[DESCRIPTOR..DESCRIPTOR + 64].copy_from_slice(&kd);
    q.bo.bytes()[CODE..CODE + text.len()].copy_from_slice(text);
    q
}

/// A KERNEL_DISPATCH of `grid` work-items in groups of `wg` (3 dimensions), kernarg at DATA,
/// completion signal at COMPLETION, `private` bytes of scratch per work-item.
fn dispatch(grid: [u32; 3], wg: [u16; 3], private: u32) -> [u8; 64] {
    let mut p = [0u8; 64];
    let header = u16::from(KERNEL_DISPATCH) | 1 << 8 | 2 << 9 | 2 << 11;
    p[..2].copy_from_slice(&header.to_le_bytes());
    p[2..4].copy_from_slice(&3u16.to_le_bytes());
    for (d, v) in wg.iter().enumerate() {
        p[4 + 2 * d..6 + 2 * d].copy_from_slice(&v.to_le_bytes());
    }
    for (d, v) in grid.iter().enumerate() {
        p[12 + 4 * d..16 + 4 * d].copy_from_slice(&v.to_le_bytes());
    }
    p[24..28].copy_from_slice(&private.to_le_bytes());
    p[32..40].copy_from_slice(&(va(2) + DESCRIPTOR as u64).to_le_bytes());
    p[40..48].copy_from_slice(&(va(2) + DATA as u64).to_le_bytes());
    p[56..64].copy_from_slice(&(va(2) + COMPLETION as u64).to_le_bytes());
    p
}

const MACHINES: [&str; 4] = ["radeon-vii", "mi100", "mi210x8", "mi300x"];

#[test]
fn a_kernel_dispatch_runs_its_waves_and_completes() {
    for machine in MACHINES {
        // Completes only if the branch executes: the word after it is no instruction.
        let Some((text, kd)) = kernel(
            mcpu(machine),
            "s_branch ok\n.long 0xffffffff\nok:\ns_endpgm",
            "",
        ) else {
            return;
        };
        let mut q = queue(machine, &text, &kd);
        q.submit(0, dispatch([256, 4, 2], [64, 2, 1], 0));
        assert!(
            q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
            "{machine}: the completion signal was not decremented"
        );
        assert_eq!(q.u64_at(RPTR), 1, "{machine}: consumed");
        assert_eq!(q.header(0), 1, "{machine}: INVALID again");
        assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 0, "{machine}");
        q.destroy();
    }
}

#[test]
fn an_illegal_instruction_stops_the_queue_with_rocrs_illegal_instruction_code() {
    for machine in MACHINES {
        let Some((text, kd)) = kernel(mcpu(machine), "s_nop 0\n.long 0xffffffff", "") else {
            return;
        };
        let mut q = queue(machine, &text, &kd);
        q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        assert!(q.wait_for_error(), "{machine}: no queue error event");
        // SIGNAL_CODE_ILLEGAL_INST: ROCr reports HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION.
        assert_eq!(
            q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
            1 << 30,
            "{machine}"
        );
        assert_eq!(q.u64_at(RPTR), 0, "{machine}: not consumed");
        assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1, "{machine}");
        q.destroy();
    }
}

/// For a runtime that enabled exceptions (ROCr 6.2.4, whose trap handler reports an illegal
/// instruction as `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION` with `MSG_INTERRUPT`, and whose
/// `queue_inactive_signal` handler ignores the code), the illegal instruction is also raised
/// into the error payload its queue's context save area names, and the error event is set.
#[test]
fn an_illegal_instruction_is_raised_to_a_runtime_that_enabled_exceptions() {
    for machine in MACHINES {
        let Some((text, kd)) = kernel(mcpu(machine), "s_nop 0\n.long 0xffffffff", "") else {
            return;
        };
        let mut q = queue(machine, &text, &kd);
        q.destroy();
        assert_eq!(
            q.emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime_on()),
            Ok(0)
        );
        let error = create(&q.emu, KFD_IOC_EVENT_SIGNAL, false);
        let payload = DATA + 0x100;
        q.recreate_with_error_reason(payload, error.event_id);
        q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        let mut events = [data(error.event_id)];
        let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
        assert_eq!(
            (r, result),
            (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE),
            "{machine}: the runtime's error event"
        );
        assert_eq!(
            q.u64_at(payload),
            kfd_ec_mask(EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION),
            "{machine}"
        );
        q.destroy();
    }
}

#[test]
fn code_the_gpu_cannot_reach_is_a_vm_fault_with_its_page() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(mcpu(machine), "s_endpgm", "") else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    // The entry 0x1000_0000 past the descriptor: va(3) + 0x3000, never mapped.
    let offset = 0x1000_0000i64;
    q.bo.bytes()[DESCRIPTOR + 16..DESCRIPTOR + 24].copy_from_slice(&offset.to_le_bytes());
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
    let fault = events[0].memory_exception_data();
    assert_eq!(fault.va, va(3) + DESCRIPTOR as u64);
    assert_eq!(fault.gpu_id, q.emu.gpu());
    assert_eq!(fault.failure.NotPresent, 1);
    assert_eq!(
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        0,
        "no queue error"
    );
    assert_eq!(q.u64_at(RPTR), 0);
    assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1);
    q.destroy();
}

#[test]
fn a_kernel_needing_scratch_asks_the_runtime_and_runs_once_given_it() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(
        mcpu(machine),
        "s_endpgm",
        ".amdhsa_user_sgpr_private_segment_buffer 1\n\
         .amdhsa_system_sgpr_private_segment_wavefront_offset 1\n\
         .amdhsa_private_segment_fixed_size 16",
    ) else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    // 16 bytes per work-item: 1 KiB per wave; the queue has no scratch yet.
    q.submit(0, dispatch([128, 1, 1], [128, 1, 1], 16));
    assert!(q.wait_for_error(), "no scratch request");
    assert_eq!(
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        1,
        "insufficient scratch, wave64"
    );
    assert_eq!(q.u64_at(RPTR), 0, "waits at the packet");
    assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1);
    // The runtime (AqlQueue::InitScratchSRD): the V#, the base, TMPRING_SIZE (8 slots of
    // 1 KiB), then 0 in the signal.
    let base = va(2) + SCRATCH as u64;
    q.put_u32(SCRATCH_SRD, base as u32);
    q.put_u32(SCRATCH_SRD + 4, (base >> 32) as u32);
    q.put_u32(SCRATCH_SRD + 8, 0x8000);
    q.put_u32(SCRATCH_SRD + 12, 0x0002_7fac);
    q.put_u64(SCRATCH_BASE, base);
    q.put_u32(TMPRING, 1 << 12 | 8);
    q.put_u64(INACTIVE_SIGNAL + SIGNAL_VALUE, 0);
    assert!(
        q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
        "the dispatch did not run once given scratch"
    );
    assert_eq!(q.u64_at(RPTR), 1);
    assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 0, "asked once");
    assert_eq!(q.u32_at(TMPRING), 1 << 12 | 8);
    q.destroy();
}

#[test]
fn destroying_the_queue_cancels_an_endless_kernel() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(mcpu(machine), "l:\ns_branch l", "") else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    q.submit(0, dispatch([64 * 64, 1, 1], [64, 1, 1], 0));
    // Let it start.
    let other = create(&q.emu, KFD_IOC_EVENT_SIGNAL, true);
    let mut events = [data(other.event_id)];
    let _ = wait(&q.emu, &mut events, true, 50);
    q.destroy();
    assert_eq!(q.u64_at(RPTR), 0);
    assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1);
    assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 0);
}

/// Every work-item stores its flat id at `out[id]` (kernarg 0: `out`; s[0:3] the private
/// segment buffer, s[4:5] the kernarg ptr, s6 the workgroup id): needs SMEM, the VALU and
/// global stores (passes with the instruction rooms merged).
#[test]
fn each_work_item_writes_its_id() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(
        mcpu(machine),
        "s_load_dwordx2 s[0:1], s[4:5], 0\n\
         v_and_b32 v1, 0x3ff, v0\n\
         s_lshl_b32 s2, s6, 6\n\
         v_add_u32 v1, s2, v1\n\
         v_lshlrev_b32 v2, 2, v1\n\
         s_waitcnt lgkmcnt(0)\n\
         global_store_dword v2, v1, s[0:1]\n\
         s_endpgm",
        ".amdhsa_user_sgpr_private_segment_buffer 1\n\
         .amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
         .amdhsa_system_sgpr_workgroup_id_x 1",
    ) else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    let out = va(2) + DATA as u64 + 0x100;
    q.put_u64(DATA, out);
    q.submit(0, dispatch([256, 1, 1], [64, 1, 1], 0));
    let done = q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0);
    assert!(
        done,
        "not completed: queue error {:#x}, read index {}",
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        q.u64_at(RPTR)
    );
    for i in 0..256usize {
        assert_eq!(q.u32_at(DATA + 0x100 + 4 * i), i as u32, "out[{i}]");
    }
    q.destroy();
}

/// A copy kernel's whole-wave `global_load_dwordx4` / `global_store_dwordx4` (each lane 16
/// bytes past the previous one: `kfd_gfx9`'s bulk path, through the dispatch's cached BO
/// window) copies every byte, and a wave whose upper half runs past the BO's end faults at
/// the first page past it with its lower half's stores done, as lane-by-lane stores leave
/// them (the guide's FLAT stores: a wave halts with part of its stores done).
#[test]
fn a_whole_wave_copy_moves_every_byte_and_faults_at_the_first_page_past_the_bo() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(
        mcpu(machine),
        "s_load_dwordx4 s[0:3], s[4:5], 0\n\
         v_and_b32 v1, 0x3ff, v0\n\
         s_lshl_b32 s8, s6, 6\n\
         v_add_u32 v1, s8, v1\n\
         v_lshlrev_b32 v2, 4, v1\n\
         s_waitcnt lgkmcnt(0)\n\
         global_load_dwordx4 v[4:7], v2, s[0:1]\n\
         s_waitcnt vmcnt(0)\n\
         global_store_dwordx4 v2, v[4:7], s[2:3]\n\
         s_endpgm",
        ".amdhsa_user_sgpr_private_segment_buffer 1\n\
         .amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
         .amdhsa_system_sgpr_workgroup_id_x 1",
    ) else {
        return;
    };
    // 2048 work-items of 16 bytes: the source at 0x8100, the destination at 0x18200, whose
    // item 2016 (wave 31's lane 32) is the BO's end (BO_SIZE, 0x20000).
    const SRC: usize = 0x8100;
    const DST: usize = 0x18200;
    let mut q = queue(machine, &text, &kd);
    for i in 0..0x8000usize {
        q.bo.bytes()[SRC + i] = (i * 7 + i / 4096) as u8;
    }
    q.put_u64(DATA, va(2) + SRC as u64);
    q.put_u64(DATA + 8, va(2) + DST as u64);
    // 31 whole waves: all in the BO.
    q.submit(0, dispatch([31 * 64, 1, 1], [64, 1, 1], 0));
    assert!(q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0));
    let copied = 31 * 64 * 16;
    let bytes = q.bo.bytes();
    assert!(
        bytes[DST..DST + copied] == bytes[SRC..SRC + copied],
        "the copy differs"
    );
    q.bo.bytes()[DST..DST + copied].fill(0);
    // 32 waves: the last one's lanes 32..63 are past the BO.
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
    q.submit(1, dispatch([32 * 64, 1, 1], [64, 1, 1], 0));
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
    let fault = events[0].memory_exception_data();
    assert_eq!(
        fault.va,
        va(2) + BO_SIZE as u64,
        "the first page past the BO"
    );
    // Wave 31's first 32 lanes stored theirs (the waves before it may or may not have run
    // when the dispatch stopped).
    let (lo, hi) = (31 * 64 * 16, 32 * 64 * 16 - 32 * 16);
    let bytes = q.bo.bytes();
    assert!(
        bytes[DST + lo..DST + hi] == bytes[SRC + lo..SRC + hi],
        "the faulting wave's lanes before the fault did not store"
    );
    q.destroy();
}

/// `PACKET3(op, count)` of a compute queue: type 3, the body's dwords - 1, the opcode.
fn packet3(op: u32, body: &[u32]) -> Vec<u32> {
    let mut p = vec![3 << 30 | (body.len() as u32 - 1) << 16 | op << 8 | 1 << 1];
    p.extend_from_slice(body);
    p
}

/// SET_SH_REG of `values` from SH register `reg` (a `gc_9_0_offset.h` dword offset).
fn set_sh(reg: u32, values: &[u32]) -> Vec<u32> {
    let mut body = vec![reg - 0x2C00];
    body.extend_from_slice(values);
    packet3(0x76, &body)
}

#[test]
fn a_pm4_dispatch_direct_and_indirect_run_the_kernel_its_registers_describe() {
    for machine in ["mi100", "mi210x8", "mi300x"] {
        let Some((text, kd)) = kernel(
            mcpu(machine),
            "s_branch ok\n.long 0xffffffff\nok:\ns_endpgm",
            "",
        ) else {
            return;
        };
        let mut q = queue_of_type(machine, &text, &kd, KFD_IOC_QUEUE_TYPE_COMPUTE);
        let entry = va(2) + CODE as u64;
        let marker = va(2) + DATA as u64;
        // RSRC2: USER_SGPR 2, TGID_X_EN (as kfdtest's shader dispatch sets its fields).
        let rsrc1 = u32::from_le_bytes(kd[48..52].try_into().unwrap());
        let mut ring = Vec::new();
        ring.extend(set_sh(0x2E0C, &[(entry >> 8) as u32, (entry >> 40) as u32]));
        ring.extend(set_sh(0x2E12, &[rsrc1, 2 << 1 | 1 << 7]));
        ring.extend(set_sh(0x2E07, &[64, 2, 1]));
        ring.extend(set_sh(0x2E40, &[0x1234, 0x5678]));
        // 4 x 3 workgroups (dimensions in workgroups: no USE_THREAD_DIMENSIONS), directly
        // and then indirectly (PM4_MEC_DISPATCH_INDIRECT: the dimensions at an address).
        ring.extend(packet3(0x15, &[4, 3, 1, 1 | 1 << 2]));
        let dims = va(2) + DATA as u64 + 0x100;
        for (i, d) in [4u32, 3, 1].iter().enumerate() {
            q.put_u32(DATA + 0x100 + 4 * i, *d);
        }
        ring.extend(packet3(
            0x16,
            &[dims as u32, (dims >> 32) as u32, 1 | 1 << 2],
        ));
        // WRITE_DATA of a marker to memory once the dispatch is done.
        ring.extend(packet3(
            0x37,
            &[5 << 8, marker as u32, (marker >> 32) as u32, 0xC0FFEE],
        ));
        for (i, d) in ring.iter().enumerate() {
            q.put_u32(RING + 4 * i, *d);
        }
        q.put_u64(WPTR, ring.len() as u64);
        assert!(
            q.wait_until(|q| q.u32_at(DATA) == 0xC0FFEE),
            "{machine}: the packet after the dispatch did not run"
        );
        assert!(
            q.wait_until(|q| u64::from(q.u32_at(RPTR)) == ring.len() as u64),
            "{machine}: the read pointer did not reach the write pointer"
        );
        q.destroy();
    }
}

/// PRED_EXEC (`gfx_v12_1_pkt.h`: `EXEC_COUNT` bits 0-13, `VIRTUALXCCID_SELECT` bits 24-31),
/// as tinygrad's multi-XCC queues use it: the next `EXEC_COUNT` dwords run when the select
/// names an XCC of the GPU's partition and are skipped when it names none — on mi300x (8
/// XCCs) the select of XCC 7 runs and 0 skips; on mi210x8 (one XCC) XCC 1's is skipped. On
/// the ring and inside an IB; the packets after the predicated ones run either way.
#[test]
fn pred_exec_runs_its_dwords_on_the_partitions_xccs_and_skips_them_otherwise() {
    for (machine, select, runs) in [
        ("mi300x", 0x80u32, true),
        ("mi300x", 0x01, true),
        ("mi300x", 0x00, false),
        ("mi210x8", 0x01, true),
        ("mi210x8", 0x02, false),
    ] {
        let mut q = queue_of_type(machine, &[], &[0; 64], KFD_IOC_QUEUE_TYPE_COMPUTE);
        let write = |at: usize, v: u32| {
            let va = va(2) + (DATA + at) as u64;
            packet3(0x37, &[5 << 8, va as u32, (va >> 32) as u32, v])
        };
        // The IB (at DATA + 0x400): the same, predicated and not.
        let mut ib = Vec::new();
        let predicated = write(0x10, 0xB1);
        ib.extend(packet3(0x23, &[select << 24 | predicated.len() as u32]));
        ib.extend(predicated);
        ib.extend(write(0x14, 0xB2));
        for (i, d) in ib.iter().enumerate() {
            q.put_u32(DATA + 0x400 + 4 * i, *d);
        }
        let ib_va = va(2) + DATA as u64 + 0x400;
        let mut ring = Vec::new();
        let predicated = write(0, 0xA1);
        ring.extend(packet3(0x23, &[select << 24 | predicated.len() as u32]));
        ring.extend(predicated);
        ring.extend(write(4, 0xA2));
        ring.extend(packet3(
            0x3F,
            &[
                ib_va as u32,
                (ib_va >> 32) as u32,
                ib.len() as u32 | 1 << 23,
            ],
        ));
        for (i, d) in ring.iter().enumerate() {
            q.put_u32(RING + 4 * i, *d);
        }
        q.put_u64(WPTR, ring.len() as u64);
        assert!(
            q.wait_until(|q| u64::from(q.u32_at(RPTR)) == ring.len() as u64),
            "{machine} select {select:#x}: the read pointer did not reach the write pointer"
        );
        let what = |q: &mut Queue, at: usize| q.u32_at(DATA + at);
        assert_eq!(
            (what(&mut q, 4), what(&mut q, 0x14)),
            (0xA2, 0xB2),
            "{machine} select {select:#x}: the packets after the predicated ones ran"
        );
        let (want_a, want_b) = if runs { (0xA1, 0xB1) } else { (0, 0) };
        assert_eq!(
            (what(&mut q, 0), what(&mut q, 0x10)),
            (want_a, want_b),
            "{machine} select {select:#x}: predicated dwords {}",
            if runs { "run" } else { "skipped" }
        );
        q.destroy();
    }
}

#[test]
fn a_profiled_queue_gets_the_dispatchs_start_and_end_times() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(mcpu(machine), "s_endpgm", "") else {
        return;
    };
    for profiled in [false, true] {
        let mut q = queue(machine, &text, &kd);
        // AMD_QUEUE_PROPERTIES_ENABLE_PROFILING (bit 3), as
        // hsa_amd_profiling_set_profiler_enabled sets it.
        q.put_u32(PROPERTIES, if profiled { 1 << 3 } else { 0 });
        q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        assert!(q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0));
        let (start, end) = (
            q.u64_at(COMPLETION + SIGNAL_START_TS),
            q.u64_at(COMPLETION + SIGNAL_END_TS),
        );
        if profiled {
            assert!(start > 0 && end >= start, "start {start} end {end}");
        } else {
            assert_eq!((start, end), (0, 0), "no timestamps unless profiled");
        }
        q.destroy();
    }
}

#[test]
fn a_pm4_dispatch_indirect_reads_its_dimensions_and_its_waves_run() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(mcpu(machine), "s_endpgm", "") else {
        return;
    };
    let mut q = queue_of_type(machine, &text, &kd, KFD_IOC_QUEUE_TYPE_COMPUTE);
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    // The entry is in a page nothing maps: the waves' first fetch is a VM fault, which only
    // happens if the dimensions read from memory are not zero.
    let entry = va(5) + 0x4000;
    let rsrc1 = u32::from_le_bytes(kd[48..52].try_into().unwrap());
    let dims = va(2) + DATA as u64 + 0x100;
    for (i, d) in [2u32, 1, 1].iter().enumerate() {
        q.put_u32(DATA + 0x100 + 4 * i, *d);
    }
    let mut ring = Vec::new();
    ring.extend(set_sh(0x2E0C, &[(entry >> 8) as u32, (entry >> 40) as u32]));
    ring.extend(set_sh(0x2E12, &[rsrc1, 1 << 7]));
    ring.extend(set_sh(0x2E07, &[64, 1, 1]));
    ring.extend(packet3(
        0x16,
        &[dims as u32, (dims >> 32) as u32, 1 | 1 << 2],
    ));
    for (i, d) in ring.iter().enumerate() {
        q.put_u32(RING + 4 * i, *d);
    }
    q.put_u64(WPTR, ring.len() as u64);
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
    let fault = events[0].memory_exception_data();
    assert_eq!(fault.va, entry, "the entry's page");
    assert_eq!(fault.gpu_id, q.emu.gpu());
    q.destroy();
}

/// `kfd-emu run --gpu-threads N` is accepted (N = 0 means 1), and a bad N is refused.
#[test]
fn kfd_emu_run_takes_gpu_threads() {
    let run = |n: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
            .args(["run", "--gpu-threads", n, "--", "/bin/true"])
            .output()
            .expect("running kfd-emu")
    };
    for n in ["1", "0", "8"] {
        let out = run(n);
        assert!(
            out.status.success(),
            "--gpu-threads {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!run("many").status.success());
}

/// Each work-item reads `in[id]` and stores `in[id] + 1` at `out[id]` (kernarg: `in`, `out`).
const INCREMENT: &str = "s_load_dwordx4 s[0:3], s[4:5], 0\n\
     v_and_b32 v1, 0x3ff, v0\n\
     s_lshl_b32 s8, s6, 6\n\
     v_add_u32 v1, s8, v1\n\
     v_lshlrev_b32 v2, 2, v1\n\
     s_waitcnt lgkmcnt(0)\n\
     global_load_dword v3, v2, s[0:1]\n\
     s_waitcnt vmcnt(0)\n\
     v_add_u32 v3, 1, v3\n\
     global_store_dword v2, v3, s[2:3]\n\
     s_endpgm";

/// USERPTR memory (the test's own pages) through a dispatch's translation cache: what the CPU
/// writes between two dispatches is what the second reads (the cache holds translations, not
/// bytes, and each dispatch starts without one), and a page the process unmapped after the
/// first dispatch touched it is a VM fault at that page in the next, not a read through a
/// stale translation.
#[test]
fn userptr_pages_are_read_fresh_by_each_dispatch_and_an_unmapped_one_faults() {
    let machine = "mi210x8";
    let Some((text, kd)) = kernel(
        mcpu(machine),
        INCREMENT,
        ".amdhsa_user_sgpr_private_segment_buffer 1\n\
         .amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
         .amdhsa_system_sgpr_workgroup_id_x 1",
    ) else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    let page = 4096usize;
    // The pages sit far below where the kernel's top-down mmap search places mappings (and
    // below the heap), so the hole the test's munmap leaves is not filled by another thread's
    // mapping (a test thread's, the model's) before the last dispatch reads it: a page mapped
    // there again would be read, not faulted.
    let hint = 0x3000_0000_0000usize + 0x10_0000 * (std::process::id() as usize % 4096);
    // SAFETY: FIXED_NOREPLACE maps fresh anonymous memory only where nothing is mapped (it
    // fails otherwise); no Rust object covers it; the test reaches it only through raw
    // pointers and the GPU, and unmaps its first page itself.
    let mem = unsafe {
        rustix::mm::mmap_anonymous(
            hint as *mut _,
            2 * page,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED_NOREPLACE,
        )
    }
    .expect("mmap") as u64;
    assert_eq!(
        mem, hint as u64,
        "a kernel older than 4.17 ignores FIXED_NOREPLACE"
    );
    let (input, output) = (mem, mem + page as u64);
    let gpu = q.emu.gpu();
    let (bo, _) = q
        .emu
        .alloc_at(
            gpu,
            mem,
            2 * page as u64,
            KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            mem,
        )
        .expect("USERPTR");
    assert_eq!(q.emu.map(bo, &[gpu]).0, Ok(0));
    let word = |at: u64, i: usize| at as *mut u32 as usize + 4 * i;
    let fill = |base: u32| {
        for i in 0..256 {
            // SAFETY: in the mapped input page.
            unsafe { std::ptr::write_volatile(word(input, i) as *mut u32, base + i as u32) };
        }
    };
    let read = |i: usize| {
        // SAFETY: in the mapped output page.
        unsafe { std::ptr::read_volatile(word(output, i) as *const u32) }
    };
    q.put_u64(DATA, input);
    q.put_u64(DATA + 8, output);
    for (round, base) in [(0u64, 1000u32), (1, 5000)] {
        fill(base);
        q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
        q.submit(round, dispatch([256, 1, 1], [64, 1, 1], 0));
        assert!(
            q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
            "round {round} not completed: queue error {:#x}",
            q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE)
        );
        for i in 0..256 {
            assert_eq!(read(i), base + i as u32 + 1, "round {round}: out[{i}]");
        }
    }
    // SAFETY: the input page, which this test mapped and no Rust object covers.
    unsafe { rustix::mm::munmap(input as *mut _, page) }.expect("munmap");
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
    q.submit(2, dispatch([256, 1, 1], [64, 1, 1], 0));
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!(
        (r, result),
        (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE),
        "no VM fault"
    );
    let fault = events[0].memory_exception_data();
    assert_eq!(fault.va & !(page as u64 - 1), input, "the unmapped page");
    assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1, "not completed");
    q.destroy();
    // SAFETY: the output page, mapped by this test, no longer used by the GPU.
    unsafe { rustix::mm::munmap(output as *mut _, page) }.expect("munmap");
}

/// Kernel A initialises GWS semaphore 0 to 1 (one wave); kernel B's workgroups each take it,
/// add 1 to the dword at DATA + 0x100 with a scalar load and store, and give it back
/// (kfdtest's `GwsInitIsa` and `GwsAtomicIncreaseIsa`).
const GWS_INIT: &str = "s_mov_b32 m0, 0\nv_mov_b32 v0, 1\nds_gws_init v0 offset:0 gds\ns_endpgm";
const GWS_INCREMENT: &str = "
    s_mov_b32 m0, 0
    ds_gws_sema_p offset:0 gds
    s_load_dword s16, s[0:1], 0x100 glc
    s_waitcnt 0
    s_add_u32 s16, s16, 1
    s_mov_b32 s20, 100
delay:
    s_sub_u32 s20, s20, 1
    s_cmp_lg_u32 s20, 0
    s_cbranch_scc1 delay
    s_store_dword s16, s[0:1], 0x100 glc
    s_waitcnt lgkmcnt(0)
    ds_gws_sema_v offset:0 gds
    s_endpgm";

#[test]
fn a_queue_with_gws_runs_semaphores_across_workgroups_and_one_without_stops() {
    for machine in ["mi210x8", "mi300x"] {
        let k = ".amdhsa_user_sgpr_kernarg_segment_ptr 1";
        let (Some((init, init_kd)), Some((inc, inc_kd))) = (
            kernel(mcpu(machine), GWS_INIT, k),
            kernel(mcpu(machine), GWS_INCREMENT, k),
        ) else {
            return;
        };
        // Without GWS: the first GWS instruction is illegal on the queue.
        let mut q = queue(machine, &init, &init_kd);
        q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        assert!(q.wait_for_error(), "{machine}: no queue error event");
        assert_eq!(
            q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
            1 << 30,
            "{machine}: ROCr's illegal-instruction code"
        );
        q.destroy();
        // With GWS: 300 single-wave workgroups on 2 threads keep every increment.
        let mut q = queue(machine, &init, &init_kd);
        let mut g = kfd_ioctl_alloc_queue_gws_args {
            queue_id: q.id,
            num_gws: 1,
            ..Default::default()
        };
        assert_eq!(q.emu.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g), Ok(0));
        q.submit(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        assert!(
            q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
            "{machine}: the init kernel did not complete"
        );
        // The second kernel in the first one's place (the first has completed).
        let mut kd = inc_kd.clone();
        kd[16..24].copy_from_slice(&((CODE - DESCRIPTOR) as i64).to_le_bytes());
        q.bo.bytes()[DESCRIPTOR..DESCRIPTOR + 64].copy_from_slice(&kd);
        q.bo.bytes()[CODE..CODE + inc.len()].copy_from_slice(&inc);
        q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
        q.submit(1, dispatch([300, 1, 1], [1, 1, 1], 0));
        assert!(
            q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
            "{machine}: the semaphore kernel did not complete"
        );
        assert_eq!(
            q.u32_at(DATA + 0x100),
            300,
            "{machine}: every increment kept"
        );
        assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 0, "{machine}");
        q.destroy();
    }
}

/// Stores 1 at DATA + 0x200 (it runs), then waits until the dword at DATA + 0x204 is not 0.
const SPIN_UNTIL_SET: &str = "
    s_mov_b32 s2, 1
    s_store_dword s2, s[0:1], 0x200 glc
    s_waitcnt lgkmcnt(0)
wait:
    s_load_dword s3, s[0:1], 0x204 glc
    s_waitcnt lgkmcnt(0)
    s_cmp_eq_u32 s3, 0
    s_cbranch_scc1 wait
    s_endpgm";

/// ALLOC_QUEUE_GWS remaps the queue (`pqm_set_gws` ends in `update_queue`), so a dispatch
/// that starts after it returned reaches the GWS, even when the engine took up the queue's
/// packets before it: packet 0 spins until the test sets a flag, packet 1 (GWS init) is
/// already published behind it; GWS is given while packet 0 runs, then the flag is set, so
/// packet 1 can only start after the ioctl returned. (Before the fix the engine's turn,
/// begun without GWS, ran packet 1 without them: an illegal instruction, code 1 << 30.)
#[test]
fn a_dispatch_that_starts_after_alloc_queue_gws_returned_has_gws() {
    for machine in ["mi210x8", "mi300x"] {
        let k = ".amdhsa_user_sgpr_kernarg_segment_ptr 1";
        let (Some((spin, spin_kd)), Some((init, init_kd))) = (
            kernel(mcpu(machine), SPIN_UNTIL_SET, k),
            kernel(mcpu(machine), GWS_INIT, k),
        ) else {
            return;
        };
        let mut q = queue(machine, &spin, &spin_kd);
        // The init kernel: its descriptor after the spinning one's, its code 4 KiB on.
        let (init_desc, init_code) = (DESCRIPTOR + 64, CODE + 0x1000);
        let mut kd = init_kd.clone();
        kd[16..24].copy_from_slice(&((init_code - init_desc) as i64).to_le_bytes());
        q.bo.bytes()[init_desc..init_desc + 64].copy_from_slice(&kd);
        q.bo.bytes()[init_code..init_code + init.len()].copy_from_slice(&init);
        q.put_u64(COMPLETION + SIGNAL_VALUE, 2);
        let mut second = dispatch([64, 1, 1], [64, 1, 1], 0);
        second[32..40].copy_from_slice(&(va(2) + init_desc as u64).to_le_bytes());
        q.place(0, dispatch([64, 1, 1], [64, 1, 1], 0));
        q.place(1, second);
        q.put_u64(WPTR, 2);
        assert!(
            q.wait_until(|q| q.u32_at(DATA + 0x200) == 1),
            "{machine}: packet 0 did not start"
        );
        let mut g = kfd_ioctl_alloc_queue_gws_args {
            queue_id: q.id,
            num_gws: 1,
            ..Default::default()
        };
        assert_eq!(q.emu.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g), Ok(0));
        q.put_u32(DATA + 0x204, 1);
        assert!(
            q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0
                || q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE) != 0),
            "{machine}: neither completed nor stopped"
        );
        assert_eq!(
            q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
            0,
            "{machine}: packet 1 ran without GWS (queue error)"
        );
        assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 0, "{machine}");
        assert_eq!(q.u64_at(RPTR), 2, "{machine}: both consumed");
        q.destroy();
    }
}

/// The gfx11 kernel of the rx7900xtx tests: `out[i] = i` and `lane[i]` = the work-item's lane
/// in its wave (`v_mbcnt_lo_u32_b32`: 0..32 in wave32), `out` and `lane` at `s[0:1]`,
/// `s[0:1] + 0x400`, the workgroup id in `s2`, 64 work-items per workgroup.
const GFX11_IDS: &str = "v_and_b32 v1, 0x3ff, v0
v_mbcnt_lo_u32_b32 v3, -1, 0
s_lshl_b32 s3, s2, 6
v_add_nc_u32 v1, s3, v1
v_lshlrev_b32 v2, 2, v1
global_store_b32 v2, v1, s[0:1]
global_store_b32 v2, v3, s[0:1] offset:0x400
s_endpgm";

/// Checks the 256 work-items of [`GFX11_IDS`] wrote their id and a wave32 lane.
fn check_gfx11_ids(q: &mut Queue, out: usize) {
    for i in 0..256usize {
        assert_eq!(q.u32_at(out + 4 * i), i as u32, "out[{i}]");
        assert_eq!(q.u32_at(out + 0x400 + 4 * i), (i % 32) as u32, "lane[{i}]");
    }
}

/// An AQL KERNEL_DISPATCH of a wave32 gfx11 kernel on rx7900xtx (which kfd-emu refused to
/// run before kfd-gfx9 had a gfx11 front end): every work-item runs once, in waves of 32.
#[test]
fn rx7900xtx_runs_a_wave32_gfx11_kernel_from_aql() {
    let machine = "rx7900xtx";
    let body = format!("s_load_b64 s[0:1], s[0:1], 0\ns_waitcnt lgkmcnt(0)\n{GFX11_IDS}");
    let Some((text, kd)) = kernel(
        mcpu(machine),
        &body,
        ".amdhsa_wavefront_size32 1\n\
         .amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
         .amdhsa_system_sgpr_workgroup_id_x 1",
    ) else {
        return;
    };
    let mut q = queue(machine, &text, &kd);
    let out = DATA + 0x100;
    q.put_u64(DATA, va(2) + out as u64);
    q.submit(0, dispatch([256, 1, 1], [64, 1, 1], 0));
    let done = q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0);
    assert!(
        done,
        "not completed: queue error {:#x}, read index {}",
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        q.u64_at(RPTR)
    );
    check_gfx11_ids(&mut q, out);
    q.destroy();
}

/// A PM4 DISPATCH_DIRECT on rx7900xtx as kfdtest's `Dispatch::BuildIb` builds it for gfx11:
/// the user SGPRs from COMPUTE_USER_DATA, the workgroup id after them, and the initiator's
/// CS_W32_EN (bit 15) making the waves wave32.
#[test]
fn rx7900xtx_runs_a_pm4_dispatch_in_wave32_when_the_initiator_says_so() {
    let machine = "rx7900xtx";
    let Some((text, kd)) = kernel(mcpu(machine), GFX11_IDS, ".amdhsa_wavefront_size32 1") else {
        return;
    };
    let mut q = queue_of_type(machine, &text, &kd, KFD_IOC_QUEUE_TYPE_COMPUTE);
    let entry = va(2) + CODE as u64;
    let out = DATA + 0x100;
    let out_va = va(2) + out as u64;
    let marker = va(2) + DATA as u64;
    let rsrc1 = u32::from_le_bytes(kd[48..52].try_into().unwrap());
    let mut ring = Vec::new();
    ring.extend(set_sh(0x2E0C, &[(entry >> 8) as u32, (entry >> 40) as u32]));
    // RSRC2: USER_SGPR 2, TGID_X_EN.
    ring.extend(set_sh(0x2E12, &[rsrc1, 2 << 1 | 1 << 7]));
    ring.extend(set_sh(0x2E07, &[64, 1, 1]));
    ring.extend(set_sh(0x2E40, &[out_va as u32, (out_va >> 32) as u32]));
    // 4 workgroups: COMPUTE_SHADER_EN, FORCE_START_AT_000, CS_W32_EN.
    ring.extend(packet3(0x15, &[4, 1, 1, 1 | 1 << 2 | 1 << 15]));
    ring.extend(packet3(
        0x37,
        &[5 << 8, marker as u32, (marker >> 32) as u32, 0xC0FFEE],
    ));
    for (i, d) in ring.iter().enumerate() {
        q.put_u32(RING + 4 * i, *d);
    }
    q.put_u64(WPTR, ring.len() as u64);
    assert!(
        q.wait_until(|q| q.u32_at(DATA) == 0xC0FFEE),
        "the packet after the dispatch did not run"
    );
    check_gfx11_ids(&mut q, out);
    q.destroy();
}
