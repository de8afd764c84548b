//! amdgpu's GEM and PRIME ioctls on a render node, as libdrm's `amdgpu_bo_*` and
//! `drmPrime*` issue them: GEM_CREATE, GEM_CLOSE, GEM_MMAP, GEM_METADATA, GEM_WAIT_IDLE,
//! GEM_VA, GEM_OP, PRIME_HANDLE_TO_FD / FD_TO_HANDLE (`amdgpu_gem.c`, `drm_gem.c`,
//! `drm_prime.c`), with the kernel's checks and errnos in its order; command submission on
//! these objects is [`cs_ioctls`](super::cs_ioctls).
//!
//! One object model with KFD's: a GEM object is a [`Backing`] like a KFD BO's (its own sealed
//! memfd, a DRM vma offset on its GPU, a reference per handle), so GEM_MMAP's offset maps
//! the same bytes through the render node, PRIME_HANDLE_TO_FD gives the same dma-buf KFD's
//! EXPORT_DMABUF gives (one per object), which KFD's GET_DMABUF_INFO (with the metadata
//! GEM_METADATA set) and IMPORT_DMABUF take, and FD_TO_HANDLE takes KFD's dma-bufs back. A
//! VRAM object is placed by [`evict`]: GEM_CREATE (and a CS's validation) may evict other
//! processes' KFD BOs, whose processes are evicted and restored as the kernel does.
//!
//! Where it differs: no GDS, GWS, OA or doorbell heaps (GEM_CREATE in those domains is
//! `EINVAL`), no GEM_USERPTR; a size of 0 is `EINVAL`; TMZ is off (as on every preset's
//! GPU). The model sees no `close`: a DRM file's handles, contexts and lists go when the
//! process that opened it exits (the kernel's at the file's last `fput`), so objects a
//! program leaves behind on a file it closed hold their memory until then. A file that is a
//! KFD VM (ACQUIRE_VM) has one VM: its GEM_VA mappings sit next to KFD's there (each
//! refuses to overlap the other, and KFD's queues reach them), but a GEM_VA CLEAR or
//! REPLACE cuts only GEM mappings (the kernel's cut any). The GTT heap is `max_ttm_mem_limit` big, and GEM objects are not
//! charged to KFD's limits (the kernel's are not either: `amdgpu_amdkfd_reserve_mem_limit`
//! counts KFD's BOs alone).
//!
//! [`Backing`]: super::objects::Backing

use std::sync::Arc;

use rustix::io::Errno;

use super::chardev::{Ctx, set_u32, set_u64, u32_at, u64_at};
use super::driver::Driver;
use super::evict;
use super::files::{self, FileKey};
use super::memory::{Charge, PAGE_SIZE, align_up};
use super::memory_ioctls::{dmabuf_of, dmabuf_of_backing, install_dmabuf};
use super::objects::{Backing, Domain, DrmFile, Gem, GemVa, Placed, Store};
use super::process::State;
use crate::backend::Caller;

/// `AMDGPU_GEM_DOMAIN_*`.
pub(super) const DOMAIN_CPU: u32 = 0x1;
pub(super) const DOMAIN_GTT: u32 = 0x2;
pub(super) const DOMAIN_VRAM: u32 = 0x4;
const DOMAIN_GDS: u32 = 0x8;
const DOMAIN_GWS: u32 = 0x10;
const DOMAIN_OA: u32 = 0x20;
const DOMAIN_DOORBELL: u32 = 0x40;
/// `AMDGPU_GEM_DOMAIN_MASK`.
const DOMAIN_MASK: u64 = 0x7F;

/// `AMDGPU_GEM_CREATE_*`.
const CREATE_CPU_ACCESS_REQUIRED: u64 = 1 << 0;
const CREATE_NO_CPU_ACCESS: u64 = 1 << 1;
const CREATE_VRAM_CLEARED: u64 = 1 << 3;
const CREATE_VM_ALWAYS_VALID: u64 = 1 << 6;
const CREATE_VRAM_WIPE_ON_RELEASE: u64 = 1 << 9;
const CREATE_ENCRYPTED: u64 = 1 << 10;
/// `AMDGPU_GEM_CREATE_SETTABLE_MASK` (`amdgpu_gem.h`): CPU_ACCESS_REQUIRED, NO_CPU_ACCESS,
/// CPU_GTT_USWC, VRAM_CLEARED, VM_ALWAYS_VALID, EXPLICIT_SYNC, VRAM_WIPE_ON_RELEASE,
/// ENCRYPTED, DISCARDABLE, COHERENT, UNCACHED, EXT_COHERENT, GFX12_DCC.
const CREATE_SETTABLE: u64 = (1 << 0)
    | (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 6)
    | (1 << 7)
    | (1 << 9)
    | (1 << 10)
    | (1 << 12)
    | (1 << 13)
    | (1 << 14)
    | (1 << 15)
    | (1 << 16);

