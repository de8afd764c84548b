//! The runtime author's example (`examples/first_day.rs`) runs, unchanged, under kfd-emu's
//! MI300X (one GPU), 8× MI210 (peer copies) and an RX 9070 XT behind a small BAR: every
//! copy arrives and nothing fails.

#[path = "../examples/first_day.rs"]
mod first_day;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};

fn run_on(machine: &str) -> Vec<&'static str> {
    let preset = Machine::preset(machine).expect("preset");
    let model = Model::new(ModelConfig {
        machine: preset,
        ..ModelConfig::default()
    })
    .expect("model");
    kfd_emu::supervisor::run_attached(model, first_day::run)
        .expect("attach")
        .unwrap_or_else(|e| panic!("{machine}: {e}"))
}

#[test]
fn the_first_day_program_runs_on_one_gpu() {
    assert_eq!(
        run_on("mi300x"),
        ["host → VRAM → host", "VRAM → SVM"],
        "every check ran"
    );
}

#[test]
fn the_first_day_program_copies_between_gpus() {
    assert_eq!(
        run_on("mi210x8"),
        ["host → VRAM → host", "VRAM → SVM", "GPU 0 → GPU 1"],
        "every check ran"
    );
}

/// Behind a small BAR (VRAM the CPU cannot map) the program still runs: it never asks for
/// host-visible VRAM, and the copy engine moves the bytes.
#[test]
fn the_first_day_program_runs_behind_a_small_bar() {
    assert_eq!(
        run_on("rx9070xt-small-bar"),
        ["host → VRAM → host", "VRAM → SVM"],
        "every check ran"
    );
}
