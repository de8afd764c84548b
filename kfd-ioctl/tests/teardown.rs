//! What the owning types leave behind when the kernel refuses, retries, forks and closed peers
//! get in the way: bounded retries with a typed error, no leaked buffer object after a
//! transient unmap failure, a forked child that only closes what it inherited, and an SMI
//! stream that ends instead of spinning.
#![cfg(not(miri))]

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kfd_emu::backend::Backend;
use kfd_emu::counting::Counting;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::{AllocMemFlags, SmiEventMask};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, Error, Kfd, SmiEvents};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

fn model(fail: &[&str], check_leaks: bool) -> Arc<Model> {
    Model::new(ModelConfig {
        fail: fail
            .iter()
            .map(|rule| rule.parse().expect("rule"))
            .collect(),
        check_leaks,
        ..ModelConfig::default()
    })
    .expect("model")
}

/// Runs `f` attached to `backend` on a thread of its own and gives up after `limit`: a call
/// that never returns fails the test instead of hanging it.
fn attached_within<T: Send + 'static>(
    backend: Arc<dyn Backend>,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(kfd_emu::supervisor::run_attached(backend, f).expect("attach"));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("still running after {limit:?}"))
}

/// Opens KFD and acquires the first GPU: `(kfd, gpu_id, a free GPU VA)`.
fn open_first_gpu() -> (Kfd, kfd_ioctl::GpuId, u64) {
    let kfd = Kfd::open().expect("open");
    let topology = Topology::read().expect("topology");
    let gpu = topology.gpus().next().expect("a GPU");
    let gpu_id = gpu.gpu_id().expect("gpu_id");
    kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)
        .expect("acquire_vm");
    let apertures = kfd.get_process_apertures().expect("apertures");
    let gpuvm = &apertures
        .iter()
        .find(|a| a.gpu_id == gpu_id)
        .expect("aperture")
        .gpuvm;
    (kfd, gpu_id, gpuvm.start + (1 << 40))
}

const GTT: AllocMemFlags = AllocMemFlags::GTT.union(AllocMemFlags::WRITABLE);

#[test]
fn open_gives_up_on_endless_eintr_with_an_error_naming_get_version() {
    let started = Instant::now();
    let result = attached_within(
        model(&["GET_VERSION:EINTR"], false),
        Duration::from_secs(20),
        Kfd::open,
    );
    match result {
        Err(Error::Interrupted {
            ioctl: "GET_VERSION",
            attempts,
            errno: Errno::INTR,
            ..
        }) => assert!(attempts > 1, "{attempts}"),
        other => panic!("expected GET_VERSION interrupted, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn open_retries_through_a_few_eintr() {
    let kfd = attached_within(
        model(&["GET_VERSION:EINTR:3"], false),
        Duration::from_secs(20),
        || Kfd::open().map(|kfd| kfd.version()),
    );
    assert_eq!(kfd.expect("open after 3 EINTR").major, 1);
}

#[test]
fn a_failed_free_gives_the_bo_back_still_mapped_and_freeing_again_works() {
    attached_within(
        model(&["UNMAP_MEMORY_FROM_GPU:EIO:1"], false),
        Duration::from_secs(60),
        || {
            let (kfd, gpu_id, va) = open_first_gpu();
            let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, GTT).unwrap();
            kfd.map_memory_to_gpu(&bo, &[gpu_id]).unwrap();
            let failed = kfd.free_memory_of_gpu(bo).expect_err("the injected EIO");
            assert_eq!(failed.error().errno(), Some(Errno::IO), "{failed}");
            assert_eq!(failed.error().ioctl(), Some("UNMAP_MEMORY_FROM_GPU"));
            assert!(failed.to_string().contains("stays allocated"), "{failed}");
            let bo = failed.into_buffer_object();
            assert_eq!(bo.mapped_gpus(), [gpu_id], "the unmap did not happen");
            kfd.free_memory_of_gpu(bo).expect("the second free");
            // The VA is free again: a new BO maps there.
            let again = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, GTT).unwrap();
            kfd.map_memory_to_gpu(&again, &[gpu_id]).unwrap();
        },
    );
}

/// Forks; the child runs `child` and `_exit`s with its result; returns the child's pid.
fn fork(child: impl FnOnce() -> i32) -> Pid {
    // SAFETY: the child runs `child`, which takes no lock another thread of the test process
    // could hold (it opens KFD afresh; glibc's malloc is fork-safe), and leaves with `_exit`,
    // running no destructor of the parent's.
    match unsafe { nix::unistd::fork() }.expect("fork") {
        ForkResult::Parent { child } => child,
        ForkResult::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
            exit_child(code.unwrap_or(99))
        }
    }
}

/// Ends a forked child at once, without running the parent's destructors or atexit handlers.
fn exit_child(code: i32) -> ! {
    // SAFETY: `_exit` only ends the process.
    unsafe { libc::_exit(code) }
}

/// The exit code of child `pid`, once it exited.
fn exit_code(pid: Pid) -> Option<i32> {
    match waitpid(pid, None).expect("waitpid") {
        WaitStatus::Exited(_, code) => Some(code),
        _ => None,
    }
}