/// `AMDGPU_GEM_METADATA_OP_*`.
const METADATA_OP_SET: u32 = 1;
const METADATA_OP_GET: u32 = 2;
/// `sizeof(drm_amdgpu_gem_metadata.data.data)`: 64 dwords.
const METADATA_MAX: usize = 256;

/// `AMDGPU_VA_OP_*`.
const VA_OP_MAP: u32 = 1;
const VA_OP_UNMAP: u32 = 2;
const VA_OP_CLEAR: u32 = 3;
const VA_OP_REPLACE: u32 = 4;
/// `AMDGPU_VM_*` page flags GEM_VA accepts (`amdgpu_gem_va_ioctl`'s `valid_flags`):
/// DELAY_UPDATE, READABLE, WRITEABLE, EXECUTABLE, MTYPE_MASK, NOALLOC.
const VA_VALID_FLAGS: u32 = 0x1 | 0x2 | 0x4 | 0x8 | (0xF << 5) | (1 << 9);
/// `AMDGPU_VM_DELAY_UPDATE | AMDGPU_VM_PAGE_PRT`.
const VA_PRT_FLAGS: u32 = 0x1 | 0x10;
const VA_PAGE_PRT: u32 = 0x10;
/// `AMDGPU_VA_RESERVED_BOTTOM`.
const VA_RESERVED_BOTTOM: u64 = 1 << 16;
/// `AMDGPU_GMC_HOLE_START` / `_END` / `_MASK`.
const GMC_HOLE_START: u64 = 0x0000_8000_0000_0000;
const GMC_HOLE_END: u64 = 0xFFFF_8000_0000_0000;
const GMC_HOLE_MASK: u64 = 0x0000_FFFF_FFFF_FFFF;
/// The VM size less `AMDGPU_VA_RESERVED_TOP` (48-bit VMs; what DEV_INFO reports).
const VM_SIZE: u64 = (1 << 48) - (1 << 21);

/// `AMDGPU_GEM_OP_*`.
const GEM_OP_GET_CREATE_INFO: u32 = 0;
const GEM_OP_SET_PLACEMENT: u32 = 1;

/// `DRM_CLOEXEC | DRM_RDWR`, what PRIME_HANDLE_TO_FD's flags may hold.
const PRIME_FLAGS: u32 = (libc::O_CLOEXEC | libc::O_RDWR) as u32;

/// The GEM side of DRM file `key` of GPU `gpu`, made on first use.
pub(super) fn file_of(st: &mut State, key: FileKey, gpu: usize) -> &mut DrmFile {
    st.drm_files.entry(key).or_insert_with(|| DrmFile::new(gpu))
}

/// The backing of handle `handle` of DRM file `key` (`drm_gem_object_lookup`: `ENOENT`).
pub(super) fn lookup(st: &State, key: FileKey, handle: u32) -> Result<u64, Errno> {
    st.drm_files
        .get(&key)
        .and_then(|f| f.handles.get(&handle).copied())
        .ok_or(Errno::NOENT)
}

/// A new handle of DRM file `key` on `backing`, taking a reference (`drm_gem_handle_create`);
/// its vma node is on the file's GPU.
fn new_handle(st: &mut State, key: FileKey, gpu: usize, backing: u64) -> Result<u32, Errno> {
    st.vma_offset(backing, gpu)?;
    let file = file_of(st, key, gpu);
    let handle = DrmFile::free_id(&file.handles).ok_or(Errno::NOSPC)?;
    file.handles.insert(handle, backing);
    if let Some(b) = st.backings.get_mut(&backing) {
        b.refs += 1;
    }
    Ok(handle)
}

/// Drops handle `handle` of DRM file `key` (`drm_gem_handle_delete` → `amdgpu_gem_object_close`:
/// the object's mappings in the file's VM go with it).
fn drop_handle(st: &mut State, key: FileKey, handle: u32) -> Result<(), Errno> {
    let file = st.drm_files.get_mut(&key).ok_or(Errno::INVAL)?;
    let backing = file.handles.remove(&handle).ok_or(Errno::INVAL)?;
    let gpu = file.gpu;
    if file.handle_of(backing).is_none() {
        file.va.retain(|_, m| m.backing != backing);
        st.mirror_gem_va(key);
    }
    st.put_backing(backing);
    st.handle_dropped(backing, gpu);
    Ok(())
}

