//! How `kfdtool` re-runs itself under the embedded emulator on a machine without `/dev/kfd`.

use std::sync::Arc;

use kfd_emu::model::SvmObserver;

/// Set in the environment of a `kfdtool` that runs under the embedded emulator.
pub(crate) const EMULATED_ENV: &str = "KFDTOOL_EMULATED_MACHINE";

/// Runs this executable again, with the same arguments, under the embedded emulator on the
/// machine preset `machine`; `marker_env` is set in the child's environment to the machine's
/// name, so the child knows not to fall back again; `vram` gives every GPU that many bytes of
/// VRAM, and `clock` is the time the emulated driver shows. `observe` may give an SVM observer
/// for the machine, which is installed on the model before the child starts (`kfdtool trace`'s
/// [`SvmRecorder`](kfdtool::svm_table::SvmRecorder)). Returns the child's exit code.
pub fn run_self_emulated(
    machine: &str,
    vram: Option<u64>,
    clock: kfd_emu::model::ClockMode,
    marker_env: &str,
    observe: impl FnOnce(&kfd_emu::machine::Machine) -> Option<Arc<dyn SvmObserver>>,
) -> std::process::ExitCode {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{Model, ModelConfig};
    use std::process::ExitCode;

    let Some(preset) = Machine::preset(machine) else {
        let names: Vec<&str> = Machine::presets().iter().map(|(name, _)| *name).collect();
        eprintln!(
            "kfdtool: no emulated machine named {machine}; choose one of {}",
            names.join(", ")
        );
        return ExitCode::FAILURE;
    };
    let preset = match vram.map(|bytes| preset.with_vram(bytes)) {
        None => preset,
        Some(Ok(machine)) => machine,
        Some(Err(e)) => {
            eprintln!("kfdtool: giving the emulated GPUs {vram:?} bytes of VRAM failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let model = match Model::new(ModelConfig {
        machine: preset,
        clock,
        ..ModelConfig::default()
    }) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("kfdtool: building the emulated machine failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(observer) = observe(model.machine())
        && model.observe_svm(observer).is_err()
    {
        eprintln!("kfdtool: the emulated machine has an SVM observer already");
        return ExitCode::FAILURE;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("kfdtool: cannot find my own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut command = std::process::Command::new(exe);
    command
        .args(std::env::args_os().skip(1))
        .env(marker_env, machine);
    match kfd_emu::supervisor::spawn_command(model, &mut command) {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("kfdtool: running under the emulator failed: {e}");
            ExitCode::FAILURE
        }
    }
}
