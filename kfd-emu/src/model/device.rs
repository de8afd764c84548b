//! The device layer: read-only data of the machine the model drives (the kernel's
//! `kfd_node`/`adev`): the configuration, its GPUs, the host's memory limits and the timing
//! model's costs. Nothing here changes after the model is made except the model's clock (an
//! atomic counter, like the GPU's own timestamp counter), and nothing here depends on a
//! process or a caller.

use std::sync::Arc;

use crate::machine::Machine;

use super::fail::FailRule;
use super::memory::Limits;
use super::timing::{Clock, ClockMode, Costs, Timing};

/// How the model behaves: which machine, which KFD version, and the emulator-only extras.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The machine whose GPUs the model drives.
    pub machine: Machine,
    /// The KFD minor version to act as (1.x). Ioctls newer than this fail as that kernel's
    /// dispatcher would. Default: the header's, 23.
    pub kfd_minor: u32,
    /// Print every ioctl to stderr, decoded, strace-style.
    pub trace: bool,
    /// Errors to inject before the handler runs.
    pub fail: Vec<FailRule>,
    /// Report what a process leaves behind when it exits (buffer objects, mappings, events)
    /// as leaks ([`Model::leaks_found`](super::Model::leaks_found)), and what survives its
    /// teardown ([`check_teardown`](Self::check_teardown)).
    pub check_leaks: bool,
    /// Check that a process's teardown frees everything, as the kernel's does
    /// (`kfd_process_wq_release`): memory, charges, dma-bufs no one holds; what survives is
    /// an emulator leak ([`Model::teardown_leaks_found`](super::Model::teardown_leaks_found)).
    /// What the process still held at exit is reported too, for information: the kernel
    /// frees it then, so a program that never cleans up (HIP, which never calls
    /// `hsa_shut_down`) does not leak by it.
    pub check_teardown: bool,
    /// The timing model's parameters (`kfd-emu run --timing FILE`).
    pub timing: Timing,
    /// Which time SMI records, GET_CLOCK_COUNTERS and WAIT_EVENTS timeouts show
    /// (`kfd-emu run --clock`): the host's (default) or the timing model's.
    pub clock: ClockMode,
    /// The most threads one kernel dispatch runs its workgroups on (`kfd-emu run
    /// --gpu-threads`; see `kernel`). Default: the host's available parallelism.
    pub gpu_threads: usize,
    /// Which KFD driver the model is (`kfd-emu run --kernel`): the mainline kernel's
    /// (default) or AMD's out-of-tree amdgpu-dkms driver, which adds the IPC and PC-sampling
    /// ioctls (`dkms`).
    pub kernel: Kernel,
    /// Whether the doorbell watcher runs (default): a thread that reads idle queues' doorbells
    /// through a mapping and wakes their engines, so work a program rings and then only spins
    /// on runs within a fraction of a millisecond (`doorbells`). Off, an idle engine finds
    /// such work at its next poll (every 5 ms at the slowest): for comparisons
    /// (`benches/queue_error_latency.rs`).
    pub doorbell_watch: bool,
}

/// Which KFD driver the model acts as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kernel {
    /// The mainline Linux kernel's amdkfd (`kfd_ioctl.h` of torvalds/linux): ioctl numbers
    /// from `AMDKFD_COMMAND_START` to `AMDKFD_COMMAND_END` only.
    #[default]
    Mainline,
    /// AMD's out-of-tree driver (amdgpu-dkms, ROCm/ROCK-Kernel-Driver): mainline's ioctls
    /// plus its second range from `AMDKFD_COMMAND_START_2` (0x80): IPC_IMPORT_HANDLE,
    /// IPC_EXPORT_HANDLE and PC_SAMPLE; and the module reports its version in
    /// `/sys/module/amdgpu/version`, which mainline's amdgpu has not.
    Dkms,
}

impl Default for ModelConfig {
    /// The `mi300x` machine at KFD 1.23 of the mainline kernel, no tracing, no faults, no leak
    /// check, the default timing model on the wall clock, kernels on as many threads as the
    /// host has cores, the doorbell watcher on.
    fn default() -> Self {
        ModelConfig {
            machine: Machine::default(),
            kfd_minor: kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION,
            trace: false,
            fail: Vec::new(),
            check_leaks: false,
            check_teardown: false,
            timing: Timing::default(),
            clock: ClockMode::Wall,
            gpu_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: Kernel::Mainline,
            doorbell_watch: true,
        }
    }
}

