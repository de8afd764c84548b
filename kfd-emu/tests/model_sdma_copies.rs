//! The SDMA engine's COPY_LINEAR and CONSTANT_FILL for every kind of memory a queue's GPU
//! reaches, through the `Backend` trait: each test compares the bytes after the packets with a
//! reference computed on the host (a `memmove` for a copy, the pattern repeated for a fill),
//! so a wrong byte anywhere fails it.
//!
//! What is proved:
//! * A peer GPU's VRAM BO mapped in the queue's GPU's VM copies both ways (mi210x8, the
//!   case of kfdtest's P2PBandWidthTest), at relative misalignments, across the engine's
//!   1 MiB chunks.
//! * USERPTR memory (this process's own pages) copies into a BO and out of one, and a copy
//!   within USERPTR memory that overlaps itself is a `memmove`.
//! * Holes stay holes: where the source BO's memfd has a hole, a BO destination gets the
//!   hole (its whole pages there have no data in its memfd afterwards, asked with
//!   `SEEK_DATA`) and a USERPTR destination gets zeros; the source's holes are never loaded
//!   (still holes after); the CPU's mapping of the destination, which held other bytes, reads
//!   the zeros.
//! * COPY_LINEAR_SUB_WIND (ROCr's rectangle copy) between USERPTR memory and a BO, both ways.
//! * A CONSTANT_FILL of zeros over a BO punches its whole pages; a pattern fill writes the
//!   pattern (bytes and dwords) into a BO and into USERPTR memory.
//! * A copy or fill that runs past a BO's end into unmapped addresses still faults as the GPU
//!   view does (the memory event is set, the queue stops at the packet) and writes nothing.

mod model_support;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use kfd_emu::backend::MmapAction;
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::{CpuMap, Emu, VRAM_RW, create, data, svm_set, va, wait};

/// How long a test waits for something that should happen at once before it fails.
const PATIENCE: Duration = Duration::from_secs(20);
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const USERPTR_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const PAGE: usize = 4096;
/// `SDMA_OP_COPY` / `SDMA_SUBOP_COPY_LINEAR`, `SDMA_OP_FENCE`, `SDMA_OP_CONST_FILL`
/// (`vega10_sdma_pkt_open.h`).
const SDMA_COPY_LINEAR: u32 = 1;
const SDMA_FENCE: u32 = 5;
const SDMA_CONST_FILL: u32 = 11;
/// The largest COPY_LINEAR of SDMA 4.x (a 22-bit count).
const SDMA_MAX_COPY: usize = 1 << 22;

fn emu(machine: &str) -> Emu {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        kfd_minor: KFD_IOCTL_MINOR_VERSION,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    emu
}

/// A BO of `size` bytes at `va` allocated on GPU index `owner` with `flags`, mapped on GPU
/// indices `on`; its mmap offset (on `owner`'s render node).
fn bo(emu: &Emu, owner: usize, va: u64, size: usize, flags: u32, on: &[usize]) -> u64 {
    let ids = emu.gpu_ids();
    let (h, offset) = emu
        .alloc(ids[owner], va, size as u64, flags)
        .expect("alloc");
    let gpus: Vec<u32> = on.iter().map(|&i| ids[i]).collect();
    assert_eq!(emu.map(h, &gpus).0, Ok(0));
    offset
}

/// The CPU's view of a BO allocated on GPU index `owner`.
fn cpu(emu: &Emu, owner: usize, offset: u64, len: usize) -> CpuMap {
    emu.cpu_map(emu.renders[owner].as_fd(), offset, len)
        .expect("CPU mapping")
}

