//! Buffer objects through the Backend trait: ACQUIRE_VM, ALLOC/FREE, MAP/UNMAP, available
//! memory, the GPU view, USERPTR and dma-buf aliasing, with the kernel's errnos.

mod fork_support;
mod model_support;

use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use kfd_emu::backend::Backend;
use kfd_emu::machine::Machine;
use kfd_emu::model::{GpuFaultReason, ModelConfig};
use kfd_ioctl::abi::*;
use kfd_ioctl::topology::MemBank;
use model_support::*;
use rustix::io::Errno;

const MIB: u64 = 1 << 20;

#[test]
fn acquire_vm_follows_the_kernel() {
    let mut emu = Emu::machine("mi210x8");
    let gpus = emu.gpu_ids();
    let render0 = emu.open_render(0);
    let render0b = emu.open_render(0);
    let render1 = emu.open_render(1);
    let acquire = |emu: &Emu, fd: i32, gpu_id: u32| {
        let mut a = kfd_ioctl_acquire_vm_args {
            drm_fd: fd as u32,
            gpu_id,
        };
        emu.ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut a)
    };
    let cases: [(&str, i32, u32, Result<i64, Errno>); 6] = [
        ("no such fd", 999_999, gpus[0], Err(Errno::INVAL)),
        ("no such GPU", render0.as_raw_fd(), 0x1, Err(Errno::INVAL)),
        (
            "not a DRM file",
            emu.kfd.as_raw_fd(),
            gpus[0],
            Err(Errno::INVAL),
        ),
        (
            "another GPU's render node",
            render1.as_raw_fd(),
            gpus[0],
            Err(Errno::INVAL),
        ),
        ("its render node", render0.as_raw_fd(), gpus[0], Ok(0)),
        ("the same file again", render0.as_raw_fd(), gpus[0], Ok(0)),
    ];
    for (what, fd, gpu, expected) in cases {
        assert_eq!(acquire(&emu, fd, gpu), expected, "{what}");
    }
    assert_eq!(
        acquire(&emu, render0b.as_raw_fd(), gpus[0]),
        Err(Errno::BUSY),
        "another open of the same node is another DRM file"
    );
    emu.renders.extend([render0, render0b, render1]);
}

#[test]
fn alloc_errnos_in_the_kernel_order() {
    let mut emu = Emu::machine("mi300x");
    let gpu = emu.gpu();
    let vram = emu.model.machine().gpus()[0].vram_size;
    // Before ACQUIRE_VM: the size and gpu checks come first, then the bind.
    let before: [(&str, u32, u64, u32, Errno); 4] = [
        ("size 0", gpu, 0, VRAM_RW, Errno::INVAL),
        ("gpu_id 0", 0, 4096, VRAM_RW, Errno::INVAL),
        ("unknown gpu_id", gpu ^ 0x8000, 4096, VRAM_RW, Errno::INVAL),
        ("no ACQUIRE_VM", gpu, 4096, VRAM_RW, Errno::NODEV),
    ];
    for (what, gpu_id, size, flags, errno) in before {
        assert_eq!(emu.alloc(gpu_id, va(1), size, flags), Err(errno), "{what}");
    }
    emu.acquire_all();
    let unmapped = 0x10_0000; // nothing is mapped at 1 MiB in a test process
    let after: [(&str, u64, u32, u64, Errno); 8] = [
        (
            "no domain flag",
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            0,
            Errno::INVAL,
        ),
        (
            "doorbell of the wrong size",
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
            0,
            Errno::INVAL,
        ),
        (
            "MMIO remap of two pages",
            8192,
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
            0,
            Errno::INVAL,
        ),
        ("VRAM past capacity", vram, VRAM_RW, 0, Errno::NOMEM),
        ("VRAM of absurd size", u64::MAX, VRAM_RW, 0, Errno::NOMEM),
        (
            "GTT past the system limit",
            1 << 60,
            KFD_IOC_ALLOC_MEM_FLAGS_GTT,
            0,
            Errno::NOMEM,
        ),
        (
            "USERPTR without an address",
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
            0,
            Errno::INVAL,
        ),
        (
            "USERPTR of unmapped memory",
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
            unmapped,
            Errno::FAULT,
        ),
    ];
    for (what, size, flags, cpu_addr, errno) in after {
        assert_eq!(
            emu.alloc_at(gpu, va(1), size, flags, cpu_addr),
            Err(errno),
            "{what}"
        );
    }
    // What succeeds, with its mmap offset.
    let (_, doorbell) = emu
        .alloc(gpu, va(2), 8192, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)
        .expect("a doorbell slice of 2 pages");
    let (_, mmio) = emu
        .alloc(
            gpu,
            va(3),
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        )
        .expect("the MMIO page");
    // amdgpu_bo_mmap_offset for the doorbell BO (a DRM vma offset, from 4 GiB);
    // KFD_MMAP_TYPE_MMIO | KFD_MMAP_GPU_ID(gpu_id) for the MMIO page (kfd_priv.h).
    assert!(doorbell >= 1 << 32, "{doorbell:#x}");
    assert_eq!(mmio, (u64::from(gpu) & 0xFFFF) << 46);
    let (_, gtt) = emu
        .alloc(
            gpu,
            va(4),
            2 * MIB,
            KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        )
        .expect("GTT");
    let (_, vram_off) = emu.alloc(gpu, va(5), 4096, VRAM_RW).expect("VRAM");
    assert_eq!(gtt % 4096, 0);
    assert_eq!(vram_off % 4096, 0);
    assert_ne!(gtt, vram_off);
    // VA conflicts are not checked at ALLOC.
    emu.alloc(gpu, va(5), 4096, VRAM_RW).expect("same VA again");
}

