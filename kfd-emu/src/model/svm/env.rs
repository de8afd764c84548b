//! What the SVM operations share (a leaf below [`svm`](super), [`migrate`](super::migrate)
//! and [`fault`](super::fault)): the device-wide state an operation works with besides the
//! process ([`Env`]), and the GPU bitmaps.

use std::collections::HashMap;

use super::super::device::Device;
use super::super::memory::Accounts;
use super::super::objects::Backing;
use super::super::process::{Process, State};
use super::super::smi::{Event, Smi};
use super::super::vmas::Vmas;

/// What the SVM code works with besides the process: the device-wide state and the caller's
/// VMAs as read at the start of the operation.
pub(super) struct Env<'a> {
    pub dev: &'a Device,
    pub acc: &'a mut Accounts,
    pub smi: &'a mut Smi,
    /// Per GPU: bytes of VRAM holding migrated SVM pages.
    pub svm_vram: &'a mut Vec<u64>,
    pub backings: &'a HashMap<u64, Backing>,
    pub vmas: &'a Vmas,
}

impl Env<'_> {
    pub(super) fn gpu_id(&self, gpu: usize) -> u32 {
        self.dev.cfg.machine.gpus()[gpu].gpu_id
    }

    /// `svm_nodes_in_same_hive`: the same device, or two GPUs of one XGMI hive.
    pub(super) fn same_hive(&self, a: usize, b: usize) -> bool {
        let gpus = self.dev.cfg.machine.gpus();
        a == b || (gpus[a].hive_id.is_some() && gpus[a].hive_id == gpus[b].hive_id)
    }

    /// Emits `event` to the SMI clients of GPU `gpu`.
    pub(super) fn emit(&mut self, gpu: usize, event: Event<'_>) {
        self.smi.emit(self.dev.cfg.kfd_minor, gpu, &event);
    }
}

/// Runs `f` on process `tgid` with the rest of the state as an [`Env`].
pub(super) fn with_env<R>(
    dev: &Device,
    st: &mut State,
    tgid: i32,
    vmas: &Vmas,
    f: impl FnOnce(&mut Env<'_>, &mut Process) -> R,
) -> Option<R> {
    let State {
        procs,
        acc,
        smi,
        svm_vram,
        backings,
        ..
    } = st;
    let p = procs.get_mut(&tgid)?;
    let mut env = Env {
        dev,
        acc,
        smi,
        svm_vram,
        backings,
        vmas,
    };
    Some(f(&mut env, p))
}

/// The GPU indices set in `mask`.
pub(super) fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..64).filter(move |g| mask & (1 << g) != 0)
}
