//! Process teardown (`kfd_process_wq_release` and what it frees): when a process goes away,
//! its objects, SVM ranges and SMI clients are released, and what it left behind is reported
//! (with `check_leaks` or `check_teardown`); and dma-bufs go when the last file of theirs
//! does, in any process.
//!
//! Two reports, as two different things can be left:
//! * What the process still held when it exited (BOs, mappings, queues, events). The kernel
//!   frees all of it then (`kfd_process_wq_release`: `kfd_process_dequeue_from_all_devices`,
//!   `kfd_process_free_outstanding_kfd_bos`, `kfd_process_destroy_pdds`,
//!   `kfd_event_free_process`), so it is a leak of the program only for a program meant to
//!   clean up (`check_leaks`, which counts it); HIP 5.2.3 never calls `hsa_shut_down` and
//!   leaves its runtime's objects for exit to free (`check_teardown` reports them for
//!   information only).
//! * What survived the teardown (both checks): memory the model still keeps that no live
//!   process's BO nor dma-buf holds, memory charges no such memory explains once no process
//!   is left, SVM VRAM still counted. The kernel's teardown frees these; the model not doing
//!   so is a leak of the emulator.

use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

use kfd_ioctl::abi::AllocMemFlags;

use super::driver::Driver;
use super::files;
use super::process::{Process, State, make_handle};
use super::smi::Event;
use super::svm;

/// A process went away: report what it left behind (with `check_leaks`), then release it all
/// as the kernel does when the last reference to the process goes.
pub(super) fn teardown(model: &Driver, tgid: i32) {
    let mut st = model.lock();
    let Some(mut process) = st.procs.remove(&tgid) else {
        return;
    };
    let (check_leaks, check_teardown) = (model.dev.cfg.check_leaks, model.dev.cfg.check_teardown);
    if let Some(report) = (check_leaks || check_teardown)
        .then(|| leak_report(&process, model))
        .flatten()
    {
        if check_leaks {
            crate::own::elog!(
                "kfd-emu: process {} exited with live KFD objects:\n{}",
                process.tgid,
                report.trim_end()
            );
            model.leaks.store(true, Ordering::Relaxed);
        } else {
            crate::own::elog!(
                "kfd-emu: process {} left these KFD objects for its exit to free (as the \
                 kernel's process teardown does; not leaks):\n{}",
                process.tgid,
                report.trim_end()
            );
        }
    }
    // Its queues are unmapped (`kfd_process_dequeue_from_all_devices`): their engines start
    // nothing more, and one blocked in an access is not waited for (it may need this lock);
    // what it brings back is discarded.
    for q in process.queues.by_id.values() {
        q.runner.destroy(false);
    }
    for pdd in &mut process.pdds {
        let bos = std::mem::take(&mut pdd.bos);
        for bo in bos.into_values() {
            if !bo.imported && bo.flags.intersects(AllocMemFlags::VRAM) {
                pdd.vram_usage = pdd.vram_usage.saturating_sub(bo.size);
            }
            st.put_backing(bo.backing);
            st.handle_dropped(bo.backing, pdd.gpu);
        }
    }
    svm::teardown(&model.dev, &mut st, &mut process);
    // Its PC-sampling sessions (the out-of-tree driver's; none on mainline).
    model
        .dkms
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .release(process.tgid, process.serial);
    // The process's own SMI fds closed when it exited; the others see it go.
    st.smi.release(tgid);
    for (gpu, pdd) in process.pdds.iter().enumerate() {
        if let Some((task_pid, comm)) = &pdd.task {
            st.smi.emit(
                model.dev.cfg.kfd_minor,
                gpu,
                &Event::Process {
                    start: false,
                    task_pid: *task_pid,
                    comm,
                },
            );
        }
    }
    // Its dma-bufs stay while other processes hold them; those only it held went with it.
    release_closed_dmabufs(model, &mut st);
    let gpu_ids: Vec<u32> = model
        .dev
        .cfg
        .machine
        .gpus()
        .iter()
        .map(|g| g.gpu_id)
        .collect();
    if (check_leaks || check_teardown)
        && let Some(report) = survivors(&st, &gpu_ids)
    {
        crate::own::elog!(
            "kfd-emu: process {tgid}'s teardown left behind what the kernel's frees (an \
             emulator leak):\n{}",
            report.trim_end()
        );
        model.teardown_leaks.store(true, Ordering::Relaxed);
        if check_leaks {
            model.leaks.store(true, Ordering::Relaxed);
        }
    }
    drop(st);
    // The stand-in is released from the file table; a forked child still holding the fd is
    // told from its memfd name and gets EBADF, as from the kernel (`released_kind`).
    model.unregister(&process.key);
    // Waiters of the process see their events gone.
    model.wake.notify_all();
}