#[test]
fn public_vram_needs_a_large_bar() {
    // An MI100 whose VRAM bank is FB_PRIVATE (small BAR).
    let preset = Machine::preset("mi100").expect("preset");
    let mut topology = preset.topology().clone();
    let gpu_node = topology.nodes.iter_mut().find(|n| n.is_gpu()).expect("gpu");
    gpu_node.mem_banks = vec![
        MemBank::parse(
            0,
            "heap_type 2\nsize_in_bytes 34342961152\nflags 0\nwidth 4096\nmem_clk_max 1200\n",
            Path::new("test"),
        )
        .expect("bank"),
    ];
    let machine = Machine::from_topology("small-bar", topology).expect("machine");
    let mut emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    let gpu = emu.gpu();
    // Checked before the bind: EINVAL even without ACQUIRE_VM.
    assert_eq!(emu.alloc(gpu, va(1), 4096, VRAM_RW), Err(Errno::INVAL));
    emu.acquire_all();
    assert_eq!(emu.alloc(gpu, va(1), 4096, VRAM_RW), Err(Errno::INVAL));
    let private = VRAM_RW & !KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    emu.alloc(gpu, va(1), 4096, private)
        .expect("VRAM without PUBLIC");
}

#[test]
fn handles_are_gpu_id_and_the_lowest_free_id() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let handles: Vec<u64> = (0..3)
        .map(|i| emu.alloc(gpu, va(i), 4096, VRAM_RW).expect("alloc").0)
        .collect();
    let base = u64::from(gpu) << 32;
    assert_eq!(handles, vec![base, base | 1, base | 2]);
    emu.free(handles[1]).expect("free");
    let again = emu.alloc(gpu, va(9), 4096, VRAM_RW).expect("alloc").0;
    assert_eq!(again, base | 1, "the freed id is reused");
    let next = emu.alloc(gpu, va(10), 4096, VRAM_RW).expect("alloc").0;
    assert_eq!(next, base | 3);
}

#[test]
fn free_errnos() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let (h, _) = emu.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    assert_eq!(emu.free(h), Err(Errno::BUSY), "still mapped");
    assert_eq!(
        emu.free(h ^ (1 << 40)),
        Err(Errno::INVAL),
        "gpu part unknown"
    );
    assert_eq!(emu.free(h + 7), Err(Errno::INVAL), "no such id");
    assert_eq!(emu.unmap(h, &[gpu]).0, Ok(0));
    assert_eq!(emu.free(h), Ok(0));
    assert_eq!(emu.free(h), Err(Errno::INVAL), "already freed");
}