/// The pages of a BO that its memfd holds as data (`SEEK_DATA`/`SEEK_HOLE` on the memfd the
/// model maps for it, not a load, which would give a hole a page).
fn data_pages(emu: &Emu, owner: usize, offset: u64, len: usize) -> Vec<usize> {
    let MmapAction::Redirect { fd, offset: base } =
        emu.mmap_action(emu.renders[owner].as_fd(), offset, len as u64)
    else {
        panic!("a BO's mapping is redirected to its memfd");
    };
    (0..len / PAGE)
        .filter(|p| {
            let at = base + (p * PAGE) as u64;
            matches!(rustix::fs::seek(&*fd, rustix::fs::SeekFrom::Data(at)), Ok(d) if d < at + PAGE as u64)
        })
        .collect()
}

/// This process's own anonymous memory, page-aligned (the pages of a USERPTR BO).
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

    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, alive as long as `self`;
        // the engines write it only between a submission and its fence, which the tests wait
        // for before they look.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// A USERPTR BO over `mem`, at GPU address `mem.addr()`, mapped on the first GPU.
fn userptr(emu: &Emu, mem: &Anon) {
    let (h, _) = emu
        .alloc_at(
            emu.gpu(),
            mem.addr(),
            mem.len as u64,
            USERPTR_RW,
            mem.addr(),
        )
        .expect("USERPTR BO");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
}

/// An SDMA queue of the first GPU with its ring (64 KiB) and pointers in GTT BOs.
struct Queue {
    ring: u64,
    pointers: u64,
    fences: u32,
}

impl Queue {
    fn new(emu: &Emu) -> Queue {
        let (ring, pointers) = (va(1), va(2));
        bo(emu, 0, ring, 64 << 10, GTT_RW, &[0]);
        bo(emu, 0, pointers, PAGE, GTT_RW, &[0]);
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: ring,
            write_pointer_address: pointers + 8,
            read_pointer_address: pointers,
            ring_size: 64 << 10,
            gpu_id: emu.gpu(),
            queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
            .expect("CREATE_QUEUE");
        Queue {
            ring,
            pointers,
            fences: 0,
        }
    }

    fn u64_at(&self, emu: &Emu, at: u64) -> u64 {
        let mut b = [0u8; 8];
        emu.model
            .gpu_read(emu.caller.tgid, emu.gpu(), at, &mut b)
            .expect("GPU read");
        u64::from_le_bytes(b)
    }

