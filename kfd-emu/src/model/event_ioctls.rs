//! The event ioctls (`kfd_events.c` as `kfd_chardev.c` calls it): CREATE/DESTROY/SET/RESET_EVENT
//! and WAIT_EVENTS over the process's [`EventTable`](super::events::EventTable).

use std::time::{Duration, Instant};

use kfd_ioctl::abi::{
    AllocMemFlags, KFD_IOC_EVENT_HW_EXCEPTION, KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_SIGNAL,
    KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_FAIL, KFD_IOC_WAIT_RESULT_TIMEOUT,
    KFD_SIGNAL_EVENT_LIMIT, kfd_event_data, kfd_ioctl_create_event_args,
    kfd_ioctl_destroy_event_args, kfd_ioctl_reset_event_args, kfd_ioctl_set_event_args,
    kfd_ioctl_wait_events_args,
};
use rustix::io::Errno;

use super::chardev::{Ctx, KMALLOC_MAX, get, put};
use super::events::{
    Event, EventTable, FIRST_NONSIGNAL_ID, KERNEL_PAGE_MAPPED_SIZE, LIVENESS_PERIOD, SignalPage,
    Slot, TIMEOUT_INFINITE, UNSIGNALED, WAITER_SIZE,
};
use super::process::State;
use super::timing::ClockMode;

/// Writes `value` to signal slot `id` of the process's page.
fn write_slot(ctx: &Ctx<'_>, st: &State, id: u32, value: u64) -> Result<(), Errno> {
    st.set_signal_slot(ctx.tgid, id, value)
}

/// `kfd_kmap_event_page`: the BO with handle `handle` becomes the signal page.
fn use_event_page(ctx: &Ctx<'_>, st: &mut State, handle: u64) -> Result<(), Errno> {
    let process = st.process(ctx.tgid, ctx.serial)?;
    if process.events.page.is_some() {
        return Err(Errno::INVAL);
    }
    let pdd = process.pdd((handle >> 32) as u32)?;
    pdd.bound()?;
    let bo = pdd.bos.get(&(handle as u32)).ok_or(Errno::INVAL)?;
    // amdgpu_amdkfd_gpuvm_map_gtt_bo_to_kernel: not a userptr, nor an SG BO.
    if bo
        .flags
        .intersects(AllocMemFlags::USERPTR | AllocMemFlags::DOORBELL | AllocMemFlags::MMIO_REMAP)
    {
        return Err(Errno::INVAL);
    }
    let (backing, size) = (bo.backing, bo.size);
    // kfd_event_page_set: the page must hold every slot.
    if size < u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8 {
        return Err(Errno::INVAL);
    }
    process.events.page = Some(SignalPage::Bo { backing });
    process.events.mapped_size = size;
    process.signal_handle = Some(handle);
    let fill = vec![0xFF; size.min(u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8) as usize];
    st.backing_write(backing, 0, &fill)
}