#[test]
fn map_errnos_and_n_success() {
    let mut emu = Emu::machine("mi210x8");
    let gpus = emu.gpu_ids();
    // Acquire GPUs 0..3 only.
    for i in 0..3 {
        emu.acquire(i).expect("acquire");
    }
    let (a, _) = emu
        .alloc(gpus[0], va(1), 2 * MIB, VRAM_RW)
        .expect("alloc a");
    let (b, _) = emu
        .alloc(gpus[0], va(1), 2 * MIB, VRAM_RW)
        .expect("alloc b, same VA");
    let (zero, _) = emu
        .alloc(gpus[0], 0, 4096, VRAM_RW)
        .expect("alloc without VA");
    let (odd, _) = emu
        .alloc(gpus[0], va(2) + 0x800, 4096, VRAM_RW)
        .expect("unaligned VA");

    // The argument checks.
    let mut args = kfd_ioctl_map_memory_to_gpu_args {
        handle: a,
        device_ids_array_ptr: gpus.as_ptr() as u64,
        n_devices: 0,
        n_success: 0,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut args),
        Err(Errno::INVAL),
        "no devices"
    );
    args.n_devices = 1;
    args.n_success = 2;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut args),
        Err(Errno::INVAL),
        "n_success > n_devices"
    );
    args.n_success = 0;
    args.device_ids_array_ptr = 8;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut args),
        Err(Errno::FAULT),
        "bad device array"
    );
    assert_eq!(
        emu.map(a + 100, &gpus[..1]).0,
        Err(Errno::NOMEM),
        "no such handle"
    );
    assert_eq!(emu.map(zero, &gpus[..1]), (Err(Errno::INVAL), 0), "VA 0");
    assert_eq!(
        emu.map(odd, &gpus[..1]),
        (Err(Errno::INVAL), 0),
        "unaligned VA"
    );

    // a on GPU 1; b on GPUs 0, 1, 2 overlaps a on GPU 1: one success, then EINVAL.
    assert_eq!(emu.map(a, &gpus[1..2]), (Ok(0), 1));
    assert_eq!(emu.map(b, &gpus[..3]), (Err(Errno::INVAL), 1));
    // Retry from n_success after moving a out of the way.
    assert_eq!(emu.unmap(a, &gpus[1..2]), (Ok(0), 1));
    assert_eq!(emu.map_from(false, b, &gpus[..3], 1), (Ok(0), 3));
    // Mapping again is a no-op; a GPU without ACQUIRE_VM is ENODEV; an unknown one EINVAL.
    assert_eq!(emu.map(b, &gpus[..3]), (Ok(0), 3));
    assert_eq!(emu.map(b, &[gpus[0], gpus[3]]), (Err(Errno::NODEV), 1));
    assert_eq!(emu.map(b, &[gpus[0], 0x7]), (Err(Errno::INVAL), 1));

    // UNMAP: not mapped on GPU 3 after two successes.
    assert_eq!(
        emu.unmap(b, &[gpus[0], gpus[1], gpus[3]]),
        (Err(Errno::INVAL), 2)
    );
    assert_eq!(
        emu.unmap(b, &[gpus[0]]),
        (Err(Errno::INVAL), 0),
        "already unmapped there"
    );
    assert_eq!(emu.unmap(b, &[gpus[2]]), (Ok(0), 1));
    assert_eq!(emu.free(b), Ok(0));
}

