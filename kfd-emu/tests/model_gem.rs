//! amdgpu's GEM, PRIME and command-submission ioctls on a render node (`amdgpu_gem.c`,
//! `drm_prime.c`, `amdgpu_ctx.c`, `amdgpu_bo_list.c`, `amdgpu_cs.c`) and what they share with
//! KFD: a GEM object's bytes through GEM_MMAP and the render node, through its dma-buf in
//! KFD (GET_DMABUF_INFO with the GEM metadata, IMPORT_DMABUF); and VRAM, where a GEM object
//! that does not fit evicts another process's KFD BOs (`amdgpu_ttm_bo_eviction_valuable`),
//! whose process is evicted (`QUEUE_EVICTION`, trigger TTM) and restored by its restore
//! worker (`QUEUE_RESTORE`), its data intact.

mod model_support;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use kfd_emu::backend::{Backend, WriteCall};
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use kfd_ioctl::{Errno, SmiEvents};
use model_support::{Emu, TestCaller, injected, own_fd, va};

const PAGE: u64 = 4096;
const MIB: u64 = 1 << 20;
/// The VRAM of the small GPU the eviction tests use: TTM's VRAM manager holds all of it.
const VRAM: u64 = 64 * MIB;

/// `_IOC(dir, 'd', nr, size)`.
const fn drm(dir: u32, nr: u32, size: u32) -> u32 {
    dir << 30 | size << 16 | 0x64 << 8 | nr
}
const RW: u32 = 3;
const W: u32 = 1;
const GEM_CLOSE: u32 = drm(W, 0x09, 8);
const PRIME_HANDLE_TO_FD: u32 = drm(RW, 0x2D, 12);
const PRIME_FD_TO_HANDLE: u32 = drm(RW, 0x2E, 12);
const GEM_CREATE: u32 = drm(RW, 0x40, 32);
const GEM_MMAP: u32 = drm(RW, 0x41, 8);
const CTX: u32 = drm(RW, 0x42, 16);
const BO_LIST: u32 = drm(RW, 0x43, 24);
const CS: u32 = drm(RW, 0x44, 24);
const GEM_METADATA: u32 = drm(RW, 0x46, 288);
const GEM_VA: u32 = drm(W, 0x48, 40);
const WAIT_CS: u32 = drm(RW, 0x49, 32);
const GEM_OP: u32 = drm(RW, 0x50, 16);

const DOMAIN_GTT: u64 = 0x2;
const DOMAIN_VRAM: u64 = 0x4;
const DOMAIN_GDS: u64 = 0x8;
const CPU_ACCESS_REQUIRED: u64 = 1;
const VRAM_CLEARED: u64 = 1 << 3;

/// A DRM ioctl on `fd` as `caller` with the argument bytes `arg`.
fn ioctl(
    emu: &Emu,
    caller: &TestCaller,
    fd: BorrowedFd<'_>,
    cmd: u32,
    arg: &mut [u8],
) -> Result<i64, Errno> {
    emu.model
        .ioctl(caller, fd, cmd, arg.as_mut_ptr() as u64)
        .expect("the render stand-in is the model's")
}

