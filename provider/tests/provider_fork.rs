//! A provider inherited by a forked child: dropping it there frees nothing of the parent's
//! (a forked child is a new KFD process, where the parent's objects do not exist) and leaks
//! nothing of the child's — every fd it inherited is closed, the ranges it inherited are
//! unmapped, and ranges it never inherited (`MADV_DONTFORK` VRAM) are left to whatever the
//! child put there. The parent's allocations keep working.

mod provider_support;

use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use kfd_emu::backend::Backend;
use kfd_emu::counting::Counting;
use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_provider::{KfdPool, KfdProvider, MemoryKind, PoolParams, ProviderParams};
use kfd_tests::{Target, on_every_target};
use provider_support::*;

/// What the parent set up before forking: a provider owning the process's only `Kfd`, a
/// pool over a sibling, an allocation of each, and (HOST, DEVICE) an IPC handle, which for
/// DEVICE makes a dma-buf fd.
struct Setup {
    provider: KfdProvider,
    pool: KfdPool,
    ptr: NonNull<u8>,
    block: NonNull<u8>,
    /// The fds the providers hold that the test can name: `/dev/kfd` and the render nodes.
    named_fds: Vec<RawFd>,
    /// How many fds the providers hold in all.
    fds: usize,
}

const SIZE: usize = 4 << 20;

fn setup(target: &Target, kind: MemoryKind) -> Setup {
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let provider = KfdProvider::new(kfd, ProviderParams::new(kind)).unwrap();
    let pool = KfdPool::new(
        sibling(&provider, ProviderParams::new(kind)),
        PoolParams::default(),
    )
    .unwrap();
    let ptr = provider.alloc(SIZE, 0).unwrap();
    let block = pool.alloc(64, 0).unwrap();
    if provider.host_accessible() {
        fill(ptr.as_ptr(), SIZE, 0x61);
        fill(block.as_ptr(), 64, 0x62);
    }
    let kfd = provider.kfd();
    let mut named_fds = vec![kfd.as_fd().as_raw_fd()];
    named_fds.extend(
        provider
            .gpus()
            .iter()
            .filter_map(|&g| kfd.render_fd(g).map(|fd| fd.as_raw_fd())),
    );
    let mut fds = named_fds.len();
    match kind {
        // Each HOST provider has its memfd.
        MemoryKind::Host => fds += 2,
        // The first IPC handle of a DEVICE allocation exports a dma-buf.
        MemoryKind::Device => fds += 1,
        MemoryKind::Shared => {}
    }
    if kind != MemoryKind::Shared {
        provider.get_ipc_handle(ptr.as_ptr(), SIZE).unwrap();
    }
    Setup {
        provider,
        pool,
        ptr,
        block,
        named_fds,
        fds,
    }
}

/// The number of open fds of this process.
fn open_fds() -> Result<usize, String> {
    Ok(std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("/proc/self/fd: {e}"))?
        .count())
}