/// Whether `[va, end)` overlaps a KFD mapping of the VM DRM file `key` is (if it is one).
fn kfd_overlap(st: &State, key: FileKey, va: u64, end: u64) -> bool {
    st.procs.values().any(|p| {
        p.pdds.iter().any(|pdd| {
            pdd.drm_key == Some(key)
                && pdd
                    .vm
                    .iter()
                    .any(|(s, m)| !m.is_gem() && s < end && va < m.end)
        })
    })
}

/// Releases what the DRM files `keys` held (their handles, mappings, contexts and lists):
/// the last `fput` of each, at its process's exit.
pub(super) fn release_drm_files(st: &mut State, keys: &[FileKey]) {
    for key in keys {
        let handles: Vec<u32> = st
            .drm_files
            .get(key)
            .map(|f| f.handles.keys().copied().collect())
            .unwrap_or_default();
        for h in handles {
            let _ = drop_handle(st, *key, h);
        }
        st.drm_files.remove(key);
    }
}

/// DRM_IOCTL_AMDGPU_GEM_CREATE (`amdgpu_gem_create_ioctl`): `bo_size`, `alignment`,
/// `domains`, `domain_flags` in; the handle out.
pub(super) fn gem_create(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (size, alignment, domains, mut flags) = (
        u64_at(buf, 0),
        u64_at(buf, 8),
        u64_at(buf, 16),
        u64_at(buf, 24),
    );
    if flags & !CREATE_SETTABLE != 0 || domains & !DOMAIN_MASK != 0 {
        return Err(Errno::INVAL);
    }
    // amdgpu_is_tmz: TMZ is off on every preset's GPU.
    if flags & CREATE_ENCRYPTED != 0 {
        return Err(Errno::INVAL);
    }
    flags |= CREATE_VRAM_CLEARED;
    let special = u64::from(DOMAIN_GDS | DOMAIN_GWS | DOMAIN_OA);
    if domains & special != 0 && flags & CREATE_VM_ALWAYS_VALID != 0 {
        return Err(Errno::INVAL);
    }
    // Where it differs: the model has no GDS/GWS/OA/doorbell heaps, and takes no empty object.
    if domains & (special | u64::from(DOMAIN_DOORBELL)) != 0 || size == 0 {
        return Err(Errno::INVAL);
    }
    let size = align_up(size, PAGE_SIZE).ok_or(Errno::NOMEM)?;
    flags |= CREATE_VRAM_WIPE_ON_RELEASE;
    let mut initial = domains as u32;
    let mut evicted = Vec::new();
    let r = (|| {
        let mut guard = m.lock();
        let st = &mut *guard;
        let tgid = caller.id().tgid;
        // amdgpu_bo_create: amdgpu_bo_validate_size (the GTT heap when GTT is asked, else
        // VRAM's), then TTM's placement: VRAM first, evicting only when it is the one
        // placement, else GTT. Then the ioctl's retries: without CPU_ACCESS_REQUIRED (no
        // difference here: the BAR is not modelled), then with GTT added to VRAM alone.
        let in_vram = loop {
            let placed = if initial & DOMAIN_GTT != 0 && size >= m.dev.limits.ttm {
                Err(Errno::NOMEM)
            } else if initial & DOMAIN_VRAM != 0 {
                let only = initial & DOMAIN_GTT == 0;
                match evict::make_room(&m.dev, st, gpu, size, Some(tgid), None, only) {
                    Ok(more) => {
                        evicted.extend(more);
                        Ok(true)
                    }
                    Err(_) if !only => Ok(false),
                    Err(e) => Err(e),
                }
            } else {
                Ok(false)
            };
            match placed {
                Ok(v) => break v,
                Err(_) if flags & CREATE_CPU_ACCESS_REQUIRED != 0 => {
                    flags &= !CREATE_CPU_ACCESS_REQUIRED;
                }
                Err(_) if initial == DOMAIN_VRAM => initial |= DOMAIN_GTT,
                Err(e) => return Err(e),
            }
        };
        let fd = files::memfd(files::BO_MEMFD_NAME, size).map_err(|_| Errno::NOMEM)?;
        let domain = if initial & DOMAIN_VRAM != 0 {
            Domain::Vram
        } else {
            Domain::Gtt
        };
        let backing = st.add_backing(Backing {
            refs: 0,
            store: Store::Memfd(Arc::new(fd)),
            size,
            gpu,
            domain,
            cpu_access: flags & CREATE_CPU_ACCESS_REQUIRED != 0,
            charge: Charge {
                system: 0,
                ttm: 0,
                vram: 0,
            },
            offsets: Vec::new(),
            gem: Gem {
                domains: initial,
                flags,
                alignment,
                ..Gem::default()
            },
            placed: Placed {
                evicted: domain == Domain::Vram && !in_vram,
                lru: 0,
            },
        });
        evict::touch(st, backing);
        match new_handle(st, key, gpu, backing) {
            Ok(handle) => {
                buf[..32].fill(0);
                set_u32(buf, 0, handle);
                Ok(())
            }
            Err(e) => {
                // No handle took a reference: the object goes.
                if let Some(b) = st.backings.get_mut(&backing) {
                    b.refs = 1;
                }
                st.put_backing(backing);
                Err(e)
            }
        }
    })();
    evict::schedule_restore(m, evicted);
    r
}

