//! The buffer-object ioctls: ACQUIRE_VM, ALLOC/FREE, MAP/UNMAP, AVAILABLE_MEMORY and the
//! dma-buf trio (kfd-abi.md §4.4, §4.6–§4.10), in the kernel's check order.
//!
//! A USERPTR BO's pages are got at ALLOC, as `init_user_pages` gets them ([`get_user_pages`]):
//! memory that is not plain process memory fails the ALLOC itself, with no handle made — a
//! BO's own CPU mapping (render node, dma-buf, `/dev/kfd` pages: `VM_IO | VM_PFNMAP`), a hole
//! or memory without `PROT_READ` is `EFAULT`, read-only memory `EPERM` (KFD always asks for
//! write access), a range that wraps `EOVERFLOW`.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::sync::Arc;

use kfd_ioctl::abi::{
    AllocMemFlags, kfd_ioctl_acquire_vm_args, kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_export_dmabuf_args, kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_get_available_memory_args, kfd_ioctl_get_dmabuf_info_args,
    kfd_ioctl_import_dmabuf_args, kfd_ioctl_map_memory_to_gpu_args,
};
use rustix::io::Errno;

use super::chardev::{Ctx, KMALLOC_MAX, get, put};
use super::driver::{Driver, FileKind};
use super::evict;
use super::files;
use super::memory::{Charge, PAGE_SIZE, align_up};
use super::objects::{Backing, Bo, Dmabuf, Domain, Store};
use super::offsets;
use super::process::{Process, State, doorbell_slice, make_handle};
use super::smi::Event;
use super::svm;
use super::teardown;
use super::vm::{Mapping, VM_SIZE};

/// The gpu_id part of a handle.
fn handle_gpu(handle: u64) -> u32 {
    (handle >> 32) as u32
}

/// The idr part of a handle.
fn handle_id(handle: u64) -> u32 {
    handle as u32
}

/// AMDKFD_IOC_ACQUIRE_VM: the caller's DRM file becomes the GPU's VM for this process.
pub(super) fn acquire_vm(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_acquire_vm_args = get(buf);
    // fget(drm_fd) failing is EINVAL here.
    let file = files::caller_file(ctx.tgid, a.drm_fd).map_err(|_| Errno::INVAL)?;
    let key = files::key_of(file.as_fd()).ok();
    let kind = key.and_then(|key| ctx.m.kind_of(&key));
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let gpu = {
        let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
        if let Some(drm) = &pdd.drm {
            return if files::same_file(drm.as_fd(), file.as_fd()) {
                Ok(())
            } else {
                Err(Errno::BUSY)
            };
        }
        pdd.gpu
    };
    // Not an amdgpu DRM file, or one of another device.
    if !matches!(kind, Some(FileKind::Render { gpu: of, .. }) if of == gpu) {
        return Err(Errno::INVAL);
    }
    // The file's VM is already some other process's compute VM.
    let taken = st
        .procs
        .values()
        .flat_map(|p| p.pdds.iter())
        .filter_map(|pdd| pdd.drm.as_ref())
        .any(|drm| files::same_file(drm.as_fd(), file.as_fd()));
    if taken {
        return Err(Errno::INVAL);
    }
    let task = ctx.caller.id().tid;
    let comm = std::fs::read_to_string(format!("/proc/{}/task/{task}/comm", ctx.tgid))
        .map(|c| c.trim_end_matches('\n').to_owned())
        .unwrap_or_default();
    let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
    pdd.drm = Some(file);
    pdd.drm_key = key;
    pdd.task = Some((task, comm.clone()));
    // The file's VM becomes the process's compute VM with what GEM_VA mapped in it.
    if let Some(key) = key {
        st.mirror_gem_va(key);
    }
    // kfd_process_device_init_vm announces the process on the GPU.
    st.smi.emit(
        ctx.m.dev.cfg.kfd_minor,
        gpu,
        &Event::Process {
            start: true,
            task_pid: task,
            comm: &comm,
        },
    );
    Ok(())
}

