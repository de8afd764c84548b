//! What the engines pay to move process memory through the GPU view: a 16 MiB GPU read of an
//! SVM range in system memory (the SDMA engine's source in kfdtest's SVM migration tests:
//! `MigrateLargeBufTest` copies 1 GiB that way, twice) and of a GTT BO (the model's own
//! bytes, a memfd), against a plain 16 MiB `memcpy` in the same run.
//!
//! The SVM range is pages of this process that the GPU view reaches one page at a time
//! (`gpu_view::translate`); the model moves a run of such pages that follow one another in
//! one `process_vm_readv` rather than one per page (`gpu_view::runs`). The reads go through
//! the model's public `gpu_read` (its GPU-view worker), as the tests' do.
//!
//! Measured 2026-12-01 on the loaded shared 2-core VM (a kfdtest run beside it, so the
//! absolute times swing): SVM 72.8 ms (22.7× the run's memcpy, 3.2 ms), GTT BO 56.3 ms
//! (17.6×); with the pieces moved one page at a time (the code before runs), SVM 72.3 ms
//! (memcpy 11.0 ms in that run). So for pages in system memory the cost is the per-page
//! translation (`svm::gpu_access`, about 17 µs a page here), not the copy calls; the runs
//! pay off for pages hidden in VRAM, which were read through one `/proc/<pid>/mem` open per
//! page (kfdtest `MigrateLargeBufTest/0`: 12.5 s of CPU before, 4.4 s after).

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::{
    KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, KFD_IOCTL_SVM_ATTR_ACCESS,
    KFD_IOCTL_SVM_OP_SET_ATTR,
};
use model_support::{Emu, va};

const LEN: usize = 16 << 20;

/// SVM SET_ATTR of `[addr, addr + size)` giving GPU `gpu` access.
fn svm_access(emu: &Emu, addr: u64, size: u64, gpu: u32) {
    let mut buf = Vec::new();
    buf.extend_from_slice(&addr.to_ne_bytes());
    buf.extend_from_slice(&size.to_ne_bytes());
    buf.extend_from_slice(&KFD_IOCTL_SVM_OP_SET_ATTR.to_ne_bytes());
    buf.extend_from_slice(&1u32.to_ne_bytes());
    buf.extend_from_slice(&KFD_IOCTL_SVM_ATTR_ACCESS.to_ne_bytes());
    buf.extend_from_slice(&gpu.to_ne_bytes());
    let cmd = rustix::ioctl::opcode::from_components(
        rustix::ioctl::Direction::ReadWrite,
        b'K',
        0x20,
        buf.len(),
    );
    emu.ioctl_raw(cmd, buf.as_mut_ptr() as u64)
        .expect("SVM SET_ATTR");
}

fn bench(c: &mut Criterion) {
    let mut emu = Emu::machine("mi100");
    emu.acquire_all();
    let gpu = emu.gpu();
    let pid = std::process::id() as i32;
    let mut src: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
    // Page-aligned SVM memory: a fresh anonymous mapping, filled.
    // SAFETY: a fresh private anonymous mapping nothing else uses; it is never unmapped (the
    // bench process ends with it).
    let svm = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            LEN,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE,
        )
    }
    .expect("mmap") as u64;
    // SAFETY: the mapping above is LEN bytes, readable and writable, and aliased by nothing.
    unsafe { std::slice::from_raw_parts_mut(svm as *mut u8, LEN) }.copy_from_slice(&src);
    svm_access(&emu, svm, LEN as u64, gpu);
    let gtt = va(1);
    let (h, _) = emu
        .alloc(
            gpu,
            gtt,
            LEN as u64,
            KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        )
        .expect("GTT BO");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    emu.model
        .gpu_write(pid, gpu, gtt, &src)
        .expect("fill the BO");

    let mut dst = vec![0u8; LEN];
    emu.model
        .gpu_read(pid, gpu, svm, &mut dst)
        .expect("SVM read");
    assert!(dst == src, "the SVM read moved the range's bytes");

    let mut g = c.benchmark_group("gpu_copy");
    g.measurement_time(Duration::from_secs(5)).sample_size(20);
    g.bench_function("memcpy_16MiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    g.bench_function("svm_read_16MiB", |b| {
        b.iter(|| emu.model.gpu_read(pid, gpu, svm, black_box(&mut dst)))
    });
    g.bench_function("gtt_read_16MiB", |b| {
        b.iter(|| emu.model.gpu_read(pid, gpu, gtt, black_box(&mut dst)))
    });
    g.finish();
    src.clear();
    ratio::report("gpu_copy", "svm_read_16MiB", "memcpy_16MiB", None);
    ratio::report("gpu_copy", "gtt_read_16MiB", "memcpy_16MiB", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
