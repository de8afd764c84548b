//! What the SDMA engine pays for a COPY_LINEAR of 32 MiB between two BOs (kfdtest's
//! `P2PBandWidthTest` queues 100 of them on each of two queues per round), against a plain
//! `memcpy` of 32 MiB between the same two BOs' CPU mappings in the same run; and the same for
//! every other kind of memory the engine moves without the model's lock, each against that
//! `memcpy` (or a `memset` for fills), the ratio printed:
//! - `copy_linear`: GTT BO to GTT BO, both all data;
//! - `peer_vram`: a peer GPU's VRAM BO (mi210x8, mapped on the queue's GPU) to local VRAM;
//! - `userptr_to_gtt`, `gtt_to_userptr`: this process's own pages (a USERPTR BO) to a BO and
//!   back;
//! - `hole`: a BO never written (all hole) to a BO that is all hole too after the first
//!   iteration (kfdtest's P2P copies, whose BOs nothing writes): no byte is loaded or stored;
//! - `fill_pattern`, `fill_zero`: CONSTANT_FILL of a dword pattern (against a `memset`), and of
//!   zeros over a BO (a punch, over holes after the first iteration).
//!
//! Each iteration submits `COPIES` × 32 MiB of packets and a FENCE to one SDMA queue of the
//! model (the write pointer in memory, which the engine polls) and waits for the read pointer
//! to pass them; the baselines do `COPIES` `memcpy`s (`memset`s) of 32 MiB. Numbers:
//! `docs/conformance.md` ("SDMA copies and fills for every kind of memory, holes kept").

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::*;
use model_support::{Emu, VRAM_RW, va};

const LEN: u64 = 32 << 20;
/// The most bytes one COPY_LINEAR moves on SDMA 4.x (a 22-bit count): a copy of `LEN` is
/// several packets, as kfdtest's `SDMACopyDataPacket` splits it.
const PACKET: u64 = 4 << 20;
/// Copies per iteration (a few, so that the engine's polling of the write pointer is noise).
const COPIES: usize = 4;
const RING: u64 = 4096;
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const USERPTR_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const SDMA_COPY_LINEAR: u32 = 1;
const SDMA_FENCE: u32 = 5;
const SDMA_CONST_FILL: u32 = 11;

/// A GTT BO of `size` bytes at `va`, mapped on the first GPU; its mmap offset.
fn mapped(emu: &Emu, va: u64, size: u64) -> u64 {
    let (h, offset) = emu.alloc(emu.gpu(), va, size, GTT_RW).expect("alloc");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
    offset
}

/// A VRAM BO of `size` bytes at `va` on GPU index `owner`, mapped on the first GPU too; its
/// mmap offset (on `owner`'s render node).
fn vram(emu: &Emu, owner: usize, va: u64, size: u64) -> u64 {
    let ids = emu.gpu_ids();
    let (h, offset) = emu.alloc(ids[owner], va, size, VRAM_RW).expect("alloc");
    let on: Vec<u32> = if owner == 0 {
        vec![ids[0]]
    } else {
        vec![ids[0], ids[owner]]
    };
    assert_eq!(emu.map(h, &on).0, Ok(0));
    offset
}

/// This process's own memory (page-aligned, anonymous), for a USERPTR BO.
struct Anon {
    ptr: *mut u8,
    len: usize,
}