fn u32s(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// A render-node open and who opened it.
struct Node {
    fd: OwnedFd,
    caller: TestCaller,
}

impl Node {
    fn open(emu: &Emu, caller: TestCaller) -> Node {
        let minor = emu.model.machine().gpus()[0].render_minor;
        let fd = injected(emu.model.open(
            &caller,
            &format!("/dev/dri/renderD{minor}"),
            libc::O_RDWR | libc::O_CLOEXEC,
            0,
        ));
        Node { fd, caller }
    }

    fn call(&self, emu: &Emu, cmd: u32, arg: &mut [u8]) -> Result<i64, Errno> {
        ioctl(emu, &self.caller, self.fd.as_fd(), cmd, arg)
    }

    /// GEM_CREATE: the handle.
    fn create(&self, emu: &Emu, size: u64, domains: u64, flags: u64) -> Result<u32, Errno> {
        let mut a = [0u8; 32];
        put64(&mut a, 0, size);
        put64(&mut a, 8, PAGE);
        put64(&mut a, 16, domains);
        put64(&mut a, 24, flags);
        self.call(emu, GEM_CREATE, &mut a)?;
        Ok(get32(&a, 0))
    }

    fn mmap_offset(&self, emu: &Emu, handle: u32) -> Result<u64, Errno> {
        let mut a = [0u8; 8];
        put32(&mut a, 0, handle);
        self.call(emu, GEM_MMAP, &mut a)?;
        Ok(get64(&a, 0))
    }

    fn close(&self, emu: &Emu, handle: u32) -> Result<i64, Errno> {
        let mut a = u32s(&[handle, 0]);
        self.call(emu, GEM_CLOSE, &mut a)
    }

    fn va(&self, emu: &Emu, handle: u32, op: u32, at: u64, size: u64) -> Result<i64, Errno> {
        let mut a = [0u8; 40];
        put32(&mut a, 0, handle);
        put32(&mut a, 8, op);
        put32(&mut a, 12, 0x2 | 0x4 | 0x8);
        put64(&mut a, 16, at);
        put64(&mut a, 32, size);
        self.call(emu, GEM_VA, &mut a)
    }

    fn ctx_alloc(&self, emu: &Emu) -> u32 {
        let mut a = u32s(&[1, 0, 0, 0]);
        self.call(emu, CTX, &mut a).expect("CTX alloc");
        get32(&a, 0)
    }

    fn bo_list(&self, emu: &Emu, handles: &[u32]) -> Result<u32, Errno> {
        let entries = u32s(&handles.iter().flat_map(|&h| [h, 0]).collect::<Vec<_>>());
        let mut a = [0u8; 24];
        put32(&mut a, 8, handles.len() as u32);
        put32(&mut a, 12, 8);
        put64(&mut a, 16, entries.as_ptr() as u64);
        self.call(emu, BO_LIST, &mut a)?;
        Ok(get32(&a, 0))
    }

    /// CS of one IB of `bytes` at `ib_va` on (`ip`, ring 0): the sequence number.
    fn cs(
        &self,
        emu: &Emu,
        ctx: u32,
        list: u32,
        ip: u32,
        ib_va: u64,
        bytes: u32,
    ) -> Result<u64, Errno> {
        let mut ib = [0u8; 32];
        put64(&mut ib, 8, ib_va);
        put32(&mut ib, 16, bytes);
        put32(&mut ib, 20, ip);
        let mut chunk = [0u8; 16];
        put32(&mut chunk, 0, 1);
        put32(&mut chunk, 4, 8);
        put64(&mut chunk, 8, ib.as_ptr() as u64);
        let mut a = [0u8; 24];
        put32(&mut a, 0, ctx);
        put32(&mut a, 4, list);
        put32(&mut a, 8, 1);
        let chunk_ptrs = [chunk.as_ptr() as u64];
        put64(&mut a, 16, chunk_ptrs.as_ptr() as u64);
        self.call(emu, CS, &mut a)?;
        Ok(get64(&a, 0))
    }
}

/// GEM_CREATE's checks are `amdgpu_gem_create_ioctl`'s, in its order; handles start at 1 and
/// reuse the lowest free; GEM_CLOSE of a handle the file lacks is `EINVAL`, GEM_MMAP of one
/// `ENOENT`; the metadata ops are checked as `amdgpu_gem_metadata_ioctl` checks them.
#[test]
fn gem_create_close_and_metadata_follow_the_kernels_checks() {
    let emu = Emu::machine("mi300x");
    let node = Node::open(&emu, emu.caller);
    let e = |r: Result<u32, Errno>| r.expect_err("refused");
    assert_eq!(
        e(node.create(&emu, PAGE, DOMAIN_VRAM, 1 << 4)),
        Errno::INVAL,
        "not settable"
    );
    assert_eq!(
        e(node.create(&emu, PAGE, 0x80, 0)),
        Errno::INVAL,
        "no such domain"
    );
    assert_eq!(
        e(node.create(&emu, PAGE, DOMAIN_VRAM, 1 << 10)),
        Errno::INVAL,
        "TMZ is off"
    );
    assert_eq!(
        e(node.create(&emu, PAGE, DOMAIN_GDS, 1 << 6)),
        Errno::INVAL,
        "GDS per-VM"
    );
    assert_eq!(node.create(&emu, PAGE, DOMAIN_VRAM, 0), Ok(1));
    assert_eq!(node.create(&emu, 3, DOMAIN_GTT, 0), Ok(2));
    assert_eq!(node.close(&emu, 1), Ok(0));
    assert_eq!(node.close(&emu, 1), Err(Errno::INVAL), "closed already");
    assert_eq!(
        node.create(&emu, PAGE, DOMAIN_VRAM, 0),
        Ok(1),
        "the lowest free handle"
    );
    assert_eq!(node.mmap_offset(&emu, 9), Err(Errno::NOENT));
    // Another open of the node has none of these handles.
    let other = Node::open(&emu, emu.caller);
    assert_eq!(other.close(&emu, 1), Err(Errno::INVAL));

    let mut meta = [0u8; 288];
    put32(&mut meta, 0, 1);
    put32(&mut meta, 4, 7);
    assert_eq!(
        node.call(&emu, GEM_METADATA, &mut meta),
        Err(Errno::PERM),
        "no such op"
    );
    put32(&mut meta, 4, 1);
    put32(&mut meta, 24, 257);
    assert_eq!(
        node.call(&emu, GEM_METADATA, &mut meta),
        Err(Errno::INVAL),
        "over 256 bytes"
    );
    put32(&mut meta, 24, 5);
    put64(&mut meta, 8, 0x11);
    put64(&mut meta, 16, 0x22);
    meta[28..33].copy_from_slice(b"meta!");
    assert_eq!(node.call(&emu, GEM_METADATA, &mut meta), Ok(0));
    let mut get = [0u8; 288];
    put32(&mut get, 0, 1);
    put32(&mut get, 4, 2);
    assert_eq!(node.call(&emu, GEM_METADATA, &mut get), Ok(0));
    assert_eq!(
        (get64(&get, 8), get64(&get, 16), get32(&get, 24)),
        (0x11, 0x22, 5)
    );
    assert_eq!(&get[28..33], b"meta!");
    put32(&mut get, 0, 5);
    assert_eq!(node.call(&emu, GEM_METADATA, &mut get), Err(Errno::NOENT));

    // GEM_OP GET_GEM_CREATE_INFO reports what was created (VRAM_CLEARED always added).
    let mut info = [0u8; 32];
    let mut op = [0u8; 16];
    put32(&mut op, 0, 2);
    put64(&mut op, 8, info.as_mut_ptr() as u64);
    assert_eq!(node.call(&emu, GEM_OP, &mut op), Ok(0));
    assert_eq!((get64(&info, 0), get64(&info, 16)), (PAGE, DOMAIN_GTT));
    assert_ne!(get64(&info, 24) & VRAM_CLEARED, 0);
}

/// One object, three views: bytes written through GEM_MMAP's offset on the render node are
/// what KFD imports from its PRIME dma-buf (GET_DMABUF_INFO gives its size, VRAM | PUBLIC
/// and the GEM metadata), and they outlive the GEM handle and the dma-buf fd (KFD holds a
/// reference); FD_TO_HANDLE gives the file its own handle back.
#[test]
fn a_gem_object_is_shared_with_kfd_through_prime() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let g = emu.gpu();
    let node = Node::open(&emu, emu.caller);
    let h = node
        .create(&emu, PAGE, DOMAIN_VRAM, CPU_ACCESS_REQUIRED)
        .expect("create");
    let offset = node.mmap_offset(&emu, h).expect("GEM_MMAP");
    assert!(offset >= 1 << 32, "a DRM vma offset: {offset:#x}");
    {
        let mut map = emu
            .cpu_map(node.fd.as_fd(), offset, PAGE as usize)
            .expect("map");
        map.bytes().fill(0xAA);
    }
    // Another open of the node holds no handle on it: not its to map.
    let stranger = Node::open(&emu, emu.caller);
    assert!(
        emu.cpu_map(stranger.fd.as_fd(), offset, PAGE as usize)
            .is_err()
    );

    let mut meta = [0u8; 288];
    put32(&mut meta, 0, h);
    put32(&mut meta, 4, 1);
    put32(&mut meta, 24, 26);
    meta[28..54].copy_from_slice(b"This data is really meta.\0");
    node.call(&emu, GEM_METADATA, &mut meta)
        .expect("set metadata");

    let mut prime = u32s(&[h, 0x0100_0000, 0]);
    assert_eq!(
        node.call(&emu, PRIME_HANDLE_TO_FD, &mut prime),
        Err(Errno::INVAL),
        "bad flags"
    );
    let mut prime = u32s(&[h, libc::O_CLOEXEC as u32 | libc::O_RDWR as u32, 0]);
    node.call(&emu, PRIME_HANDLE_TO_FD, &mut prime)
        .expect("PRIME_HANDLE_TO_FD");
    let dmabuf = own_fd(get32(&prime, 8));
    let mut back = u32s(&[0, 0, dmabuf.as_raw_fd() as u32]);
    node.call(&emu, PRIME_FD_TO_HANDLE, &mut back)
        .expect("FD_TO_HANDLE");
    assert_eq!(get32(&back, 0), h, "the file's own handle on the object");

    let mut metadata = [0u8; 64];
    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: dmabuf.as_raw_fd() as u32,
        metadata_ptr: metadata.as_mut_ptr() as u64,
        metadata_size: 8,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info),
        Err(Errno::INVAL),
        "a buffer smaller than the metadata"
    );
    info.metadata_size = 64;
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("GET_DMABUF_INFO");
    assert_eq!((info.size, info.metadata_size, info.gpu_id), (PAGE, 26, g));
    assert_eq!(
        info.flags,
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    );
    assert_eq!(&metadata[..26], b"This data is really meta.\0");

    let mut import = kfd_ioctl_import_dmabuf_args {
        va_addr: va(1),
        gpu_id: g,
        dmabuf_fd: dmabuf.as_raw_fd() as u32,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut import)
        .expect("IMPORT_DMABUF");
    drop(dmabuf);
    assert_eq!(node.close(&emu, h), Ok(0));
    assert_eq!(emu.map(import.handle, &[g]).0, Ok(0));
    let mut seen = [0u8; 16];
    emu.model
        .gpu_read(emu.caller.tgid, g, va(1), &mut seen)
        .expect("GPU read of the import");
    assert_eq!(
        seen, [0xAA; 16],
        "the bytes the CPU wrote through the render node"
    );
}

