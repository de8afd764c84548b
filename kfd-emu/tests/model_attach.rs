//! The model behind the real thing: the product's `Kfd` on a thread attached through seccomp
//! (`supervisor::run_attached`), checked against the model's GPU-side view.

mod fork_support;
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
        cpu.write_slice(b"written by the CPU", 1000).expect("write");
        let pid = std::process::id() as i32;
        let mut seen = [0u8; 18];
        view.gpu_read(pid, gpus[0], VA + 1000, &mut seen)
            .expect("GPU read");
        assert_eq!(&seen, b"written by the CPU");
        view.gpu_write(pid, gpus[0], VA + 4096, b"GPU")
            .expect("GPU write");
        let mut back = [0u8; 3];
        cpu.read_slice(&mut back, 4096).expect("read");
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
        cpu.read_slice(&mut back, 64).expect("read");
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

/// One KFD ioctl of a forked child on a stack argument: 0 or the errno (async-signal-safe).
fn child_ioctl<T>(fd: std::os::fd::BorrowedFd<'_>, cmd: rustix::ioctl::Opcode, arg: &mut T) -> i32 {
    use std::os::fd::AsRawFd;
    // SAFETY: `arg` is the ABI struct of `cmd`, alive and exclusively borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, std::ptr::from_mut(arg)) };
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

/// In a forked child: opens `/dev/kfd` and the render node `render` and binds GPU `gpu_id` to
/// it. Returns the kfd fd, or the step that failed.
fn child_open_gpu(
    render: &str,
    gpu_id: u32,
) -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), i32> {
    use kfd_ioctl::abi::{AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args};
    use rustix::fs::{Mode, OFlags, open};
    use std::os::fd::{AsFd, AsRawFd};
    let kfd = open("/dev/kfd", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|_| 20)?;
    let drm = open(render, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|_| 21)?;
    let mut acquire = kfd_ioctl_acquire_vm_args {
        drm_fd: drm.as_raw_fd() as u32,
        gpu_id,
    };
    match child_ioctl(kfd.as_fd(), AMDKFD_IOC_ACQUIRE_VM, &mut acquire) {
        0 => Ok((kfd, drm)),
        _ => Err(22),
    }
}

