//! `AMDKFD_IOC_IPC_EXPORT_HANDLE` and `AMDKFD_IOC_IPC_IMPORT_HANDLE` (`kfd_ipc.c`:
//! `kfd_ipc_export_as_handle`, `kfd_ipc_import_handle`; `kfd_chardev.c`:
//! `kfd_ioctl_ipc_export_handle`, `kfd_ioctl_ipc_import_handle`): a process shares a BO by a
//! 128-bit random handle (libhsakmt's `hsaKmtShareMemory`), and any process under the same
//! driver imports it by that handle at a GPU VA of its own (`hsaKmtRegisterSharedHandle`),
//! getting a BO on the same memory and the render-node offset that maps it.
//!
//! Errors, in the kernel's order: an unknown `gpu_id` is `EINVAL` (`kfd_device_by_id`); at
//! export a process without a VM on that GPU `ENODEV` (`kfd_bind_process_to_device`), then a
//! handle the process device does not hold `EINVAL` (`kfd_process_device_find_bo` of
//! `GET_IDR_HANDLE(handle)`: the handle's low 32 bits, on `gpu_id`'s device) and a USERPTR BO
//! `EPERM` (its dma-buf export, `amdgpu_gem_prime_export`); at import an unknown share handle
//! (all 128 bits compared) `EINVAL`, then `ENODEV` without a VM.
//!
//! One IPC object per memory: a second export (by the exporter or by an importer, whose BO
//! carries the object it came from) gives the same handle (`amdgpu_amdkfd_gpuvm_export_ipc_obj`
//! keeps it in `mem->ipc_obj`), and the flags of the first export. The object lives while a
//! BO on it does (every `kgd_mem` holding it has a reference; `ipc_obj_release` drops it from
//! the store with the last): the model keeps no count and drops the objects whose memory no
//! process's BO holds any more when it next looks (`prune`). Where it differs: the model keys
//! the object by the memory, so a BO that reached the same memory another way (a dma-buf
//! import) shares its handle too, where the kernel would make it one of its own.

use std::io::Read as _;

use kfd_ioctl::abi::AllocMemFlags;
use rustix::io::Errno;

use super::super::chardev::{Ctx, get, put};
use super::super::memory_ioctls;
use super::super::process::State;
use super::abi::{kfd_ioctl_ipc_export_handle_args, kfd_ioctl_ipc_import_handle_args};
use super::state::{DkmsState, IpcObj};

/// AMDKFD_IOC_IPC_EXPORT_HANDLE.
pub(super) fn export_handle(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_ipc_export_handle_args = get(buf);
    let m = ctx.m;
    if m.dev.gpu_index(a.gpu_id).is_none() {
        return Err(Errno::INVAL);
    }
    let mut guard = m.lock();
    let st = &mut *guard;
    let backing = {
        let pdd = st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?;
        pdd.bound()?;
        // GET_IDR_HANDLE: the id is the handle's low half, whatever GPU its high half names.
        let bo = pdd.bos.get(&(a.handle as u32)).ok_or(Errno::INVAL)?;
        if bo.flags.intersects(AllocMemFlags::USERPTR) {
            return Err(Errno::PERM);
        }
        bo.backing
    };
    let mut dkms = m.dkms.lock().unwrap_or_else(|e| e.into_inner());
    prune(st, &mut dkms);
    let handle = match dkms.ipc_handle_of(backing) {
        Some(handle) => handle,
        None => {
            let handle = loop {
                let handle = random_handle()?;
                if !dkms.ipc.contains_key(&handle) {
                    break handle;
                }
            };
            dkms.ipc.insert(
                handle,
                IpcObj {
                    backing,
                    flags: a.flags,
                },
            );
            handle
        }
    };
    a.share_handle = handle;
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_IPC_IMPORT_HANDLE.
pub(super) fn import_handle(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_ipc_import_handle_args = get(buf);
    let m = ctx.m;
    let gpu = m.dev.gpu_index(a.gpu_id).ok_or(Errno::INVAL)?;
    let mut guard = m.lock();
    let st = &mut *guard;
    let obj = {
        let mut dkms = m.dkms.lock().unwrap_or_else(|e| e.into_inner());
        prune(st, &mut dkms);
        dkms.ipc.get(&a.share_handle).copied()
    }
    .ok_or(Errno::INVAL)?;
    st.process(ctx.tgid, ctx.serial)?.pdd(a.gpu_id)?.bound()?;
    let (handle, mmap_offset) = memory_ioctls::import_backing(
        st,
        ctx.tgid,
        ctx.serial,
        a.gpu_id,
        gpu,
        a.va_addr,
        obj.backing,
    )?;
    a.handle = handle;
    a.mmap_offset = mmap_offset;
    a.flags = obj.flags;
    put(buf, &a);
    Ok(())
}

/// Drops the IPC objects whose memory no process's BO holds any more (the last `kgd_mem`
/// with a reference went: `ipc_obj_release`).
fn prune(st: &State, dkms: &mut DkmsState) {
    dkms.ipc.retain(|_, obj| {
        st.procs.values().any(|p| {
            p.pdds
                .iter()
                .any(|pdd| pdd.bos.values().any(|bo| bo.backing == obj.backing))
        })
    });
}

/// 128 random bits (`get_random_bytes`).
fn random_handle() -> Result<[u32; 4], Errno> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|_| Errno::NOMEM)?;
    let word = |i: usize| u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Ok([word(0), word(4), word(8), word(12)])
}