    /// Writes `dwords` and a FENCE at the ring's start (each submission from the start: the
    /// queue is idle between them), publishes the write pointer and waits for the fence.
    fn run(&mut self, emu: &Emu, dwords: &[u32]) {
        let consumed = self.u64_at(emu, self.pointers);
        self.fences += 1;
        let fence = self.pointers + 64;
        let mut all = dwords.to_vec();
        all.extend([SDMA_FENCE, fence as u32, (fence >> 32) as u32, self.fences]);
        let bytes: Vec<u8> = all.iter().flat_map(|d| d.to_le_bytes()).collect();
        let ring_size = 64u64 << 10;
        assert!(consumed % ring_size + bytes.len() as u64 <= ring_size);
        let pid = emu.caller.tgid;
        emu.model
            .gpu_write(pid, emu.gpu(), self.ring + consumed % ring_size, &bytes)
            .expect("ring write");
        let wptr = consumed + bytes.len() as u64;
        emu.model
            .gpu_write(pid, emu.gpu(), self.pointers + 8, &wptr.to_le_bytes())
            .expect("wptr write");
        let deadline = Instant::now() + PATIENCE;
        while self.u64_at(emu, fence) as u32 != self.fences {
            assert!(Instant::now() < deadline, "the packets never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Writes `dwords` without a fence and publishes the write pointer (for packets that
    /// fault: nothing after them would run).
    fn submit(&self, emu: &Emu, dwords: &[u32]) {
        let bytes: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
        let pid = emu.caller.tgid;
        emu.model
            .gpu_write(pid, emu.gpu(), self.ring, &bytes)
            .expect("ring write");
        emu.model
            .gpu_write(
                pid,
                emu.gpu(),
                self.pointers + 8,
                &(bytes.len() as u64).to_le_bytes(),
            )
            .expect("wptr write");
    }
}

/// COPY_LINEARs of `len` bytes from `src` to `dst`, split as kfdtest's `SDMACopyDataPacket`
/// splits a large copy.
fn copy(src: u64, dst: u64, len: usize) -> Vec<u32> {
    let mut d = Vec::new();
    for at in (0..len).step_by(SDMA_MAX_COPY) {
        let n = (len - at).min(SDMA_MAX_COPY);
        let (s, t) = (src + at as u64, dst + at as u64);
        d.extend([
            SDMA_COPY_LINEAR,
            (n - 1) as u32,
            0,
            s as u32,
            (s >> 32) as u32,
            t as u32,
            (t >> 32) as u32,
        ]);
    }
    d
}

/// One side of a COPY_LINEAR_SUB_WIND: the surface's address, the rectangle's origin (x, y in
/// elements and rows), the pitch in elements.
#[derive(Clone, Copy)]
struct Surface {
    base: u64,
    x: u32,
    y: u32,
    pitch: u32,
}

impl Surface {
    /// Byte offset of element `i` of row `row` of the rectangle (elements of `size` bytes).
    fn at(&self, row: u32, i: u32, size: usize) -> usize {
        ((self.x + i + (self.y + row) * self.pitch) as usize) * size
    }
}

/// COPY_LINEAR_SUB_WIND of `width` x `rows` elements of `1 << element` bytes, one slice
/// (`SDMA_PKT_COPY_LINEAR_SUB_WIND` of `vega10_sdma_pkt_open.h`: pitches and the extent minus
/// one, the slice pitch one element row set).
fn sub_window(element: u32, src: Surface, dst: Surface, width: u32, rows: u32) -> [u32; 13] {
    let side = |s: Surface| {
        [
            s.base as u32,
            (s.base >> 32) as u32,
            s.x | s.y << 16,
            (s.pitch - 1) << 13,
            s.pitch * 4096 - 1,
        ]
    };
    let (a, b) = (side(src), side(dst));
    [
        SDMA_COPY_LINEAR | 4 << 8 | element << 29,
        a[0],
        a[1],
        a[2],
        a[3],
        a[4],
        b[0],
        b[1],
        b[2],
        b[3],
        b[4],
        (width - 1) | (rows - 1) << 16,
        0,
    ]
}

/// A CONSTANT_FILL of `bytes` at `dst` with `value`, in units of `1 << size` bytes (`count`
/// is bytes - 1 whatever the size, as the kernel's `sdma_v4_0_emit_fill_buffer` and kfdtest's
/// `SDMAFillDataPacket` write it).
fn fill(dst: u64, value: u32, bytes: usize, size: u32) -> [u32; 5] {
    [
        SDMA_CONST_FILL | size << 30,
        dst as u32,
        (dst >> 32) as u32,
        value,
        (bytes - 1) as u32,
    ]
}

/// Bytes no two places of which are alike at a short distance.
fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 7 + (i >> 9) * 13 + seed) as u8)
        .collect()
}

/// `memmove` of `len` bytes within `buf`, or between two buffers.
fn moved(dst: &[u8], at: usize, src: &[u8], from: usize, len: usize) -> Vec<u8> {
    let mut out = dst.to_vec();
    out[at..at + len].copy_from_slice(&src[from..from + len]);
    out
}

/// The first byte where `got` and `want` differ, for a failure message.
fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    got.iter().zip(want).position(|(a, b)| a != b)
}