/// The kernel takes any size and any GPU address at ALLOC and decides at MAP:
/// * `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu` rounds the size up to pages
///   (`aligned_size = PAGE_ALIGN(size)`), and the BO is that size: a 4097-byte BO covers
///   8 KiB of the GPU VM (`amdgpu_vm_bo_map(..., amdgpu_bo_size(bo), ...)`), its dma-buf is
///   8 KiB;
/// * `kfd_ioctl_alloc_memory_of_gpu` checks no address: base + 123 and 0 are accepted;
/// * at MAP, `kfd_mem_attach` refuses address 0 and `amdgpu_vm_verify_parameters` an
///   unaligned address, a range that wraps, and one whose last page is at or past the VM's
///   `max_pfn` (2^48 bytes on these GPUs), all with EINVAL; the last page below it maps.
#[test]
fn odd_sizes_round_to_pages_and_addresses_are_checked_at_map() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let (odd, _) = emu.alloc(gpu, va(1), 4097, VRAM_RW).expect("4097 bytes");
    let dmabuf = emu.export(odd).expect("export");
    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: dmabuf.as_raw_fd() as u32,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("dmabuf info");
    assert_eq!(info.size, 8192, "the BO is the size rounded up to pages");
    assert_eq!(emu.map(odd, &[gpu]), (Ok(0), 1));
    let (second_page, _) = emu.alloc(gpu, va(1) + 4096, 4096, VRAM_RW).expect("alloc");
    assert_eq!(
        emu.map(second_page, &[gpu]),
        (Err(Errno::INVAL), 0),
        "the odd BO's second page is mapped"
    );
    let (third_page, _) = emu.alloc(gpu, va(1) + 8192, 4096, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(third_page, &[gpu]), (Ok(0), 1));

    let (unaligned, _) = emu
        .alloc(gpu, va(2) + 123, 4096, VRAM_RW)
        .expect("an unaligned VA is accepted at ALLOC");
    let (zero, _) = emu
        .alloc(gpu, 0, 4096, VRAM_RW)
        .expect("VA 0 is accepted at ALLOC");
    let vm_end = 1u64 << 48;
    let (last_page, _) = emu.alloc(gpu, vm_end - 4096, 4096, VRAM_RW).expect("alloc");
    let (past_end, _) = emu.alloc(gpu, vm_end - 4096, 8192, VRAM_RW).expect("alloc");
    let (wraps, _) = emu
        .alloc(gpu, u64::MAX - 4095, 8192, VRAM_RW)
        .expect("alloc");
    for (what, handle) in [
        ("unaligned", unaligned),
        ("zero", zero),
        ("past the VM", past_end),
        ("wrapping", wraps),
    ] {
        assert_eq!(emu.map(handle, &[gpu]), (Err(Errno::INVAL), 0), "{what}");
        assert_eq!(emu.free(handle), Ok(0), "{what}: never mapped, frees");
    }
    assert_eq!(emu.map(last_page, &[gpu]), (Ok(0), 1), "the VM's last page");
    emu.renders.push(dmabuf);
}

#[test]
fn peer_vram_needs_a_hive_or_a_large_bar() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    // Two hives of four, all large BAR: every GPU reaches every other.
    let (h, _) = emu.alloc(gpus[0], va(1), 4096, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(h, &gpus), (Ok(0), 8));
}

#[test]
fn available_memory_drops_in_2_mib_steps() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let start = emu.available(gpu);
    assert_eq!(start % (2 * MIB), 0);
    assert!(start <= emu.model.machine().gpus()[0].vram_size);
    let (small, _) = emu.alloc(gpu, va(1), 4096, VRAM_RW).expect("4 KiB");
    assert_eq!(emu.available(gpu), start - 2 * MIB);
    let (big, _) = emu
        .alloc(gpu, va(2), 4 * MIB + 4096, VRAM_RW)
        .expect("4 MiB + 4 KiB");
    assert_eq!(emu.available(gpu), start - 8 * MIB);
    let (_, _) = emu
        .alloc(gpu, va(3), 64 * MIB, KFD_IOC_ALLOC_MEM_FLAGS_GTT)
        .expect("GTT does not count");
    assert_eq!(emu.available(gpu), start - 8 * MIB);
    emu.free(small).expect("free");
    emu.free(big).expect("free");
    assert_eq!(emu.available(gpu), start);
    let mut unknown = kfd_ioctl_get_available_memory_args {
        available: 0,
        gpu_id: 0x3,
        pad: 0,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_AVAILABLE_MEMORY, &mut unknown),
        Err(Errno::INVAL)
    );
}

