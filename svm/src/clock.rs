//! Clock correlation: GET_CLOCK_COUNTERS samples of a GPU and the fit relating its counter to
//! `CLOCK_BOOTTIME`, the clock SMI timestamps are in.
//!
//! The kernel's `kfd_ioctl_get_clock_counters` returns, at one instant, the GPU's counter
//! (`amdgpu_amdkfd_get_gpu_clock_counter`: the 100 MHz reference clock on gfx9 and later),
//! `ktime_get_raw_ns()` and `ktime_get_boottime_ns()` with the frequency 10^9. Two samples,
//! one at the start and one at the end of a recording, give the GPU counter's rate and offset
//! in `CLOCK_BOOTTIME` ns, so GPU timestamps (of kernels, of SDMA copies) can be put on the
//! SMI records' time line.

use std::fmt;

/// One GET_CLOCK_COUNTERS sample of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockSample {
    /// The GPU's `gpu_id`.
    pub gpu_id: u32,
    /// Its KFD topology node id (rocprofv3's agent id).
    pub node_id: u32,
    /// `gpu_clock_counter`.
    pub gpu_counter: u64,
    /// `cpu_clock_counter` (`CLOCK_MONOTONIC_RAW` ns).
    pub cpu_counter: u64,
    /// `system_clock_counter` (`CLOCK_BOOTTIME` ns).
    pub system_counter: u64,
    /// `system_clock_freq` (10^9).
    pub system_freq: u64,
}

/// The linear relation between one GPU's counter and `CLOCK_BOOTTIME`, from two samples:
/// `boottime_ns = at_ns + (counter - at_counter) * ns_per_tick`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockFit {
    /// The GPU.
    pub gpu_id: u32,
    /// Its node id.
    pub node_id: u32,
    /// The GPU counter's rate, Hz.
    pub gpu_hz: f64,
    /// The first sample's counter.
    pub at_counter: u64,
    /// The first sample's `CLOCK_BOOTTIME` ns.
    pub at_ns: u64,
    /// The time between the samples, ns.
    pub span_ns: u64,
}

impl ClockFit {
    /// The fit of two samples of one GPU (in either order); `None` when they are of different
    /// GPUs, when no time passed between them, when the GPU counter did not advance (0: a
    /// gpu_id the process lacks) or the system frequency is 0.
    pub fn new(a: &ClockSample, b: &ClockSample) -> Option<ClockFit> {
        let (a, b) = if a.system_counter <= b.system_counter {
            (a, b)
        } else {
            (b, a)
        };
        if a.gpu_id != b.gpu_id || a.system_freq == 0 || a.system_freq != b.system_freq {
            return None;
        }
        let dt = b.system_counter.checked_sub(a.system_counter)?;
        let dg = b.gpu_counter.checked_sub(a.gpu_counter)?;
        if dt == 0 || dg == 0 {
            return None;
        }
        let seconds = dt as f64 / a.system_freq as f64;
        let to_ns = 1e9 / a.system_freq as f64;
        Some(ClockFit {
            gpu_id: a.gpu_id,
            node_id: a.node_id,
            gpu_hz: dg as f64 / seconds,
            at_counter: a.gpu_counter,
            at_ns: (a.system_counter as f64 * to_ns) as u64,
            span_ns: (dt as f64 * to_ns) as u64,
        })
    }

    /// The fits of `samples`: for each GPU, its first and last sample.
    pub fn of_samples(samples: &[ClockSample]) -> Vec<ClockFit> {
        let mut gpus: Vec<u32> = samples.iter().map(|s| s.gpu_id).collect();
        gpus.sort_unstable();
        gpus.dedup();
        gpus.into_iter()
            .filter_map(|g| {
                let mine: Vec<&ClockSample> = samples.iter().filter(|s| s.gpu_id == g).collect();
                let first = mine.iter().min_by_key(|s| s.system_counter)?;
                let last = mine.iter().max_by_key(|s| s.system_counter)?;
                ClockFit::new(first, last)
            })
            .collect()
    }

    /// ns per GPU counter tick.
    pub fn ns_per_tick(&self) -> f64 {
        1e9 / self.gpu_hz
    }

    /// The `CLOCK_BOOTTIME` ns of GPU counter value `counter`.
    pub fn boottime_ns(&self, counter: u64) -> f64 {
        self.at_ns as f64 + (counter as f64 - self.at_counter as f64) * self.ns_per_tick()
    }
}

impl fmt::Display for ClockFit {
    /// `clock: GPU 0x7396 (node 1) counter at 100.000000 MHz; boottime_ns = 123 + (counter -
    /// 456) x 10.000000 over 1.234 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "clock: GPU {:#x} (node {}) counter at {:.6} MHz; boottime_ns = {} + (counter - {}) \
             x {:.6} ns, fitted over {:.6} s",
            self.gpu_id,
            self.node_id,
            self.gpu_hz / 1e6,
            self.at_ns,
            self.at_counter,
            self.ns_per_tick(),
            self.span_ns as f64 / 1e9
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu_id: u32, gpu: u64, system: u64) -> ClockSample {
        ClockSample {
            gpu_id,
            node_id: 1,
            gpu_counter: gpu,
            cpu_counter: system,
            system_counter: system,
            system_freq: 1_000_000_000,
        }
    }

    #[test]
    fn two_samples_give_the_rate_and_offset() {
        // 100 MHz: 2 s of boottime are 200 000 000 ticks.
        let a = sample(7, 5_000, 10_000_000_000);
        let b = sample(7, 200_005_000, 12_000_000_000);
        let fit = ClockFit::new(&b, &a).expect("a fit");
        assert_eq!(fit.gpu_hz, 100e6);
        assert_eq!(fit.ns_per_tick(), 10.0);
        assert_eq!(fit.boottime_ns(5_000), 10e9);
        assert_eq!(fit.boottime_ns(100_005_000), 11e9);
        assert_eq!(fit.span_ns, 2_000_000_000);
        assert!(fit.to_string().contains("100.000000 MHz"), "{fit}");
        // A GPU counter of 0 (gpu_id unknown to the process), another GPU, no time: no fit.
        assert_eq!(ClockFit::new(&sample(7, 0, 1), &sample(7, 0, 2)), None);
        assert_eq!(ClockFit::new(&a, &sample(8, 9, 11_000_000_000)), None);
        assert_eq!(ClockFit::new(&a, &a), None);
        let fits = ClockFit::of_samples(&[a, sample(9, 0, 3), b, sample(7, 100, 10_500_000_000)]);
        assert_eq!(fits.len(), 1);
        assert_eq!(fits[0].gpu_hz, 100e6);
    }
}