/// GEM_VA maps objects in the file's VM with `amdgpu_vm_bo_map`'s checks; a CS of an IB there
/// (after CTX and BO_LIST) returns sequence numbers from 1 on its ring, WAIT_CS knows them and
/// no later one; an IB outside any mapping, an unknown context, ring or list are refused; a
/// packet other than a NOP is `EOPNOTSUPP` (the emulator does not run it).
#[test]
fn command_submission_runs_nop_ibs_and_fences_them() {
    let emu = Emu::machine("mi300x");
    let node = Node::open(&emu, emu.caller);
    let ib = node.create(&emu, PAGE, DOMAIN_GTT, 0).expect("IB object");
    let at = 0x40_0000;
    assert_eq!(
        node.va(&emu, ib, 1, 0x1000, PAGE),
        Err(Errno::INVAL),
        "reserved bottom"
    );
    assert_eq!(
        node.va(&emu, ib, 1, at, 2 * PAGE),
        Err(Errno::INVAL),
        "past the object"
    );
    assert_eq!(
        node.va(&emu, ib, 1, at + 1, PAGE),
        Err(Errno::INVAL),
        "unaligned"
    );
    assert_eq!(
        node.va(&emu, 77, 1, at, PAGE),
        Err(Errno::NOENT),
        "no such handle"
    );
    assert_eq!(
        node.va(&emu, ib, 9, at, PAGE),
        Err(Errno::INVAL),
        "no such op"
    );
    assert_eq!(node.va(&emu, ib, 1, at, PAGE), Ok(0));
    assert_eq!(
        node.va(&emu, ib, 1, at, PAGE),
        Err(Errno::INVAL),
        "overlaps"
    );
    let offset = node.mmap_offset(&emu, ib).expect("mmap");
    let mut map = emu
        .cpu_map(node.fd.as_fd(), offset, PAGE as usize)
        .expect("map");
    map.bytes()[..64].fill(0); // 16 SDMA NOPs

    let ctx = node.ctx_alloc(&emu);
    assert_eq!(ctx, 1);
    assert_eq!(
        node.bo_list(&emu, &[ib, 42]),
        Err(Errno::NOENT),
        "no such handle"
    );
    let list = node.bo_list(&emu, &[ib]).expect("BO_LIST");
    assert_eq!(node.cs(&emu, ctx, list, 2, at, 64), Ok(1));
    assert_eq!(node.cs(&emu, ctx, list, 2, at, 64), Ok(2));
    assert_eq!(node.cs(&emu, ctx, 0, 2, at, 64), Ok(3), "no list");
    assert_eq!(
        node.cs(&emu, ctx + 1, list, 2, at, 64),
        Err(Errno::INVAL),
        "no such context"
    );
    assert_eq!(
        node.cs(&emu, ctx, list + 1, 2, at, 64),
        Err(Errno::NOENT),
        "no such list"
    );
    assert_eq!(
        node.cs(&emu, ctx, list, 2, at + 2 * PAGE, 64),
        Err(Errno::INVAL),
        "unmapped IB"
    );
    assert_eq!(
        node.cs(&emu, ctx, list, 9, at, 64),
        Err(Errno::INVAL),
        "no such ring"
    );
    let wait = |seq: u64| {
        let mut a = [0u8; 32];
        put64(&mut a, 0, seq);
        put64(&mut a, 8, u64::MAX);
        put32(&mut a, 16, 2);
        put32(&mut a, 28, ctx);
        node.call(&emu, WAIT_CS, &mut a).map(|_| get64(&a, 0))
    };
    assert_eq!(wait(3), Ok(0), "signalled");
    assert_eq!(wait(4), Err(Errno::INVAL), "not submitted yet");
    map.bytes()[..4].copy_from_slice(&1u32.to_le_bytes()); // SDMA COPY
    assert_eq!(node.cs(&emu, ctx, list, 2, at, 64), Err(Errno::OPNOTSUPP));
    assert_eq!(node.va(&emu, ib, 2, at, PAGE), Ok(0), "unmap");
    assert_eq!(
        node.cs(&emu, ctx, list, 2, at, 64),
        Err(Errno::INVAL),
        "unmapped now"
    );
}