impl Anon {
    fn new(len: usize) -> Anon {
        // SAFETY: a fresh private anonymous mapping, unmapped on drop.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .expect("mmap");
        Anon {
            ptr: ptr.cast(),
            len,
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes, alive as long as `self`; the engine writes them only between a
        // submission and its fence, which `Queue::run` waits for.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` made.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// One SDMA queue of the model and where its producer is.
struct Queue<'a> {
    emu: &'a Emu,
    ring: u64,
    pointers: u64,
    wptr: u64,
    fences: u32,
}

impl Queue<'_> {
    /// Writes `dwords` at the write pointer (across the ring's wrap), publishes the new write
    /// pointer and waits until the read pointer reaches it.
    fn run(&mut self, dwords: &[u32]) {
        let (pid, gpu) = (self.emu.caller.tgid, self.emu.gpu());
        for d in dwords {
            let at = self.ring + self.wptr % RING;
            self.emu
                .model
                .gpu_write(pid, gpu, at, &d.to_le_bytes())
                .expect("ring write");
            self.wptr += 4;
        }
        self.emu
            .model
            .gpu_write(pid, gpu, self.pointers + 8, &self.wptr.to_le_bytes())
            .expect("wptr write");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut r = [0u8; 8];
            self.emu
                .model
                .gpu_read(pid, gpu, self.pointers, &mut r)
                .expect("rptr read");
            if u64::from_le_bytes(r) == self.wptr {
                return;
            }
            assert!(Instant::now() < deadline, "the copies never ran");
            std::thread::yield_now();
        }
    }

    /// `COPIES` copies of `LEN` bytes (COPY_LINEARs of `PACKET`) from `src` to `dst`, then a
    /// FENCE after the pointers.
    fn copies(&mut self, src: u64, dst: u64) {
        let mut d = Vec::new();
        for _ in 0..COPIES {
            for at in (0..LEN).step_by(PACKET as usize) {
                let (s, t) = (src + at, dst + at);
                d.extend([
                    SDMA_COPY_LINEAR,
                    (PACKET - 1) as u32,
                    0,
                    s as u32,
                    (s >> 32) as u32,
                    t as u32,
                    (t >> 32) as u32,
                ]);
            }
        }
        self.fenced(d);
    }

    /// `COPIES` CONSTANT_FILLs of `LEN` bytes at `dst` with the dword `value` (dword units,
    /// packets of `PACKET`, `count` = bytes - 1), then a FENCE after the pointers.
    fn fills(&mut self, dst: u64, value: u32) {
        let mut d = Vec::new();
        for _ in 0..COPIES {
            for at in (0..LEN).step_by(PACKET as usize) {
                let t = dst + at;
                d.extend([
                    SDMA_CONST_FILL | 2 << 30,
                    t as u32,
                    (t >> 32) as u32,
                    value,
                    (PACKET - 1) as u32,
                ]);
            }
        }
        self.fenced(d);
    }

    /// `d` and a FENCE at the pointers' page + 64, run to the fence.
    fn fenced(&mut self, mut d: Vec<u32>) {
        self.fences += 1;
        let fence = self.pointers + 64;
        d.extend([SDMA_FENCE, fence as u32, (fence >> 32) as u32, self.fences]);
        self.run(&d);
    }
}

/// An SDMA queue of `emu`'s first GPU with its ring and pointers at `ring`, `pointers`.
fn queue(emu: &Emu, ring: u64, pointers: u64) -> Queue<'_> {
    mapped(emu, ring, RING);
    mapped(emu, pointers, 4096);
    let mut a = kfd_ioctl_create_queue_args {
        ring_base_address: ring,
        write_pointer_address: pointers + 8,
        read_pointer_address: pointers,
        ring_size: RING as u32,
        gpu_id: emu.gpu(),
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
        .expect("CREATE_QUEUE");
    Queue {
        emu,
        ring,
        pointers,
        wptr: 0,
        fences: 0,
    }
}

/// Bytes unlike at any short distance.
fn fill_pattern(bytes: &mut [u8]) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ (i >> 20) as u8;
    }
}

