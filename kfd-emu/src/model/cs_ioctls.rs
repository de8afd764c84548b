//! amdgpu's command-submission ioctls on a render node, as libdrm's `amdgpu_cs_*` and
//! `amdgpu_bo_list_*` issue them: CTX, BO_LIST, CS and WAIT_CS (`amdgpu_ctx.c`,
//! `amdgpu_bo_list.c`, `amdgpu_cs.c`), with the kernel's checks and errnos in its order, on
//! the GEM objects of [`gem_ioctls`](super::gem_ioctls). A CS validates its BO list where
//! each object prefers to be, which may evict other processes' KFD BOs ([`evict`]).
//!
//! Where it differs: a CS runs at once and its fence is signalled when it returns; the
//! graphics rings run only NOP packets (SDMA `NOP`, PM4 type-3 `NOP` and type-2 filler), an
//! IB with any other packet is refused with `EOPNOTSUPP` (the emulator lacks it) rather
//! than skipped; no syncobjs, user fences or gang submissions; only GFX (on GPUs with a
//! graphics ring), compute and SDMA rings exist; the move budget
//! (`amdgpu_cs_get_threshold_for_moves`) is unlimited.

use rustix::io::Errno;

use super::chardev::{KMALLOC_MAX, set_u32, set_u64, u32_at, u64_at};
use super::driver::Driver;
use super::evict;
use super::files::FileKey;
use super::gem_ioctls::{DOMAIN_GTT, DOMAIN_VRAM, file_of, lookup};
use super::objects::{CsCtx, Domain, DrmFile};
use crate::backend::Caller;

/// `AMDGPU_CTX_OP_*`.
const CTX_OP_ALLOC: u32 = 1;
const CTX_OP_FREE: u32 = 2;
const CTX_OP_QUERY_STATE: u32 = 3;
const CTX_OP_QUERY_STATE2: u32 = 4;
/// `AMDGPU_CTX_PRIORITY_*` a context may have: VERY_LOW, LOW, NORMAL, HIGH, VERY_HIGH
/// (`amdgpu_ctx_priority_is_valid`; UNSET is not).
const CTX_PRIORITIES: [i32; 5] = [-1023, -512, 0, 512, 1023];
const CTX_PRIORITY_NORMAL: i32 = 0;

/// `AMDGPU_BO_LIST_OP_*`.
const BO_LIST_CREATE: u32 = 0;
const BO_LIST_DESTROY: u32 = 1;
const BO_LIST_UPDATE: u32 = 2;
/// `sizeof(struct drm_amdgpu_bo_list_entry)`.
const BO_LIST_ENTRY: usize = 8;

/// `AMDGPU_CHUNK_ID_*`.
const CHUNK_IB: u32 = 1;
const CHUNK_FENCE: u32 = 2;
const CHUNK_BO_HANDLES: u32 = 6;
/// The chunk ids `amdgpu_cs_pass1` accepts without work here (dependencies, syncobjs,
/// scheduled dependencies, timelines, the CP's shadow).
const CHUNKS_PASSED: &[u32] = &[3, 4, 5, 7, 8, 9, 10];
/// `sizeof(struct drm_amdgpu_cs_chunk_ib)`.
const CHUNK_IB_SIZE: usize = 32;
/// `AMDGPU_HW_IP_*` and `amdgpu_ctx_num_entities`, the rings per IP a context may name.
const HW_IP_GFX: u32 = 0;
const HW_IP_COMPUTE: u32 = 1;
const HW_IP_DMA: u32 = 2;
const HW_IP_ENTITIES: [u32; 10] = [1, 4, 2, 1, 1, 1, 1, 1, 1, 1];