#[test]
fn peer_vram_copies_move_their_bytes_both_ways() {
    const LEN: usize = 3 << 20;
    let emu = emu("mi210x8");
    let mut q = Queue::new(&emu);
    // VRAM of GPU 1 mapped on GPU 0 (the queue's) too, and VRAM of GPU 0.
    let (peer, local) = (va(3), va(4));
    let peer_at = bo(&emu, 1, peer, LEN, VRAM_RW, &[0, 1]);
    let local_at = bo(&emu, 0, local, LEN, VRAM_RW, &[0]);
    let mut peer_map = cpu(&emu, 1, peer_at, LEN);
    let mut local_map = cpu(&emu, 0, local_at, LEN);
    peer_map.bytes().copy_from_slice(&pattern(LEN, 1));
    local_map.bytes().copy_from_slice(&pattern(LEN, 2));
    // Peer to local, misaligned (5 against 3 modulo 8), across the 1 MiB chunks.
    let (from, to, n) = (5usize, 3usize, (1 << 20) * 2 + 12_345);
    let want = moved(local_map.bytes(), to, peer_map.bytes(), from, n);
    q.run(&emu, &copy(peer + from as u64, local + to as u64, n));
    assert_eq!(
        first_difference(local_map.bytes(), &want),
        None,
        "peer to local"
    );
    // Local to peer.
    let (from, to, n) = (4096 + 1, 77usize, (1 << 20) + 999);
    let want = moved(peer_map.bytes(), to, local_map.bytes(), from, n);
    q.run(&emu, &copy(local + from as u64, peer + to as u64, n));
    assert_eq!(
        first_difference(peer_map.bytes(), &want),
        None,
        "local to peer"
    );
}

#[test]
fn userptr_copies_move_their_bytes_both_ways_and_overlap_as_a_memmove() {
    const LEN: usize = 3 << 20;
    let emu = emu("mi100");
    let mut q = Queue::new(&emu);
    let mut user = Anon::new(LEN);
    user.bytes().copy_from_slice(&pattern(LEN, 3));
    userptr(&emu, &user);
    let gtt = va(3);
    let gtt_at = bo(&emu, 0, gtt, LEN, GTT_RW, &[0]);
    let mut gtt_map = cpu(&emu, 0, gtt_at, LEN);
    gtt_map.bytes().fill(0xEE);
    // USERPTR to a BO, misaligned, across chunks and the engine's 64 KiB pieces.
    let (from, to, n) = (11usize, 4096 + 2, (2 << 20) + 70_001);
    let want = moved(gtt_map.bytes(), to, user.bytes(), from, n);
    q.run(&emu, &copy(user.addr() + from as u64, gtt + to as u64, n));
    assert_eq!(
        first_difference(gtt_map.bytes(), &want),
        None,
        "USERPTR to a BO"
    );
    // A BO to USERPTR.
    gtt_map.bytes().copy_from_slice(&pattern(LEN, 4));
    let (from, to, n) = (3usize, 1usize, (1 << 20) + 4093);
    let want = moved(user.bytes(), to, gtt_map.bytes(), from, n);
    q.run(&emu, &copy(gtt + from as u64, user.addr() + to as u64, n));
    assert_eq!(
        first_difference(user.bytes(), &want),
        None,
        "a BO to USERPTR"
    );
    // Within USERPTR memory, overlapping forwards and backwards: a memmove.
    for (from, to, n) in [(0usize, 100usize, 200_000usize), (5000, 17, 1 << 20)] {
        let before = user.bytes().to_vec();
        let want = moved(&before, to, &before, from, n);
        q.run(
            &emu,
            &copy(user.addr() + from as u64, user.addr() + to as u64, n),
        );
        assert_eq!(
            first_difference(user.bytes(), &want),
            None,
            "overlapping {from} -> {to}"
        );
    }
}