#[test]
fn cpu_mapping_of_the_render_node_and_the_gpu_view_see_the_same_bytes() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let tgid = emu.caller.tgid;
    let (h, offset) = emu.alloc(gpu, va(1), 2 * MIB, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    let mut cpu = emu
        .cpu_map(emu.renders[0].as_fd(), offset, 2 * MIB as usize)
        .expect("map the BO through the render node");
    assert!(cpu.bytes().iter().all(|&b| b == 0), "a new BO is zeroed");
    cpu.bytes()[4096..4101].copy_from_slice(b"hello");
    let mut seen = [0u8; 5];
    emu.model
        .gpu_read(tgid, gpu, va(1) + 4096, &mut seen)
        .expect("GPU read");
    assert_eq!(&seen, b"hello");
    emu.model
        .gpu_write(tgid, gpu, va(1) + 2 * MIB - 3, b"end")
        .expect("GPU write");
    assert_eq!(&cpu.bytes()[2 * MIB as usize - 3..], b"end");

    // Past the end, and after the unmap: not mapped.
    let past = emu
        .model
        .gpu_read(tgid, gpu, va(1) + 2 * MIB - 1, &mut [0u8; 2]);
    let fault = past.expect_err("crosses the end");
    assert_eq!(
        (fault.va, fault.reason),
        (va(1) + 2 * MIB, GpuFaultReason::NotMapped)
    );
    assert_eq!(emu.unmap(h, &[gpu]).0, Ok(0));
    let fault = emu
        .model
        .gpu_read(tgid, gpu, va(1), &mut seen)
        .expect_err("unmapped");
    assert_eq!(fault.reason, GpuFaultReason::NotMapped);
    assert!(!fault.write);
    drop(cpu);
    emu.free(h).expect("free");
}

#[test]
fn a_bo_without_writable_faults_on_gpu_writes() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let tgid = emu.caller.tgid;
    let ro = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let (h, _) = emu.alloc(gpu, va(1), 4096, ro).expect("alloc");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    let fault = emu
        .model
        .gpu_write(tgid, gpu, va(1) + 8, &[1, 2, 3])
        .expect_err("read-only");
    assert_eq!(fault.reason, GpuFaultReason::ReadOnly);
    assert!(fault.write);
    assert_eq!(fault.va, va(1) + 8);
    assert_eq!(fault.gpu_id, gpu);
    let mut back = [9u8; 3];
    emu.model
        .gpu_read(tgid, gpu, va(1) + 8, &mut back)
        .expect("reads are fine");
    assert_eq!(back, [0, 0, 0], "the faulting write changed nothing");
    let other = emu.model.gpu_read(tgid, 0x1234, va(1), &mut back);
    assert_eq!(other.map_err(|f| f.reason), Err(GpuFaultReason::UnknownGpu));
}

#[test]
fn userptr_is_the_callers_own_memory() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let tgid = emu.caller.tgid;
    let len = 16 * 4096usize;
    // SAFETY: a fresh private anonymous mapping, unmapped at the end of the test.
    let host = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE,
        )
    }
    .expect("mmap") as *mut u8;
    // SAFETY: `host` is `len` writable bytes that only this test uses.
    let bytes = unsafe { std::slice::from_raw_parts_mut(host, len) };
    bytes[100..104].copy_from_slice(b"host");
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (h, offset) = emu
        .alloc_at(gpu, va(1), len as u64, flags, host as u64)
        .expect("userptr");
    assert_ne!(offset, host as u64, "mmap_offset is overwritten");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    let mut seen = [0u8; 4];
    emu.model
        .gpu_read(tgid, gpu, va(1) + 100, &mut seen)
        .expect("read");
    assert_eq!(&seen, b"host");
    emu.model
        .gpu_write(tgid, gpu, va(1) + 200, b"gpu!")
        .expect("write");
    assert_eq!(&bytes[200..204], b"gpu!");
    // A userptr BO cannot be exported.
    let mut export = kfd_ioctl_export_dmabuf_args {
        handle: h,
        flags: libc::O_CLOEXEC as u32,
        dmabuf_fd: 0,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export),
        Err(Errno::PERM)
    );
    assert_eq!(emu.unmap(h, &[gpu]).0, Ok(0));
    emu.free(h).expect("free");
    // SAFETY: unmaps the mapping made above; `bytes` is not used after this.
    unsafe { rustix::mm::munmap(host.cast(), len) }.expect("munmap");
}