/// The QUEUE_EVICTION / QUEUE_RESTORE records of `smi` for `pid`, as `(id, trigger)`.
fn records(smi: &mut SmiEvents, pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(line) = smi.read_line().expect("read the SMI fd") {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(2) == Some(&format!("-{pid}").as_str()) {
            let mut r = f[0].to_owned();
            if f[0] == "9" {
                r.push(' ');
                r.push_str(f.get(4).copied().unwrap_or(""));
            }
            out.push(r);
        }
    }
    out
}

/// Waits (polling, up to 20 s) until `smi` has given `n` records for `pid` in all.
fn wait_records(smi: &mut SmiEvents, pid: i32, seen: &mut Vec<String>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < n && Instant::now() < deadline {
        seen.extend(records(smi, pid));
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// On a 64 MiB GPU: this process's KFD BO fills half the VRAM; another process's GEM
/// object that needs more than what is left evicts it (not the other's own), which evicts
/// this process (`QUEUE_EVICTION` with trigger TTM, 2); its restore worker then validates
/// the BO back (evicting the GEM object, which has no KFD fence) and restores it
/// (`QUEUE_RESTORE`). The other's CS, which validates its object back into VRAM, evicts this
/// process again, and again it is restored; the BO's bytes survive it all.
#[test]
fn vram_pressure_evicts_kfd_bos_and_the_restore_worker_brings_them_back() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi = eviction_events(&emu, g);

    let room = emu.available(g);
    let mine = (room / 2) & !(2 * MIB - 1);
    let (handle, offset) = emu
        .alloc(g, va(2), mine, model_support::VRAM_RW)
        .expect("alloc");
    {
        let mut map = emu
            .cpu_map(emu.renders[0].as_fd(), offset, PAGE as usize)
            .expect("map");
        map.bytes()[..8].copy_from_slice(b"survives");
    }
    assert_eq!(emu.map(handle, &[g]).0, Ok(0));

    // amdgpu's `mem_info_vram_used` and `mem_info_gtt_used`: what the VRAM and GTT managers
    // hold now.
    let usage = |name: &str| -> u64 {
        let fd = injected(emu.model.open(
            &emu.caller,
            &format!("/sys/class/drm/renderD128/device/mem_info_{name}_used"),
            libc::O_RDONLY,
            0,
        ));
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).expect("read");
        text.trim().parse().expect("a number")
    };
    let used = || usage("vram");
    assert_eq!(used(), mine);
    let gtt = usage("gtt");
    let other = Node::open(&emu, TestCaller::other());
    let theirs = VRAM - mine + 2 * MIB;
    let gem = other
        .create(&emu, theirs, DOMAIN_VRAM, VRAM_CLEARED)
        .expect("GEM_CREATE");
    let mut seen = Vec::new();
    wait_records(&mut smi, pid, &mut seen, 2);
    assert_eq!(seen, ["9 2", "a"], "evicted by TTM, then restored");
    assert_eq!(used(), mine, "the BO is back, the GEM object in GTT");
    assert_eq!(
        usage("gtt"),
        gtt + theirs,
        "the evicted GEM object is in GTT"
    );

    // The other's CS validates its object back into VRAM: this process goes again.
    let ib = other.create(&emu, PAGE, DOMAIN_GTT, 0).expect("IB");
    other.va(&emu, ib, 1, 0x40_0000, PAGE).expect("GEM_VA");
    let ctx = other.ctx_alloc(&emu);
    let list = other.bo_list(&emu, &[ib, gem]).expect("BO_LIST");
    assert_eq!(other.cs(&emu, ctx, list, 2, 0x40_0000, 64), Ok(1));
    wait_records(&mut smi, pid, &mut seen, 4);
    assert_eq!(seen, ["9 2", "a", "9 2", "a"]);
    assert_eq!(
        usage("gtt"),
        gtt + theirs + PAGE,
        "the GEM object evicted to GTT again, and the IB placed there"
    );

    let mut back = [0u8; 8];
    emu.model
        .gpu_read(pid, g, va(2), &mut back)
        .expect("GPU read");
    assert_eq!(&back, b"survives");
    // Nothing more happens once the other's object is gone.
    assert_eq!(other.close(&emu, gem), Ok(0));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(records(&mut smi, pid), Vec::<String>::new());
}

