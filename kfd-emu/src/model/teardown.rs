//! Process teardown (`kfd_process_wq_release` and what it frees): when a process goes away,
//! its objects, SVM ranges and SMI clients are released, and what it left behind is reported
//! (with `check_leaks`); and dma-bufs go when the last file of theirs does, in any process.

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
    if model.dev.cfg.check_leaks
        && let Some(report) = leak_report(&process, model)
    {
        crate::own::elog!("{}", report.trim_end());
        model.leaks.store(true, Ordering::Relaxed);
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
    (!out.is_empty()).then(|| {
        format!(
            "kfd-emu: process {} exited with live KFD objects:\n{out}",
            process.tgid
        )
    })
}
