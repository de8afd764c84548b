//! The model behind the real thing: the product's `Kfd` on a thread attached through seccomp
//! (`supervisor::run_attached`), checked against the model's GPU-side view.

mod model_svm_support;

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{GpuFaultReason, Model, ModelConfig};
use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::{Errno, Error};
use model_svm_support::open_all;

const MIB: u64 = 1 << 20;
/// GPU VAs of the tests (GPU-only addresses: nothing is mapped there on the CPU side).
const VA: u64 = 0x6000_0000_0000;

fn model(machine: &str, cfg: ModelConfig) -> Arc<Model> {
    Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        ..cfg
    })
    .expect("model")
}

#[test]
fn vram_written_by_the_cpu_is_what_the_gpu_reads() {
    let model = model("mi300x", ModelConfig::default());
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let flags = AllocMemFlags::VRAM
            | AllocMemFlags::WRITABLE
            | AllocMemFlags::EXECUTABLE
            | AllocMemFlags::PUBLIC;
        let bo = kfd
            .alloc_memory_of_gpu(gpus[0], VA, 2 * MIB, flags)
            .expect("alloc");
        kfd.map_memory_to_gpu(&bo, &gpus).expect("map");
        let cpu = bo.map_cpu().expect("mmap the render node");
        cpu.write(1000, b"written by the CPU").expect("write");
        let pid = std::process::id() as i32;
        let mut seen = [0u8; 18];
        view.gpu_read(pid, gpus[0], VA + 1000, &mut seen)
            .expect("GPU read");
        assert_eq!(&seen, b"written by the CPU");
        view.gpu_write(pid, gpus[0], VA + 4096, b"GPU")
            .expect("GPU write");
        let mut back = [0u8; 3];
        cpu.read(4096, &mut back).expect("read");
        assert_eq!(&back, b"GPU");
        drop(cpu);
        kfd.free_memory_of_gpu(bo).expect("unmap and free");
        let fault = view
            .gpu_read(pid, gpus[0], VA, &mut back)
            .expect_err("gone");
        assert_eq!(fault.reason, GpuFaultReason::NotMapped);
    })
    .expect("attach");
}

#[test]
fn userptr_memory_of_the_test_is_seen_by_the_gpu() {
    let model = model("mi210x8", ModelConfig::default());
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let mut host = vec![0u8; 8 * 4096 + 4096];
        let offset = host.as_ptr().align_offset(4096);
        let page = &mut host[offset..offset + 8 * 4096];
        page[..5].copy_from_slice(b"host!");
        let flags = AllocMemFlags::USERPTR | AllocMemFlags::WRITABLE;
        // SAFETY: `page` stays alive and unmoved until the BO is freed below.
        let bo = unsafe {
            kfd.alloc_userptr(gpus[2], VA, page.as_ptr() as u64, page.len() as u64, flags)
        }
        .expect("userptr");
        kfd.map_memory_to_gpu(&bo, &gpus[2..4])
            .expect("map on two GPUs");
        let pid = std::process::id() as i32;
        let mut seen = [0u8; 5];
        view.gpu_read(pid, gpus[3], VA, &mut seen).expect("read");
        assert_eq!(&seen, b"host!");
        kfd.free_memory_of_gpu(bo).expect("free");
        drop(host);
    })
    .expect("attach");
}

#[test]
fn an_import_at_another_va_aliases_the_export() {
    let model = model("mi210x8", ModelConfig::default());
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
        let bo = kfd
            .alloc_memory_of_gpu(gpus[0], VA, 2 * MIB, flags)
            .expect("alloc");
        let dmabuf = kfd.export_dmabuf(&bo, true).expect("export");
        let info = kfd
            .get_dmabuf_info(std::os::fd::AsFd::as_fd(&dmabuf), None)
            .expect("info");
        assert_eq!(info.size, 2 * MIB);
        let alias = kfd
            .import_dmabuf(std::os::fd::AsFd::as_fd(&dmabuf), gpus[1], VA + 16 * MIB)
            .expect("import on a peer");
        kfd.map_memory_to_gpu(&bo, &gpus[..1]).expect("map");
        kfd.map_memory_to_gpu(&alias, &gpus[1..2])
            .expect("map alias");
        let pid = std::process::id() as i32;
        view.gpu_write(pid, gpus[0], VA + 64, b"one buffer")
            .expect("write");
        let mut seen = [0u8; 10];
        view.gpu_read(pid, gpus[1], VA + 16 * MIB + 64, &mut seen)
            .expect("read through the alias");
        assert_eq!(&seen, b"one buffer");
        let cpu = bo.map_cpu().expect("mmap");
        let mut back = [0u8; 10];
        cpu.read(64, &mut back).expect("read");
        assert_eq!(&back, b"one buffer");
    })
    .expect("attach");
}

#[test]
fn an_injected_fault_reaches_the_caller_as_a_typed_error() {
    let model = model(
        "radeon-vii",
        ModelConfig {
            fail: vec!["ALLOC_MEMORY_OF_GPU:ENOSPC:1".parse().expect("rule")],
            ..ModelConfig::default()
        },
    );
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE;
        let err = kfd
            .alloc_memory_of_gpu(gpus[0], VA, 4096, flags)
            .expect_err("injected");
        match err {
            Error::Ioctl { ioctl, errno, .. } => {
                assert_eq!(ioctl, "ALLOC_MEMORY_OF_GPU");
                assert_eq!(errno, Errno::NOSPC);
            }
            other => panic!("unexpected error {other:?}"),
        }
        kfd.alloc_memory_of_gpu(gpus[0], VA, 4096, flags)
            .expect("the rule fired once");
    })
    .expect("attach");
}