/// Where the bytes of a new BO are; `user_pages`, for a USERPTR, what `init_user_pages`
/// makes of its range (made before the model's lock: [`user_pages_before_lock`]).
fn create_store(
    ctx: &Ctx<'_>,
    gpu: usize,
    flags: AllocMemFlags,
    size: u64,
    user_addr: u64,
    user_pages: Option<Result<(), Errno>>,
) -> Result<Store, Errno> {
    if flags.intersects(AllocMemFlags::VRAM | AllocMemFlags::GTT) {
        let fd = files::memfd(files::BO_MEMFD_NAME, size).map_err(|_| Errno::NOMEM)?;
        Ok(Store::Memfd(Arc::new(fd)))
    } else if flags.intersects(AllocMemFlags::USERPTR) {
        // init_user_pages, made before the model's lock ([`user_pages_before_lock`]).
        if let Some(r) = user_pages {
            r?;
        }
        Ok(Store::UserPtr {
            tgid: ctx.tgid,
            addr: user_addr,
        })
    } else {
        let offset = if flags.intersects(AllocMemFlags::DOORBELL) {
            Process::doorbell_offset(gpu)
        } else {
            Process::mmio_offset(gpu)
        };
        Ok(Store::Kfd {
            tgid: ctx.tgid,
            offset,
        })
    }
}

/// What `init_user_pages` (amdgpu_amdkfd_gpuvm.c) makes of a new USERPTR BO over
/// `[addr, addr + size)` of process `tgid`, at ALLOC time: the ioctl fails with its error,
/// and the BO is freed with its memory-limit reservation, so no handle is made.
/// * `amdgpu_hmm_register` → `mmu_interval_notifier_insert`: a range whose last byte wraps is
///   `EOVERFLOW`.
/// * `amdgpu_ttm_tt_get_user_pages` (amdgpu_ttm.c): `mmget_not_zero` (`ESRCH`, "happens
///   during process shutdown"); `vma_lookup` of the first byte (`EFAULT`);
///   `AMDGPU_GEM_USERPTR_ANONONLY` is never set here, since KFD registers with userflags 0
///   (`amdgpu_ttm_tt_set_userptr(&bo->tbo, user_addr, 0)`), which also makes the BO
///   not `READONLY`: every page is faulted for writing whatever `WRITABLE` says.
/// * `amdgpu_hmm_range_get_pages` (amdgpu_hmm.c) → `hmm_range_fault` over every page
///   ([`Vmas::fault_in`](super::vmas::Vmas::fault_in)): a hole or device memory is
///   `EFAULT`, read-only memory `EPERM`. A BO's own CPU mapping is device memory
///   (`ttm_bo_mmap_obj`: `VM_PFNMAP | VM_IO`), so registering it as a USERPTR fails here, as
///   it does on the hardware; the model recognises those mappings by their stand-in files and
///   BO memfds (`Driver::vmas`).
fn get_user_pages(m: &Driver, tgid: i32, addr: u64, size: u64) -> Result<(), Errno> {
    let last = addr
        .checked_add(size.saturating_sub(1))
        .ok_or(Errno::OVERFLOW)?;
    let vmas = m.vmas(tgid).map_err(|_| Errno::SRCH)?;
    if vmas.lookup(addr).is_none() {
        return Err(Errno::FAULT);
    }
    // `last + 1` wraps only for a range ending at the top of the address space, where no
    // VMA can be: the walk then ends at the first hole.
    vmas.fault_in(addr, last.saturating_add(1), true)
}

/// For a USERPTR allocation (neither VRAM nor GTT), [`get_user_pages`] over its range (the
/// BO's size rounded up to pages, from `user_addr`); `None` for any other. Made before the
/// model's lock is taken: reading the caller's mappings grows with their number (a runtime
/// that keeps loading code objects has thousands; 3–7 ms per USERPTR in rocrtst's
/// `Queue_Validation_InvalidWorkGroupSize` on mi210x8), and every engine's turn and every
/// other ioctl waits for that lock. The errno keeps its place among the ioctl's checks
/// ([`create_store`] applies it).
fn user_pages_before_lock(
    ctx: &Ctx<'_>,
    flags: AllocMemFlags,
    size: u64,
    user_addr: u64,
) -> Option<Result<(), Errno>> {
    let userptr = !flags.intersects(AllocMemFlags::VRAM | AllocMemFlags::GTT)
        && flags.intersects(AllocMemFlags::USERPTR);
    if !userptr {
        return None;
    }
    // The size the BO gets (an AQL queue's BO is half its VA range), as `alloc_placed`.
    let size = if flags.intersects(AllocMemFlags::AQL_QUEUE_MEM) {
        size >> 1
    } else {
        size
    };
    let aligned = align_up(size, PAGE_SIZE).filter(|&a| a != 0)?;
    Some(get_user_pages(ctx.m, ctx.tgid, user_addr, aligned))
}