/// `amdgpu_ttm_bo_eviction_valuable`: a process's own GEM_CREATE never evicts its own KFD
/// BOs (no record; the VRAM-only object that does not fit goes to GTT, the ioctl's retry with
/// VRAM | GTT, which GET_GEM_CREATE_INFO then reports; another process's object in GTT makes
/// no room in VRAM); a KFD ALLOC that needs the room of
/// another process's GEM object evicts that object, which carries no KFD fence (no record).
#[test]
fn a_process_never_evicts_its_own_kfd_bos() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi_args = kfd_ioctl_smi_events_args {
        gpuid: g,
        anon_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_SMI_EVENTS, &mut smi_args)
        .expect("SMI_EVENTS");
    let mut smi = SmiEvents::from_fd(own_fd(smi_args.anon_fd), g);
    let mask = (SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE).bits();
    let addr = &raw const mask as u64;
    let written = emu
        .model
        .write(&emu.caller, smi.as_fd(), &|| Ok(WriteCall::Write(addr, 8)));
    assert_eq!(written, Some(Ok(8)));

    let room = emu.available(g);
    let mine = (room / 2) & !(2 * MIB - 1);
    emu.alloc(g, va(3), mine, model_support::VRAM_RW)
        .expect("alloc");
    // Another process's object in GTT, made before: not in the VRAM manager's LRU, so no
    // room to make.
    let other = Node::open(&emu, TestCaller::other());
    other
        .create(&emu, VRAM / 2, DOMAIN_GTT, 0)
        .expect("a GTT object");
    let node = Node::open(&emu, emu.caller);
    let gem = node
        .create(&emu, VRAM - mine + 2 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE falls back to GTT");
    let mut info = [0u8; 32];
    let mut op = [0u8; 16];
    put32(&mut op, 0, gem);
    put64(&mut op, 8, info.as_mut_ptr() as u64);
    assert_eq!(node.call(&emu, GEM_OP, &mut op), Ok(0));
    assert_eq!(
        get64(&info, 16),
        DOMAIN_VRAM | DOMAIN_GTT,
        "placed with GTT added"
    );

    // Another process's object fills what is left; this process's ALLOC takes it back.
    other
        .create(&emu, VRAM - mine, DOMAIN_VRAM, 0)
        .expect("the other's object fits");
    emu.alloc(g, va(4), room - mine, model_support::VRAM_RW)
        .expect("ALLOC evicts the other's GEM object");
    assert_eq!(
        records(&mut smi, pid),
        Vec::<String>::new(),
        "this process was never evicted"
    );
}