/// `kfd-emu run --check-leaks --fail UNMAP_MEMORY_FROM_GPU:EIO:1 -- <alloc, map, drop>`:
/// dropping retries the unmap, so the process exits with nothing left behind.
#[test]
fn dropping_after_a_transient_unmap_failure_leaves_no_leak() {
    let model = model(&["UNMAP_MEMORY_FROM_GPU:EIO:1"], true);
    let watch = Counting::new(model.clone());
    let backend = watch.clone();
    let (status, pid) = attached_within(backend, Duration::from_secs(60), || {
        let pid = fork(|| {
            let (kfd, gpu_id, va) = open_first_gpu();
            let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, GTT).unwrap();
            kfd.map_memory_to_gpu(&bo, &[gpu_id]).unwrap();
            drop(bo);
            0
        });
        (exit_code(pid), pid)
    });
    assert_eq!(status, Some(0));
    assert!(
        watch.wait_exited(pid.as_raw(), Duration::from_secs(20)),
        "the child's teardown never came"
    );
    assert!(
        !model.leaks_found(),
        "the child left a buffer object behind"
    );
}

/// The number of open descriptors of the calling process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// A forked child that drops the `Kfd`, buffer object, CPU mapping and SMI fd it inherited
/// issues no ioctl (KFD would refuse them: the objects are the parent's) and closes the three
/// descriptors (`/dev/kfd`, the render node, the SMI fd); the parent's objects stay usable.
#[test]
fn a_forked_child_closes_what_it_inherited_and_frees_nothing_of_the_parent() {
    let emu = Counting::new(model(&[], false));
    let backend = emu.clone();
    attached_within(backend, Duration::from_secs(60), move || {
        let (kfd, gpu_id, va) = open_first_gpu();
        let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, GTT).unwrap();
        kfd.map_memory_to_gpu(&bo, &[gpu_id]).unwrap();
        let cpu = bo.map_cpu().unwrap();
        cpu.write_slice(b"parent", 0).unwrap();
        let smi = kfd.smi_events(gpu_id).unwrap();
        let before = emu.counts();

        // SAFETY: as in `fork`; the child drops what it inherited and leaves with `_exit`.
        let forked = unsafe { nix::unistd::fork() }.expect("fork");
        if let ForkResult::Child = forked {
            let code = 'child: {
                if !matches!(cpu.as_volatile_slice(), Err(Error::Inherited { .. })) {
                    break 'child 1;
                }
                drop(cpu);
                let fds = open_fds();
                match kfd.free_memory_of_gpu(bo) {
                    Err(e) if matches!(e.error(), Error::Inherited { .. }) => {}
                    _ => break 'child 2,
                }
                drop(smi);
                drop(kfd);
                if fds - open_fds() != 3 {
                    break 'child 3;
                }
                0
            };
            exit_child(code);
        }
        if let ForkResult::Parent { child } = forked {
            assert_eq!(exit_code(child), Some(0));
        }
        assert_eq!(
            emu.counts().since(&before),
            [],
            "the child issued ioctls on the parent's objects"
        );
        // Everything is still the parent's and works.
        let mut back = [0u8; 6];
        cpu.read_slice(&mut back, 0).unwrap();
        assert_eq!(&back, b"parent");
        assert_eq!(bo.mapped_gpus(), [gpu_id]);
        smi.set_mask(SmiEventMask::all()).unwrap();
        drop(cpu);
        kfd.free_memory_of_gpu(bo).expect("the parent frees its BO");
    });
}

/// A pipe standing in for an SMI fd whose writer already wrote `data` and closed.
fn closed_smi_pipe(data: &[u8]) -> SmiEvents {
    let (reader, writer) = rustix::pipe::pipe().expect("pipe");
    assert_eq!(rustix::io::write(&writer, data).expect("write"), data.len());
    drop(writer);
    SmiEvents::from_fd(reader, 0x1a2b)
}

#[test]
fn an_smi_fd_whose_writer_closed_ends_with_a_typed_error_once_drained() {
    let mut smi = closed_smi_pipe(b"2 100 -1 1a2b\n2 200 -1 1a2b\nunfinished");
    assert_eq!(smi.read_line().unwrap().as_deref(), Some("2 100 -1 1a2b"));
    assert_eq!(smi.read_line().unwrap().as_deref(), Some("2 200 -1 1a2b"));
    match smi.read_line() {
        Err(Error::SmiEndOfStream {
            gpu_id: kfd_ioctl::GpuId(0x1a2b),
            unfinished: 10,
        }) => {}
        other => panic!("expected end of stream, got {other:?}"),
    }
    // And stays ended.
    assert!(matches!(
        smi.read_line(),
        Err(Error::SmiEndOfStream { unfinished: 0, .. })
    ));
    let mut buf = [0u8; 8];
    assert!(matches!(
        smi.read(&mut buf),
        Err(Error::SmiEndOfStream { .. })
    ));
}