/// Whether process `tgid` has `CAP_SYS_NICE` in effect (`/proc/<pid>/status` `CapEff`).
fn has_sys_nice(tgid: i32) -> bool {
    const CAP_SYS_NICE: u32 = 23;
    std::fs::read_to_string(format!("/proc/{tgid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

/// DRM_IOCTL_AMDGPU_CTX (`amdgpu_ctx_ioctl`): ALLOC (a priority that is none of the five
/// counts as NORMAL; above NORMAL needs `CAP_SYS_NICE`, else `EACCES`), FREE, QUERY_STATE(2) (no reset, no
/// hang, nothing lost).
pub(super) fn ctx(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (op, id) = (u32_at(buf, 0), u32_at(buf, 8));
    // "For backwards compatibility [...] garbage values in the priority field result in the
    // priority being set to NORMAL."
    let mut priority = u32_at(buf, 12) as i32;
    if !CTX_PRIORITIES.contains(&priority) {
        priority = CTX_PRIORITY_NORMAL;
    }
    // amdgpu_ctx_priority_permit, asked before the model's lock is taken.
    let permitted = priority <= CTX_PRIORITY_NORMAL || has_sys_nice(caller.id().tgid);
    let mut st = m.lock();
    let file = file_of(&mut st, key, gpu);
    match op {
        CTX_OP_ALLOC => {
            if !permitted {
                return Err(Errno::ACCESS);
            }
            let id = DrmFile::free_id(&file.ctxs).ok_or(Errno::NOMEM)?;
            file.ctxs.insert(id, CsCtx::default());
            set_u32(buf, 0, id);
            Ok(())
        }
        CTX_OP_FREE => file.ctxs.remove(&id).map(|_| ()).ok_or(Errno::INVAL),
        CTX_OP_QUERY_STATE | CTX_OP_QUERY_STATE2 => {
            if !file.ctxs.contains_key(&id) {
                return Err(Errno::INVAL);
            }
            buf[..16].fill(0);
            Ok(())
        }
        _ => Err(Errno::INVAL),
    }
}

/// `amdgpu_bo_create_list_entry_array`: the handles of a list's entries (each entry
/// `bo_info_size` bytes, of which the first 8 are read). Where it differs: over 4 MiB of
/// entries is `ENOMEM`.
fn read_list(caller: &dyn Caller, buf: &[u8]) -> Result<Vec<u32>, Errno> {
    let (number, info_size, ptr) = (
        u32_at(buf, 8) as usize,
        u32_at(buf, 12) as usize,
        u64_at(buf, 16),
    );
    let bytes = number.checked_mul(info_size.max(1)).ok_or(Errno::NOMEM)?;
    if bytes as u64 > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let mut raw = vec![0u8; number * info_size];
    caller.read(ptr, &mut raw).map_err(|_| Errno::FAULT)?;
    let mut handles = Vec::with_capacity(number);
    for i in 0..number {
        let mut entry = [0u8; BO_LIST_ENTRY];
        let n = info_size.min(BO_LIST_ENTRY);
        entry[..n].copy_from_slice(&raw[i * info_size..i * info_size + n]);
        handles.push(u32_at(&entry, 0));
    }
    Ok(handles)
}

/// DRM_IOCTL_AMDGPU_BO_LIST (`amdgpu_bo_list_ioctl`): CREATE, DESTROY (of any id: 0),
/// UPDATE (`ENOENT` for a list the file lacks).
pub(super) fn bo_list(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (op, handle) = (u32_at(buf, 0), u32_at(buf, 4));
    // Caller memory is read before the model's lock is taken.
    let list = read_list(caller, buf)?;
    let mut st = m.lock();
    // amdgpu_bo_list_create: every handle of a new list must be the file's (`ENOENT`).
    if matches!(op, BO_LIST_CREATE | BO_LIST_UPDATE) {
        for &h in &list {
            lookup(&st, key, h)?;
        }
    }
    let file = file_of(&mut st, key, gpu);
    let out = match op {
        BO_LIST_CREATE => {
            let id = DrmFile::free_id(&file.bo_lists).ok_or(Errno::NOMEM)?;
            file.bo_lists.insert(id, list);
            id
        }
        BO_LIST_DESTROY => {
            file.bo_lists.remove(&handle);
            0
        }
        BO_LIST_UPDATE => {
            let slot = file.bo_lists.get_mut(&handle).ok_or(Errno::NOENT)?;
            *slot = list;
            handle
        }
        _ => return Err(Errno::INVAL),
    };
    buf[..24].fill(0);
    set_u32(buf, 0, out);
    Ok(())
}

/// `amdgpu_ctx_get_entity`'s checks of an (IP, instance, ring) a context names. Where it
/// differs: only GFX (on GPUs with a graphics ring), compute and SDMA rings exist.
fn entity(m: &Driver, gpu: usize, ip: u32, instance: u32, ring: u32) -> Result<(), Errno> {
    let entities = *HW_IP_ENTITIES.get(ip as usize).ok_or(Errno::INVAL)?;
    if instance != 0 || ring >= entities {
        return Err(Errno::INVAL);
    }
    // The CDNA parts (gfx908, gfx90a, gfx94x) have no graphics ring.
    let g = &m.dev.cfg.machine.gpus()[gpu];
    let t = &g.target;
    let cdna = (t.major, t.minor) == (9, 4)
        || (t.major, t.minor) == (9, 0) && matches!(t.stepping, 8 | 10);
    match ip {
        HW_IP_GFX if !cdna => Ok(()),
        HW_IP_COMPUTE | HW_IP_DMA => Ok(()),
        _ => Err(Errno::INVAL),
    }
}

/// Runs an IB of `ip` (what the ring would): only NOPs (see the module docs).
fn run_ib(ip: u32, ib: &[u8]) -> Result<(), Errno> {
    let dwords: Vec<u32> = ib
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut at = 0usize;
    while at < dwords.len() {
        let h = dwords[at];
        at += match ip {
            // SDMA_OP_NOP: the count field (bits 16..29) is the dwords that follow.
            HW_IP_DMA if h & 0xFF == 0 => 1 + ((h >> 16) & 0x3FFF) as usize,
            // PM4 type-2 filler; type-3 PACKET3_NOP (opcode 0x10): count + 2 dwords.
            _ if ip != HW_IP_DMA && h >> 30 == 2 => 1,
            _ if ip != HW_IP_DMA && h >> 30 == 3 && (h >> 8) & 0xFF == 0x10 => {
                2 + ((h >> 16) & 0x3FFF) as usize
            }
            _ => {
                crate::own::elog!(
                    "kfd-emu: a CS on the render node holds packet {h:#010x} on IP {ip}: only \
                     NOP packets run there (EOPNOTSUPP)"
                );
                return Err(Errno::OPNOTSUPP);
            }
        };
    }
    Ok(())
}

/// DRM_IOCTL_AMDGPU_CS (`amdgpu_cs_ioctl`): the context, the chunks (`amdgpu_cs_pass1`), the
/// BO list (`amdgpu_cs_parser_bos`: each object validated where it prefers, which may evict,
/// and moved to the LRU's tail), the IB's mapping (`amdgpu_cs_p2_ib`), then the IB runs and
/// its sequence number is returned, its fence signalled.
pub(super) fn cs(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
) -> Result<(), Errno> {
    let mut evicted = Vec::new();
    let r = cs_inner(m, caller, key, gpu, buf, &mut evicted);
    evict::schedule_restore(m, evicted);
    r
}

fn cs_inner(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    buf: &mut [u8],
    evicted: &mut Vec<i32>,
) -> Result<(), Errno> {
    let (ctx_id, list_handle, nchunks, chunks) = (
        u32_at(buf, 0),
        u32_at(buf, 4),
        u32_at(buf, 8) as usize,
        u64_at(buf, 16),
    );
    {
        let st = m.lock();
        let known = st
            .drm_files
            .get(&key)
            .is_some_and(|f| f.ctxs.contains_key(&ctx_id));
        if !known {
            return Err(Errno::INVAL);
        }
    }
    if nchunks as u64 * 8 > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let mut ptrs = vec![0u8; nchunks * 8];
    caller.read(chunks, &mut ptrs).map_err(|_| Errno::FAULT)?;
    let mut ibs: Vec<[u8; CHUNK_IB_SIZE]> = Vec::new();
    let mut bo_handles_chunk = false;
    for p in ptrs.chunks_exact(8) {
        let ptr = u64_at(p, 0);
        let mut chunk = [0u8; 16];
        caller.read(ptr, &mut chunk).map_err(|_| Errno::FAULT)?;
        let (id, len_dw, data) = (
            u32_at(&chunk, 0),
            u32_at(&chunk, 4) as usize,
            u64_at(&chunk, 8),
        );
        let size = len_dw.checked_mul(4).ok_or(Errno::NOMEM)?;
        if size as u64 > KMALLOC_MAX {
            return Err(Errno::NOMEM);
        }
        let mut kdata = vec![0u8; size];
        caller.read(data, &mut kdata).map_err(|_| Errno::FAULT)?;
        match id {
            CHUNK_IB => {
                if size < CHUNK_IB_SIZE {
                    return Err(Errno::INVAL);
                }
                let mut ib = [0u8; CHUNK_IB_SIZE];
                ib.copy_from_slice(&kdata[..CHUNK_IB_SIZE]);
                entity(m, gpu, u32_at(&ib, 20), u32_at(&ib, 24), u32_at(&ib, 28))?;
                ibs.push(ib);
            }
            CHUNK_BO_HANDLES => bo_handles_chunk = true,
            // A user fence needs an object to write to: not modelled.
            CHUNK_FENCE => return Err(Errno::INVAL),
            id if CHUNKS_PASSED.contains(&id) => {}
            _ => return Err(Errno::INVAL),
        }
    }
    // No IB: nothing to submit. Gangs (IBs on several rings) are not modelled.
    let Some(first) = ibs.first() else {
        return Err(Errno::INVAL);
    };
    let ring = (u32_at(first, 20), u32_at(first, 24), u32_at(first, 28));
    if ibs
        .iter()
        .any(|ib| (u32_at(ib, 20), u32_at(ib, 24), u32_at(ib, 28)) != ring)
    {
        return Err(Errno::INVAL);
    }
    let mut guard = m.lock();
    let st = &mut *guard;
    let tgid = caller.id().tgid;
    if list_handle != 0 {
        if bo_handles_chunk {
            return Err(Errno::INVAL);
        }
        let list = st
            .drm_files
            .get(&key)
            .and_then(|f| f.bo_lists.get(&list_handle))
            .cloned()
            .ok_or(Errno::NOENT)?;
        for handle in list {
            let Ok(id) = lookup(st, key, handle) else {
                continue;
            };
            let Some(b) = st.backings.get(&id) else {
                continue;
            };
            let (size, at, evicted_now) = (b.size, b.gpu, b.placed.evicted);
            let only_vram = b.gem.domains & DOMAIN_VRAM != 0 && b.gem.domains & DOMAIN_GTT == 0;
            let vram = b.domain == Domain::Vram;
            // amdgpu_cs_bo_validate: the preferred domains, else (ENOMEM) the allowed ones,
            // where it stays.
            if vram
                && evicted_now
                && let Ok(more) =
                    evict::make_room(&m.dev, st, at, size, Some(tgid), Some(id), only_vram)
            {
                evicted.extend(more);
                if let Some(b) = st.backings.get_mut(&id) {
                    b.placed.evicted = false;
                }
            }
            evict::touch(st, id);
        }
    }
    for ib in &ibs {
        let (va, bytes) = (u64_at(ib, 8), u32_at(ib, 16) as u64);
        let file = st.drm_files.get(&key).ok_or(Errno::INVAL)?;
        let (start, map) = file.mapping_at(va).ok_or(Errno::INVAL)?;
        if va.checked_add(bytes).is_none_or(|end| end > map.end) {
            return Err(Errno::INVAL);
        }
        let mut code = vec![0u8; bytes as usize & !3];
        st.backing_read(map.backing, map.offset + (va - start), &mut code)?;
        run_ib(u32_at(ib, 20), &code)?;
    }
    let file = st.drm_files.get_mut(&key).ok_or(Errno::INVAL)?;
    let ctx = file.ctxs.get_mut(&ctx_id).ok_or(Errno::INVAL)?;
    let next = ctx.next_seq.entry(ring).or_insert(1);
    let seq = *next;
    *next += 1;
    buf[..24].fill(0);
    set_u64(buf, 0, seq);
    Ok(())
}

/// DRM_IOCTL_AMDGPU_WAIT_CS (`amdgpu_cs_wait_ioctl`, `amdgpu_ctx_get_fence`): a sequence
/// number not yet handed out on that ring is `EINVAL` (`~0` is the last one); every CS has
/// completed, so the status is 0 (signalled).
pub(super) fn wait_cs(m: &Driver, key: FileKey, gpu: usize, buf: &mut [u8]) -> Result<(), Errno> {
    let (seq, ip, instance, ring, ctx_id) = (
        u64_at(buf, 0),
        u32_at(buf, 16),
        u32_at(buf, 20),
        u32_at(buf, 24),
        u32_at(buf, 28),
    );
    let st = m.lock();
    let ctx = st
        .drm_files
        .get(&key)
        .and_then(|f| f.ctxs.get(&ctx_id))
        .ok_or(Errno::INVAL)?;
    entity(m, gpu, ip, instance, ring)?;
    let next = ctx
        .next_seq
        .get(&(ip, instance, ring))
        .copied()
        .unwrap_or(1);
    if seq != u64::MAX && seq >= next {
        return Err(Errno::INVAL);
    }
    buf[..32].fill(0);
    Ok(())
}