/// DRM_IOCTL_GEM_CLOSE (`drm_gem_close_ioctl`): `EINVAL` for a handle the file lacks.
pub(super) fn gem_close(m: &Driver, key: FileKey, buf: &mut [u8]) -> Result<(), Errno> {
    drop_handle(&mut m.lock(), key, u32_at(buf, 0))
}

/// DRM_IOCTL_AMDGPU_GEM_MMAP (`amdgpu_mode_dumb_mmap`): the object's vma offset, which the
/// render node's mmap maps (`mmap`).
pub(super) fn gem_mmap(m: &Driver, key: FileKey, gpu: usize, buf: &mut [u8]) -> Result<(), Errno> {
    let handle = u32_at(buf, 0);
    buf[..8].fill(0);
    let mut st = m.lock();
    let backing = lookup(&st, key, handle)?;
    let b = st.backings.get(&backing).ok_or(Errno::NOENT)?;
    if matches!(b.store, Store::UserPtr { .. }) || b.gem.flags & CREATE_NO_CPU_ACCESS != 0 {
        return Err(Errno::PERM);
    }
    let offset = st.vma_offset(backing, gpu)?;
    set_u64(buf, 0, offset);
    Ok(())
}

/// DRM_IOCTL_AMDGPU_GEM_METADATA (`amdgpu_gem_metadata_ioctl`): SET keeps tiling flags and
/// up to 256 bytes of UMD metadata (KFD's GET_DMABUF_INFO reports them), GET gives them
/// back; any other op is `amdgpu_gem_metadata_ioctl`'s `r = -1` (`EPERM`).
pub(super) fn gem_metadata(m: &Driver, key: FileKey, buf: &mut [u8]) -> Result<(), Errno> {
    let (handle, op) = (u32_at(buf, 0), u32_at(buf, 4));
    let mut st = m.lock();
    let backing = lookup(&st, key, handle)?;
    let b = st.backings.get_mut(&backing).ok_or(Errno::NOENT)?;
    match op {
        METADATA_OP_GET => {
            set_u64(buf, 16, b.gem.tiling);
            let data = &b.gem.metadata;
            if let Some(dst) = buf.get_mut(28..28 + data.len()) {
                dst.copy_from_slice(data);
            }
            set_u32(buf, 24, data.len() as u32);
            set_u64(buf, 8, b.gem.metadata_flags);
            Ok(())
        }
        METADATA_OP_SET => {
            let len = u32_at(buf, 24) as usize;
            if len > METADATA_MAX {
                return Err(Errno::INVAL);
            }
            b.gem.tiling = u64_at(buf, 16);
            // amdgpu_bo_set_metadata: a size of 0 drops the metadata (flags unchanged).
            if len == 0 {
                b.gem.metadata.clear();
            } else {
                b.gem.metadata = buf.get(28..28 + len).ok_or(Errno::INVAL)?.to_vec();
                b.gem.metadata_flags = u64_at(buf, 8);
            }
            Ok(())
        }
        _ => Err(Errno::PERM),
    }
}

/// DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE: every object is idle (a CS completes before it returns).
pub(super) fn gem_wait_idle(m: &Driver, key: FileKey, buf: &mut [u8]) -> Result<(), Errno> {
    lookup(&m.lock(), key, u32_at(buf, 0))?;
    buf[..16].fill(0);
    Ok(())
}