/// TTM evicts from the head of the VRAM manager's LRU (`ttm_mem_evict_first`), and a CS
/// validation moves each object of its BO list to the tail (`ttm_bo_move_to_lru_tail`): with
/// another process's GEM object made first, then this process's KFD BO, then the object
/// validated by the other's CS, the other's next object that needs the room of one of them
/// evicts the KFD BO (this process is evicted, `QUEUE_EVICTION` with trigger TTM), not the
/// older GEM object; the restore worker then takes the GEM object's room (the head now) to
/// bring the BO back (`QUEUE_RESTORE`), and only it (the process's other BO, still in VRAM,
/// needs no room).
/// Each eviction makes exactly the room asked for (`ttm_bo_mem_space` places the object as
/// soon as it fits).
#[test]
fn ttm_evicts_the_object_validated_longest_ago() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi_args = kfd_ioctl_smi_events_args {
        gpuid: g,
        anon_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_SMI_EVENTS, &mut smi_args)
        .expect("SMI_EVENTS");
    let mut smi = SmiEvents::from_fd(own_fd(smi_args.anon_fd), g);
    let mask = (SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE).bits();
    let addr = &raw const mask as u64;
    let written = emu
        .model
        .write(&emu.caller, smi.as_fd(), &|| Ok(WriteCall::Write(addr, 8)));
    assert_eq!(written, Some(Ok(8)));

    let other = Node::open(&emu, TestCaller::other());
    let older = other
        .create(&emu, 8 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE");
    let (handle, _) = emu
        .alloc(g, va(2), 8 * MIB, model_support::VRAM_RW)
        .expect("alloc");
    assert_eq!(emu.map(handle, &[g]).0, Ok(0));
    let ib = other.create(&emu, PAGE, DOMAIN_GTT, 0).expect("IB");
    other.va(&emu, ib, 1, 0x40_0000, PAGE).expect("GEM_VA");
    let ctx = other.ctx_alloc(&emu);
    let list = other.bo_list(&emu, &[ib, older]).expect("BO_LIST");
    assert_eq!(other.cs(&emu, ctx, list, 2, 0x40_0000, 64), Ok(1));
    // And a second KFD BO of this process, at the LRU's tail: it stays in VRAM throughout.
    emu.alloc(g, va(3), 4 * MIB, model_support::VRAM_RW)
        .expect("alloc");
    assert_eq!(records(&mut smi, pid), Vec::<String>::new());

    // Exactly the room of one of them: VRAM - 20 MiB free, and 8 MiB more.
    other
        .create(&emu, VRAM - 12 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE evicts one object");
    let mut seen = Vec::new();
    wait_records(&mut smi, pid, &mut seen, 2);
    assert_eq!(
        seen,
        ["9 2", "a"],
        "the KFD BO evicted (validated longest ago), then restored"
    );
    // The BOs and the new object fill the VRAM: only the older object made room (the
    // restore validates the evicted BO, not the one still in VRAM).
    let fd = injected(emu.model.open(
        &emu.caller,
        "/sys/class/drm/renderD128/device/mem_info_vram_used",
        libc::O_RDONLY,
        0,
    ));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).expect("read");
    assert_eq!(text.trim().parse::<u64>(), Ok(VRAM));
}

/// An SMI client of GPU `g` for `emu`'s process, asking for QUEUE_EVICTION and QUEUE_RESTORE.
fn eviction_events(emu: &Emu, g: u32) -> SmiEvents {
    let mut smi_args = kfd_ioctl_smi_events_args {
        gpuid: g,
        anon_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_SMI_EVENTS, &mut smi_args)
        .expect("SMI_EVENTS");
    let smi = SmiEvents::from_fd(own_fd(smi_args.anon_fd), g);
    let mask = (SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE).bits();
    let addr = &raw const mask as u64;
    let written = emu
        .model
        .write(&emu.caller, smi.as_fd(), &|| Ok(WriteCall::Write(addr, 8)));
    assert_eq!(written, Some(Ok(8)));
    smi
}

