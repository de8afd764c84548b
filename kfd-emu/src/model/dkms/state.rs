//! What the out-of-tree driver keeps for its own ioctls, apart from the processes: the IPC
//! share-handle store (`kfd_ipc_handles` of `kfd_ipc.c`) and each GPU's PC-sampling data
//! (`kfd_node::pcs_data` of `kfd_pc_sampling.c`). Plain data with no reference to the model
//! or a caller (the state layer); the handlers in the parent module run the behaviour.

use std::collections::{BTreeMap, HashMap};

use super::abi::kfd_pc_sample_info;

/// The driver-wide DKMS state (in [`Driver`](super::super::driver::Driver), under its own
/// lock, taken after the model state's when both are held).
#[derive(Debug, Default)]
pub(crate) struct DkmsState {
    /// Share handle → IPC object.
    pub ipc: HashMap<[u32; 4], IpcObj>,
    /// Per GPU index: its PC-sampling data (made on first use).
    pub pcs: Vec<PcsNode>,
}

/// `struct kfd_ipc_obj`: memory shared by a 128-bit random handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpcObj {
    /// The memory (the model's backing id; the kernel's dma-buf of the BO).
    pub backing: u64,
    /// The exporter's `flags`, given back at each import.
    pub flags: u32,
}

/// `kfd_node::pcs_data`: one GPU's PC-sampling methods in use and their sessions.
#[derive(Debug, Default)]
pub(crate) struct PcsNode {
    /// `hosttrap_entry.base`.
    pub hosttrap: PcsMethod,
    /// `stoch_entry.base`.
    pub stochastic: PcsMethod,
    /// `sampling_idr`: session (trace id) → session.
    pub sessions: BTreeMap<u32, PcsSession>,
    /// Where `idr_alloc_cyclic` starts its next search.
    pub next_id: u32,
}

/// One method's use on a GPU (`struct pc_sampling_entry_base`'s counts and format).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PcsMethod {
    /// Sessions created with it (`use_count`).
    pub use_count: u32,
    /// Sessions started (`active_count`): the host-trap thread runs while it is not 0.
    pub active_count: u32,
    /// The format of the first session, which every later one must match
    /// (`pc_sample_info`; zeroed when the last session goes).
    pub info: kfd_pc_sample_info,
}

/// `struct pc_sampling_entry`: a session of one process device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PcsSession {
    /// The process (its tgid and the model's serial of it: the kernel compares the
    /// `kfd_process_device`).
    pub tgid: i32,
    pub serial: u64,
    /// `KFD_IOCTL_PCS_METHOD_*`.
    pub method: u32,
    /// Started (`enabled`).
    pub enabled: bool,
}

impl PcsNode {
    /// The method's counts.
    pub(crate) fn method(&mut self, method: u32) -> &mut PcsMethod {
        if method == super::abi::KFD_IOCTL_PCS_METHOD_HOSTTRAP {
            &mut self.hosttrap
        } else {
            &mut self.stochastic
        }
    }

    /// `idr_alloc_cyclic(idr, ptr, 1, 0)`: the first free id from the one after the last
    /// given, wrapping from `INT_MAX` back to 1; `None` when every id is taken.
    pub(crate) fn alloc_id(&mut self) -> Option<u32> {
        let max = i32::MAX as u32;
        let start = self.next_id.clamp(1, max);
        let mut id = start;
        loop {
            if !self.sessions.contains_key(&id) {
                self.next_id = if id == max { 1 } else { id + 1 };
                return Some(id);
            }
            id = if id == max { 1 } else { id + 1 };
            if id == start {
                return None;
            }
        }
    }
}

impl PcsNode {
    /// `kfd_pc_sample_start`: the first started session of a method starts it on the GPU.
    pub(crate) fn start(&mut self, id: u32) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        s.enabled = true;
        let method = s.method;
        self.method(method).active_count += 1;
    }

    /// `kfd_pc_sample_stop`: the last stopped session of a method stops it on the GPU.
    pub(crate) fn stop(&mut self, id: u32) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        s.enabled = false;
        let method = s.method;
        let counts = self.method(method);
        counts.active_count = counts.active_count.saturating_sub(1);
    }

    /// `kfd_pc_sample_destroy`: the last session of a method frees its format.
    pub(crate) fn destroy(&mut self, id: u32) {
        let Some(s) = self.sessions.remove(&id) else {
            return;
        };
        let counts = self.method(s.method);
        counts.use_count = counts.use_count.saturating_sub(1);
        if counts.use_count == 0 {
            counts.info = kfd_pc_sample_info::default();
        }
    }
}

impl DkmsState {
    /// `kfd_pc_sample_release` (from `kfd_process_destroy_pdds`): process `(tgid, serial)`
    /// went away; its sessions on every GPU are stopped and destroyed. Its IPC objects need
    /// nothing: an object lives while a BO on its memory does (`dkms::ipc`).
    pub(crate) fn release(&mut self, tgid: i32, serial: u64) {
        for node in &mut self.pcs {
            let ids: Vec<(u32, bool)> = node
                .sessions
                .iter()
                .filter(|(_, s)| (s.tgid, s.serial) == (tgid, serial))
                .map(|(&id, s)| (id, s.enabled))
                .collect();
            for (id, enabled) in ids {
                if enabled {
                    node.stop(id);
                }
                node.destroy(id);
            }
        }
    }

    /// GPU index `gpu`'s PC-sampling data.
    pub(crate) fn pcs(&mut self, gpu: usize) -> &mut PcsNode {
        if self.pcs.len() <= gpu {
            self.pcs.resize_with(gpu + 1, PcsNode::default);
        }
        &mut self.pcs[gpu]
    }

    /// The share handle of the IPC object on `backing`, if one was made.
    pub(crate) fn ipc_handle_of(&self, backing: u64) -> Option<[u32; 4]> {
        self.ipc
            .iter()
            .find(|(_, obj)| obj.backing == backing)
            .map(|(handle, _)| *handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> PcsSession {
        PcsSession {
            tgid: 1,
            serial: 1,
            method: 1,
            enabled: false,
        }
    }

    #[test]
    fn ids_are_cyclic_from_one_and_skip_those_in_use() {
        let mut node = PcsNode::default();
        let a = node.alloc_id().unwrap();
        assert_eq!(a, 1);
        node.sessions.insert(a, session());
        let b = node.alloc_id().unwrap();
        assert_eq!(b, 2);
        node.sessions.insert(b, session());
        // Freeing 1 does not make it the next id: the search goes on from 3.
        node.sessions.remove(&a);
        assert_eq!(node.alloc_id(), Some(3));
        // At INT_MAX it wraps to 1, skipping ids in use (1 and 2).
        node.next_id = i32::MAX as u32;
        node.sessions.insert(1, session());
        assert_eq!(node.alloc_id(), Some(i32::MAX as u32));
        assert_eq!(node.alloc_id(), Some(3));
    }
}