/// DRM_IOCTL_AMDGPU_GEM_VA (`amdgpu_gem_va_ioctl`, `amdgpu_vm_bo_map`/`_unmap`/
/// `_clear_mappings`/`_replace_map`): mappings of the file's VM, with the kernel's checks.
pub(super) fn gem_va(m: &Driver, key: FileKey, gpu: usize, buf: &mut [u8]) -> Result<(), Errno> {
    let (handle, op, flags) = (u32_at(buf, 0), u32_at(buf, 8), u32_at(buf, 12));
    let (va, offset, size) = (u64_at(buf, 16), u64_at(buf, 24), u64_at(buf, 32));
    if va < VA_RESERVED_BOTTOM || (GMC_HOLE_START..GMC_HOLE_END).contains(&va) {
        return Err(Errno::INVAL);
    }
    let va = va & GMC_HOLE_MASK;
    if va.checked_add(size).is_none_or(|end| end > VM_SIZE) {
        return Err(Errno::INVAL);
    }
    if flags & !VA_VALID_FLAGS != 0 && flags & !VA_PRT_FLAGS != 0 {
        return Err(Errno::INVAL);
    }
    if !matches!(op, VA_OP_MAP | VA_OP_UNMAP | VA_OP_CLEAR | VA_OP_REPLACE) {
        return Err(Errno::INVAL);
    }
    let mut guard = m.lock();
    let st = &mut *guard;
    let backing = if op != VA_OP_CLEAR && flags & VA_PAGE_PRT == 0 {
        Some(lookup(st, key, handle)?)
    } else {
        None
    };
    let bo_size = backing.and_then(|id| st.backings.get(&id)).map(|b| b.size);
    let r = va_op(
        st,
        key,
        gpu,
        (op, flags, va, offset, size),
        backing,
        bo_size,
    );
    if r.is_ok() {
        st.mirror_gem_va(key);
    }
    r
}

/// GEM_VA's operation `op` on the file's VM (see [`gem_va`]).
fn va_op(
    st: &mut State,
    key: FileKey,
    gpu: usize,
    (op, flags, va, offset, size): (u32, u32, u64, u64, u64),
    backing: Option<u64>,
    bo_size: Option<u64>,
) -> Result<(), Errno> {
    // The KFD mappings of the same VM (the file is a KFD VM) overlap as any other.
    let kfd_taken = match (va.checked_add(size), op) {
        (Some(end), VA_OP_MAP) => kfd_overlap(st, key, va, end),
        _ => false,
    };
    let file = file_of(st, key, gpu);
    // amdgpu_vm_verify_parameters.
    let verify = |bo: Option<u64>| -> Result<u64, Errno> {
        let page = PAGE_SIZE - 1;
        if va & page != 0 || offset & page != 0 || size & page != 0 || size == 0 {
            return Err(Errno::INVAL);
        }
        let end = va.checked_add(size).ok_or(Errno::INVAL)?;
        let bo_end = offset.checked_add(size).ok_or(Errno::INVAL)?;
        if bo.is_some_and(|s| bo_end > s) {
            return Err(Errno::INVAL);
        }
        Ok(end)
    };
    match op {
        VA_OP_MAP | VA_OP_REPLACE => {
            let Some(id) = backing else {
                // A PRT mapping (no object): not modelled.
                return Err(Errno::INVAL);
            };
            let end = verify(bo_size)?;
            if op == VA_OP_REPLACE {
                clear_range(file, va, end);
            } else if kfd_taken
                || file
                    .va
                    .range(..end)
                    .next_back()
                    .is_some_and(|(_, m)| m.end > va)
            {
                return Err(Errno::INVAL);
            }
            file.va.insert(
                va,
                GemVa {
                    end,
                    backing: id,
                    offset,
                    flags,
                },
            );
            Ok(())
        }
        VA_OP_UNMAP => {
            let id = backing.ok_or(Errno::INVAL)?;
            match file.va.get(&va) {
                Some(m) if m.backing == id => {
                    file.va.remove(&va);
                    Ok(())
                }
                _ => Err(Errno::NOENT),
            }
        }
        _ => {
            let end = verify(None)?;
            clear_range(file, va, end);
            Ok(())
        }
    }
}