fn bench(c: &mut Criterion) {
    let mut emu = Emu::machine("mi100");
    emu.acquire_all();
    let (ring, pointers, src, dst, hole_src, hole_dst) = (va(1), va(2), va(3), va(4), va(5), va(6));
    let src_at = mapped(&emu, src, LEN);
    let dst_at = mapped(&emu, dst, LEN);
    mapped(&emu, hole_src, LEN);
    mapped(&emu, hole_dst, LEN);
    let render = emu.renders[0].as_fd();
    let mut src_map = emu.cpu_map(render, src_at, LEN as usize).expect("map");
    let mut dst_map = emu.cpu_map(render, dst_at, LEN as usize).expect("map");
    fill_pattern(src_map.bytes());
    let mut user = Anon::new(LEN as usize);
    fill_pattern(user.bytes());
    let (h, _) = emu
        .alloc_at(emu.gpu(), user.ptr as u64, LEN, USERPTR_RW, user.ptr as u64)
        .expect("USERPTR");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
    let mut q = queue(&emu, ring, pointers);
    q.copies(src, dst);
    assert!(
        src_map.bytes() == dst_map.bytes(),
        "the engine copied every byte"
    );
    q.copies(user.ptr as u64, dst);
    assert!(user.bytes() == dst_map.bytes(), "USERPTR to GTT");
    q.copies(src, user.ptr as u64);
    assert!(user.bytes() == src_map.bytes(), "GTT to USERPTR");

    // mi210x8: GPU 1's VRAM, mapped on GPU 0 too, to GPU 0's.
    let mut peers = Emu::machine("mi210x8");
    peers.acquire_all();
    let (peer, local) = (va(3), va(4));
    let peer_at = vram(&peers, 1, peer, LEN);
    let local_at = vram(&peers, 0, local, LEN);
    let mut peer_map = peers
        .cpu_map(peers.renders[1].as_fd(), peer_at, LEN as usize)
        .expect("map");
    let local_map = peers
        .cpu_map(peers.renders[0].as_fd(), local_at, LEN as usize)
        .expect("map");
    fill_pattern(peer_map.bytes());
    let mut pq = queue(&peers, ring, pointers);
    pq.copies(peer, local);

    let mut g = c.benchmark_group("sdma_copy");
    g.measurement_time(Duration::from_secs(5)).sample_size(10);
    g.bench_function("memcpy_4x32MiB", |b| {
        b.iter(|| {
            for _ in 0..COPIES {
                dst_map.bytes().copy_from_slice(black_box(src_map.bytes()));
            }
            black_box(dst_map.bytes());
        })
    });
    g.bench_function("memset_4x32MiB", |b| {
        b.iter(|| {
            for _ in 0..COPIES {
                black_box(dst_map.bytes()).fill(0x5A);
            }
            black_box(dst_map.bytes());
        })
    });
    g.bench_function("copy_linear_4x32MiB", |b| b.iter(|| q.copies(src, dst)));
    g.bench_function("peer_vram_4x32MiB", |b| b.iter(|| pq.copies(peer, local)));
    g.bench_function("userptr_to_gtt_4x32MiB", |b| {
        b.iter(|| q.copies(user.ptr as u64, dst))
    });
    g.bench_function("gtt_to_userptr_4x32MiB", |b| {
        b.iter(|| q.copies(src, user.ptr as u64))
    });
    g.bench_function("hole_4x32MiB", |b| b.iter(|| q.copies(hole_src, hole_dst)));
    g.bench_function("fill_pattern_4x32MiB", |b| {
        b.iter(|| q.fills(dst, 0x1122_3344))
    });
    g.bench_function("fill_zero_4x32MiB", |b| b.iter(|| q.fills(hole_dst, 0)));
    g.finish();
    drop(local_map);
    for (candidate, baseline) in [
        ("copy_linear_4x32MiB", "memcpy_4x32MiB"),
        ("peer_vram_4x32MiB", "memcpy_4x32MiB"),
        ("userptr_to_gtt_4x32MiB", "memcpy_4x32MiB"),
        ("gtt_to_userptr_4x32MiB", "memcpy_4x32MiB"),
        ("hole_4x32MiB", "memcpy_4x32MiB"),
        ("fill_pattern_4x32MiB", "memset_4x32MiB"),
        ("fill_zero_4x32MiB", "memset_4x32MiB"),
    ] {
        ratio::report("sdma_copy", candidate, baseline, None);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