/// A restore worker belongs to the process it was scheduled for (`restore_process_worker`
/// works on its `kfd_process`, whose teardown cancels it): when the evicted process exits
/// before it runs and a new process with the same pid opens `/dev/kfd`, the worker restores
/// nothing (no `QUEUE_RESTORE` for the new process, which was never evicted).
#[test]
fn a_restore_worker_leaves_a_new_process_with_the_same_pid_alone() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi = eviction_events(&emu, g);
    let mine = (emu.available(g) / 2) & !(2 * MIB - 1);
    emu.alloc(g, va(2), mine, model_support::VRAM_RW)
        .expect("alloc");
    let other = Node::open(&emu, TestCaller::other());
    other
        .create(&emu, VRAM - mine + 2 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE");
    // Evicted now (the eviction is part of the GEM_CREATE); the worker runs 100 ms later.
    assert_eq!(records(&mut smi, pid), ["9 2"]);
    drop(smi);
    emu.model.process_exited(pid);
    emu.kfd = injected(
        emu.model
            .open(&emu.caller, "/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC, 0),
    );
    let mut smi = eviction_events(&emu, g);
    // Past the old worker's time (PROCESS_RESTORE_TIME, 100 ms), with room to spare.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(records(&mut smi, pid), Vec::<String>::new());
}

/// A restore worker belongs to the process it was scheduled for, even when a new process
/// with the same pid was evicted too: the new process's queues come back by its own worker,
/// `PROCESS_RESTORE_TIME` (100 ms) after its own eviction, not when the exited process's
/// worker would have run (`restore_process_worker` works on its `kfd_process`, and
/// `kfd_process_notifier_release` cancels it with the process). The new process is evicted
/// about 60 ms after the old one, so a restore by the old worker would come about 40 ms
/// after the new eviction (on a machine so loaded that the old worker runs later still, the
/// check sees the right answer either way: a restore is never earlier than its timer).
#[test]
fn a_new_process_with_the_same_pid_is_restored_by_its_own_worker() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi = eviction_events(&emu, g);
    let mine = (emu.available(g) / 2) & !(2 * MIB - 1);
    emu.alloc(g, va(2), mine, model_support::VRAM_RW)
        .expect("alloc");
    let other = Node::open(&emu, TestCaller::other());
    let first = VRAM - mine + 2 * MIB;
    other
        .create(&emu, first, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE");
    let old_evicted = Instant::now();
    assert_eq!(records(&mut smi, pid), ["9 2"]);
    drop(smi);
    emu.model.process_exited(pid);
    emu.kfd = injected(
        emu.model
            .open(&emu.caller, "/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC, 0),
    );
    emu.acquire_all();
    let mut smi = eviction_events(&emu, g);
    // The exited process's BO is gone: the new one's fits beside the other's object.
    let again = ((VRAM - first) / 2) & !(2 * MIB - 1);
    emu.alloc(g, va(2), again, model_support::VRAM_RW)
        .expect("alloc");
    std::thread::sleep(Duration::from_millis(60).saturating_sub(old_evicted.elapsed()));
    // Room for it only with both the first object (the LRU's head) and the new BO gone.
    other
        .create(&emu, VRAM - again + 2 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE");
    let new_evicted = Instant::now();
    let mut seen = records(&mut smi, pid);
    assert_eq!(
        seen,
        ["9 2"],
        "the new process evicted by the second object"
    );
    seen.clear();
    wait_records(&mut smi, pid, &mut seen, 1);
    let after = new_evicted.elapsed();
    assert_eq!(
        seen,
        ["a"],
        "the new process restored (QUEUE_RESTORE, id 0xa)"
    );
    assert!(
        after >= Duration::from_millis(100),
        "restored {after:?} after its eviction: before its own worker's 100 ms (the old \
         process's worker, due {:?} after the new eviction, restored it)",
        Duration::from_millis(100).saturating_sub(new_evicted - old_evicted)
    );
}

/// `kfd_process_evict_queues` stops the process's queues until its restore worker resumes
/// them (`restore_process_queues_cpsch`): an SDMA fence submitted after the eviction is
/// written only once the `QUEUE_RESTORE` record was emitted (the worker emits it before it
/// resumes the queues), and it is written then.
#[test]
fn an_evicted_process_queue_runs_again_only_after_the_restore() {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(VRAM)
        .expect("with_vram");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let mut smi_args = kfd_ioctl_smi_events_args {
        gpuid: g,
        anon_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_SMI_EVENTS, &mut smi_args)
        .expect("SMI_EVENTS");
    let mut smi = SmiEvents::from_fd(own_fd(smi_args.anon_fd), g);
    let mask = (SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE).bits();
    let addr = &raw const mask as u64;
    let written = emu
        .model
        .write(&emu.caller, smi.as_fd(), &|| Ok(WriteCall::Write(addr, 8)));
    assert_eq!(written, Some(Ok(8)));

    // The ring, its pointers and the fence's target: a one-page GTT BO each (what
    // `kfd_queue_acquire_buffers` asks of the ring and the pointers).
    let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    for at in [va(5), va(6), va(7)] {
        let (h, _) = emu.alloc(g, at, PAGE, gtt).expect("GTT BO");
        assert_eq!(emu.map(h, &[g]).0, Ok(0));
    }
    let (ring, pointers, target) = (va(5), va(6), va(7));
    let mut q = kfd_ioctl_create_queue_args {
        ring_base_address: ring,
        write_pointer_address: pointers + 8,
        read_pointer_address: pointers,
        ring_size: PAGE as u32,
        gpu_id: g,
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut q)
        .expect("CREATE_QUEUE");
    let fence = |n: u64, value: u32| {
        // SDMA_OP_FENCE at slot n (16 bytes each), then the write pointer past it.
        let words = [5u32, target as u32, (target >> 32) as u32, value];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        emu.model
            .gpu_write(pid, g, ring + 16 * n, &bytes)
            .expect("ring write");
        emu.model
            .gpu_write(pid, g, pointers + 8, &(16 * (n + 1)).to_le_bytes())
            .expect("wptr write");
    };
    let read = || {
        let mut b = [0u8; 4];
        emu.model
            .gpu_read(pid, g, target, &mut b)
            .expect("GPU read");
        u32::from_le_bytes(b)
    };
    let until = |want: u32| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while read() != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        read() == want
    };
    fence(0, 1);
    assert!(until(1), "the queue runs");

    let room = emu.available(g);
    let mine = (room / 2) & !(2 * MIB - 1);
    emu.alloc(g, va(2), mine, model_support::VRAM_RW)
        .expect("alloc");
    let other = Node::open(&emu, TestCaller::other());
    other
        .create(&emu, VRAM - mine + 2 * MIB, DOMAIN_VRAM, 0)
        .expect("GEM_CREATE");
    let mut seen = records(&mut smi, pid);
    assert_eq!(seen, ["9 2"], "evicted during the GEM_CREATE");
    fence(1, 2);
    assert!(until(2), "the queue runs again");
    seen.extend(records(&mut smi, pid));
    assert_eq!(seen, ["9 2", "a"], "restored before the fence was written");
}

/// A DRM file that is a process's KFD VM has one VM (`amdgpu_vm`): a GEM_VA mapping may not
/// overlap a KFD mapping and a KFD MAP may not overlap a GEM_VA mapping (`EINVAL` both ways,
/// `amdgpu_vm_bo_map`), and the GPU reaches the GEM object through KFD's view of that VM
/// until GEM_VA unmaps it.
#[test]
fn gem_va_shares_the_vm_of_a_kfd_process() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let g = emu.gpu();
    let pid = emu.caller.tgid;
    let node = Node {
        fd: emu.renders[0].try_clone().expect("dup of the VM's DRM fd"),
        caller: emu.caller,
    };
    let (kfd_bo, _) = emu
        .alloc(g, va(8), 2 * MIB, model_support::VRAM_RW)
        .expect("alloc");
    assert_eq!(emu.map(kfd_bo, &[g]).0, Ok(0));
    let gem = node.create(&emu, PAGE, DOMAIN_GTT, 0).expect("GEM_CREATE");
    let offset = node.mmap_offset(&emu, gem).expect("GEM_MMAP");
    emu.cpu_map(node.fd.as_fd(), offset, PAGE as usize)
        .expect("map")
        .bytes()[..4]
        .copy_from_slice(b"GEM!");
    assert_eq!(
        node.va(&emu, gem, 1, va(8), PAGE),
        Err(Errno::INVAL),
        "KFD's BO is there"
    );
    assert_eq!(node.va(&emu, gem, 1, va(9), PAGE), Ok(0));
    let mut seen = [0u8; 4];
    emu.model
        .gpu_read(pid, g, va(9), &mut seen)
        .expect("the GPU reaches the GEM mapping");
    assert_eq!(&seen, b"GEM!");
    let (other_bo, _) = emu
        .alloc(g, va(9), 2 * MIB, model_support::VRAM_RW)
        .expect("alloc");
    assert_eq!(
        emu.map(other_bo, &[g]).0,
        Err(Errno::INVAL),
        "the GEM mapping is there"
    );
    assert_eq!(node.va(&emu, gem, 2, va(9), PAGE), Ok(0), "GEM_VA unmap");
    assert!(
        emu.model.gpu_read(pid, g, va(9), &mut seen).is_err(),
        "unmapped"
    );
    assert_eq!(emu.map(other_bo, &[g]).0, Ok(0), "free for KFD now");
}

/// ACQUIRE_VM of a DRM file makes its VM the process's compute VM with what GEM_VA already
/// mapped there (`amdgpu_vm_make_compute` keeps the VM's mappings): the GPU reaches it.
#[test]
fn acquire_vm_keeps_the_files_gem_va_mappings() {
    let emu = Emu::machine("mi300x");
    let g = emu.gpu();
    let node = Node::open(&emu, emu.caller);
    let gem = node.create(&emu, PAGE, DOMAIN_GTT, 0).expect("GEM_CREATE");
    let offset = node.mmap_offset(&emu, gem).expect("GEM_MMAP");
    emu.cpu_map(node.fd.as_fd(), offset, PAGE as usize)
        .expect("map")
        .bytes()[..4]
        .copy_from_slice(b"kept");
    assert_eq!(node.va(&emu, gem, 1, va(10), PAGE), Ok(0));
    let mut acquire = kfd_ioctl_acquire_vm_args {
        drm_fd: node.fd.as_raw_fd() as u32,
        gpu_id: g,
    };
    emu.ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut acquire)
        .expect("ACQUIRE_VM");
    let mut seen = [0u8; 4];
    emu.model
        .gpu_read(emu.caller.tgid, g, va(10), &mut seen)
        .expect("the GEM mapping is in the compute VM");
    assert_eq!(&seen, b"kept");
}