#[test]
fn aql_queue_memory_is_mapped_twice() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let tgid = emu.caller.tgid;
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT
        | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        | KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
    let (h, _) = emu.alloc(gpu, va(1), 128 * 1024, flags).expect("alloc");
    assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
    emu.model
        .gpu_write(tgid, gpu, va(1) + 16, b"ring")
        .expect("write");
    let mut seen = [0u8; 4];
    emu.model
        .gpu_read(tgid, gpu, va(1) + 64 * 1024 + 16, &mut seen)
        .expect("read the mirror");
    assert_eq!(&seen, b"ring");
    // The mirror occupies VA: a BO at the second half cannot be mapped.
    let (other, _) = emu
        .alloc(gpu, va(1) + 64 * 1024, 4096, VRAM_RW)
        .expect("alloc");
    assert_eq!(emu.map(other, &[gpu]).0, Err(Errno::INVAL));
}

#[test]
fn dmabuf_export_info_and_import_alias_the_same_bytes() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let tgid = emu.caller.tgid;
    let (h, offset) = emu.alloc(gpus[0], va(1), 2 * MIB, VRAM_RW).expect("alloc");
    let mut export = kfd_ioctl_export_dmabuf_args {
        handle: h,
        flags: libc::O_CLOEXEC as u32,
        dmabuf_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export)
        .expect("export");
    let dmabuf = own_fd(export.dmabuf_fd);
    let fd_flags = rustix::io::fcntl_getfd(&dmabuf).expect("getfd");
    assert!(
        fd_flags.contains(rustix::io::FdFlags::CLOEXEC),
        "O_CLOEXEC honoured"
    );

    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: export.dmabuf_fd,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("info");
    assert_eq!(info.size, 2 * MIB);
    assert_eq!(info.gpu_id, gpus[0]);
    assert_eq!(
        info.flags,
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    );

    // Import on the same GPU at another VA, and on a peer.
    let mut import = kfd_ioctl_import_dmabuf_args {
        va_addr: va(2),
        handle: 0,
        gpu_id: gpus[0],
        dmabuf_fd: export.dmabuf_fd,
    };
    emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut import)
        .expect("import");
    assert_eq!(import.handle >> 32, u64::from(gpus[0]));
    assert_ne!(import.handle, h);
    assert_eq!(emu.map(h, &gpus[..1]).0, Ok(0));
    assert_eq!(emu.map(import.handle, &gpus[..1]).0, Ok(0));
    emu.model
        .gpu_write(tgid, gpus[0], va(1) + 64, b"alias")
        .expect("write");
    let mut seen = [0u8; 5];
    emu.model
        .gpu_read(tgid, gpus[0], va(2) + 64, &mut seen)
        .expect("read alias");
    assert_eq!(&seen, b"alias");
    let mut cpu = emu
        .cpu_map(emu.renders[0].as_fd(), offset, 4096)
        .expect("map the BO through the render node");
    assert_eq!(
        &cpu.bytes()[64..69],
        b"alias",
        "the CPU mapping aliases too"
    );

    // Freeing the original keeps the memory alive for the import.
    assert_eq!(emu.unmap(h, &gpus[..1]).0, Ok(0));
    emu.free(h).expect("free the exporter's handle");
    emu.model
        .gpu_read(tgid, gpus[0], va(2) + 64, &mut seen)
        .expect("still there");
    assert_eq!(&seen, b"alias");

    // Errors: a file that is not a dma-buf, no such fd, an unknown GPU.
    let not_dmabuf = emu.kfd.as_raw_fd() as u32;
    for (what, fd, gpu, errno) in [
        ("not a dma-buf", not_dmabuf, gpus[0], Errno::INVAL),
        ("no such fd", 999_999, gpus[0], Errno::BADF),
        ("unknown gpu", export.dmabuf_fd, 0x9, Errno::INVAL),
    ] {
        let mut bad = kfd_ioctl_import_dmabuf_args {
            va_addr: va(3),
            handle: 0,
            gpu_id: gpu,
            dmabuf_fd: fd,
        };
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut bad),
            Err(errno),
            "{what}"
        );
    }
    let mut bad_info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: not_dmabuf,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut bad_info),
        Err(Errno::INVAL)
    );
    export.handle = h;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export),
        Err(Errno::INVAL),
        "a freed handle"
    );
    drop(dmabuf);
}