/// The kernel's dma-buf lives while any reference to it does, whoever made it: here the
/// exporter frees its BO and exits while the only reference is an fd in flight in an
/// `SCM_RIGHTS` message; a second process receives it, imports it, frees the import, closes
/// the fd. AVAILABLE_MEMORY (device-wide) shows the BO's VRAM used until that close, and
/// the leak check finds nothing.
#[test]
fn a_dmabuf_outlives_its_exporter_until_its_last_reference_goes() {
    use kfd_ioctl::abi::*;
    use rustix::net::{
        AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
        SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
    };
    use std::io::{IoSlice, IoSliceMut};
    use std::mem::MaybeUninit;
    use std::os::fd::{AsFd, AsRawFd};
    use std::time::Duration;

    const SIZE: u64 = 64 * MIB;
    let model = model(
        "mi210x8",
        ModelConfig {
            check_leaks: true,
            ..ModelConfig::default()
        },
    );
    let counting = kfd_emu::counting::Counting::new(Arc::clone(&model));
    let seen = Arc::clone(&counting);
    let view = Arc::clone(&model);
    let (stages, leaks) = kfd_emu::supervisor::run_attached(counting, move || {
        let (kfd, gpus) = open_all(&view);
        let gpu = gpus[0];
        let render = format!("/dev/dri/renderD{}", view.machine().gpus()[0].render_minor);
        let free = || kfd.available_memory(gpu).expect("available");
        let before = free();
        let (send, recv) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .expect("socketpair");

        // The exporter: ALLOC, EXPORT, FREE its handle, send the fd, close it, exit.
        let exporter = fork_support::fork(|| {
            let Ok((kfd, _drm)) = child_open_gpu(&render, gpu) else {
                return 10;
            };
            let mut alloc = kfd_ioctl_alloc_memory_of_gpu_args {
                va_addr: VA,
                size: SIZE,
                gpu_id: gpu,
                flags: KFD_IOC_ALLOC_MEM_FLAGS_VRAM
                    | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
                    | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
                ..Default::default()
            };
            if child_ioctl(kfd.as_fd(), AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut alloc) != 0 {
                return 11;
            }
            let mut export = kfd_ioctl_export_dmabuf_args {
                handle: alloc.handle,
                flags: libc::O_CLOEXEC as u32,
                dmabuf_fd: 0,
            };
            if child_ioctl(kfd.as_fd(), AMDKFD_IOC_EXPORT_DMABUF, &mut export) != 0 {
                return 12;
            }
            let mut free = kfd_ioctl_free_memory_of_gpu_args {
                handle: alloc.handle,
            };
            if child_ioctl(kfd.as_fd(), AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut free) != 0 {
                return 13;
            }
            // SAFETY: the export installed this fd in this process; it is owned here only.
            let dmabuf = unsafe {
                <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(
                    export.dmabuf_fd as i32,
                )
            };
            let fds = [dmabuf.as_fd()];
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return 14;
            }
            match rustix::net::sendmsg(
                &send,
                &[IoSlice::new(b"d")],
                &mut control,
                SendFlags::empty(),
            ) {
                Ok(1) => 0,
                _ => 15,
            }
        });
        let status = fork_support::wait_pid(exporter);
        assert_eq!(status.code(), Some(0), "exporter: {status:?}");
        assert!(
            seen.wait_exited(exporter, Duration::from_secs(10)),
            "the exporter's exit was never handled"
        );
        let mut stages = vec![("exporter gone, fd in flight", before - free())];

        // The importer: receive, IMPORT, then step by step, the parent looking in between.
        let (from_child, to_parent) = rustix::pipe::pipe().expect("pipe");
        let (from_parent, to_child) = rustix::pipe::pipe().expect("pipe");
        let importer = fork_support::fork(|| {
            let step = |n: u8| {
                let mut byte = [0u8];
                rustix::io::write(&to_parent, &[n]).is_ok()
                    && rustix::io::read(&from_parent, &mut byte).is_ok()
            };
            let mut data = [0u8; 1];
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            if rustix::net::recvmsg(
                &recv,
                &mut [IoSliceMut::new(&mut data)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .is_err()
            {
                return 30;
            }
            let mut received = None;
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(mut fds) = message {
                    received = fds.next();
                }
            }
            let Some(dmabuf) = received else {
                return 31;
            };
            let Ok((kfd, _drm)) = child_open_gpu(&render, gpu) else {
                return 32;
            };
            let mut import = kfd_ioctl_import_dmabuf_args {
                va_addr: VA + SIZE,
                gpu_id: gpu,
                dmabuf_fd: dmabuf.as_raw_fd() as u32,
                handle: 0,
            };
            if child_ioctl(kfd.as_fd(), AMDKFD_IOC_IMPORT_DMABUF, &mut import) != 0 {
                return 33;
            }
            if !step(1) {
                return 34;
            }
            let mut free = kfd_ioctl_free_memory_of_gpu_args {
                handle: import.handle,
            };
            if child_ioctl(kfd.as_fd(), AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut free) != 0 {
                return 35;
            }
            if !step(2) {
                return 36;
            }
            drop(dmabuf);
            if !step(3) {
                return 37;
            }
            0
        });
        let mut byte = [0u8];
        for name in ["imported", "import freed, fd still open", "fd closed too"] {
            if rustix::io::read(&from_child, &mut byte).ok() != Some(1) {
                let status = fork_support::wait_pid(importer);
                panic!("the importer stopped before {name:?}: {status:?}");
            }
            stages.push((name, before - free()));
            rustix::io::write(&to_child, &[0]).expect("release the child");
        }
        let status = fork_support::wait_pid(importer);
        assert_eq!(status.code(), Some(0), "importer: {status:?}");
        assert!(
            seen.wait_exited(importer, Duration::from_secs(10)),
            "the importer's exit was never handled"
        );
        stages.push(("importer gone", before - free()));
        (stages, view.leaks_found())
    })
    .expect("attach");
    let used: Vec<u64> = stages.iter().map(|&(_, used)| used).collect();
    assert_eq!(
        used,
        [SIZE, SIZE, SIZE, 0, 0],
        "VRAM in use at each stage: {stages:?}"
    );
    assert!(!leaks, "the leak check found something");
}
