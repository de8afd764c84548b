//! What a tool running programs on the model may watch that no KFD interface reports about
//! another process: every successful SVM SET_ATTR (its range and attributes) and every
//! process's XNACK mode. On hardware nothing tells a profiler another process's SET_ATTR (the
//! kernel's SMI events carry migrations, faults and evictions, not attribute changes:
//! `kfd_smi_events.c`), so this is the emulator's addition, for tools such as `kfdtool trace`
//! whose replay needs it.
//!
//! An observer is installed explicitly, once, with
//! [`Model::observe_svm`](super::Model::observe_svm); a model without one calls nothing. It is
//! called with the model's lock held, after the call succeeded: it must only record (no
//! ioctl, no model call).

use std::sync::Arc;

use kfd_ioctl::abi::kfd_ioctl_svm_attribute;

/// One successful `AMDKFD_IOC_SVM` SET_ATTR.
#[derive(Debug, Clone)]
pub struct SvmSetAttr {
    /// The calling process (tgid).
    pub tgid: i32,
    /// When it returned: the model clock's now (the time SMI records show), ns.
    pub time_ns: u64,
    /// The range's first byte.
    pub start: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Whether it covered memory no SVM range held before (a registration).
    pub registers: bool,
    /// The attributes, as the caller passed them.
    pub attrs: Vec<kfd_ioctl_svm_attribute>,
    /// The process's XNACK mode at the time.
    pub xnack: bool,
}

/// A watcher of the model's SVM calls (see the module docs).
pub trait SvmObserver: Send + Sync {
    /// A SET_ATTR succeeded.
    fn set_attr(&self, call: &SvmSetAttr);
    /// Process `tgid`'s XNACK mode is `on`, as a successful SET_XNACK_MODE (a query or a set)
    /// left it.
    fn xnack(&self, tgid: i32, on: bool);
}

/// The installed observer, as the driver holds it.
pub(super) struct Observer(pub Arc<dyn SvmObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}
