//! What the SDMA engine pays for a COPY_LINEAR of 32 MiB between two BOs (kfdtest's
//! `P2PBandWidthTest` queues 100 of them on each of two queues per round), against a plain
//! `memcpy` of 32 MiB between the same two BOs' CPU mappings in the same run.
//!
//! Each iteration submits `COPIES` COPY_LINEARs of 32 MiB and a FENCE to one SDMA queue of
//! the model (the write pointer in memory, which the engine polls) and waits for the read
//! pointer to pass them; the baseline does `COPIES` `memcpy`s of 32 MiB. The engine copies
//! between long-lived shared mappings of the BOs' memfds (`model/bo_maps.rs`); before, it
//! moved each 1 MiB chunk with a `pread` of the source memfd and a `pwrite` of the
//! destination's, under the model's lock. Numbers: `docs/conformance.md` ("SDMA copies at
//! memcpy speed").

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::*;
use model_support::{Emu, va};

const LEN: u64 = 32 << 20;
/// The most bytes one COPY_LINEAR moves on SDMA 4.x (a 22-bit count): a copy of `LEN` is
/// several packets, as kfdtest's `SDMACopyDataPacket` splits it.
const PACKET: u64 = 4 << 20;
/// Copies per iteration (a few, so that the engine's polling of the write pointer is noise).
const COPIES: usize = 4;
const RING: u64 = 4096;
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const SDMA_COPY_LINEAR: u32 = 1;
const SDMA_FENCE: u32 = 5;

/// A GTT BO of `size` bytes at `va`, mapped on the first GPU; its mmap offset.
fn mapped(emu: &Emu, va: u64, size: u64) -> u64 {
    let (h, offset) = emu.alloc(emu.gpu(), va, size, GTT_RW).expect("alloc");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
    offset
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

    /// `COPIES` copies of `LEN` bytes (COPY_LINEARs of `PACKET`) from `src` to `dst`, then a FENCE at `fence`.
    fn copies(&mut self, src: u64, dst: u64, fence: u64) {
        self.fences += 1;
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
        d.extend([SDMA_FENCE, fence as u32, (fence >> 32) as u32, self.fences]);
        self.run(&d);
    }
}

fn bench(c: &mut Criterion) {
    let mut emu = Emu::machine("mi100");
    emu.acquire_all();
    let (ring, pointers, src, dst) = (va(1), va(2), va(3), va(4));
    mapped(&emu, ring, RING);
    mapped(&emu, pointers, 4096);
    let src_at = mapped(&emu, src, LEN);
    let dst_at = mapped(&emu, dst, LEN);
    let render = emu.renders[0].as_fd();
    let mut src_map = emu.cpu_map(render, src_at, LEN as usize).expect("map");
    let mut dst_map = emu.cpu_map(render, dst_at, LEN as usize).expect("map");
    for (i, b) in src_map.bytes().iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ (i >> 20) as u8;
    }
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
    let mut q = Queue {
        emu: &emu,
        ring,
        pointers,
        wptr: 0,
        fences: 0,
    };
    q.copies(src, dst, pointers + 64);
    let first = src_map
        .bytes()
        .iter()
        .zip(dst_map.bytes().iter())
        .position(|(a, b)| a != b);
    assert_eq!(first, None, "the engine copied every byte");

    let mut g = c.benchmark_group("sdma_copy");
    g.measurement_time(Duration::from_secs(10)).sample_size(10);
    g.bench_function("memcpy_4x32MiB", |b| {
        b.iter(|| {
            for _ in 0..COPIES {
                dst_map.bytes().copy_from_slice(black_box(src_map.bytes()));
            }
            black_box(dst_map.bytes());
        })
    });
    g.bench_function("copy_linear_4x32MiB", |b| {
        b.iter(|| q.copies(src, dst, pointers + 64))
    });
    g.finish();
    ratio::report("sdma_copy", "copy_linear_4x32MiB", "memcpy_4x32MiB", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
