//! [`Event`], the owner of a KFD event id, and [`Kfd::wait_events`].
//!
//! Signal events are what a GPU agent raises: a queue writes the event's slot in the
//! process's signal page and sends an interrupt naming the event id (an SDMA `TRAP`, a CP
//! `RELEASE_MEM` with an interrupt); the kernel (`kfd_signal_event_interrupt`) sets the event
//! when its slot is no longer unsignaled, and `WAIT_EVENTS` wakes. Memory events report GPU
//! VM faults of the process (`kfd_signal_vm_fault_event`).

use std::fmt;

use crate::abi::{self, kfd_event_data, kfd_hsa_memory_exception_data};
use crate::error::{Error, IoctlContext, Result};
use crate::{BufferObject, Kfd};

/// The kind of an event (`KFD_IOC_EVENT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// `KFD_IOC_EVENT_SIGNAL`: set from the CPU (`SET_EVENT`) or by a GPU interrupt.
    #[doc(alias = "KFD_IOC_EVENT_SIGNAL")]
    Signal,
    /// `KFD_IOC_EVENT_MEMORY`: set on a GPU VM fault of the process, with its address.
    #[doc(alias = "KFD_IOC_EVENT_MEMORY")]
    Memory,
    /// `KFD_IOC_EVENT_HW_EXCEPTION`: set on a GPU reset.
    #[doc(alias = "KFD_IOC_EVENT_HW_EXCEPTION")]
    HwException,
}

impl EventKind {
    fn raw(self) -> u32 {
        match self {
            EventKind::Signal => abi::KFD_IOC_EVENT_SIGNAL,
            EventKind::Memory => abi::KFD_IOC_EVENT_MEMORY,
            EventKind::HwException => abi::KFD_IOC_EVENT_HW_EXCEPTION,
        }
    }
}

/// A KFD event; destroyed on drop, or by [`Event::close`], which reports errors.
pub struct Event {
    kfd: Kfd,
    id: u32,
    kind: EventKind,
    /// The slot index in the signal page (signal events).
    slot: Option<u32>,
    /// The mmap offset of the signal page (signal events on the kernel's page).
    page_offset: u64,
    closed: bool,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("slot", &self.slot)
            .finish()
    }
}

/// What a GPU VM fault reported through a memory event.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MemoryFault {
    /// The GPU.
    pub gpu_id: crate::GpuId,
    /// The faulting page's address.
    pub va: u64,
    /// The page was not present.
    pub not_present: bool,
    /// A write to a read-only page.
    pub read_only: bool,
}

impl fmt::Debug for MemoryFault {
    /// With the GPU id and the address in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryFault")
            .field("gpu_id", &self.gpu_id)
            .field("va", &format_args!("{:#x}", self.va))
            .field("not_present", &self.not_present)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl MemoryFault {
    fn from_raw(d: &kfd_hsa_memory_exception_data) -> MemoryFault {
        MemoryFault {
            gpu_id: crate::GpuId(d.gpu_id),
            va: d.va,
            not_present: d.failure.NotPresent != 0,
            read_only: d.failure.ReadOnly != 0,
        }
    }
}

/// How a [`Kfd::wait_events`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition held. Per event, in the order given: the memory fault a memory event
    /// carried (`None` for other events or ones that did not fire).
    Complete(Vec<Option<MemoryFault>>),
    /// The timeout passed first.
    Timeout,
}

impl Event {
    /// The event id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The kind.
    pub fn kind(&self) -> EventKind {
        self.kind
    }
    /// The index of the event's slot in the signal page (signal events): a GPU agent writes a
    /// value other than all ones at `slot * 8` of the page before raising the interrupt.
    pub fn slot(&self) -> Option<u32> {
        self.slot
    }
    /// The mmap offset of the signal page on `/dev/kfd` (`KFD_MMAP_TYPE_EVENTS`; signal
    /// events only).
    pub fn page_offset(&self) -> u64 {
        self.page_offset
    }