#[test]
fn svm_copies_move_their_bytes_both_ways() {
    const LEN: usize = 2 << 20;
    let emu = emu("mi100");
    let mut q = Queue::new(&emu);
    let mut svm = Anon::new(LEN);
    svm.bytes().copy_from_slice(&pattern(LEN, 7));
    // An SVM range of this process's memory the GPU may access (mapped on it at SET_ATTR).
    let access = [(KFD_IOCTL_SVM_ATTR_ACCESS, emu.gpu())];
    assert_eq!(svm_set(&emu, svm.addr(), LEN as u64, &access), Ok(0));
    let gtt = va(3);
    let gtt_at = bo(&emu, 0, gtt, LEN, GTT_RW, &[0]);
    let mut map = cpu(&emu, 0, gtt_at, LEN);
    map.bytes().fill(0xEE);
    let (from, to, n) = (3001usize, 6usize, (1 << 20) + 3001);
    let want = moved(map.bytes(), to, svm.bytes(), from, n);
    q.run(&emu, &copy(svm.addr() + from as u64, gtt + to as u64, n));
    assert_eq!(first_difference(map.bytes(), &want), None, "SVM to a BO");
    map.bytes().copy_from_slice(&pattern(LEN, 8));
    let (from, to, n) = (5usize, 4096 + 1, LEN - 8192);
    let want = moved(svm.bytes(), to, map.bytes(), from, n);
    q.run(&emu, &copy(gtt + from as u64, svm.addr() + to as u64, n));
    assert_eq!(first_difference(svm.bytes(), &want), None, "a BO to SVM");
}

#[test]
fn sub_window_copies_move_rectangles_between_userptr_memory_and_a_bo() {
    const LEN: usize = 1 << 20;
    let emu = emu("mi100");
    let mut q = Queue::new(&emu);
    let mut user = Anon::new(LEN);
    user.bytes().copy_from_slice(&pattern(LEN, 5));
    userptr(&emu, &user);
    let gtt = va(3);
    let gtt_at = bo(&emu, 0, gtt, LEN, GTT_RW, &[0]);
    let mut map = cpu(&emu, 0, gtt_at, LEN);
    map.bytes().fill(0xEE);
    // 300 x 40 dwords from (7, 2) of a 1000-dword pitch in USERPTR memory to (3, 1) of a
    // 512-dword pitch in the BO; then 100 x 9 16-byte elements back the other way.
    let (size, width, rows) = (4usize, 300u32, 40u32);
    let from = Surface {
        base: user.addr(),
        x: 7,
        y: 2,
        pitch: 1000,
    };
    let to = Surface {
        base: gtt,
        x: 3,
        y: 1,
        pitch: 512,
    };
    let mut want = map.bytes().to_vec();
    let src = user.bytes().to_vec();
    for row in 0..rows {
        let (s, d) = (from.at(row, 0, size), to.at(row, 0, size));
        let n = width as usize * size;
        want[d..d + n].copy_from_slice(&src[s..s + n]);
    }
    q.run(&emu, &sub_window(2, from, to, width, rows));
    assert_eq!(
        first_difference(map.bytes(), &want),
        None,
        "USERPTR to a BO"
    );
    map.bytes().copy_from_slice(&pattern(LEN, 6));
    let (size, width, rows) = (16usize, 100u32, 9u32);
    let from = Surface {
        base: gtt,
        x: 1,
        y: 0,
        pitch: 300,
    };
    let to = Surface {
        base: user.addr(),
        x: 0,
        y: 5,
        pitch: 101,
    };
    let mut want = user.bytes().to_vec();
    let src = map.bytes().to_vec();
    for row in 0..rows {
        let (s, d) = (from.at(row, 0, size), to.at(row, 0, size));
        let n = width as usize * size;
        want[d..d + n].copy_from_slice(&src[s..s + n]);
    }
    q.run(&emu, &sub_window(4, from, to, width, rows));
    assert_eq!(
        first_difference(user.bytes(), &want),
        None,
        "a BO to USERPTR"
    );
}

