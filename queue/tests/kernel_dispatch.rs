//! `kfd_queue::Kernel` and `AqlQueue::dispatch` under kfd-emu: a kernel assembled with
//! `kfd_gfx9::asm`, placed with no code object, runs on an AQL queue of an emulated MI300X
//! (gfx942) and MI210 (gfx90a) and writes what it should; packets with the barrier bit run in
//! order, each with its own kernarg slot; a store to an address nothing maps is
//! `Error::VmFault` naming the page; bad placements and dispatches are typed errors.

use std::sync::Arc;
use std::time::Duration;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_gfx9::Operand::{Int, Literal, Sgpr};
use kfd_gfx9::asm::{self, DescriptorBuilder, Program, Saddr};
use kfd_gfx9::exec::Target;
use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::vm_memory::Bytes;
use kfd_ioctl::{GpuId, Kfd};
use kfd_queue::{AqlQueue, Error, Kernel, KernelError, QueueContext, Signal};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Work-item `i` stores `value + i` at `dst + 4 i` (kernargs: dst u64, value u32).
fn store_kernel(target: Target) -> ([u8; 64], Vec<u8>) {
    let u = |r: asm::Result<asm::Words>| r.expect("encodes");
    let mut p = Program::new();
    p.push(u(asm::s_load_dwordx2(4, 0, 0)))
        .push(u(asm::s_load_dword(6, 0, 8)))
        .push(u(asm::v_and_b32(0, Literal(0x3ff), 0)))
        .push(u(asm::s_lshl_b32(Sgpr(3), Sgpr(2), Int(6))))
        .push(u(asm::v_add_u32(1, Sgpr(3), 0)))
        .push(u(asm::v_lshlrev_b32(2, Int(2), 1)))
        .push(u(asm::s_waitcnt(None, None, Some(0))))
        .push(u(asm::v_add_u32(3, Sgpr(6), 1)))
        .push(u(asm::global_store_dword(2, 3, Saddr::Sgpr(4), 0)))
        .push(u(asm::s_waitcnt(Some(0), None, None)))
        .push(asm::s_endpgm());
    let code: Vec<u8> = p
        .finish()
        .expect("finishes")
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let kd = DescriptorBuilder::new(target)
        .vgprs(8)
        .sgprs(16)
        .kernarg_segment_ptr()
        .kernarg_size(16)
        .build()
        .expect("builds");
    (kd, code)
}

fn args(dst: u64, value: u32) -> Vec<u8> {
    let mut a = dst.to_le_bytes().to_vec();
    a.extend(value.to_le_bytes());
    a
}

/// Opens KFD, acquires the first GPU's VM, makes a queue context.
fn open() -> Result<(Kfd, Arc<QueueContext>, GpuId)> {
    let kfd = Kfd::open()?;
    let topology = Topology::read()?;
    let node = topology.gpus().next().ok_or("no GPU")?;
    let gpu = node.gpu_id().ok_or("no gpu_id")?;
    kfd.acquire_vm(gpu, node.render_minor().ok_or("no render node")?)?;
    let context = QueueContext::new(&kfd, &topology)?;
    Ok((kfd, context, gpu))
}

fn on(machine: &str, f: impl FnOnce() -> Result<()> + Send) {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model");
    kfd_emu::supervisor::run_attached(model, f)
        .expect("attach")
        .unwrap_or_else(|e| panic!("{machine}: {e}"));
}

#[test]
fn a_placed_kernel_runs_its_dispatches_in_order() {
    for (machine, target) in [("mi300x", Target::Gfx942), ("mi210x8", Target::Gfx90a)] {
        on(machine, || {
            let (kfd, context, gpu) = open()?;
            let (kd, code) = store_kernel(target);
            let mut kernel = Kernel::new(&context, gpu, &kd, &code, 16, 4)?;
            let mut queue = AqlQueue::new(&context, gpu, 64)?;
            let out = kfd.alloc_memory(
                gpu,
                1 << 20,
                AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
                &[gpu],
            )?;
            let done = Signal::new(&context, gpu, 1)?;
            // Three dispatches over the same 1000 dwords, each with its own kernarg slot: with
            // the barrier bit they run in order, so the last one's values stay.
            for (n, value) in [10u32, 20, 30].into_iter().enumerate() {
                let signal = (n == 2).then_some(&done);
                let p = kernel.packet([1000, 1, 1], [64, 1, 1], &args(out.va(), value), signal)?;
                queue.dispatch(&p)?;
            }
            done.wait_zero(TIMEOUT)?;
            let m = out.as_volatile_slice()?;
            for i in 0..1000u32 {
                let got: u32 = m.read_obj(4 * i as usize)?;
                assert_eq!(got, 30 + i, "{machine} item {i}");
            }
            let past: u32 = m.read_obj(4000)?;
            assert_eq!(past, 0, "past the grid");
            assert_eq!(queue.read_index()?, 3);
            Ok(())
        });
    }
}

#[test]
fn a_store_nothing_maps_is_a_vm_fault_naming_the_page() {
    on("mi300x", || {
        let (_kfd, context, gpu) = open()?;
        let (kd, code) = store_kernel(Target::Gfx942);
        let mut kernel = Kernel::new(&context, gpu, &kd, &code, 16, 1)?;
        let mut queue = AqlQueue::new(&context, gpu, 64)?;
        let done = Signal::new(&context, gpu, 1)?;
        // Low in the GPU's address space, where no BO or SVM range is.
        let nowhere = 0x10_0000u64;
        let p = kernel.packet([64, 1, 1], [64, 1, 1], &args(nowhere, 1), Some(&done))?;
        queue.dispatch(&p)?;
        match done.wait_zero(TIMEOUT) {
            Err(Error::VmFault(f)) => {
                assert_eq!(f.gpu_id, gpu);
                assert_eq!(f.va, nowhere);
            }
            other => panic!("expected a VM fault, got {other:?}"),
        }
        Ok(())
    });
}

#[test]
fn bad_placements_and_dispatches_are_typed_errors() {
    on("mi300x", || {
        let (_kfd, context, gpu) = open()?;
        let (kd, code) = store_kernel(Target::Gfx942);
        assert!(matches!(
            Kernel::new(&context, gpu, &kd, &[], 16, 1),
            Err(Error::Kernel(KernelError::NoCode))
        ));
        assert!(matches!(
            Kernel::new(&context, gpu, &kd, &code, 16, 0),
            Err(Error::Kernel(KernelError::Kernargs { .. }))
        ));
        assert!(matches!(
            Kernel::new(&context, gpu, &kd, &code, 1 << 20, 64),
            Err(Error::Kernel(KernelError::TooLarge { .. }))
        ));
        assert!(matches!(
            Kernel::new(&context, 0xdead_u32, &kd, &code, 16, 1),
            Err(Error::UnknownGpu { .. })
        ));
        let mut kernel = Kernel::new(&context, gpu, &kd, &code, 16, 1)?;
        assert!(matches!(
            kernel.kernargs(&[0; 65]),
            Err(Error::Kernel(KernelError::Kernargs { len: 65, slot: 64 }))
        ));
        let mut queue = AqlQueue::new(&context, gpu, 64)?;
        let p = kernel.packet([64, 1, 1], [64, 32, 1], &args(0, 0), None)?;
        assert!(matches!(
            queue.dispatch(&p),
            Err(Error::Kernel(KernelError::WorkgroupTooLarge(2048)))
        ));
        assert_eq!(queue.write_index(), 0, "nothing was submitted");
        Ok(())
    });
}