/// Releases every dma-buf no program holds any more (`dma_buf_release` at the last `fput`
/// of its file, then the GEM reference it held): its registration goes, so a stand-in of the
/// same memory is no dma-buf, and so does its reference on the memory, whose charge is given
/// back with the last reference (handles of the exporter or of importers may hold it on).
///
/// The model cannot see a `close`, so it asks at the points where the answer shows: a process
/// exit, AVAILABLE_MEMORY, and an ALLOC that would not fit. One `fcntl` per live dma-buf.
pub(super) fn release_closed_dmabufs(model: &Driver, st: &mut State) {
    let closed: Vec<u64> = st
        .dmabufs
        .iter()
        .filter(|(_, d)| !files::exported_file_alive(d.probe.as_fd()))
        .map(|(&id, _)| id)
        .collect();
    for id in closed {
        if let Some(dmabuf) = st.dmabufs.remove(&id) {
            model.unregister(&dmabuf.key);
            st.put_backing(dmabuf.backing);
        }
    }
}

/// What a process left behind, or `None` when it cleaned up.
fn leak_report(process: &Process, model: &Driver) -> Option<String> {
    let mut out = String::new();
    for pdd in &process.pdds {
        for (&id, bo) in &pdd.bos {
            let handle = make_handle(pdd.gpu_id, id);
            if Some(handle) == process.signal_handle {
                // The event page: the kernel frees it at teardown and refuses FREE before.
                continue;
            }
            let mapped: Vec<String> = bo
                .mapped
                .iter()
                .map(|&g| format!("{:#x}", model.dev.cfg.machine.gpus()[g].gpu_id))
                .collect();
            let _ = writeln!(
                out,
                "  buffer object handle={handle:#x} va={:#x} size={} flags={}{}{}",
                bo.va,
                bo.size,
                super::trace::alloc_flags(bo.flags.bits()),
                if bo.imported { " (imported)" } else { "" },
                if mapped.is_empty() {
                    String::new()
                } else {
                    format!(", still mapped on {}", mapped.join(", "))
                }
            );
        }
        for (start, m) in pdd.vm.iter() {
            let _ = writeln!(
                out,
                "  mapping gpu_id={:#x} va={start:#x}..{:#x} handle={:#x}",
                pdd.gpu_id, m.end, m.handle
            );
        }
        if pdd.vram_usage > 0 {
            let _ = writeln!(
                out,
                "  {} MiB of VRAM still allocated on gpu_id={:#x}",
                pdd.vram_usage.div_ceil(1 << 20),
                pdd.gpu_id
            );
        }
    }
    for (id, q) in &process.queues.by_id {
        let _ = writeln!(
            out,
            "  queue id={id} gpu_id={:#x} {:?} ring={:#x} size={}",
            model.dev.cfg.machine.gpus()[q.gpu].gpu_id,
            q.engine,
            q.ring_va,
            q.ring_size
        );
    }
    for event in process.events.live() {
        let _ = writeln!(out, "  {event}");
    }
    (!out.is_empty()).then_some(out)
}