#[test]
fn gtt_dmabuf_info_names_the_first_gpu() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let (h, _) = emu
        .alloc(gpus[3], va(1), 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT)
        .expect("alloc");
    let mut export = kfd_ioctl_export_dmabuf_args {
        handle: h,
        flags: 0,
        dmabuf_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export)
        .expect("export");
    let dmabuf = own_fd(export.dmabuf_fd);
    assert!(
        !rustix::io::fcntl_getfd(&dmabuf)
            .expect("getfd")
            .contains(rustix::io::FdFlags::CLOEXEC)
    );
    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: export.dmabuf_fd,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("info");
    assert_eq!(info.flags, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    assert_eq!(
        info.gpu_id, gpus[0],
        "a GTT BO has no partition: the first KFD GPU"
    );
}

/// `dma_buf_get` (through `amdgpu_amdkfd_gpuvm_import_dmabuf_fd` and
/// `amdgpu_amdkfd_get_dmabuf_info`): a closed fd is `EBADF`, any file that is not an amdgpu
/// dma-buf `EINVAL` — a pipe, `/dev/null`, a memfd, even one named like the model's — and
/// IMPORT looks up its gpu_id before the fd (`kfd_ioctl_import_dmabuf`).
#[test]
fn import_and_info_of_closed_and_foreign_fds_fail_as_the_kernel() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let (h, _) = emu.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    let dmabuf = emu.export(h).expect("export");
    let (pipe, _write) = rustix::pipe::pipe().expect("pipe");
    let null = std::fs::File::open("/dev/null").expect("/dev/null");
    let memfd = rustix::fs::memfd_create("plain", rustix::fs::MemfdFlags::CLOEXEC).expect("memfd");
    let lookalike =
        rustix::fs::memfd_create("kfd-emu:bo", rustix::fs::MemfdFlags::CLOEXEC).expect("memfd");
    rustix::fs::ftruncate(&lookalike, 4096).expect("size");
    // Closed at a number far above the ones the tests running alongside take.
    let high = rustix::io::fcntl_dupfd_cloexec(&dmabuf, 3000).expect("dup");
    let closed = high.as_raw_fd() as u32;
    drop((high, dmabuf));
    let cases = [
        ("closed", closed, Errno::BADF),
        ("pipe", pipe.as_raw_fd() as u32, Errno::INVAL),
        ("/dev/null", null.as_raw_fd() as u32, Errno::INVAL),
        ("memfd", memfd.as_raw_fd() as u32, Errno::INVAL),
        ("look-alike", lookalike.as_raw_fd() as u32, Errno::INVAL),
        ("/dev/kfd", emu.kfd.as_raw_fd() as u32, Errno::INVAL),
    ];
    for (what, fd, errno) in cases {
        let mut info = kfd_ioctl_get_dmabuf_info_args {
            dmabuf_fd: fd,
            ..Default::default()
        };
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info),
            Err(errno),
            "info of {what}"
        );
        let mut import = kfd_ioctl_import_dmabuf_args {
            va_addr: va(2),
            gpu_id: gpu,
            dmabuf_fd: fd,
            handle: 0,
        };
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut import),
            Err(errno),
            "import of {what}"
        );
        import.gpu_id = 0x9;
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut import),
            Err(Errno::INVAL),
            "import of {what} on an unknown gpu_id: the gpu_id is looked up first"
        );
    }
    emu.free(h).expect("free");
}

