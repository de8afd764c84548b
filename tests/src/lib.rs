//! `kfd-tests`: cross-crate integration tests and the harness they share.
//!
//! Every test body runs once per *target*: on kfd-emu (one or more emulated machines, always),
//! and on the real `/dev/kfd` when the machine has one. `KFD_TEST_HW=1` makes a missing
//! `/dev/kfd` a failure instead of a printed skip. A test body is written against the product
//! API only (`Kfd`, topology), so the same assertions hold on an MI300X.

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};

/// Where a test body runs.
#[derive(Debug, Clone)]
pub enum Target {
    /// Under kfd-emu, on the named machine preset.
    Emulated {
        /// The preset name (`mi300x`, `mi210x8`, …).
        machine: &'static str,
        /// The model answering the body's syscalls (for GPU-side views in emulator-only checks).
        model: Arc<Model>,
    },
    /// On the machine's own `/dev/kfd`.
    Hardware,
}

impl Target {
    /// A short name for messages.
    pub fn name(&self) -> String {
        match self {
            Target::Emulated { machine, .. } => format!("kfd-emu/{machine}"),
            Target::Hardware => "hardware".to_owned(),
        }
    }
}

/// Whether the hardware run is required (`KFD_TEST_HW=1`).
pub fn hardware_required() -> bool {
    std::env::var("KFD_TEST_HW").is_ok_and(|v| v == "1")
}

/// Whether this machine has a KFD device to test on.
pub fn hardware_present() -> bool {
    std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH).exists()
}

/// Runs `body` on each emulated machine of `machines`, then on the hardware when present.
///
/// Emulated runs happen on a fresh thread attached to a fresh model, so their KFD state is
/// their own. A panic in the body fails the test with the target's name.
pub fn on_every_target(machines: &[&'static str], body: impl Fn(&Target) + Send + Sync) {
    for &machine in machines {
        let preset = Machine::preset(machine)
            .unwrap_or_else(|| panic!("no kfd-emu machine preset named {machine}"));
        let model = Model::new(ModelConfig {
            machine: preset,
            ..ModelConfig::default()
        })
        .unwrap_or_else(|e| panic!("kfd-emu/{machine}: building the model failed: {e}"));
        let target = Target::Emulated {
            machine,
            model: model.clone(),
        };
        kfd_emu::supervisor::run_attached(model, || body(&target))
            .unwrap_or_else(|e| panic!("kfd-emu/{machine}: attaching the emulator failed: {e}"));
    }
    if hardware_present() {
        body(&Target::Hardware);
    } else if hardware_required() {
        panic!(
            "KFD_TEST_HW=1 but this machine has no {}",
            kfd_ioctl::KFD_DEVICE_PATH
        );
    } else {
        kfd_skip::skip_part(
            "the hardware run",
            &format!(
                "this machine has no {} (set KFD_TEST_HW=1 to require it)",
                kfd_ioctl::KFD_DEVICE_PATH
            ),
        );
    }
}

/// An anonymous `PROT_NONE` reservation of the process's address space, released on drop
/// (kfd-ioctl's [`Reservation`](kfd_ioctl::mem::Reservation), which panics here on failure).
///
/// libhsakmt places GPU VAs of buffer objects at addresses it reserved this way, so the GPU
/// VA never collides with CPU memory or SVM ranges; tests do the same.
#[derive(Debug)]
pub struct VaReservation(kfd_ioctl::mem::Reservation);

impl VaReservation {
    /// Reserves `len` bytes (whole pages) aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> VaReservation {
        match kfd_ioctl::mem::Reservation::new(len, align) {
            Ok(reservation) => VaReservation(reservation),
            Err(errno) => panic!("reserving {len:#x} bytes aligned to {align:#x}: {errno}"),
        }
    }

    /// The reserved address.
    pub fn addr(&self) -> u64 {
        self.0.addr().as_ptr() as u64
    }
}