#[test]
fn a_source_hole_is_a_hole_in_a_bo_and_zeros_in_userptr_memory() {
    const PAGES: usize = 64;
    const LEN: usize = PAGES * PAGE;
    let emu = emu("mi100");
    let mut q = Queue::new(&emu);
    let (src, dst, dst2) = (va(3), va(4), va(5));
    let src_at = bo(&emu, 0, src, LEN, GTT_RW, &[0]);
    let dst_at = bo(&emu, 0, dst, LEN, GTT_RW, &[0]);
    let dst2_at = bo(&emu, 0, dst2, LEN, GTT_RW, &[0]);
    let data = [3usize, 4, 9, 40];
    {
        // Data in a few pages of the source only: written through a CPU mapping of just
        // those pages, the rest never touched.
        for &p in &data {
            let mut page = cpu(&emu, 0, src_at + (p * PAGE) as u64, PAGE);
            page.bytes().copy_from_slice(&pattern(PAGE, p));
        }
    }
    assert_eq!(data_pages(&emu, 0, src_at, LEN), data);
    // What the source reads as (a hole is zeros).
    let mut reference = vec![0u8; LEN];
    for &p in &data {
        reference[p * PAGE..(p + 1) * PAGE].copy_from_slice(&pattern(PAGE, p));
    }
    let mut dst_map = cpu(&emu, 0, dst_at, LEN);
    let mut dst2_map = cpu(&emu, 0, dst2_at, LEN);
    dst_map.bytes().fill(0xEE);
    dst2_map.bytes().fill(0xEE);
    let mut user = Anon::new(LEN);
    user.bytes().fill(0xEE);
    userptr(&emu, &user);
    // Whole, page against page; misaligned into a second BO; and into USERPTR memory.
    let (off, at, n) = (100usize, 4096 + 7, LEN - 8192);
    let mut packets = copy(src, dst, LEN);
    packets.extend(copy(src + off as u64, dst2 + at as u64, n));
    packets.extend(copy(src, user.addr(), LEN));
    q.run(&emu, &packets);
    // The memfds first: a load through a mapping would give a hole a page.
    assert_eq!(
        data_pages(&emu, 0, src_at, LEN),
        data,
        "the source's holes were loaded"
    );
    assert_eq!(
        data_pages(&emu, 0, dst_at, LEN),
        data,
        "the destination's pages under the source's holes are holes"
    );
    // The misaligned copy: every destination page wholly under source holes is a hole.
    let dst2_data = data_pages(&emu, 0, dst2_at, LEN);
    let under_data = |p: usize| {
        let (a, b) = ((p * PAGE).max(at), ((p + 1) * PAGE).min(at + n));
        data.iter().any(|&d| {
            let (s, e) = (d * PAGE + at - off, (d + 1) * PAGE + at - off);
            s < b && a < e
        })
    };
    for p in 0..PAGES {
        let inside = p * PAGE >= at && (p + 1) * PAGE <= at + n;
        if inside && !under_data(p) {
            assert!(!dst2_data.contains(&p), "page {p} of the misaligned copy");
        }
    }
    assert_eq!(
        first_difference(dst_map.bytes(), &reference),
        None,
        "the whole copy's bytes, through the CPU's mapping that held 0xEE"
    );
    let want2 = moved(&[0xEE; LEN], at, &reference, off, n);
    assert_eq!(
        first_difference(dst2_map.bytes(), &want2),
        None,
        "the misaligned copy's bytes"
    );
    assert_eq!(
        first_difference(user.bytes(), &reference),
        None,
        "zeros in USERPTR memory"
    );
}