/// What survived a teardown that the kernel's would have freed, or `None`: memory the model
/// keeps with more references than live BOs and dma-bufs hold (the last one frees it,
/// `amdgpu_bo_unref` of the GEM object); and, once no process is left, memory charges and
/// SVM VRAM the remaining memory does not explain (`amdgpu_amdkfd_unreserve_mem_limit` runs
/// with each BO's release, `svm_range_vram_node_free` with each range's).
/// `gpu_ids` are the machine's, by GPU index.
fn survivors(st: &State, gpu_ids: &[u32]) -> Option<String> {
    let mut out = String::new();
    let gpu_id = |gpu: usize| gpu_ids.get(gpu).copied().unwrap_or(0);
    let mut held: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    for p in st.procs.values() {
        for pdd in &p.pdds {
            for bo in pdd.bos.values() {
                *held.entry(bo.backing).or_default() += 1;
            }
        }
    }
    for d in st.dmabufs.values() {
        *held.entry(d.backing).or_default() += 1;
    }
    for f in st.drm_files.values() {
        for &b in f.handles.values() {
            *held.entry(b).or_default() += 1;
        }
    }
    let mut ids: Vec<&u64> = st.backings.keys().collect();
    ids.sort();
    for id in ids {
        let b = &st.backings[id];
        let holders = held.get(id).copied().unwrap_or(0);
        if b.refs != holders {
            let _ = writeln!(
                out,
                "  memory id={id} size={} on gpu_id={:#x}: {} references, {holders} held by \
                 live buffer objects and dma-bufs",
                b.size,
                gpu_id(b.gpu),
                b.refs
            );
        }
    }
    if st.procs.is_empty() {
        let mut system = 0u64;
        let mut ttm = 0u64;
        let mut vram = vec![0u64; st.acc.vram.len()];
        for b in st.backings.values() {
            system = system.saturating_add(b.charge.system);
            ttm = ttm.saturating_add(b.charge.ttm);
            if let Some(v) = vram.get_mut(b.gpu) {
                *v = v.saturating_add(b.charge.vram);
            }
        }
        if st.acc.system_used != system || st.acc.ttm_used != ttm {
            let _ = writeln!(
                out,
                "  system memory charged {} bytes (TTM {}), remaining memory explains {system} \
                 (TTM {ttm})",
                st.acc.system_used, st.acc.ttm_used
            );
        }
        for (gpu, (&(used, _), want)) in st.acc.vram.iter().zip(&vram).enumerate() {
            if used != *want {
                let _ = writeln!(
                    out,
                    "  VRAM charged {used} bytes on gpu_id={:#x}, remaining memory explains \
                     {want}",
                    gpu_id(gpu)
                );
            }
        }
        for (gpu, &bytes) in st.svm_vram.iter().enumerate() {
            if bytes != 0 {
                let _ = writeln!(
                    out,
                    "  {bytes} bytes of VRAM still hold SVM pages on gpu_id={:#x}",
                    gpu_id(gpu)
                );
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::memory::Charge;
    use super::super::objects::{Backing, Domain, Store};
    use super::*;

    fn backing(refs: u32, charge: Charge) -> Backing {
        Backing {
            refs,
            store: Store::UserPtr { tgid: 1, addr: 0 },
            size: 4096,
            gpu: 0,
            domain: Domain::Gtt,
            cpu_access: true,
            charge,
            offsets: Vec::new(),
            gem: Default::default(),
            placed: Default::default(),
        }
    }

    /// Memory no live BO nor dma-buf holds, a charge no memory explains and SVM VRAM still
    /// counted once no process is left are each reported; a state with none is clean.
    #[test]
    fn what_survives_a_teardown_is_reported() {
        let gpus = [0x1234];
        let mut st = State::new(1);
        assert_eq!(survivors(&st, &gpus), None);
        let charge = Charge {
            system: 4096,
            ttm: 4096,
            vram: 0,
        };
        st.backings.insert(7, backing(1, charge));
        st.acc.system_used = 4096;
        st.acc.ttm_used = 4096;
        let report = survivors(&st, &gpus).expect("unheld memory");
        assert!(
            report.contains("memory id=7 size=4096 on gpu_id=0x1234: 1 references, 0 held"),
            "{report}"
        );
        assert!(!report.contains("charged"), "{report}");
        st.backings.clear();
        let report = survivors(&st, &gpus).expect("an unexplained charge");
        assert!(
            report.contains("system memory charged 4096 bytes"),
            "{report}"
        );
        st.acc.system_used = 0;
        st.acc.ttm_used = 0;
        st.acc.vram[0].0 = 8192;
        st.svm_vram[0] = 4096;
        let report = survivors(&st, &gpus).expect("VRAM");
        assert!(
            report.contains("VRAM charged 8192 bytes on gpu_id=0x1234"),
            "{report}"
        );
        assert!(
            report.contains("4096 bytes of VRAM still hold SVM pages"),
            "{report}"
        );
    }
}
