//! A kernel dispatched from `kfd-queue`'s PM4 compute queue — tinygrad's path, without ROCr:
//! SET_SH_REG of the program address, its COMPUTE_PGM_RSRC1/2 (RSRC1 and RSRC3 from the
//! descriptor LLVM 19 writes for it), the user data (the output buffer's address in s[0:1]),
//! the workgroup size, then DISPATCH_DIRECT and a WRITE_DATA marker. Every work-item stores
//! its global id at `out[id]`; the marker lands only after every wave ended. On mi300x (a
//! gfx942 kernel) and mi210x8 (gfx90a).
//!
//! Emulated only: on hardware a PM4 dispatch also needs the board's CU masks
//! (COMPUTE_STATIC_THREAD_MGMT_SE*), resource limits and per-XCC scratch, which this test
//! does not set up.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{CpuMapping, Kfd};
use kfd_queue::pm4;
use kfd_queue::{Pm4Command, Pm4Queue, QueueContext};
use kfd_tests::{Target, VaReservation, on_every_target};

const WAIT: Duration = Duration::from_secs(30);
const GTT: AllocMemFlags = AllocMemFlags::GTT
    .union(AllocMemFlags::WRITABLE)
    .union(AllocMemFlags::EXECUTABLE);

/// gfx9 SH registers (`gc_9_0_offset.h`'s `mmCOMPUTE_*`).
const COMPUTE_NUM_THREAD_X: u32 = 0x2E07;
const COMPUTE_PGM_LO: u32 = 0x2E0C;
const COMPUTE_PGM_RSRC1: u32 = 0x2E12;
const COMPUTE_PGM_RSRC3: u32 = 0x2E28;
const COMPUTE_USER_DATA_0: u32 = 0x2E40;
/// COMPUTE_DISPATCH_INITIATOR: COMPUTE_SHADER_EN | FORCE_START_AT_000.
const INITIATOR: u32 = 1 | 1 << 2;

/// The kernel: s[0:1] `out` (user data), s2 the workgroup id; `out[id] = id` for
/// `id = wg * 64 + x`.
const BODY: &str = "v_and_b32 v1, 0x3ff, v0
  s_lshl_b32 s3, s2, 6
  v_add_u32 v1, s3, v1
  v_lshlrev_b32 v2, 2, v1
  global_store_dword v2, v1, s[0:1]
  s_endpgm";

/// `.text` and the descriptor of the kernel for `mcpu` (llvm-mc-19 with `.amdhsa_kernel`);
/// `None` (skipped) without LLVM 19.
fn kernel(mcpu: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    if !Path::new("/usr/bin/llvm-mc-19").exists() {
        kfd_skip::prerequisite("llvm-mc-19 is missing (Debian llvm-19)");
        return None;
    }
    let src = format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--{mcpu}\"\n.text\n.globl k\n.p2align 8\n\
         .type k,@function\nk:\n{BODY}\n.rodata\n.p2align 6\n.amdhsa_kernel k\n\
         .amdhsa_next_free_vgpr 8\n.amdhsa_next_free_sgpr 8\n.amdhsa_accum_offset 4\n\
         .amdhsa_user_sgpr_count 2\n.amdhsa_system_sgpr_workgroup_id_x 1\n\
         .end_amdhsa_kernel\n"
    );
    let dir = std::env::temp_dir().join(format!(
        "kfd-tests-kernels-{}-{mcpu}-{:?}",
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
    let text = section(".text");
    let kd = section(".rodata");
    let _ = std::fs::remove_dir_all(&dir);
    Some((text, kd))
}

fn dwords(cpu: &CpuMapping<'_>, at: usize, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; 4 * n];
    cpu.read_slice(&mut b, at).unwrap();
    b.chunks(4)
        .map(|d| u32::from_le_bytes(d.try_into().unwrap()))
        .collect()
}

#[test]
fn a_pm4_dispatch_from_kfd_queue_runs_every_work_item() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        if !matches!(target, Target::Emulated { .. }) {
            return;
        }
        let name = target.name();
        let kfd = Kfd::open().unwrap_or_else(|e| panic!("{name}: {e}"));
        let topology = Topology::read().unwrap_or_else(|e| panic!("{name}: {e}"));
        let node = topology.gpus().next().expect("a GPU").clone();
        let gpu_id = node.gpu_id().expect("gpu_id");
        let gfx = node.gfx_target_version().expect("gfx");
        let mcpu = if gfx.minor == 4 { "gfx942" } else { "gfx90a" };
        let Some((text, kd)) = kernel(mcpu) else {
            return;
        };
        kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let context: Arc<QueueContext> =
            QueueContext::new(&kfd, &topology).unwrap_or_else(|e| panic!("{name}: {e}"));
        let va = VaReservation::new(1 << 30, 2 << 20);
        let bo = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr(), 1 << 16, GTT)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        kfd.map_memory_to_gpu(&bo, &[gpu_id])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let cpu = bo.map_cpu().unwrap();
        // Code at 0 (256-aligned), `out` at 0x4000, the marker at 0x8000.
        cpu.write_slice(&text, 0).unwrap();
        cpu.write_slice(&vec![0xFFu8; 4 * 384], 0x4000).unwrap();
        let (code, out, marker) = (bo.va(), bo.va() + 0x4000, bo.va() + 0x8000);
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let (rsrc3, rsrc1) = (u32_at(&kd, 44), u32_at(&kd, 48));
        // RSRC2: USER_SGPR 2, TGID_X_EN; the rest of what the descriptor says is not needed.
        let rsrc2 = 2 << 1 | 1 << 7;
        let sh = |reg, values: &[u32]| pm4::set_sh_reg(reg, values).expect("an SH register");
        let packets = [
            sh(COMPUTE_PGM_LO, &[(code >> 8) as u32, (code >> 40) as u32]),
            sh(COMPUTE_PGM_RSRC1, &[rsrc1, rsrc2]),
            sh(COMPUTE_PGM_RSRC3, &[rsrc3]),
            sh(COMPUTE_NUM_THREAD_X, &[64, 1, 1]),
            sh(COMPUTE_USER_DATA_0, &[out as u32, (out >> 32) as u32]),
            pm4::dispatch_direct([5, 1, 1], INITIATOR).to_vec(),
        ];
        let mut q = Pm4Queue::new(&context, gpu_id, 4096).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut commands: Vec<Pm4Command<'_>> =
            packets.iter().map(|p| Pm4Command::Raw(p)).collect();
        commands.push(Pm4Command::WriteData {
            addr: marker,
            data: &[0xC0FFEE],
        });
        let c = q
            .submit(&commands)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        q.wait(c, WAIT).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(dwords(&cpu, 0x8000, 1), [0xC0FFEE], "{name}: the marker");
        // Five workgroups of 64: out[0..320] written, the rest untouched.
        let got = dwords(&cpu, 0x4000, 384);
        for (i, &v) in got.iter().enumerate() {
            let want = if i < 5 * 64 { i as u32 } else { u32::MAX };
            assert_eq!(v, want, "{name}: out[{i}]");
        }
        drop(q);
        drop(cpu);
        let _ = context;
    });
}