/// What the model knows of the device, fixed when it is made: the configuration (machine, KFD
/// version, extras), the machine's memory limits and the timing model's costs; and the model's
/// clock, the one thing here that moves (an atomic counter of modeled time).
#[derive(Debug)]
pub(super) struct Device {
    pub cfg: ModelConfig,
    pub limits: Limits,
    pub costs: Costs,
    pub clock: Arc<Clock>,
    /// The GPU translations' generation: bumped by every invalidation of GPU page-table
    /// entries of process memory (an MMU-notifier event: [`addrspace`](super::addrspace);
    /// SVM pages unmapped from GPUs: `svm_range_unmap_from_gpus`), which running dispatches'
    /// translation caches (`kernel`) check on every access and drop when it changed.
    pub translations: std::sync::atomic::AtomicU64,
    /// Each GPU's global wave sync resources (by GPU index), the hardware's: `kfd_gws_init`
    /// gives KFD the device's whole GWS (`amdgpu_amdkfd_alloc_gws` of `gds.gws_size`, 64 on
    /// gfx9), and a queue given them with ALLOC_QUEUE_GWS reaches them from its dispatches
    /// ([`kernel`](super::kernel)). Where it differs: two processes' GWS queues share the
    /// counters here at once, where the HWS would run them in turns (more than one GWS queue
    /// makes the runlist oversubscribed, `pm_calc_rlib_size`) and save and restore the
    /// waves' state with CWSR.
    pub gws: Vec<Arc<kfd_gfx9::gws::Gws>>,
}

impl Device {
    /// The device for `cfg`, with its machine's memory limits.
    pub(super) fn new(cfg: ModelConfig) -> Device {
        let costs = Costs::new(&cfg.machine, cfg.timing.clone());
        let clock = Arc::new(Clock::new(cfg.clock));
        let gws = cfg
            .machine
            .gpus()
            .iter()
            .map(|_| Arc::new(kfd_gfx9::gws::Gws::new()))
            .collect();
        let limits = Limits::of_machine(&cfg.machine);
        Device {
            gws,
            cfg,
            limits,
            costs,
            clock,
            translations: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Bumps [`translations`](Self::translations).
    pub(super) fn invalidate_translations(&self) {
        self.translations
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Times an SDMA copy of `bytes` run by an engine of GPU `engine` from `src` to `dst`
    /// (`None`: system memory; `Some(i)`: GPU `i`'s VRAM): advances the model clock by
    /// [`Costs::sdma_copy_ns`] and returns the clock's time when the copy completes (what a
    /// completion's timestamp or fence should carry).
    pub(super) fn time_sdma_copy(
        &self,
        engine: usize,
        src: Option<usize>,
        dst: Option<usize>,
        bytes: u64,
    ) -> u64 {
        self.clock
            .advance(self.costs.sdma_copy_ns(engine, src, dst, bytes));
        self.clock.now_ns()
    }

    /// The GPU index of `gpu_id` in the machine.
    pub(super) fn gpu_index(&self, gpu_id: u32) -> Option<usize> {
        self.cfg
            .machine
            .gpus()
            .iter()
            .position(|gpu| gpu.gpu_id == gpu_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sdma_copy_advances_the_model_clock_by_its_cost() {
        let dev = Device::new(ModelConfig {
            machine: Machine::preset("mi210x8").expect("preset"),
            clock: ClockMode::Model,
            ..ModelConfig::default()
        });
        let start = dev.clock.now_ns();
        let cost = dev.costs.sdma_copy_ns(0, None, Some(0), 64 << 20);
        // 64 MiB over 32000 MB/s PCIe at 80%, plus the setup.
        assert_eq!(cost, 3_000 + (64u64 << 20) * 1000 / 25_600);
        assert_eq!(dev.time_sdma_copy(0, None, Some(0), 64 << 20), start + cost);
        assert_eq!(dev.clock.modeled_ns(), cost);
    }
}