/// `amdgpu_vm_bo_clear_mappings`: removes `[va, end)` from the file's VM, cutting the
/// mappings that straddle it.
fn clear_range(file: &mut DrmFile, va: u64, end: u64) {
    let hit: Vec<(u64, GemVa)> = file
        .va
        .range(..end)
        .filter(|(_, m)| m.end > va)
        .map(|(&s, &m)| (s, m))
        .collect();
    for (start, m) in hit {
        file.va.remove(&start);
        if start < va {
            file.va.insert(start, GemVa { end: va, ..m });
        }
        if m.end > end {
            let offset = m.offset + (end - start);
            file.va.insert(end, GemVa { offset, ..m });
        }
    }
}

/// DRM_IOCTL_AMDGPU_GEM_OP (`amdgpu_gem_op_ioctl`): GET_GEM_CREATE_INFO copies the object's
/// `drm_amdgpu_gem_create_in` to `value`; SET_PLACEMENT changes its preferred domains
/// (where it differs: the object does not move until something validates it).
pub(super) fn gem_op(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (handle, op, value) = (u32_at(buf, 0), u32_at(buf, 4), u64_at(buf, 8));
    let mut st = m.lock();
    let backing = lookup(&st, key, handle)?;
    let b = st.backings.get_mut(&backing).ok_or(Errno::NOENT)?;
    let preferred = if b.gem.domains != 0 {
        b.gem.domains
    } else if b.domain == Domain::Vram {
        DOMAIN_VRAM
    } else {
        DOMAIN_GTT
    };
    match op {
        GEM_OP_GET_CREATE_INFO => {
            let mut info = [0u8; 32];
            set_u64(&mut info, 0, b.size);
            set_u64(
                &mut info,
                8,
                align_up(b.gem.alignment, PAGE_SIZE).unwrap_or(0),
            );
            set_u64(&mut info, 16, u64::from(preferred));
            set_u64(&mut info, 24, b.gem.flags);
            // Caller memory is written without the model's lock.
            drop(st);
            caller.write(value, &info).map_err(|_| Errno::FAULT)
        }
        GEM_OP_SET_PLACEMENT => {
            // drm_gem_is_imported: an object of another device's dma-buf.
            let imported = b.gpu != gpu;
            if imported && value & u64::from(DOMAIN_VRAM) != 0 {
                return Err(Errno::INVAL);
            }
            if matches!(b.store, Store::UserPtr { .. }) {
                return Err(Errno::PERM);
            }
            b.gem.domains = (value as u32) & (DOMAIN_VRAM | DOMAIN_GTT | DOMAIN_CPU);
            Ok(())
        }
        _ => Err(Errno::INVAL),
    }
}

/// DRM_IOCTL_PRIME_HANDLE_TO_FD (`drm_prime_handle_to_fd_ioctl`, `amdgpu_gem_prime_export`):
/// the object's one dma-buf, a new fd of it in the caller.
pub(super) fn prime_handle_to_fd(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (handle, flags) = (u32_at(buf, 0), u32_at(buf, 4));
    if flags & !PRIME_FLAGS != 0 {
        return Err(Errno::INVAL);
    }
    let mut guard = m.lock();
    let st = &mut *guard;
    let backing = lookup(st, key, handle)?;
    let b = st.backings.get(&backing).ok_or(Errno::NOENT)?;
    if matches!(b.store, Store::UserPtr { .. }) || b.gem.flags & CREATE_VM_ALWAYS_VALID != 0 {
        return Err(Errno::PERM);
    }
    let id = dmabuf_of_backing(m, st, backing)?;
    let ctx = Ctx {
        m,
        caller,
        tgid: caller.id().tgid,
        serial: 0,
    };
    let fd = install_dmabuf(&ctx, st, id, flags & libc::O_CLOEXEC as u32 != 0)?;
    set_u32(buf, 8, fd as u32);
    Ok(())
}

/// DRM_IOCTL_PRIME_FD_TO_HANDLE (`drm_gem_prime_fd_to_handle`): the file's handle on the
/// dma-buf's object (the one it has, else a new one; a dma-buf of another GPU becomes an
/// object of this one on the same memory).
pub(super) fn prime_fd_to_handle(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let ctx = Ctx {
        m,
        caller,
        tgid: caller.id().tgid,
        serial: 0,
    };
    let id = dmabuf_of(&ctx, u32_at(buf, 8))?;
    let mut guard = m.lock();
    let st = &mut *guard;
    let backing = st.dmabufs.get(&id).ok_or(Errno::INVAL)?.backing;
    let existing = st.drm_files.get(&key).and_then(|f| f.handle_of(backing));
    let handle = match existing {
        Some(h) => h,
        None => new_handle(st, key, gpu, backing)?,
    };
    set_u32(buf, 0, handle);
    Ok(())
}