/// In the child: drops what it inherited and checks every fd of it is closed; for
/// `MADV_DONTFORK` VRAM, that a mapping the child made at its address survives the drop.
fn drop_inherited(s: Setup, kind: MemoryKind) -> Result<(), String> {
    let page = page();
    let Setup {
        provider,
        pool,
        ptr,
        named_fds,
        fds,
        ..
    } = s;
    // VRAM mapped for the CPU is MADV_DONTFORK: the child has nothing at its address, so it
    // can map memory of its own there.
    let own = kind == MemoryKind::Device && provider.host_accessible();
    if own {
        // SAFETY: MAP_FIXED_NOREPLACE maps only where nothing is mapped, so it cannot
        // replace memory anything of ours uses; the mapping is this test's.
        let at = unsafe {
            libc::mmap(
                ptr.as_ptr().cast(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if at != ptr.as_ptr().cast() {
            return Err(format!(
                "the parent's VRAM range at {ptr:p} is not free in the child"
            ));
        }
        fill(ptr.as_ptr(), page, 0x99);
    }
    let before = open_fds()?;
    drop(pool);
    drop(provider);
    let after = open_fds()?;
    for fd in named_fds {
        // SAFETY: F_GETFD only asks about the fd number; it touches no memory.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            return Err(format!("fd {fd} of the inherited providers is still open"));
        }
    }
    if before - after != fds {
        return Err(format!(
            "dropping the inherited providers closed {} fds, not their {fds}",
            before - after
        ));
    }
    if own {
        // SAFETY: msync only checks that the range is mapped (ENOMEM when it is not).
        if unsafe { libc::msync(ptr.as_ptr().cast(), page, libc::MS_ASYNC) } != 0 {
            return Err(
                "the drop unmapped the child's own mapping at the parent's VRAM address".into(),
            );
        }
        if read(ptr.as_ptr(), page) != vec![0x99; page] {
            return Err("the child's own mapping lost its bytes".into());
        }
    }
    Ok(())
}

/// Back in the parent: its allocations hold their bytes, take new ones, and free.
fn parent_still_works(target: &Target, s: Setup) {
    let name = target.name();
    if s.provider.host_accessible() {
        assert_eq!(read(s.ptr.as_ptr(), SIZE), vec![0x61; SIZE], "{name}");
        assert_eq!(read(s.block.as_ptr(), 64), vec![0x62; 64], "{name}");
        fill(s.ptr.as_ptr(), SIZE, 0x63);
        assert_eq!(read(s.ptr.as_ptr(), SIZE), vec![0x63; SIZE], "{name}");
    }
    let more = s.pool.alloc(4096, 0).unwrap();
    s.pool.free(more.as_ptr()).unwrap();
    s.pool.free(s.block.as_ptr()).unwrap();
    s.provider.free(s.ptr.as_ptr(), SIZE).unwrap();
    assert_empty(target, &s.provider);
}

fn forked_child_drop_closes_what_it_inherited(kind: MemoryKind) {
    on_every_target(MACHINES, |target| {
        // The child takes the setup out of its copy of the slot; the parent's stays.
        let mut slot = Some(setup(target, kind));
        let ok = in_forked_child(|| drop_inherited(slot.take().ok_or("no setup")?, kind));
        assert!(
            ok,
            "{}: the forked child failed (see its line above)",
            target.name()
        );
        parent_still_works(target, slot.expect("the parent's setup"));
    });
}

#[test]
fn host_forked_child_drop_closes_what_it_inherited() {
    forked_child_drop_closes_what_it_inherited(MemoryKind::Host);
}

#[test]
fn device_forked_child_drop_closes_what_it_inherited() {
    forked_child_drop_closes_what_it_inherited(MemoryKind::Device);
}

#[test]
fn shared_forked_child_drop_closes_what_it_inherited() {
    forked_child_drop_closes_what_it_inherited(MemoryKind::Shared);
}

/// Dropping the inherited providers in the child issues no ioctl at all (kfd-emu counts the
/// ioctls it answers, the child's included).
fn forked_child_drop_issues_no_ioctl(kind: MemoryKind) {
    for machine in MACHINES {
        let model = Model::new(ModelConfig {
            machine: Machine::preset(machine).expect("a preset"),
            ..ModelConfig::default()
        })
        .expect("a model");
        let counting = Counting::new(model.clone());
        let backend: Arc<dyn Backend> = counting.clone();
        let target = Target::Emulated { machine, model };
        kfd_emu::supervisor::run_attached(backend, || {
            let mut slot = Some(setup(&target, kind));
            let before = counting.counts();
            let ok = in_forked_child(|| drop_inherited(slot.take().ok_or("no setup")?, kind));
            assert!(ok, "{}: the forked child failed", target.name());
            let issued = counting.counts().since(&before);
            assert!(
                issued.is_empty(),
                "{}: the child issued {issued:?}",
                target.name()
            );
            parent_still_works(&target, slot.expect("the parent's setup"));
        })
        .expect("attaching");
    }
}

#[test]
fn host_forked_child_drop_issues_no_ioctl() {
    forked_child_drop_issues_no_ioctl(MemoryKind::Host);
}

#[test]
fn device_forked_child_drop_issues_no_ioctl() {
    forked_child_drop_issues_no_ioctl(MemoryKind::Device);
}

#[test]
fn shared_forked_child_drop_issues_no_ioctl() {
    forked_child_drop_issues_no_ioctl(MemoryKind::Shared);
}