    /// `SET_EVENT`: sets a signal event from the CPU.
    ///
    /// # Errors
    /// `EINVAL` for an event that is not a signal event.
    #[doc(alias = "AMDKFD_IOC_SET_EVENT")]
    pub fn set(&self) -> Result<()> {
        let mut args = abi::kfd_ioctl_set_event_args {
            event_id: self.id,
            pad: 0,
        };
        self.kfd.call(
            abi::AMDKFD_IOC_SET_EVENT,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(())
    }

    /// `RESET_EVENT`: clears a signal event.
    ///
    /// # Errors
    /// `EINVAL` for an event that is not a signal event.
    #[doc(alias = "AMDKFD_IOC_RESET_EVENT")]
    pub fn reset(&self) -> Result<()> {
        let mut args = abi::kfd_ioctl_reset_event_args {
            event_id: self.id,
            pad: 0,
        };
        self.kfd.call(
            abi::AMDKFD_IOC_RESET_EVENT,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(())
    }

    /// `DESTROY_EVENT`, reporting what dropping would swallow.
    ///
    /// # Errors
    /// [`Error::Inherited`] in a forked child; `EINVAL` when the kernel does not know the id.
    #[doc(alias = "AMDKFD_IOC_DESTROY_EVENT")]
    pub fn close(mut self) -> Result<()> {
        self.kfd.check_owner("DESTROY_EVENT")?;
        self.closed = true;
        self.destroy()
    }

    fn destroy(&self) -> Result<()> {
        let mut args = abi::kfd_ioctl_destroy_event_args {
            event_id: self.id,
            pad: 0,
        };
        self.kfd.call(
            abi::AMDKFD_IOC_DESTROY_EVENT,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.closed || !self.kfd.is_owner_process() {
            return;
        }
        // Errors are reported by `close`; a failed destroy leaves the id to process teardown.
        let _ = self.destroy();
    }
}

impl Kfd {
    /// `CREATE_EVENT`: a new event of `kind`; an auto-reset event is cleared by the wait that
    /// sees it.
    ///
    /// # Errors
    /// `ENOSPC` when the signal page has no free slot; `ENOMEM`.
    #[doc(alias = "AMDKFD_IOC_CREATE_EVENT")]
    pub fn create_event(&self, kind: EventKind, auto_reset: bool) -> Result<Event> {
        self.create_event_with_page(kind, auto_reset, 0)
    }

    /// `CREATE_EVENT` with `page` as the process's signal page, as libhsakmt does on dGPUs
    /// (the GPU then reaches the slots at `page.va() + slot * 8`). Only the first signal page
    /// of a process can be given.
    ///
    /// # Errors
    /// `EINVAL` when the process has a signal page already, or `page` is a USERPTR, doorbell
    /// or MMIO BO or smaller than `KFD_SIGNAL_EVENT_LIMIT * 8` bytes; then as
    /// [`Kfd::create_event`].
    #[doc(alias = "AMDKFD_IOC_CREATE_EVENT")]
    pub fn create_event_on_page(
        &self,
        kind: EventKind,
        auto_reset: bool,
        page: &BufferObject,
    ) -> Result<Event> {
        self.create_event_with_page(kind, auto_reset, page.handle())
    }

    fn create_event_with_page(
        &self,
        kind: EventKind,
        auto_reset: bool,
        page: u64,
    ) -> Result<Event> {
        self.check_owner("CREATE_EVENT")?;
        let mut args = abi::kfd_ioctl_create_event_args {
            event_page_offset: page,
            event_type: kind.raw(),
            auto_reset: u32::from(auto_reset),
            ..Default::default()
        };
        let context = if page != 0 {
            IoctlContext::handle(page)
        } else {
            IoctlContext::default()
        };
        self.call(abi::AMDKFD_IOC_CREATE_EVENT, &mut args, context)?;
        let signal = kind == EventKind::Signal;
        Ok(Event {
            kfd: self.clone(),
            id: args.event_id,
            kind,
            slot: signal.then_some(args.event_slot_index),
            page_offset: args.event_page_offset,
            closed: false,
        })
    }

    /// `WAIT_EVENTS`: waits up to `timeout_ms` milliseconds (`u32::MAX`: forever) for any (or
    /// with `all`, every) event of `events`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty list or one longer than `u32::MAX`; `EINVAL` for
    /// an id the kernel does not know; `EIO` when an event was destroyed while waiting;
    /// `EINTR`-retries are bounded ([`Error::Interrupted`]).
    #[doc(alias = "AMDKFD_IOC_WAIT_EVENTS")]
    pub fn wait_events(
        &self,
        events: &[&Event],
        all: bool,
        timeout_ms: u32,
    ) -> Result<WaitOutcome> {
        let invalid = |reason| Error::InvalidArgument {
            ioctl: "WAIT_EVENTS",
            reason,
        };
        if events.is_empty() {
            return Err(invalid("no events to wait for"));
        }
        let num_events = u32::try_from(events.len()).map_err(|_| invalid("too many events"))?;
        let mut data: Vec<kfd_event_data> = events
            .iter()
            .map(|e| kfd_event_data {
                event_id: e.id,
                ..Default::default()
            })
            .collect();
        let mut args = abi::kfd_ioctl_wait_events_args {
            events_ptr: data.as_mut_ptr() as u64,
            num_events,
            wait_for_all: u32::from(all),
            timeout: timeout_ms,
            wait_result: 0,
        };
        // SAFETY: `events_ptr` is `data`, `num_events` entries the kernel reads and writes,
        // alive and not otherwise borrowed for the call.
        unsafe {
            self.call_with_pointers(
                abi::AMDKFD_IOC_WAIT_EVENTS,
                &mut args,
                IoctlContext::default(),
            )
        }?;
        if args.wait_result == abi::KFD_IOC_WAIT_RESULT_TIMEOUT {
            return Ok(WaitOutcome::Timeout);
        }
        Ok(WaitOutcome::Complete(
            events
                .iter()
                .zip(&data)
                .map(|(e, d)| {
                    let fault = d.memory_exception_data();
                    (e.kind == EventKind::Memory && (fault.gpu_id != 0 || fault.va != 0))
                        .then(|| MemoryFault::from_raw(&fault))
                })
                .collect(),
        ))
    }
}
