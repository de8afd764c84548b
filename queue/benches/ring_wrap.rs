//! Writing a packet across the ring's wrap point against a contiguous write of the same bytes.
//!
//! `SdmaQueue::submit` writes each submission into the ring with one copy through the
//! mirrored mapping (`kfd-ring`), even when it straddles the end of the buffer. `across_wrap`
//! writes 256 bytes of packets starting 128 bytes before the end of a 64 KiB mirrored ring;
//! `contiguous` writes them at the start. The ratio says what the wrap costs (about nothing:
//! the second half lands in the next view, mapping the same pages).

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_queue::packet::{self, SdmaGeneration};
use kfd_ring::{HostMirror, Mirrored};

fn bench(c: &mut Criterion) {
    let ring = HostMirror::new(64 << 10).expect("a mirrored ring");
    let cap = ring.capacity() as isize;
    // Nine COPY_LINEAR packets and a NOP: 256 bytes of real packet dwords.
    let mut dwords: Vec<u32> = (0..9)
        .flat_map(|i| {
            packet::copy_linear(SdmaGeneration::Sdma4, 0x1000 * i, 0x8000_0000, 4096).unwrap()
        })
        .collect();
    dwords.extend(packet::nop(0));
    let bytes: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
    assert_eq!(bytes.len(), 256);
    let mut group = c.benchmark_group("ring_wrap");
    group.bench_function("contiguous", |b| {
        b.iter(|| ring.write(black_box(0), black_box(&bytes)).unwrap())
    });
    group.bench_function("across_wrap", |b| {
        b.iter(|| ring.write(black_box(cap - 128), black_box(&bytes)).unwrap())
    });
    group.finish();
    // The bytes after the wrap are at the start of the buffer.
    let mut start = [0u8; 128];
    ring.read(0, &mut start).unwrap();
    assert_eq!(start[..], bytes[128..]);
    ratio::report("ring_wrap", "across_wrap", "contiguous", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