/// AMDKFD_IOC_ALLOC_MEMORY_OF_GPU. A VRAM BO is placed in VRAM as TTM places it, which may
/// evict other processes' BOs (`evict::make_room`); their restore workers are scheduled
/// once the model's lock is given back.
pub(super) fn alloc_memory_of_gpu(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut evicted = Vec::new();
    let r = alloc_placed(ctx, buf, &mut evicted);
    evict::schedule_restore(ctx.m, evicted);
    r
}

fn alloc_placed(ctx: &Ctx<'_>, buf: &mut [u8], evicted: &mut Vec<i32>) -> Result<(), Errno> {
    let mut a: kfd_ioctl_alloc_memory_of_gpu_args = get(buf);
    let m = ctx.m;
    if a.size == 0 {
        return Err(Errno::INVAL);
    }
    let flags = AllocMemFlags::from_bits_retain(a.flags);
    let user_pages = user_pages_before_lock(ctx, flags, a.size, a.mmap_offset);
    let mut guard = m.lock();
    let st = &mut *guard;
    svm::alloc_overlap(
        ctx.tgid,
        ctx.serial,
        st,
        a.va_addr,
        a.size,
        flags,
        a.mmap_offset,
    )?;
    let index = {
        let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
        let gpu = &m.dev.cfg.machine.gpus()[pdd.gpu];
        if flags.intersects(AllocMemFlags::PUBLIC)
            && flags.intersects(AllocMemFlags::VRAM)
            && !gpu.large_bar
        {
            return Err(Errno::INVAL);
        }
        pdd.bound()?;
        if flags.intersects(AllocMemFlags::DOORBELL) {
            if a.size != doorbell_slice(gpu.layout) {
                return Err(Errno::INVAL);
            }
        } else if flags.intersects(AllocMemFlags::MMIO_REMAP) && a.size != PAGE_SIZE {
            return Err(Errno::INVAL);
        }
        pdd.gpu
    };
    let gpu = &m.dev.cfg.machine.gpus()[index];

    // amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: the domain is the first of VRAM, GTT, USERPTR,
    // DOORBELL|MMIO_REMAP; on an `apu_prefer_gtt` APU, VRAM is a GTT BO (system memory, which
    // the CPU can map whatever PUBLIC says).
    let domain = if flags.intersects(AllocMemFlags::VRAM) && gpu.apu {
        Domain::Gtt
    } else if flags.intersects(AllocMemFlags::VRAM) {
        Domain::Vram
    } else if flags.intersects(
        AllocMemFlags::GTT
            | AllocMemFlags::USERPTR
            | AllocMemFlags::DOORBELL
            | AllocMemFlags::MMIO_REMAP,
    ) {
        Domain::Gtt
    } else {
        return Err(Errno::INVAL);
    };
    let userptr = !flags.intersects(AllocMemFlags::VRAM | AllocMemFlags::GTT)
        && flags.intersects(AllocMemFlags::USERPTR);
    if userptr && a.mmap_offset == 0 {
        return Err(Errno::INVAL);
    }
    let aql = flags.intersects(AllocMemFlags::AQL_QUEUE_MEM);
    let size = if aql { a.size >> 1 } else { a.size };
    let aligned = align_up(size, PAGE_SIZE).ok_or(Errno::NOMEM)?;
    if aligned == 0 {
        return Err(Errno::INVAL);
    }
    let charge = Charge::on(flags, aligned, gpu.apu).ok_or(Errno::NOMEM)?;
    if st
        .acc
        .reserve(&m.dev.limits, index, gpu.vram_size, charge)
        .is_err()
    {
        // Memory that dma-bufs nobody holds any more kept is free in the kernel already.
        teardown::release_closed_dmabufs(m, st);
        st.acc
            .reserve(&m.dev.limits, index, gpu.vram_size, charge)?;
    }
    let store = match create_store(ctx, index, flags, aligned, a.mmap_offset, user_pages) {
        Ok(v) => v,
        Err(e) => {
            st.acc.unreserve(index, charge);
            return Err(e);
        }
    };
    // amdgpu_bo_create → ttm_bo_validate in VRAM only (a KFD BO has no GTT fallback).
    if domain == Domain::Vram {
        match evict::make_room(&m.dev, st, index, aligned, Some(ctx.tgid), None, true) {
            Ok(more) => evicted.extend(more),
            Err(e) => {
                st.acc.unreserve(index, charge);
                return Err(e);
            }
        }
    }
    let backing = st.add_backing(Backing {
        refs: 1,
        store,
        size: aligned,
        gpu: index,
        domain,
        cpu_access: domain == Domain::Vram && flags.intersects(AllocMemFlags::PUBLIC),
        charge,
        offsets: Vec::new(),
        gem: Default::default(),
        placed: Default::default(),
    });
    evict::touch(st, backing);
    // amdgpu_bo_mmap_offset: every BO (userptr and SG ones too) is a GEM object with a node
    // in its device's vma manager; an MMIO-remap BO is mapped through /dev/kfd instead.
    let mmap_offset = match st.vma_offset(backing, index) {
        Ok(_) if flags.intersects(AllocMemFlags::MMIO_REMAP) => offsets::mmio_offset(a.gpu_id),
        Ok(offset) => offset,
        Err(e) => {
            st.put_backing(backing);
            return Err(e);
        }
    };
    let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
    let Some(id) = pdd.free_id() else {
        st.put_backing(backing);
        return Err(Errno::FAULT);
    };
    pdd.bos.insert(
        id,
        Bo {
            va: a.va_addr,
            size: aligned,
            flags,
            backing,
            mapped: BTreeSet::new(),
            imported: false,
            aql,
            dmabuf: None,
        },
    );
    if flags.intersects(AllocMemFlags::VRAM) {
        pdd.vram_usage += aligned;
    }
    a.handle = make_handle(a.gpu_id, id);
    a.mmap_offset = mmap_offset;
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_FREE_MEMORY_OF_GPU.
pub(super) fn free_memory_of_gpu(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_free_memory_of_gpu_args = get(buf);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let process = st.process(ctx.tgid, ctx.serial)?;
    if process.signal_handle == Some(a.handle) {
        return Err(Errno::PERM);
    }
    let pdd = process.pdd(handle_gpu(a.handle))?;
    let bo = pdd.bos.get(&handle_id(a.handle)).ok_or(Errno::INVAL)?;
    if !bo.mapped.is_empty() {
        return Err(Errno::BUSY);
    }
    let Some(bo) = pdd.bos.remove(&handle_id(a.handle)) else {
        return Err(Errno::INVAL);
    };
    if !bo.imported && bo.flags.intersects(AllocMemFlags::VRAM) {
        pdd.vram_usage = pdd.vram_usage.saturating_sub(bo.size);
    }
    let gpu = pdd.gpu;
    st.put_backing(bo.backing);
    st.handle_dropped(bo.backing, gpu);
    Ok(())
}

/// The gpu_ids of a MAP/UNMAP device list (`kmalloc_array` + `copy_from_user`).
fn device_list(ctx: &Ctx<'_>, ptr: u64, n: u32) -> Result<Vec<u32>, Errno> {
    if u64::from(n) * 4 > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let mut bytes = vec![0u8; n as usize * 4];
    ctx.caller.read(ptr, &mut bytes).map_err(|_| Errno::FAULT)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Whether GPU `peer` can reach memory of GPU `owner` (`kfd_mem_attach`): over xGMI in the
/// same hive (VRAM), or over PCIe when the owner has a large BAR.
fn peer_accessible(m: &Driver, owner: usize, peer: usize, vram: bool) -> bool {
    let gpus = m.dev.cfg.machine.gpus();
    let same_hive =
        vram && gpus[owner].hive_id.is_some() && gpus[owner].hive_id == gpus[peer].hive_id;
    same_hive || gpus[owner].large_bar
}

/// Maps BO `id` of pdd `owner_pdd` on the GPU of pdd `peer_pdd` (`kfd_mem_attach` +
/// `amdgpu_vm_bo_map`); mapping again is a no-op.
fn map_one(
    ctx: &Ctx<'_>,
    st: &mut State,
    handle: u64,
    owner_pdd: usize,
    peer_pdd: usize,
) -> Result<(), Errno> {
    let (backing_gpu, domain) = backing_of(st, ctx, owner_pdd, handle)?;
    let process = st.process(ctx.tgid, ctx.serial)?;
    let peer = process.pdds[peer_pdd].gpu;
    let bo = process.pdds[owner_pdd]
        .bos
        .get(&handle_id(handle))
        .ok_or(Errno::NOMEM)?;
    if bo.mapped.contains(&peer) {
        return Ok(());
    }
    if bo.va == 0 {
        return Err(Errno::INVAL);
    }
    let sg = bo
        .flags
        .intersects(AllocMemFlags::DOORBELL | AllocMemFlags::MMIO_REMAP);
    let vram = domain == Domain::Vram;
    if peer != backing_gpu && (vram || sg) && !peer_accessible(ctx.m, backing_gpu, peer, vram) {
        return Err(Errno::INVAL);
    }
    let copies: u64 = if bo.aql { 2 } else { 1 };
    let va = bo.va;
    let end = bo
        .size
        .checked_mul(copies)
        .and_then(|len| va.checked_add(len))
        .ok_or(Errno::INVAL)?;
    if va % PAGE_SIZE != 0 || end > VM_SIZE {
        return Err(Errno::INVAL);
    }
    let vm = &process.pdds[peer_pdd].vm;
    if vm.overlaps(va, end) {
        return Err(Errno::INVAL);
    }
    let (size, backing, writable) = (
        bo.size,
        bo.backing,
        bo.flags.intersects(AllocMemFlags::WRITABLE),
    );
    for copy in 0..copies {
        process.pdds[peer_pdd].vm.insert(
            va + copy * size,
            Mapping {
                end: va + (copy + 1) * size,
                backing,
                offset: 0,
                writable,
                handle,
            },
        );
    }
    if let Some(bo) = process.pdds[owner_pdd].bos.get_mut(&handle_id(handle)) {
        bo.mapped.insert(peer);
    }
    Ok(())
}

/// The owning GPU and domain of the backing of BO `handle` in pdd `pdd`.
fn backing_of(
    st: &mut State,
    ctx: &Ctx<'_>,
    pdd: usize,
    handle: u64,
) -> Result<(usize, Domain), Errno> {
    let backing = st.process(ctx.tgid, ctx.serial)?.pdds[pdd]
        .bos
        .get(&handle_id(handle))
        .ok_or(Errno::NOMEM)?
        .backing;
    let b = st.backings.get(&backing).ok_or(Errno::NOMEM)?;
    Ok((b.gpu, b.domain))
}

/// AMDKFD_IOC_MAP_MEMORY_TO_GPU: maps on `devices[n_success..]`, counting each success.
pub(super) fn map_memory_to_gpu(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_map_memory_to_gpu_args = get(buf);
    if a.n_devices == 0 || a.n_success > a.n_devices {
        return Err(Errno::INVAL);
    }
    let devices = device_list(ctx, a.device_ids_array_ptr, a.n_devices)?;
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let process = st.process(ctx.tgid, ctx.serial)?;
    let owner = index_of(process, handle_gpu(a.handle))?;
    process.pdds[owner].bound()?;
    if !process.pdds[owner].bos.contains_key(&handle_id(a.handle)) {
        return Err(Errno::NOMEM);
    }
    for i in a.n_success..a.n_devices {
        let result = (|| {
            let process = st.process(ctx.tgid, ctx.serial)?;
            let peer = index_of(process, devices[i as usize])?;
            process.pdds[peer].bound()?;
            map_one(ctx, st, a.handle, owner, peer)
        })();
        if let Err(e) = result {
            put(buf, &a);
            return Err(e);
        }
        a.n_success = i + 1;
    }
    put(buf, &a);
    Ok(())
}

/// The pdd index of `gpu_id` (`EINVAL` when the process has no such GPU).
fn index_of(process: &Process, gpu_id: u32) -> Result<usize, Errno> {
    if gpu_id == 0 {
        return Err(Errno::INVAL);
    }
    process
        .pdds
        .iter()
        .position(|p| p.gpu_id == gpu_id)
        .ok_or(Errno::INVAL)
}

/// AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: unmaps from `devices[n_success..]`; a GPU the BO is not
/// mapped on is `EINVAL`.
pub(super) fn unmap_memory_from_gpu(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    // The unmap arguments have the map layout.
    let mut a: kfd_ioctl_map_memory_to_gpu_args = get(buf);
    if a.n_devices == 0 || a.n_success > a.n_devices {
        return Err(Errno::INVAL);
    }
    let devices = device_list(ctx, a.device_ids_array_ptr, a.n_devices)?;
    let mut st = ctx.m.lock();
    let process = st.process(ctx.tgid, ctx.serial)?;
    let owner = index_of(process, handle_gpu(a.handle))?;
    if !process.pdds[owner].bos.contains_key(&handle_id(a.handle)) {
        return Err(Errno::NOMEM);
    }
    for i in a.n_success..a.n_devices {
        let Ok(peer) = index_of(process, devices[i as usize]) else {
            put(buf, &a);
            return Err(Errno::INVAL);
        };
        let gpu = process.pdds[peer].gpu;
        let mapped = process.pdds[owner]
            .bos
            .get(&handle_id(a.handle))
            .is_some_and(|bo| bo.mapped.contains(&gpu));
        if !mapped {
            put(buf, &a);
            return Err(Errno::INVAL);
        }
        // unmap_bo_from_gpuvm: a mapping a user queue holds (`bo_va->queue_refcount`).
        if process.queues.hold(gpu, a.handle) {
            put(buf, &a);
            return Err(Errno::BUSY);
        }
        process.pdds[peer].vm.remove_handle(a.handle);
        if let Some(bo) = process.pdds[owner].bos.get_mut(&handle_id(a.handle)) {
            bo.mapped.remove(&gpu);
        }
        a.n_success = i + 1;
    }
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_AVAILABLE_MEMORY.
pub(super) fn available_memory(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_get_available_memory_args = get(buf);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let gpu = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?.gpu;
    teardown::release_closed_dmabufs(ctx.m, st);
    let vram = ctx.m.dev.cfg.machine.gpus()[gpu].vram_size;
    a.available = st.acc.available(&ctx.m.dev.limits, gpu, vram);
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_EXPORT_DMABUF: one dma-buf per BO; each export installs a new fd for it.
pub(super) fn export_dmabuf(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_export_dmabuf_args = get(buf);
    let m = ctx.m;
    if m.dev.gpu_index(handle_gpu(a.handle)).is_none() {
        return Err(Errno::INVAL);
    }
    let mut guard = m.lock();
    let st = &mut *guard;
    let (backing, existing) = {
        let pdd = st
            .process(ctx.tgid, ctx.serial)?
            .pdd(handle_gpu(a.handle))?;
        let bo = pdd.bos.get(&handle_id(a.handle)).ok_or(Errno::INVAL)?;
        // amdgpu_gem_prime_export refuses userptr BOs.
        if bo.flags.intersects(AllocMemFlags::USERPTR) {
            return Err(Errno::PERM);
        }
        (bo.backing, bo.dmabuf)
    };
    let id = match existing.filter(|id| st.dmabufs.contains_key(id)) {
        Some(id) => id,
        None => dmabuf_of_backing(m, st, backing)?,
    };
    if let Ok(pdd) = st.process(ctx.tgid, ctx.serial)?.pdd(handle_gpu(a.handle))
        && let Some(bo) = pdd.bos.get_mut(&handle_id(a.handle))
    {
        bo.dmabuf = Some(id);
    }
    let cloexec = a.flags & libc::O_CLOEXEC as u32 != 0;
    a.dmabuf_fd = install_dmabuf(ctx, st, id, cloexec)? as u32;
    put(buf, &a);
    Ok(())
}

/// The dma-buf of the GEM object on `backing`, made on the first export (one dma-buf per
/// GEM object, `drm_gem_prime_handle_to_fd` keeps it in `obj->dma_buf`: the BO's own, or the
/// one of the object it was imported from).
pub(super) fn dmabuf_of_backing(m: &Driver, st: &mut State, backing: u64) -> Result<u64, Errno> {
    if let Some((&id, _)) = st.dmabufs.iter().find(|(_, d)| d.backing == backing) {
        return Ok(id);
    }
    // The stand-in is the BO's memory itself (a reopen of its memfd), so a mapping of the
    // dma-buf fd shows the BO's bytes; SG BOs have none to show.
    let probe = match st.backings.get(&backing).map(|b| &b.store) {
        Some(Store::Memfd(fd)) => files::reopen(fd.as_fd())?,
        Some(_) => files::memfd("dmabuf", 0).map_err(|_| Errno::NOMEM)?,
        None => return Err(Errno::INVAL),
    };
    let key = files::key_of(probe.as_fd())?;
    let id = st.next_dmabuf;
    st.next_dmabuf += 1;
    st.dmabufs.insert(
        id,
        Dmabuf {
            backing,
            probe,
            key,
        },
    );
    if let Some(b) = st.backings.get_mut(&backing) {
        b.refs += 1;
    }
    m.register(key, FileKind::Dmabuf { id });
    Ok(id)
}

/// Installs a new fd of dma-buf `id` in the caller (`dma_buf_fd`).
pub(super) fn install_dmabuf(
    ctx: &Ctx<'_>,
    st: &State,
    id: u64,
    cloexec: bool,
) -> Result<i32, Errno> {
    let dmabuf = st.dmabufs.get(&id).ok_or(Errno::INVAL)?;
    // The kernel installs the same file at every export of a live dma-buf (`dma_buf_fd`);
    // the model keeps no reference to hand out again, so each export is an open file of its
    // own on the same memory, all of them keeping the dma-buf alive. The model's own copy
    // goes when this returns: from then on only the program's references count.
    let file = files::exported_file(dmabuf.probe.as_fd()).map_err(|_| Errno::NOMEM)?;
    ctx.caller.install_fd(file.as_fd(), cloexec)
}

/// The model's dma-buf behind fd `fd` of the caller: `EBADF` for no such fd, `EINVAL` for a
/// file that is not one.
pub(super) fn dmabuf_of(ctx: &Ctx<'_>, fd: u32) -> Result<u64, Errno> {
    let file = files::caller_file(ctx.tgid, fd)?;
    let key = files::key_of(file.as_fd()).map_err(|_| Errno::INVAL)?;
    match ctx.m.kind_of(&key) {
        Some(FileKind::Dmabuf { id }) => Ok(id),
        _ => Err(Errno::INVAL),
    }
}

/// AMDKFD_IOC_GET_DMABUF_INFO.
pub(super) fn get_dmabuf_info(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_get_dmabuf_info_args = get(buf);
    let gpus = ctx.m.dev.cfg.machine.gpus();
    let Some(first) = gpus.first() else {
        return Err(Errno::INVAL);
    };
    if a.metadata_ptr != 0 && u64::from(a.metadata_size) > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let id = dmabuf_of(ctx, a.dmabuf_fd)?;
    let st = ctx.m.lock();
    let dmabuf = st.dmabufs.get(&id).ok_or(Errno::INVAL)?;
    let backing = st.backings.get(&dmabuf.backing).ok_or(Errno::INVAL)?;
    // amdgpu_amdkfd_get_dmabuf_info: only an object that prefers VRAM or GTT.
    const GEM_DOMAIN_VRAM_GTT: u32 = 0x2 | 0x4;
    if backing.gem.domains != 0 && backing.gem.domains & GEM_DOMAIN_VRAM_GTT == 0 {
        return Err(Errno::INVAL);
    }
    a.size = backing.size;
    let metadata = backing.gem.metadata.clone();
    // amdgpu_amdkfd_get_dmabuf_info asks amdgpu_bo_get_metadata only with a buffer: EINVAL
    // when it is smaller than the metadata, else the metadata's size; without one,
    // `metadata_size` is left as given.
    if a.metadata_ptr != 0 {
        if u64::from(a.metadata_size) < metadata.len() as u64 {
            return Err(Errno::INVAL);
        }
        a.metadata_size = metadata.len() as u32;
    }
    let mut flags = match backing.domain {
        Domain::Vram => AllocMemFlags::VRAM,
        Domain::Gtt => AllocMemFlags::GTT,
    };
    if backing.cpu_access {
        flags |= AllocMemFlags::PUBLIC;
    }
    a.flags = flags.bits();
    // A VRAM BO names its partition; a GTT BO has none (xcp_id -1), and the kernel then
    // reports the first KFD GPU.
    a.gpu_id = match backing.domain {
        Domain::Vram => gpus[backing.gpu].gpu_id,
        Domain::Gtt => first.gpu_id,
    };
    // Caller memory is written without the model's lock.
    drop(st);
    if a.metadata_ptr != 0 && !metadata.is_empty() {
        ctx.caller
            .write(a.metadata_ptr, &metadata)
            .map_err(|_| Errno::FAULT)?;
    }
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_IMPORT_DMABUF: a new handle at `va_addr` on the same memory.
pub(super) fn import_dmabuf(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_import_dmabuf_args = get(buf);
    let resolved = dmabuf_of(ctx, a.dmabuf_fd);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let gpu = {
        let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
        pdd.bound()?;
        pdd.gpu
    };
    let id = resolved?;
    let backing = st.dmabufs.get(&id).ok_or(Errno::INVAL)?.backing;
    let (handle, _) = import_backing(st, ctx.tgid, ctx.serial, a.gpu_id, gpu, a.va_addr, backing)?;
    a.handle = handle;
    put(buf, &a);
    Ok(())
}

/// A new handle of process `(tgid, serial)` on GPU `gpu_id` (index `gpu`) at `va` on the memory
/// `backing` (`amdgpu_amdkfd_gpuvm_import_dmabuf`, then `kfd_process_device_create_obj_handle`):
/// the handle and the GEM object's vma offset on that GPU (what the out-of-tree driver's
/// IPC import returns as `mmap_offset`).
pub(super) fn import_backing(
    st: &mut State,
    tgid: i32,
    serial: u64,
    gpu_id: u32,
    gpu: usize,
    va: u64,
    backing: u64,
) -> Result<(u64, u64), Errno> {
    let (size, domain) = {
        let b = st.backings.get(&backing).ok_or(Errno::INVAL)?;
        // A dma-buf of another device is attached as system memory.
        let domain = if b.gpu == gpu { b.domain } else { Domain::Gtt };
        (b.size, domain)
    };
    // amdgpu_gem_prime_import: a dma-buf of this device gives back its own GEM object (the same
    // vma offset); one of another device becomes a new object there.
    let offset = st.vma_offset(backing, gpu)?;
    let pdd = st.process(tgid, serial)?.pdd(gpu_id)?;
    let bo_id = pdd.free_id().ok_or(Errno::FAULT)?;
    let domain_flag = match domain {
        Domain::Vram => AllocMemFlags::VRAM,
        Domain::Gtt => AllocMemFlags::GTT,
    };
    pdd.bos.insert(
        bo_id,
        Bo {
            va,
            size,
            flags: domain_flag | AllocMemFlags::WRITABLE | AllocMemFlags::EXECUTABLE,
            backing,
            mapped: BTreeSet::new(),
            imported: true,
            aql: false,
            dmabuf: None,
        },
    );
    if let Some(b) = st.backings.get_mut(&backing) {
        b.refs += 1;
    }
    Ok((make_handle(gpu_id, bo_id), offset))
}