#[test]
fn a_zero_fill_punches_its_pages_and_a_pattern_fill_writes_the_pattern() {
    const LEN: usize = 32 * PAGE;
    let emu = emu("mi100");
    let mut q = Queue::new(&emu);
    let bo_va = va(3);
    let bo_at = bo(&emu, 0, bo_va, LEN, GTT_RW, &[0]);
    let mut map = cpu(&emu, 0, bo_at, LEN);
    map.bytes().fill(0xEE);
    let mut user = Anon::new(LEN);
    user.bytes().fill(0xEE);
    userptr(&emu, &user);
    // Zeros, bytes, from 100 bytes into page 1 over 5 pages and a bit.
    let (at, n) = (PAGE + 100, 5 * PAGE + 50);
    let mut want = vec![0xEEu8; LEN];
    want[at..at + n].fill(0);
    q.run(&emu, &fill(bo_va + at as u64, 0, n, 0));
    // The memfd first: a load through a mapping would give a hole a page.
    let data = data_pages(&emu, 0, bo_at, LEN);
    for p in 2..6 {
        assert!(!data.contains(&p), "page {p} is still data: {data:?}");
    }
    assert_eq!(first_difference(map.bytes(), &want), None, "the zero fill");
    // A dword pattern, dword-aligned (ROCr's `BuildFillCommand`), and a byte pattern at an
    // odd address (kfdtest's byte fill), into the BO and into USERPTR memory.
    let value = 0x1122_3344u32;
    let (dat, dn) = (8 * PAGE + 12, 3 * PAGE + 20);
    let (bat, bn) = (20 * PAGE + 3, PAGE + 7);
    let mut packets = fill(bo_va + dat as u64, value, dn, 2).to_vec();
    packets.extend(fill(bo_va + bat as u64, 0xA5, bn, 0));
    packets.extend(fill(user.addr() + dat as u64, value, dn, 2));
    packets.extend(fill(user.addr() + bat as u64, 0xA5, bn, 0));
    q.run(&emu, &packets);
    let mut want_user = vec![0xEEu8; LEN];
    for w in [&mut want, &mut want_user] {
        for (i, b) in w[dat..dat + dn].iter_mut().enumerate() {
            *b = value.to_le_bytes()[i % 4];
        }
        w[bat..bat + bn].fill(0xA5);
    }
    assert_eq!(first_difference(map.bytes(), &want), None, "the BO's fills");
    assert_eq!(
        first_difference(user.bytes(), &want_user),
        None,
        "USERPTR memory's fills"
    );
    // A zero fill of USERPTR memory writes zeros.
    q.run(&emu, &fill(user.addr() + 5, 0, 2 * PAGE, 0));
    want_user[5..5 + 2 * PAGE].fill(0);
    assert_eq!(
        first_difference(user.bytes(), &want_user),
        None,
        "USERPTR memory's zero fill"
    );
}

#[test]
fn copies_and_fills_past_a_bo_end_fault_and_write_nothing() {
    const LEN: usize = 4 * PAGE;
    for (what, packet) in [
        ("copy into", 0u8),
        ("copy out of", 1),
        ("copy from USERPTR into", 2),
        ("fill", 3),
    ] {
        let emu = emu("mi100");
        let q = Queue::new(&emu);
        let memory = create(&emu, KFD_IOC_EVENT_MEMORY, false);
        let (a, b) = (va(3), va(4));
        let a_at = bo(&emu, 0, a, LEN, GTT_RW, &[0]);
        let b_at = bo(&emu, 0, b, LEN, GTT_RW, &[0]);
        let mut a_map = cpu(&emu, 0, a_at, LEN);
        let mut b_map = cpu(&emu, 0, b_at, LEN);
        a_map.bytes().fill(0x11);
        b_map.bytes().fill(0x22);
        let mut user = Anon::new(LEN);
        user.bytes().fill(0x33);
        userptr(&emu, &user);
        // Each runs one page past the end of its BO (nothing is mapped after it).
        let packets = match packet {
            0 => copy(a, b + PAGE as u64, LEN),
            1 => copy(b + PAGE as u64, a, LEN),
            2 => copy(user.addr(), b + PAGE as u64, LEN),
            _ => fill(b + PAGE as u64, 0, LEN, 0).to_vec(),
        };
        q.submit(&emu, &packets);
        let (r, result) = wait(&emu, &mut [data(memory.event_id)], true, 20_000);
        assert_eq!(r, Ok(0));
        assert_eq!(result, KFD_IOC_WAIT_RESULT_COMPLETE, "{what}: no VM fault");
        assert_eq!(q.u64_at(&emu, q.pointers), 0, "{what}: the queue went on");
        assert!(
            a_map.bytes().iter().all(|&x| x == 0x11),
            "{what}: A written"
        );
        assert!(
            b_map.bytes().iter().all(|&x| x == 0x22),
            "{what}: B written"
        );
        assert!(
            user.bytes().iter().all(|&x| x == 0x33),
            "{what}: USERPTR written"
        );
    }
}