/// AMDKFD_IOC_CREATE_EVENT.
pub(super) fn create_event(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_create_event_args = get(buf);
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    if a.event_page_offset != 0 {
        use_event_page(ctx, st, a.event_page_offset)?;
    }
    a.event_page_offset = 0;
    let events = &mut st.process(ctx.tgid, ctx.serial)?.events;
    let id;
    if EventTable::is_signal(a.event_type) {
        if events.mapped_size != 0 && events.signal_count == events.mapped_size / 8 {
            put(buf, &a);
            return Err(Errno::NOSPC);
        }
        if events.page.is_none() {
            events.page = Some(SignalPage::Kernel);
            events.mapped_size = KERNEL_PAGE_MAPPED_SIZE;
        }
        // allocate_event_notification_slot: ids below `signal_mapped_size / 8`, not capped at
        // KFD_SIGNAL_EVENT_LIMIT (a user page larger than 32 KiB gives more).
        let slots = u32::try_from(events.mapped_size / 8).unwrap_or(u32::MAX);
        id = events.free_id(1, slots).ok_or(Errno::NOSPC)?;
        events.signal_count += 1;
        // kfd_event_create: every signal event names the page by its mmap type.
        a.event_page_offset = super::offsets::KFD_MMAP_TYPE_EVENTS;
        a.event_slot_index = id;
    } else {
        id = events
            .free_id(FIRST_NONSIGNAL_ID, i32::MAX as u32)
            .ok_or(Errno::NOSPC)?;
    }
    events.events.insert(
        id,
        Event {
            kind: a.event_type,
            auto_reset: a.auto_reset != 0,
            signaled: false,
            age: 1,
            waiting: Vec::new(),
            memory_exception: [0; 32],
        },
    );
    a.event_id = id;
    a.event_trigger_data = id;
    if EventTable::is_signal(a.event_type) {
        write_slot(ctx, st, id, UNSIGNALED)?;
    }
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_DESTROY_EVENT: waiters on it return failure.
pub(super) fn destroy_event(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_destroy_event_args = get(buf);
    let mut st = ctx.m.lock();
    let events = &mut st.process(ctx.tgid, ctx.serial)?.events;
    let ev = events.events.remove(&a.event_id).ok_or(Errno::INVAL)?;
    for (waiter, index) in ev.waiting {
        if let Some(slot) = events
            .waiters
            .get_mut(&waiter)
            .and_then(|s| s.get_mut(index))
        {
            slot.event = None;
        }
    }
    if EventTable::is_signal(ev.kind) {
        events.signal_count = events.signal_count.saturating_sub(1);
    }
    drop(st);
    ctx.m.wake.notify_all();
    Ok(())
}

/// AMDKFD_IOC_SET_EVENT: only signal events can be set from the CPU.
pub(super) fn set_event(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_set_event_args = get(buf);
    let mut st = ctx.m.lock();
    let events = &mut st.process(ctx.tgid, ctx.serial)?.events;
    let ev = events.events.get(&a.event_id).ok_or(Errno::INVAL)?;
    if ev.kind != KFD_IOC_EVENT_SIGNAL {
        return Err(Errno::INVAL);
    }
    events.set(a.event_id);
    drop(st);
    ctx.m.wake.notify_all();
    Ok(())
}

/// AMDKFD_IOC_RESET_EVENT.
pub(super) fn reset_event(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_reset_event_args = get(buf);
    let mut st = ctx.m.lock();
    let events = &mut st.process(ctx.tgid, ctx.serial)?.events;
    let ev = events.events.get_mut(&a.event_id).ok_or(Errno::INVAL)?;
    if ev.kind != KFD_IOC_EVENT_SIGNAL {
        return Err(Errno::INVAL);
    }
    ev.signaled = false;
    Ok(())
}

/// The entries of the caller's `kfd_event_data` array that can be read, up to the first
/// fault.
fn read_event_data(ctx: &Ctx<'_>, ptr: u64, n: usize) -> Vec<kfd_event_data> {
    let size = size_of::<kfd_event_data>();
    let mut bytes = vec![0u8; n * size];
    if ctx.caller.read(ptr, &mut bytes).is_ok() {
        return bytes.chunks_exact(size).map(get).collect();
    }
    let mut out = Vec::new();
    for chunk in bytes.chunks_exact_mut(size) {
        let addr = ptr.wrapping_add((out.len() * size) as u64);
        if ctx.caller.read(addr, chunk).is_err() {
            break;
        }
        out.push(get(chunk));
    }
    out
}

/// AMDKFD_IOC_WAIT_EVENTS: blocks, with the model unlocked, until the condition holds, the
/// timeout passes, or the caller goes away.
pub(super) fn wait_events(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_wait_events_args = get(buf);
    let result = wait(ctx, &a);
    a.wait_result = match result {
        Ok(w) => w,
        Err(_) => KFD_IOC_WAIT_RESULT_FAIL,
    };
    put(buf, &a);
    match result {
        Ok(KFD_IOC_WAIT_RESULT_FAIL) => Err(Errno::IO),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

fn wait(ctx: &Ctx<'_>, a: &kfd_ioctl_wait_events_args) -> Result<u32, Errno> {
    let n = a.num_events as usize;
    if u64::from(a.num_events) * WAITER_SIZE > KMALLOC_MAX {
        return Err(Errno::NOMEM);
    }
    let all = a.wait_for_all != 0;
    let data = read_event_data(ctx, a.events_ptr, n);
    let deadline = match a.timeout {
        0 => Some(Instant::now()),
        TIMEOUT_INFINITE => None,
        // msecs_to_jiffies + 1 jiffy; values past 2^31-1 are finite too.
        ms => Some(Instant::now() + Duration::from_millis(u64::from(ms.min(0x7FFF_FFFF)) + 4)),
    };

    // The engines of the caller's queues are told to look now, so that a waiter sees what
    // they can finish at once; nothing here waits for them: the timeout holds whatever they
    // do.
    super::scheduler::kick_process(ctx.m, ctx.tgid);
    let mut st = ctx.m.lock();
    let events = &mut st.process(ctx.tgid, ctx.serial)?.events;
    let waiter = events.next_waiter;
    events.next_waiter += 1;
    events.waiters.insert(waiter, Vec::with_capacity(n));
    // init_event_waiter for each entry, in order; a failure leaves the earlier ones consumed.
    for i in 0..n {
        let Some(entry) = data.get(i) else {
            events.unregister(waiter);
            return Err(Errno::FAULT);
        };
        let Some(ev) = events.events.get_mut(&entry.event_id) else {
            events.unregister(waiter);
            return Err(Errno::INVAL);
        };
        let mut slot = Slot {
            event: Some(entry.event_id),
            activated: ev.signaled,
            age_enabled: false,
        };
        ev.signaled = ev.signaled && !ev.auto_reset;
        // Event ages arrived with KFD 1.14; older kernels ignore the field.
        let last_age = entry.signal_event_data().last_event_age;
        if ev.kind == KFD_IOC_EVENT_SIGNAL && last_age != 0 && ctx.m.dev.cfg.kfd_minor >= 14 {
            slot.age_enabled = true;
            if ev.age != last_age {
                slot.activated = true;
            }
        }
        if !slot.activated {
            ev.waiting.push((waiter, i));
        }
        if let Some(slots) = events.waiters.get_mut(&waiter) {
            slots.push(slot);
        }
    }

    let mut result = events.condition(waiter, all);
    let mut last_check = Instant::now();
    while result == KFD_IOC_WAIT_RESULT_TIMEOUT {
        let now = Instant::now();
        let slice = match deadline {
            Some(d) if d <= now => break,
            Some(d) => (d - now).min(LIVENESS_PERIOD),
            None => LIVENESS_PERIOD,
        };
        st = ctx
            .m
            .wake
            .wait_timeout(st, slice)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if last_check.elapsed() >= LIVENESS_PERIOD {
            last_check = Instant::now();
            // A caller killed while waiting: its notification is no longer valid. Asked
            // without touching its memory, as the model's lock is held.
            if ctx.caller.still_valid() == Err(Errno::NOENT) {
                if let Ok(p) = st.process(ctx.tgid, ctx.serial) {
                    p.events.unregister(waiter);
                }
                return Err(Errno::INTR);
            }
        }
        match st.process(ctx.tgid, ctx.serial) {
            Ok(p) => result = p.events.condition(waiter, all),
            Err(_) => return Ok(KFD_IOC_WAIT_RESULT_FAIL),
        }
    }

    // Under the model clock (and the program clock, which does not count the wait's wall
    // time) a wait that timed out took its timeout (msecs_to_jiffies + 1
    // jiffy, as the deadline above) in model time too.
    if result == KFD_IOC_WAIT_RESULT_TIMEOUT
        && matches!(
            ctx.m.dev.clock.mode(),
            ClockMode::Model | ClockMode::Program
        )
        && a.timeout != 0
        && a.timeout != TIMEOUT_INFINITE
    {
        let ms = u64::from(a.timeout.min(0x7FFF_FFFF)) + 4;
        ctx.m.dev.clock.advance(ms * 1_000_000);
    }
    let process = st.process(ctx.tgid, ctx.serial)?;
    let mut writes = Ok(Vec::new());
    if result == KFD_IOC_WAIT_RESULT_COMPLETE {
        writes = signaled_event_data(&process.events, waiter, a.events_ptr);
    }
    process.events.unregister(waiter);
    drop(st);
    // The caller's memory is written after the lock is gone: a caller whose page faults
    // forever must not hold up every other process.
    for (dst, bytes) in writes? {
        ctx.caller.write(dst, &bytes).map_err(|_| Errno::FAULT)?;
    }
    Ok(result)
}

/// The data of activated memory, hardware-exception and (age-tracked) signal events, with
/// where each goes in the caller's array.
fn signaled_event_data(
    events: &EventTable,
    waiter: u64,
    ptr: u64,
) -> Result<Vec<(u64, Vec<u8>)>, Errno> {
    let mut writes = Vec::new();
    let Some(slots) = events.waiters.get(&waiter) else {
        return Err(Errno::INVAL);
    };
    for (i, slot) in slots.iter().enumerate() {
        let ev = slot
            .event
            .and_then(|id| events.events.get(&id))
            .ok_or(Errno::INVAL)?;
        if !slot.activated {
            continue;
        }
        let dst = ptr.wrapping_add((i * size_of::<kfd_event_data>()) as u64);
        match ev.kind {
            KFD_IOC_EVENT_MEMORY => writes.push((dst, ev.memory_exception.to_vec())),
            KFD_IOC_EVENT_HW_EXCEPTION => writes.push((dst, vec![0u8; 16])),
            KFD_IOC_EVENT_SIGNAL if slot.age_enabled => {
                writes.push((dst, ev.age.to_ne_bytes().to_vec()));
            }
            _ => {}
        }
    }
    Ok(writes)
}