/// The dma-buf holds the BO's memory after the exporter freed its handle and exited, for as
/// long as an fd of it exists (here in this process, standing for a child it was passed to),
/// and an import there works; an import's handle, a new export of it and a mapping of the
/// dma-buf hold it in turn. The charge (AVAILABLE_MEMORY) follows the last reference.
#[test]
fn a_dmabuf_holds_its_memory_until_the_last_fd_and_handle_go() {
    let mut importer = Emu::machine("mi300x");
    importer.acquire_all();
    let gpu = importer.gpu();
    let before = importer.available(gpu);
    // The exporter: a child of this process, idle until released, that the model is told
    // about by pid; the fds the model installs for it land here (the test caller's table).
    let render = importer.open_render(0);
    let stand_ins = importer.model.stand_ins();
    let (child, release) = fork_support::fork_idle();
    let exporter_caller = TestCaller {
        tid: child,
        tgid: child,
    };
    let kfd = injected(importer.model.open(
        &exporter_caller,
        "/dev/kfd",
        libc::O_RDWR | libc::O_CLOEXEC,
        0,
    ));
    let exporter = Emu {
        model: importer.model.clone(),
        caller: exporter_caller,
        kfd,
        renders: Vec::new(),
    };
    let mut acquire = kfd_ioctl_acquire_vm_args {
        drm_fd: render.as_raw_fd() as u32,
        gpu_id: gpu,
    };
    exporter
        .ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut acquire)
        .expect("acquire_vm");
    let (h, _) = exporter.alloc(gpu, va(1), 8 * MIB, VRAM_RW).expect("alloc");
    let first = exporter.export(h).expect("export");
    let second = exporter.export(h).expect("export again");
    exporter.free(h).expect("free");
    rustix::io::write(&release, &[1]).expect("release the child");
    fork_support::wait_pid(child);
    drop((exporter, render));
    importer.model.process_exited(child);
    assert_eq!(importer.available(gpu), before - 8 * MIB, "held by two fds");
    drop(first);
    assert_eq!(importer.available(gpu), before - 8 * MIB, "held by one fd");

    let mut import = kfd_ioctl_import_dmabuf_args {
        va_addr: va(2),
        gpu_id: gpu,
        dmabuf_fd: second.as_raw_fd() as u32,
        handle: 0,
    };
    importer
        .ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut import)
        .expect("import after the exporter is gone");
    drop(second);
    assert_eq!(
        importer.available(gpu),
        before - 8 * MIB,
        "held by the import"
    );
    // A re-export of the import is the same memory; its fd keeps it after the import goes.
    let third = importer.export(import.handle).expect("export the import");
    importer.free(import.handle).expect("free the import");
    assert_eq!(
        importer.available(gpu),
        before - 8 * MIB,
        "held by a new fd"
    );
    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: third.as_raw_fd() as u32,
        ..Default::default()
    };
    importer
        .ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("info");
    assert_eq!(info.size, 8 * MIB);
    // A mapping of the dma-buf is a reference too: the fd can go, the mapping holds it.
    let mut mapped = CpuMap::new(third.as_fd(), 0, 4096);
    drop(third);
    assert_eq!(
        importer.available(gpu),
        before - 8 * MIB,
        "held by a mapping"
    );
    mapped.bytes()[..3].copy_from_slice(b"map");
    drop(mapped);
    assert_eq!(importer.available(gpu), before, "every reference gone");
    assert_eq!(
        importer.model.stand_ins(),
        stand_ins,
        "the exporter's stand-ins and the dma-buf are released"
    );
}

/// ACQUIRE_VM takes a DRM file of the GPU opened through its primary node `card<N>` as well
/// as its render node (`amdgpu_file_to_fpriv` checks only that the file is amdgpu's), and a
/// BO allocated then maps through that file.
#[test]
fn acquire_vm_takes_the_primary_node_too() {
    let emu = Emu::machine("mi300x");
    let gpu = emu.gpu();
    let card = injected(emu.model.open(
        &emu.caller,
        "/dev/dri/card0",
        libc::O_RDWR | libc::O_CLOEXEC,
        0,
    ));
    let mut acquire = kfd_ioctl_acquire_vm_args {
        drm_fd: card.as_raw_fd() as u32,
        gpu_id: gpu,
    };
    emu.ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut acquire)
        .expect("acquire_vm with card0");
    let (h, offset) = emu.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    let mut cpu = emu
        .cpu_map(card.as_fd(), offset, 4096)
        .expect("map the BO through the primary node");
    cpu.bytes()[..4].copy_from_slice(b"card");
    drop(cpu);
    emu.free(h).expect("free");
}
