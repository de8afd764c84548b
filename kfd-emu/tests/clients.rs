//! Real, unmodified clients of `/dev/kfd` under `kfd-emu run`: a C program built against
//! Debian's libhsakmt, and ROCr's rocminfo. What they print is checked against the emulated
//! machine's topology.
//!
//! The packages (`libhsakmt-dev`, `rocminfo`) are installed by `cargo xtask test`. When one is
//! missing the test fails under `CI=true` and is recorded as skipped otherwise (`kfd_skip`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kfd_emu::machine::Machine;
use kfd_ioctl::topology::HeapType;

fn kfd_emu() -> &'static str {
    env!("CARGO_BIN_EXE_kfd-emu")
}

/// Returns false (after printing why) when `what` is missing and we may skip; panics under CI.
fn prerequisite(present: bool, what: &str) -> bool {
    if present {
        return true;
    }
    kfd_skip::prerequisite(format!("{what} is missing"));
    false
}

/// Runs `program` under `kfd-emu run --machine machine`, with `--check-leaks` when `leaks`
/// should fail the run (ROCr leaves its events page mapped at exit, as it does on hardware).
fn run_under_emulator(machine: &str, leaks: bool, program: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(kfd_emu());
    command.args(["run", "--machine", machine]);
    if leaks {
        command.arg("--check-leaks");
    }
    command
        .arg("--")
        .arg(program)
        .args(args)
        .output()
        .expect("running kfd-emu")
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Builds `tests/clients/<name>.c` into the target directory with `cc_args` (before the
/// source) and `libs` (after it); `None` (skip) when `files`, the package `what`, are missing.
fn build_probe(
    name: &str,
    files: &[&str],
    what: &str,
    cc_args: &[&str],
    libs: &[&str],
) -> Option<PathBuf> {
    if !prerequisite(files.iter().all(|f| Path::new(f).exists()), what) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/clients/{name}.c"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = Command::new("cc")
        .args(["-Wall", "-Werror", "-O1"])
        .args(cc_args)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .args(libs)
        .status()
        .expect("running cc");
    assert!(status.success(), "building {} failed", src.display());
    Some(out)
}

/// Builds the libhsakmt probe into the target directory.
fn build_hsakmt_probe() -> Option<PathBuf> {
    build_hsakmt_program("hsakmt_probe")
}

/// Builds `tests/clients/<name>.c` against libhsakmt.
fn build_hsakmt_program(name: &str) -> Option<PathBuf> {
    build_probe(
        name,
        &[
            "/usr/include/hsakmt.h",
            "/usr/lib/x86_64-linux-gnu/libhsakmt.so",
        ],
        "libhsakmt-dev (hsakmt.h, libhsakmt.so)",
        &[],
        &["-lhsakmt"],
    )
}

#[test]
fn libhsakmt_program_runs_on_every_preset() {
    let Some(probe) = build_hsakmt_probe() else {
        return;
    };
    for (name, _) in Machine::presets() {
        let machine = Machine::preset(name).unwrap();
        let topo = machine.topology();
        let out = run_under_emulator(name, true, &probe, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        assert!(
            text.contains("version 1.23\n"),
            "{name}: {}",
            describe(&out)
        );
        assert!(
            text.contains(&format!("nodes {}\n", topo.nodes.len())),
            "{name}: {text}"
        );
        for node in &topo.nodes {
            let p = &node.properties;
            let line = format!(
                "node {} cpu_cores={} simds={} ",
                node.id, p.cpu_cores_count, p.simd_count
            );
            assert!(text.contains(&line), "{name}: no line `{line}` in\n{text}");
            if node.is_gpu() {
                let render = format!("render={} ", p.drm_render_minor);
                let vram = format!("node {} vram={}\n", node.id, node.vram_size());
                // Behind a small BAR (no FB_PUBLIC bank) CPU-visible VRAM is refused and VRAM
                // for the GPU alone is allocated instead.
                let large_bar = node
                    .mem_banks
                    .iter()
                    .any(|b| b.heap() == HeapType::FrameBufferPublic);
                let mut wants = vec![render, vram];
                if large_bar {
                    wants.push(format!(
                        "alloc node={} kind=vram size=2097152 ok\n",
                        node.id
                    ));
                } else {
                    wants.push(format!(
                        "alloc node={} kind=vram size=2097152 refused\n",
                        node.id
                    ));
                    wants.push(format!(
                        "alloc node={} kind=vram-device size=2097152 ok\n",
                        node.id
                    ));
                }
                for want in wants {
                    assert!(text.contains(&want), "{name}: no `{want}` in\n{text}");
                }
                if node.capability().svm_api_supported() {
                    let svm = format!("svm node={} ok\n", node.id);
                    assert!(text.contains(&svm), "{name}: no `{svm}` in\n{text}");
                }
            }
        }
        // XNACK starts as kfd_process_xnack_mode(p, false) says (off on every preset);
        // turning it on works where kfd_process_xnack_mode(p, true) allows it.
        let mode = format!("xnack mode={}\n", u8::from(machine.xnack_mode(false)));
        assert!(text.contains(&mode), "{name}: no `{mode}` in\n{text}");
        let on = if machine.xnack_mode(true) {
            "xnack on ok\n"
        } else {
            "xnack on not-supported\n"
        };
        assert!(text.contains(on), "{name}: no `{on}` in\n{text}");
        assert!(
            text.contains("alloc node=0 kind=system size=1048576 ok\n"),
            "{name}: {text}"
        );
        assert!(text.ends_with("done\n"), "{name}: {text}");
    }
}

#[test]
fn rocminfo_lists_the_cpu_and_gpu_agents() {
    let rocminfo = Path::new("/usr/bin/rocminfo");
    if !prerequisite(rocminfo.exists(), "rocminfo") {
        return;
    }
    for (name, _) in Machine::presets() {
        let machine = Machine::preset(name).unwrap();
        let out = run_under_emulator(name, false, rocminfo, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        // lsmod (run by rocminfo) finds the module's sysfs directory too.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("libkmod: ERROR"), "{name}: {stderr}");
        let gpus = machine.topology().gpus().count();
        let cpu_agents = text.matches("Device Type:             CPU").count();
        let gpu_agents = text.matches("Device Type:             GPU").count();
        assert_eq!(
            cpu_agents,
            machine.topology().nodes.len() - gpus,
            "{name}: {text}"
        );
        // libhsakmt names each CPU agent by finding its node's cpu_core_id_base among
        // /proc/cpuinfo's apicids (`topology_get_cpu_model_name`): every CPU agent has a name
        // only when /proc/cpuinfo lists the topology's CPUs (mi210x8's second CPU was nameless
        // while it listed the host's).
        for agent in text.split("\nAgent ").skip(1) {
            if agent.contains("Device Type:             CPU") {
                let agent_name = agent
                    .lines()
                    .find_map(|l| l.trim_start().strip_prefix("Name:"))
                    .map(str::trim);
                assert!(
                    agent_name.is_some_and(|n| !n.is_empty()),
                    "{name}: a CPU agent without a name:\n{agent}"
                );
            }
        }
        // ROCr 5.2.3 (Debian's) knows the ISAs up to gfx90c and gfx103x; it skips a GPU of a
        // later one (gfx942, gfx11, gfx12) with a warning, as it would on that hardware.
        let mut known = 0;
        for gpu in machine.topology().gpus() {
            let isa = gpu
                .gfx_target_version()
                .expect("presets carry gfx_target_version");
            let want = format!("amdgcn-amd-amdhsa--{isa}");
            if rocr_5_2_knows(isa.major, isa.raw()) {
                known += 1;
                assert!(text.contains(&want), "{name}: no ISA {want} in\n{text}");
            } else {
                assert!(!text.contains(&want), "{name}: ISA {want} in\n{text}");
                assert!(
                    stderr.contains("The GPU node has an unrecognized id."),
                    "{name}: {}",
                    describe(&out)
                );
            }
        }
        assert_eq!(gpu_agents, known, "{name}: {text}");
    }
}

/// Whether ROCr 5.2.3 makes an agent of a GPU of `gfx_target_version` (`major`, `raw`): GFX9
/// up to gfx90c (90012) and GFX10 (gfx101x, gfx103x).
fn rocr_5_2_knows(major: u32, raw: Option<u32>) -> bool {
    match major {
        9 => raw.is_some_and(|raw| raw <= 90012),
        10 => true,
        _ => false,
    }
}

/// Builds the libdrm probe into the target directory.
fn build_drm_probe() -> Option<PathBuf> {
    build_probe(
        "drm_probe",
        &[
            "/usr/include/xf86drm.h",
            "/usr/lib/x86_64-linux-gnu/libdrm.so",
        ],
        "libdrm-dev (xf86drm.h, libdrm.so)",
        &["-I/usr/include/libdrm"],
        &["-ldrm"],
    )
}

/// libdrm's `drmGetDevices2` lists every emulated GPU once, with its primary node
/// `card<N>` and its render node `renderD<128+N>` folded into one device (both node bits
/// available), and the PCI location and ids of its topology node (opendir of /dev/dri, stat of
/// each node, the `/sys/dev/char/226:<minor>` entry, its `device/subsystem` link and the
/// `realpath` of its `device`); `drmGetDevice2` of an opened render node (its `fstat`) finds
/// the same device.
#[test]
fn libdrm_lists_the_render_nodes_with_their_pci_ids() {
    let Some(probe) = build_drm_probe() else {
        return;
    };
    for name in ["mi210x8", "mi100"] {
        let machine = Machine::preset(name).unwrap();
        let out = run_under_emulator(name, true, &probe, &[]);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines.first().copied(),
            Some(format!("count {}", machine.gpus().len()).as_str()),
            "{name}: {}",
            describe(&out)
        );
        lines.remove(0);
        let mut want: Vec<String> = machine
            .gpus()
            .iter()
            .map(|gpu| {
                let loc = gpu.location_id;
                format!(
                    "/dev/dri/renderD{} /dev/dri/card{} {:04x}:{:02x}:{:02x}.{:x} {:04x}:{:04x} \
                     nodes 0x5 fd same",
                    gpu.render_minor,
                    gpu.render_minor - 128,
                    gpu.pci_domain,
                    loc >> 8,
                    (loc >> 3) & 0x1f,
                    loc & 7,
                    gpu.vendor_id,
                    gpu.device_id
                )
            })
            .collect();
        want.sort();
        lines.sort();
        assert_eq!(lines, want, "{name}: {}", describe(&out));
    }
}

/// A C program under `kfd-emu run` (the traced filter) writes and polls its SMI event fd as
/// the kernel's `kfd_smi_ev_write` and `kfd_smi_ev_poll` answer: the fd is at a number of
/// `SMI_FDS`, a 4-byte write is `EFAULT`, a 16-byte one returns 8, a `writev` of two 8-byte
/// pieces 16, a `pwrite` `ESPIPE`, `poll(POLLIN | POLLOUT)` reports nothing, and a read of
/// the empty FIFO is `EAGAIN`.
#[test]
fn a_c_program_writes_and_polls_its_smi_fd_as_the_kernels() {
    let Some(probe) = build_probe(
        "smi_probe",
        &["/usr/include/stdio.h"],
        "libc6-dev",
        &[],
        &[],
    ) else {
        return;
    };
    let out = run_under_emulator("mi300x", true, &probe, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let fd: u32 = lines
        .next()
        .and_then(|l| l.strip_prefix("fd "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", describe(&out)));
    assert!(kfd_emu::backend::SMI_FDS.contains(&fd), "fd {fd}");
    assert_eq!(
        lines.collect::<Vec<_>>(),
        [
            "poll 0 0",
            "revents 0",
            "write4 -1 EFAULT",
            "write16 8 0",
            "writev 16 0",
            "pwrite -1 ESPIPE",
            "read -1 EAGAIN",
        ],
        "{}",
        describe(&out)
    );
}

/// libhsakmt's hsaKmtCreateQueue and hsaKmtDestroyQueue on kfd-emu, with a fence the SDMA
/// engine writes in between: on every preset, every GPU gets an SDMA queue whose FENCE lands
/// in system memory, and nothing is left behind under `--check-leaks`.
#[test]
fn libhsakmt_sdma_queue_runs_a_fence_on_every_preset() {
    let Some(program) = build_hsakmt_program("hsakmt_queue") else {
        return;
    };
    for (name, _) in Machine::presets() {
        let machine = Machine::preset(name).unwrap();
        let out = run_under_emulator(name, true, &program, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        for node in machine.topology().nodes.iter().filter(|n| n.is_gpu()) {
            let want = format!("queue node={} id=", node.id);
            let line = text.lines().find(|l| l.starts_with(&want));
            let line = line.unwrap_or_else(|| panic!("{name}: no `{want}` in\n{text}"));
            // The fence landed, and the engine wrote back the read pointer past it (16 bytes).
            assert!(line.ends_with("fence=0xc0ffee rptr=16"), "{name}: {line}");
        }
        assert!(text.ends_with("done\n"), "{name}: {text}");
    }
}

/// `--trace` prints each SDMA packet the engine executes, with its fields.
#[test]
fn trace_prints_the_sdma_packets_executed() {
    let Some(program) = build_hsakmt_program("hsakmt_queue") else {
        return;
    };
    let out = Command::new(kfd_emu())
        .args(["run", "--machine", "mi300x", "--trace", "--"])
        .arg(&program)
        .output()
        .expect("running kfd-emu");
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let fence = err
        .lines()
        .find(|l| l.contains(" sdma gpu ") && l.contains(": FENCE addr="))
        .unwrap_or_else(|| panic!("no traced FENCE in\n{err}"));
    assert!(fence.ends_with(" data=0xc0ffee"), "{fence}");
    // The queue's creation is traced as an ioctl, its type by name, before its packet.
    let create = err.find("CREATE_QUEUE").expect("CREATE_QUEUE traced");
    assert!(err[create..].contains("queue_type=SDMA,"), "{err}");
    assert!(create < err.find(fence).unwrap_or(0), "{err}");
}

/// `kfd-emu run --clock model`: a C program's GET_CLOCK_COUNTERS shows the model's time, which
/// stands still while nothing is modeled and advances by exactly a WAIT_EVENTS timeout
/// (10 ms + 1 jiffy at HZ=250) when the wait times out; with the default wall clock both
/// intervals are the host's time.
#[test]
fn under_the_model_clock_a_programs_clock_counters_advance_only_by_the_model() {
    let Some(probe) = build_probe(
        "clock_probe",
        &["/usr/include/stdio.h"],
        "libc6-dev",
        &[],
        &[],
    ) else {
        return;
    };
    let run = |clock: &str| {
        let out = Command::new(kfd_emu())
            .args(["run", "--machine", "mi300x", "--clock", clock, "--"])
            .arg(&probe)
            .output()
            .expect("running kfd-emu");
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(run("model"), "idle 0\nwait 1 14000000\nfreq 1000000000\n");
    let wall = run("wall");
    let field = |key: &str, n: usize| -> u64 {
        wall.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split(' ').nth(n))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {wall}"))
    };
    assert!(field("idle ", 0) > 0, "{wall}");
    assert_eq!(field("wait ", 0), 1, "{wall}");
    assert!(field("wait ", 1) >= 10_000_000, "{wall}");
}

/// The GFX9 presets ROCr 5.2.3 runs on: gfx906 (radeon-vii), gfx908 (mi100), gfx90a
/// (mi210x8).
const GFX9_PRESETS: [&str; 3] = ["radeon-vii", "mi100", "mi210x8"];

/// Runs `program` under `kfd-emu run --machine machine --check-leaks --trace` with `env` set.
fn run_traced(machine: &str, program: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(kfd_emu())
        .args([
            "run",
            "--machine",
            machine,
            "--check-leaks",
            "--trace",
            "--",
        ])
        .arg(program)
        .envs(env.iter().copied())
        .output()
        .expect("running kfd-emu")
}

/// Checks that what `--check-leaks` reports of a libhsakmt client is its events page alone:
/// libhsakmt 5.2.3 allocates it (`KFD_SIGNAL_EVENT_LIMIT` 8-byte slots, 32 KiB, mapped on
/// every GPU) at its first signal event, passes its handle as the first CREATE_EVENT's
/// `event_page_offset`, and never frees it (hsaKmtCloseKFD leaves it; the kernel frees it at
/// the process's exit, `kfd_process_free_outstanding_kfd_bos`). Anything else is a leak.
fn only_the_events_page_leaks(name: &str, out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    let Some(at) = err.find("exited with live KFD objects:\n") else {
        assert!(out.status.success(), "{name}: {}", describe(out));
        return;
    };
    assert_eq!(out.status.code(), Some(3), "{name}: {}", describe(out));
    let page = err
        .split("CREATE_EVENT(event_page_offset=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("{name}: no CREATE_EVENT traced\n{err}"));
    let report = err[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "));
    let mut lines = 0;
    for line in report {
        lines += 1;
        let span = line
            .strip_prefix("  mapping gpu_id=")
            .and_then(|l| l.split(" va=").nth(1))
            .and_then(|l| l.split_once(" handle="))
            .and_then(|(range, handle)| {
                let (start, end) = range.split_once("..")?;
                let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
                Some((hex(end)? - hex(start)?, handle == page))
            });
        assert_eq!(
            span,
            Some((32 << 10, true)),
            "{name}: a leak other than the events page ({page}): {line}"
        );
    }
    assert!(lines > 0, "{name}: {}", describe(out));
}

/// libhsakmt's hsaKmtCreateQueue(HSA_QUEUE_COMPUTE_AQL) and hsaKmtDestroyQueue on the GFX9
/// presets, with a BARRIER_AND packet the emulator's AQL packet processor runs in between: it
/// waits while its dependency signal holds 1, then is consumed (its header back to INVALID,
/// the read index at one) and decrements its completion signal to 0, whose event mailbox
/// wakes hsaKmtWaitOnEvent. The queue is created at KFD 1.23, so the kernel's buffer checks
/// (`kfd_queue_acquire_buffers`) see libhsakmt 5.2.3's own EOP and CWSR sizes: they are the
/// kernel's on these GPUs. (On the gfx942, gfx11 and gfx12 presets, which ROCm 5.2 predates,
/// its control stack size is not the node's `ctl_stack_size` and CREATE_QUEUE fails with
/// `EINVAL`, as it would on such a kernel.)
#[test]
fn libhsakmt_aql_queue_runs_a_barrier_on_the_gfx9_presets() {
    let Some(program) = build_hsakmt_program("hsakmt_aql") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let out = run_traced(name, &program, &[]);
        only_the_events_page_leaks(name, &out);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        for node in machine.topology().nodes.iter().filter(|n| n.is_gpu()) {
            let want = format!("aql node={} signal=0 rptr=1 header=1 event=woke\n", node.id);
            assert!(
                text.contains(&want),
                "{name}: no `{want}` in {}",
                describe(&out)
            );
        }
        assert!(text.ends_with("done\n"), "{name}: {text}");
        // Created as AQL queues, and the packet waited before it ran.
        let gpus = machine.topology().gpus().count();
        assert_eq!(
            err.matches("queue_type=COMPUTE_AQL,").count(),
            gpus,
            "{name}: {err}"
        );
        assert!(err.contains(": waits\n"), "{name}: {err}");
        assert_eq!(err.matches("DESTROY_QUEUE(").count(), gpus, "{name}: {err}");
    }
}

/// libhsakmt's hsaKmtCreateQueue(HSA_QUEUE_COMPUTE) on the GFX9 presets, driven as kfdtest's
/// PM4Queue drives it: one-dword NOPs, a WRITE_DATA and a RELEASE_MEM whose end-of-pipe
/// interrupt (with the event id in the mailbox) wakes hsaKmtWaitOnEvent; the CP's read
/// pointer reaches the 15 dwords written. (Before the PM4 processor, nothing ran on these
/// queues: the wait timed out.)
#[test]
fn libhsakmt_pm4_queue_runs_write_data_and_release_mem_on_the_gfx9_presets() {
    let Some(program) = build_hsakmt_program("hsakmt_pm4") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let out = run_traced(name, &program, &[]);
        only_the_events_page_leaks(name, &out);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        for node in machine.topology().nodes.iter().filter(|n| n.is_gpu()) {
            let want = format!("pm4 node={} data=0xc0ffee rptr=15 event=woke\n", node.id);
            assert!(
                text.contains(&want),
                "{name}: no `{want}` in {}",
                describe(&out)
            );
        }
        assert!(text.ends_with("done\n"), "{name}: {text}");
        let gpus = machine.topology().gpus().count();
        assert_eq!(
            err.matches("queue_type=COMPUTE,").count(),
            gpus,
            "{name}: {err}"
        );
        assert!(
            err.contains("RELEASE_MEM data_sel=2 int_sel=2"),
            "{name}: {err}"
        );
    }
}

/// Builds `tests/clients/<name>.c` against ROCr (Debian's libhsa-runtime64 5.2.3).
fn build_rocr_program(name: &str) -> Option<PathBuf> {
    build_probe(
        name,
        &[
            "/usr/include/hsa/hsa_ext_amd.h",
            "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so",
        ],
        "libhsa-runtime-dev (hsa/hsa.h, libhsa-runtime64.so)",
        &[],
        &["-lhsa-runtime64"],
    )
}

/// Unmodified ROCr 5.2.3 on the GFX9 presets: on every GPU agent, an AQL queue from
/// hsa_queue_create completes a BARRIER_AND and a BARRIER_OR in dependency order (the OR
/// packet, its dependency met, still waits behind the AND packet), and
/// hsa_amd_memory_async_copy moves 1 MiB host→device (after a dependency signal) and back
/// through ROCr's SDMA blits (HSA_ENABLE_SDMA=1, ROCr's default for dGPUs, set to be sure),
/// profiled, which the emulator's SDMA engines run: the POLL_REGMEMs on the dependency, the
/// TIMESTAMPs, the HDP-flush register poll, COPY_LINEAR, the ATOMIC that decrements the
/// signal, and the FENCE and TRAP of its event mailbox. hsa_shut_down then destroys it all:
/// `--check-leaks` finds only libhsakmt's events page.
#[test]
fn rocr_runs_barriers_in_dependency_order_and_copies_through_sdma() {
    let Some(program) = build_rocr_program("rocr_queue") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let gpus = machine.topology().gpus().count();
        let out = run_traced(name, &program, &[("HSA_ENABLE_SDMA", "1")]);
        only_the_events_page_leaks(name, &out);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        let mut want = vec![format!("gpus {gpus}")];
        for n in 0..gpus {
            want.push(format!("gpu {n} barriers and=0 or=0 read_index=2"));
            want.push(format!("gpu {n} copied 1048576 bytes there and back"));
        }
        want.push("done".into());
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            want,
            "{name}: {}",
            describe(&out)
        );
        // The copies ran on SDMA queues, each as ROCr's BlitSdma builds it for GFX9.
        let sdma = |what: &str| {
            err.lines()
                .filter(|l| l.contains(" sdma gpu ") && l.contains(what))
                .count()
        };
        assert_eq!(sdma(": COPY_LINEAR "), 2 * gpus, "{name}: {err}");
        assert_eq!(sdma(": POLL_REGMEM register="), 2 * gpus, "{name}: {err}");
        assert_eq!(sdma(": ATOMIC op=47 "), 2 * gpus, "{name}: {err}");
        assert_eq!(sdma(": TRAP "), 2 * gpus, "{name}: {err}");
        // The first copy's dependency: a poll of each dword of the signal's value, until
        // both hold 0; both copies profiled: a timestamp before and after each.
        let polls_held = err
            .lines()
            .filter(|l| {
                l.contains(": POLL_REGMEM addr=")
                    && l.ends_with(" func=3 value=0x0 mask=0xffffffff: holds")
            })
            .count();
        assert_eq!(polls_held, 2 * gpus, "{name}: {err}");
        assert_eq!(sdma(": TIMESTAMP "), 4 * gpus, "{name}: {err}");
        assert!(!err.contains("stopped"), "{name}: {err}");
        // ROCr destroyed every queue it created.
        assert_eq!(
            err.matches("CREATE_QUEUE(").count(),
            err.matches("DESTROY_QUEUE(").count(),
            "{name}: {err}"
        );
    }
}

/// Queue errors reaching unmodified ROCr 5.2.3 on the GFX9 presets (`rocr_queue_error.c`): on
/// every GPU agent, a packet of a reserved type and a vendor-specific packet make the queue's
/// error callback report `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT` (0x1009), a dispatch of a
/// null kernel object `HSA_STATUS_ERROR_INVALID_CODE_OBJECT` (0x1010) and one of a kernel
/// object the emulator cannot run `HSA_STATUS_ERROR_INVALID_ISA` (0x100f), each naming the
/// queue, with the packet's completion signal untouched and the read index at the packet; the
/// queue is destroyed once ROCr's handler has finished (a destroy racing it can hang in ROCr
/// 5.2.3 itself, see the program). ROCr reads the code the packet processor wrote into the queue's
/// `queue_inactive_signal` (`AqlQueue::DynamicScratchHandler`), woken by the signal's event.
/// A barrier whose dependency signal the GPU cannot reach is a VM fault: the handler of
/// `hsa_amd_register_system_event_handler` gets the agent and the page, and the queue's
/// callback is not called; with no handler ROCr prints the fault, naming the GPU's node, and
/// aborts the process.
#[test]
fn rocr_queue_errors_reach_the_error_callback_on_the_gfx9_presets() {
    let Some(program) = build_rocr_program("rocr_queue_error") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let gpus = machine.topology().gpus().count();
        let out = run_traced(name, &program, &[]);
        only_the_events_page_leaks(name, &out);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        let mut want = vec![format!("gpus {gpus}")];
        for n in 0..gpus {
            for (what, status) in [
                ("reserved-type", 0x1009),
                ("vendor-specific", 0x1009),
                ("null-kernel-object", 0x1010),
                ("bogus-kernel-object", 0x100f),
            ] {
                want.push(format!(
                    "gpu {n} {what}: status={status:#x} completion=1 read_index=0 destroyed"
                ));
            }
        }
        want.push(format!(
            "gpu {} memory-fault: agent=ok address=page reasons=0x1 destroyed",
            gpus - 1
        ));
        want.push("done".into());
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            want,
            "{name}: {}",
            describe(&out)
        );
        // The packet processor stopped each queue with the CP's code, and ROCr destroyed
        // every queue it created.
        for code in [32, 256, 8, 128] {
            assert_eq!(
                err.matches(&format!(": stopped: QueueError({code})\n"))
                    .count(),
                gpus,
                "{name}: error {code}: {err}"
            );
        }
        assert_eq!(
            err.matches("CREATE_QUEUE(").count(),
            err.matches("DESTROY_QUEUE(").count(),
            "{name}: {err}"
        );

        // No handler: ROCr's VMFaultHandler reports the fault and aborts.
        let out = run_under_emulator(name, false, &program, &["unhandled-fault"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let node = machine.gpus().last().unwrap().node_id;
        assert_eq!(out.status.code(), Some(134), "{name}: {}", describe(&out));
        assert!(
            err.contains(&format!("Memory access fault by GPU node-{node} "))
                && err.contains("Reason: Page not present or supervisor privilege."),
            "{name}: {}",
            describe(&out)
        );
    }
}

/// An AddressSanitizer build runs under `kfd-emu run` with the one documented switch,
/// `ASAN_OPTIONS=detect_leaks=0`: LeakSanitizer ptraces the program's threads at exit, which
/// a program already traced by the emulator cannot do (see the supervisor's module docs).
#[test]
fn an_address_sanitizer_build_runs_with_leak_detection_off() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/asan_probe.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asan_probe");
    let built = Command::new("cc")
        .args(["-Wall", "-Werror", "-O1", "-g", "-fsanitize=address", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !prerequisite(built, "a C compiler with AddressSanitizer (libasan)") {
        return;
    }
    let run = Command::new(kfd_emu())
        .args(["run", "--machine", "mi300x", "--"])
        .arg(&out)
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .expect("running kfd-emu");
    assert!(
        run.status.success() && String::from_utf8_lossy(&run.stdout).contains("ASAN PROBE OK 1."),
        "{}",
        describe(&run)
    );
}

/// Unmodified ROCr 5.2.3 on the GFX9 presets feeds an AQL queue of the agent's smallest size
/// faster than the packet processor drains it, as ROCr's own clients do (the write index
/// bumped first, then a wait for the read index to free the slot, the packet, the doorbell):
/// `2 * size + 3` barriers, then 3000, all complete and are all consumed. The packet
/// processor used to stop for good once the write index ran a ring ahead of the read index.
#[test]
fn rocr_barriers_through_a_wrapping_aql_ring_all_complete() {
    let Some(program) = build_rocr_program("rocr_ring_wrap") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let gpus = machine.topology().gpus().count();
        let out = Command::new(kfd_emu())
            .args(["run", "--machine", name, "--"])
            .arg(&program)
            .output()
            .expect("running kfd-emu");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 * gpus + 1, "{name}: {}", describe(&out));
        for (n, pair) in lines.chunks(2).take(gpus).enumerate() {
            let size: u64 = pair[0]
                .strip_prefix(&format!("gpu {n} size "))
                .and_then(|rest| rest.split(' ').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{name}: {}", describe(&out)));
            let wrap = 2 * size + 3;
            assert_eq!(
                pair[0],
                format!("gpu {n} size {size} barriers {wrap} read_index {wrap}"),
                "{name}"
            );
            assert_eq!(
                pair[1],
                format!("gpu {n} size {size} barriers 3000 read_index 3000"),
                "{name}"
            );
        }
        assert_eq!(lines.last(), Some(&"done"), "{name}");
    }
}

/// libhsakmt's hsaKmtUpdateQueue to 0 percent deactivates an SDMA queue (the kernel's
/// `QUEUE_IS_ACTIVE`): a fence written and rung meanwhile does not run until an update back
/// to 100 percent, then it lands. Every GPU of the GFX9 presets. It used to run at once.
#[test]
fn libhsakmt_update_queue_to_zero_percent_parks_the_queue() {
    let Some(program) = build_hsakmt_program("hsakmt_update_queue") else {
        return;
    };
    for name in GFX9_PRESETS {
        let machine = Machine::preset(name).unwrap();
        let out = run_under_emulator(name, true, &program, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        for node in machine.topology().nodes.iter().filter(|n| n.is_gpu()) {
            let want = format!(
                "queue node={} inactive: idle; active: fence=0xc0ffee rptr=16",
                node.id
            );
            assert!(
                text.lines().any(|l| l == want),
                "{name}: no `{want}` in\n{text}"
            );
        }
        assert!(text.ends_with("done\n"), "{name}: {text}");
    }
}

/// Two libhsakmt processes under one `kfd-emu run`: the child's SDMA copy reads a page behind
/// a userfaultfd nobody serves, so its engine blocks. The parent's 10 ms waits must still
/// take about 10 ms (median within the 50 ms; the slowest within 200 ms, for a loaded
/// 2-core VM), and the child's hsaKmtDestroyQueue (within 1 s) and exit must complete. Every
/// process used to wait behind the blocked engine for good: the run is killed after a
/// minute, failing the test.
#[test]
fn a_programs_copy_blocked_in_an_unserved_page_stalls_no_other_program() {
    let Some(program) = build_hsakmt_program("hsakmt_blocked_copy") else {
        return;
    };
    let mut child = Command::new(kfd_emu())
        .args(["run", "--machine", "mi100", "--"])
        .arg(&program)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kfd-emu");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    if out.status.code() == Some(77) {
        kfd_skip::skip(
            "userfaultfd cannot catch kernel accesses here (vm.unprivileged_userfaultfd is 0 and \
             kfd-emu run drops CAP_SYS_PTRACE; cargo xtask prerequisites sets it)",
        );
        return;
    }
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers = |what: &str| -> Vec<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .unwrap_or_else(|| panic!("no `{what}` in {}", describe(&out)))
            .split_whitespace()
            .map(|n| n.parse().expect("a number"))
            .collect()
    };
    let mut waits = numbers("waits ");
    waits.sort_by(f64::total_cmp);
    assert!(waits[2] <= 50.0, "10 ms waits took {waits:?} ms");
    assert!(waits[4] <= 200.0, "10 ms waits took {waits:?} ms");
    assert!(numbers("destroy ")[0] < 1000.0, "{}", describe(&out));
    assert!(numbers("exit ")[0] < 1000.0, "{}", describe(&out));
    assert!(text.ends_with("done\n"), "{}", describe(&out));
}

/// Builds `tests/clients/vadd.cl` into a code object for `mcpu` with clang-19 (OpenCL C,
/// `-nogpulib`, code object v4, which ROCr 5.2.3 loads) and ld.lld-19 (`-shared`: ROCr's
/// loader takes an executable shared object, not a relocatable one); `None` (skip) without
/// them.
fn build_code_object(mcpu: &str) -> Option<PathBuf> {
    build_cl_code_object("vadd", mcpu)
}

/// [`build_code_object`] for `tests/clients/<name>.cl`.
fn build_cl_code_object(name: &str, mcpu: &str) -> Option<PathBuf> {
    let tools = ["/usr/bin/clang-19", "/usr/bin/ld.lld-19"];
    if !prerequisite(
        tools.iter().all(|t| Path::new(t).exists()),
        "clang-19 and lld-19 (ld.lld-19)",
    ) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/clients/{name}.cl"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let obj = dir.join(format!("{name}-{mcpu}.o"));
    let co = dir.join(format!("{name}-{mcpu}.co"));
    let out = Command::new(tools[0])
        .args([
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "-target",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-nogpulib",
            "-mcode-object-version=4",
            "-O2",
            "-c",
            "-o",
        ])
        .arg(&obj)
        .arg(&src)
        .output()
        .expect("running clang-19");
    assert!(out.status.success(), "{}", describe(&out));
    let out = Command::new(tools[1])
        .arg("-shared")
        .arg(&obj)
        .arg("-o")
        .arg(&co)
        .output()
        .expect("running ld.lld-19");
    assert!(out.status.success(), "{}", describe(&out));
    Some(co)
}

/// Unmodified ROCr 5.2.3 loads a clang-built code object with hsa_executable (its segments
/// copied to the GPU by ROCr's own blit kernel) and dispatches `vadd` on an AQL queue: 1000
/// work-items in groups of 64 compute every element right, on each GFX9 preset's first GPU
/// (gfx906, gfx908, gfx90a), and hsa_shut_down leaves nothing but libhsakmt's events page.
#[test]
fn rocr_program_dispatches_a_clang_built_kernel() {
    let Some(program) = build_rocr_program("rocr_kernel") else {
        return;
    };
    for (name, mcpu) in [
        ("radeon-vii", "gfx906"),
        ("mi100", "gfx908"),
        ("mi210x8", "gfx90a"),
    ] {
        let Some(co) = build_code_object(mcpu) else {
            return;
        };
        let out = Command::new(kfd_emu())
            .args(["run", "--machine", name, "--check-leaks", "--trace", "--"])
            .arg(&program)
            .arg(&co)
            .output()
            .expect("running kfd-emu");
        only_the_events_page_leaks(name, &out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("vadd n=1000 group=64 kernarg=") && text.contains(" bad=0 "),
            "{name}: {}",
            describe(&out)
        );
        assert!(text.ends_with("done\n"), "{name}: {}", describe(&out));
    }
}

/// Builds `tests/clients/<name>.hip` with Debian's hipcc for `arch`; `None` (skip) without
/// hipcc and libamdhip64-dev.
fn build_hip_program(name: &str, arch: &str) -> Option<PathBuf> {
    if !prerequisite(
        Path::new("/usr/bin/hipcc").exists()
            && Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so").exists(),
        "hipcc and libamdhip64-dev",
    ) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/clients/{name}.hip"));
    let program = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = Command::new("hipcc")
        .arg(format!("--offload-arch={arch}"))
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(&src)
        .output()
        .expect("running hipcc");
    assert!(out.status.success(), "{}", describe(&out));
    Some(program)
}

/// Runs a HIP `program` under `kfd-emu run --machine mi210x8 --check-teardown` with `env`.
/// Not `--check-leaks`: HIP 5.2.3 never calls `hsa_shut_down` (its runtime lives until the
/// process exits, and the kernel frees what it left), so its BOs are live at exit, which
/// `--check-teardown` only reports; it fails the run (exit 3) when the teardown leaves
/// anything behind. Checks that report: HIP's runtime objects are there, and no teardown
/// leak.
fn run_hip(program: &Path, env: &[(&str, &str)]) -> Output {
    let out = Command::new(kfd_emu())
        .args(["run", "--machine", "mi210x8", "--check-teardown", "--"])
        .arg(program)
        .envs(env.iter().copied())
        .output()
        .expect("running kfd-emu");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("teardown left behind"),
        "a teardown leak: {}",
        describe(&out)
    );
    if out.status.success() {
        assert!(
            err.contains("left these KFD objects for its exit to free")
                && err.contains("  buffer object handle="),
            "HIP's objects at exit are reported: {}",
            describe(&out)
        );
    }
    out
}

/// A HIP 5.2.3 vector add built by Debian's hipcc for gfx90a runs under `kfd-emu run` on
/// mi210x8: hipMemcpy's blit kernels and the program's kernel compute every element right.
#[test]
fn hip_vector_add_runs_on_mi210x8() {
    let Some(program) = build_hip_program("hip_vadd", "gfx90a") else {
        return;
    };
    let out = run_hip(&program, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("vadd n=1000 bad=0 c[999]=2997"),
        "{}",
        describe(&out)
    );
}

/// HIP kernels with LDS and `__syncthreads`, global atomics under contention, a 2D stencil
/// with partial blocks, hipMemset and a device-to-device hipMemcpy all give the host's
/// results on mi210x8.
#[test]
fn hip_reduction_atomics_and_stencil_run_on_mi210x8() {
    let Some(program) = build_hip_program("hip_kernels", "gfx90a") else {
        return;
    };
    let out = run_hip(&program, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "reduce n=10000 blocks=40 sum=1995000\n",
        "atomics threads=5120 add=5120 max=5119 cas=10240\n",
        "stencil 130x67 ok\n",
        "memset ok\n",
        "done\n",
    ] {
        assert!(text.contains(want), "no `{want}` in {}", describe(&out));
    }
}

/// hipMallocManaged with XNACK on (HSA_XNACK=1, a gfx90a:xnack+ code object): the kernel's
/// first touch of each page of the managed array is a retry fault that migrates it, and the
/// host reads the kernel's results.
#[test]
fn hip_managed_memory_with_xnack_runs_on_mi210x8() {
    let Some(program) = build_hip_program("hip_managed", "gfx90a:xnack+") else {
        return;
    };
    let out = run_hip(&program, &[("HSA_XNACK", "1")]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("managed n=65536 bad=0\ndone\n"),
        "{}",
        describe(&out)
    );
}

/// A HIP kernel with a private array (scratch) on mi210x8: ROCr's queue has no scratch, so
/// the CP's request (queue error 1) reaches ROCr's DynamicScratchHandler, which allocates it
/// and restarts the queue; the dispatch then runs with the queue's scratch and computes
/// every element right.
#[test]
fn hip_kernel_with_scratch_gets_it_from_rocr_on_mi210x8() {
    let Some(program) = build_hip_program("hip_scratch", "gfx90a") else {
        return;
    };
    let out = run_hip(&program, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("scratch n=4096 bad=0\ndone\n"),
        "{}",
        describe(&out)
    );
}

/// The phases of `svm_cpu_fault`'s output: each phase's SMI records (the kernel's text
/// without its timestamp and pid, each checked to parse as its event's format), and the
/// program's other lines.
fn svm_phases(text: &str) -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let mut phases: Vec<(String, Vec<String>)> = Vec::new();
    let mut other = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("phase ") {
            phases.push((name.to_owned(), Vec::new()));
        } else if let Some(record) = line.strip_prefix("smi ") {
            // C's printf stops at the NUL a QUEUE_RESTORE record ends with.
            let whole = if record.starts_with("a ") {
                format!("{record}\0")
            } else {
                record.to_owned()
            };
            kfd_ioctl::smi::Record::parse(&whole)
                .unwrap_or_else(|e| panic!("`{record}` is no SMI record: {e:?}"));
            let mut words = record.split(' ');
            let id = words.next().unwrap_or("");
            let rest: Vec<&str> = words.skip(2).collect();
            let shape = format!("{id} {}", rest.join(" "));
            phases.last_mut().expect("a phase first").1.push(shape);
        } else {
            other.push(line.to_owned());
        }
    }
    (phases, other)
}

/// CPU faults on SVM memory the GPU holds, under `kfd-emu run` (`svm_migrate_to_ram`): with
/// XNACK on, a 4 MiB range prefetched to the GPU; an SDMA write into its second 2 MiB granule
/// while it is in VRAM; then one CPU read of one page migrates back exactly that granule
/// (trigger PAGEFAULT_CPU, the GPU's mapping invalidated between MIGRATE_START and END), and
/// reads what the GPU wrote; a second read of the same granule migrates nothing; the GPU's
/// next write to it faults again (PAGE_FAULT_START, a PAGEFAULT_GPU migration, PAGE_FAULT_END)
/// and the CPU's next read faults it back again; a forked child reads its copy of a granule
/// in VRAM; a granule in VRAM the program makes read-only still faults back on a read, and a
/// write to it then reaches the program's own SIGSEGV handler (not the model's); two
/// threads reading the first granule at once migrate it once; and a SIGSEGV of the program's
/// own reaches its own handler.
#[test]
fn a_cpu_read_of_svm_memory_in_vram_migrates_its_granule_back() {
    let Some(program) = build_probe(
        "svm_cpu_fault",
        &[
            "/usr/include/hsakmt.h",
            "/usr/lib/x86_64-linux-gnu/libhsakmt.so",
        ],
        "libhsakmt-dev (hsakmt.h, libhsakmt.so)",
        &[],
        &["-lhsakmt", "-lpthread"],
    ) else {
        return;
    };
    let out = run_under_emulator("mi300x", false, &program, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    let (phases, other) = svm_phases(&text);
    let range = other
        .iter()
        .find_map(|l| l.strip_prefix("range 0x"))
        .unwrap_or_else(|| panic!("no range line in\n{text}"));
    let words: Vec<&str> = range.split(' ').collect();
    let first = u64::from_str_radix(words[0], 16).unwrap();
    let gpu = words[4].trim_start_matches("0x");
    let (b1, b2) = (first, first + 0x200);
    let records = |name: &str| -> Vec<String> {
        phases
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no phase {name} in\n{text}"))
            .1
            .clone()
    };
    let back = |page: u64| {
        vec![
            format!("5 @{page:x}(200) {gpu}->0 {gpu}:ffffffff 2"),
            format!("b @{page:x}(200) {gpu} 1"),
            format!("6 @{page:x}(200) {gpu}->0 2 0"),
        ]
    };
    assert_eq!(
        records("prefetch"),
        vec![
            format!("5 @{b1:x}(400) 0->{gpu} {gpu}:ffffffff 0"),
            format!("6 @{b1:x}(400) 0->{gpu} 0 0"),
        ],
        "{text}"
    );
    assert_eq!(records("gpu-write"), Vec::<String>::new(), "{text}");
    assert_eq!(records("cpu-read"), back(b2), "{text}");
    assert!(
        other.contains(&"value cpu-read 0xdeadbeef".to_owned()),
        "{text}"
    );
    assert_eq!(records("cpu-read-again"), Vec::<String>::new(), "{text}");
    assert_eq!(
        records("gpu-again"),
        vec![
            format!("7 @{b2:x}({gpu}) W"),
            format!("5 @{b2:x}(200) 0->{gpu} {gpu}:ffffffff 1"),
            format!("b @{b2:x}(200) {gpu} 1"),
            format!("6 @{b2:x}(200) 0->{gpu} 1 0"),
            format!("8 @{b2:x}({gpu}) M"),
        ],
        "{text}"
    );
    assert_eq!(records("cpu-after-gpu"), back(b2), "{text}");
    assert!(
        other.contains(&"value cpu-after-gpu 0xfeed".to_owned()),
        "{text}"
    );
    // A forked child reads its copy of the first granule (in VRAM) and sees the GPU's data.
    // What it records is left open: on the kernel the child's touch of the device-private
    // page it shares with the parent runs `svm_migrate_to_ram` on the parent's range in the
    // child's mm ("COW mapping in child process", kfd_migrate.c), a PAGEFAULT_CPU migration
    // under the parent's pid; kfd-emu's child reads its own copy and records nothing (a known
    // difference, in `supervisor/tracer.rs`' module docs).
    assert!(other.contains(&"fork-child ok".to_owned()), "{text}");
    // Made read-only by the program while in VRAM, it still faults back on a read.
    assert_eq!(records("read-only"), back(b2), "{text}");
    assert!(
        other.contains(&"value read-only 0xabc".to_owned()),
        "{text}"
    );
    // Home, read-only: its write is the program's own fault (its handler ran, nothing
    // written), and nothing migrates.
    assert_eq!(records("read-only-write"), Vec::<String>::new(), "{text}");
    assert!(
        other.contains(&"value read-only-write 0xabc".to_owned()),
        "{text}"
    );
    let threads = records("threads");
    assert!(threads.ends_with(&back(b1)), "{text}");
    assert_eq!(
        threads.iter().filter(|r| r.starts_with('5')).count(),
        1,
        "{text}"
    );
    assert!(
        other.contains(&"value threads 0x3c 0x3c".to_owned()),
        "{text}"
    );
    assert!(other.contains(&"own-handler ok".to_owned()), "{text}");
    assert!(text.ends_with("done\n"), "{text}");
}

/// GPU atomics on process memory are atomic with the CPU's locked instructions, as a
/// PCIe/xGMI atomic is on the hardware (kfdtest's `KFDQMTest.Atomics`): under unmodified ROCr
/// 5.2.3 on mi210x8, a CPU thread adds 1 to a dword with `lock add` in a loop while 1024
/// work-items each `global_atomic_add` 1 to it 64 times, on a USERPTR page
/// (`hsa_amd_memory_lock`) and then on an SVM range left in system memory: the dword ends
/// at exactly every CPU increment plus all 65 536 GPU ones. (A read-modify-write through
/// `process_vm_readv`/`writev`, as before, loses CPU increments made between its read and
/// its write: about 1.7 million of 2.8 million in a run on the 2-core development VM.)
#[test]
fn gpu_atomics_on_process_memory_are_atomic_with_the_cpus() {
    let Some(program) = build_probe(
        "rocr_atomics",
        &[
            "/usr/include/hsa/hsa_ext_amd.h",
            "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so",
        ],
        "libhsa-runtime-dev (hsa/hsa.h, libhsa-runtime64.so)",
        &[],
        &["-lhsa-runtime64", "-lpthread"],
    ) else {
        return;
    };
    let Some(co) = build_cl_code_object("atomics", "gfx90a") else {
        return;
    };
    let out = Command::new(kfd_emu())
        .args(["run", "--machine", "mi210x8", "--"])
        .arg(&program)
        .arg(&co)
        .output()
        .expect("running kfd-emu");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    for kind in ["userptr", "svm"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("atomics {kind} ")))
            .unwrap_or_else(|| panic!("no {kind} line in {}", describe(&out)));
        let field = |name: &str| -> u64 {
            line.split(' ')
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in `{line}`"))
        };
        assert_eq!(field("gpu"), 65_536, "{line}");
        assert!(field("cpu") >= 1000, "{line}");
        assert_eq!(field("value"), field("gpu") + field("cpu"), "{line}");
    }
    // No fallback was taken (it would be logged).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("not atomic with its CPU"),
        "{}",
        describe(&out)
    );
    assert!(text.ends_with("done\n"), "{}", describe(&out));
}

/// System calls given SVM memory the GPU holds, under `kfd-emu run`: the kernel's
/// `copy_from_user`/`copy_to_user` faults the device-private pages home
/// (`svm_migrate_to_ram`) and the call succeeds, where without the tracer's syscall stops it
/// failed with `EFAULT` on the hidden memory. With XNACK on, an 8 MiB range prefetched to
/// the GPU and an SDMA write into its first granule: `write()` from that granule brings
/// exactly it home (trigger PAGEFAULT_CPU, the GPU's mapping invalidated) and writes what the
/// GPU wrote; `read()` into the second granule brings it home and lands the bytes;
/// `readv()` into the fourth then the third granule brings them home in the iovecs' order;
/// a call on memory already home moves nothing; after a prefetch of it all again,
/// `getrandom()` into, `pwrite()` from and `pread()` into a granule each bring it home.
/// Calls given structs there do the same, each with the kernel's records in its copy order:
/// `fstat`, `FIONREAD`, `AMDKFD_IOC_GET_VERSION`, a private `FUTEX_WAIT` (it reads the word
/// the GPU wrote), a shared `FUTEX_WAKE` (its key's `get_user_pages_fast`), `clock_gettime`
/// (as a call and through the vDSO), `poll`, `sendmsg` (its msghdr, then its data) and
/// `recvmsg`; a private `FUTEX_WAKE` moves nothing, as on the kernel (no memory touched).
/// Two calls the tracer's table does not describe succeed through its exit fallback with
/// the same records: `getcwd` (a register names the memory) and
/// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW` (a pointer in the ioctl's struct does). Memory a
/// prefetch moved is hidden before the program runs on: two reads right after it fault. A
/// forked child's `write()` from and `getcwd()` into its copies of two granules in VRAM succeed
/// with the bytes the GPU wrote. A `read()` into a granule in VRAM the program made
/// read-only fails with `EFAULT` and moves nothing (`access_error` comes before the fault
/// handler on the kernel).
#[test]
fn system_calls_given_svm_memory_in_vram_fault_it_home_and_succeed() {
    let Some(program) = build_probe(
        "svm_syscall",
        &[
            "/usr/include/hsakmt.h",
            "/usr/lib/x86_64-linux-gnu/libhsakmt.so",
        ],
        "libhsakmt-dev (hsakmt.h, libhsakmt.so)",
        &[],
        &["-lhsakmt"],
    ) else {
        return;
    };
    let out = run_under_emulator("mi300x", false, &program, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    let (phases, other) = svm_phases(&text);
    let range = other
        .iter()
        .find_map(|l| l.strip_prefix("range 0x"))
        .unwrap_or_else(|| panic!("no range line in\n{text}"));
    let words: Vec<&str> = range.split(' ').collect();
    let first = u64::from_str_radix(words[0], 16).unwrap();
    let gpu = words[4].trim_start_matches("0x");
    let granule = |n: u64| first + n * 0x200;
    let records = |name: &str| -> Vec<String> {
        phases
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no phase {name} in\n{text}"))
            .1
            .clone()
    };
    let back = |page: u64| {
        vec![
            format!("5 @{page:x}(200) {gpu}->0 {gpu}:ffffffff 2"),
            format!("b @{page:x}(200) {gpu} 1"),
            format!("6 @{page:x}(200) {gpu}->0 2 0"),
        ]
    };
    assert_eq!(
        records("prefetch"),
        vec![
            format!("5 @{first:x}(800) 0->{gpu} {gpu}:ffffffff 0"),
            format!("6 @{first:x}(800) 0->{gpu} 0 0"),
        ],
        "{text}"
    );
    assert_eq!(records("write"), back(granule(0)), "{text}");
    assert!(
        other.contains(&"value write 0xdeadbeef".to_owned()),
        "{text}"
    );
    assert_eq!(records("read"), back(granule(1)), "{text}");
    assert!(
        other.contains(&"value read 0x12345678".to_owned()),
        "{text}"
    );
    assert_eq!(records("read-check"), Vec::<String>::new(), "{text}");
    let mut readv = back(granule(3));
    readv.extend(back(granule(2)));
    assert_eq!(records("readv"), readv, "{text}");
    assert!(
        other.contains(&"value readv 0xaaaa0001 0xbbbb0002".to_owned()),
        "{text}"
    );
    assert_eq!(records("again"), Vec::<String>::new(), "{text}");
    // Prefetched again (the granules home move; the GPU mapping of those there dropped).
    assert!(
        records("prefetch-again")
            .iter()
            .any(|r| r.starts_with(&format!("6 @{first:x}(800) 0->{gpu} 0 0"))),
        "{text}"
    );
    assert_eq!(records("getrandom"), back(granule(0)), "{text}");
    assert_eq!(records("pwrite"), back(granule(1)), "{text}");
    assert_eq!(records("pread"), back(granule(2)), "{text}");
    assert!(
        other.contains(&"value pread 0x12345678".to_owned()),
        "{text}"
    );
    // Structs: each call's struct brings its granule home, and only it.
    for (phase, n) in [("fstat", 0), ("fionread", 1), ("kfd-version", 2)] {
        assert_eq!(records(phase), back(granule(n)), "{phase}: {text}");
    }
    for value in [
        "value fstat fifo 1 gpu 0xdeadbeef",
        "value fionread 5",
        "value kfd-version 1",
    ] {
        assert!(other.contains(&value.to_owned()), "{value}: {text}");
    }
    // A private FUTEX_WAKE touches no memory (its key is the address); the wait reads the
    // GPU's word (EAGAIN: the client checks it) and the shared wake's key pins the page.
    assert_eq!(records("gpu-write-futex"), Vec::<String>::new(), "{text}");
    assert_eq!(
        records("futex-wake-private"),
        Vec::<String>::new(),
        "{text}"
    );
    assert_eq!(records("futex-wait"), back(granule(3)), "{text}");
    assert_eq!(records("futex-wait-value"), Vec::<String>::new(), "{text}");
    assert_eq!(records("futex-wake-shared"), back(granule(0)), "{text}");
    assert_eq!(records("clock-gettime"), back(granule(1)), "{text}");
    assert_eq!(records("clock-vdso"), back(granule(2)), "{text}");
    assert!(other.contains(&"value clock 1".to_owned()), "{text}");
    assert_eq!(records("poll"), back(granule(2)), "{text}");
    assert!(other.contains(&"value poll 0x1".to_owned()), "{text}");
    // sendmsg reads its msghdr and iovec (fourth granule) before the data (first);
    // recvmsg its msghdr (second) before it writes the data (third).
    let mut sendmsg = back(granule(3));
    sendmsg.extend(back(granule(0)));
    assert_eq!(records("sendmsg"), sendmsg, "{text}");
    let mut recvmsg = back(granule(1));
    recvmsg.extend(back(granule(2)));
    assert_eq!(records("recvmsg"), recvmsg, "{text}");
    assert!(
        other.contains(&"value recvmsg 0xdeadbeef".to_owned()),
        "{text}"
    );
    // Left to the exit fallback: the argument register, then the pointer in the ioctl's
    // struct.
    assert_eq!(records("getcwd"), back(granule(3)), "{text}");
    assert!(other.contains(&"value getcwd 1".to_owned()), "{text}");
    assert_eq!(records("apertures"), back(granule(1)), "{text}");
    assert!(other.contains(&"value apertures 1 1".to_owned()), "{text}");
    // A forked child's calls on its copy of the first and third granules (hidden in two
    // spans: its write() shows the first at its entry, while the third stays hidden for
    // its getcwd()'s exit fallback): they succeed, and the parent's pages do not move.
    // Read right after a prefetch returned, the granules it moved fault home: its thread
    // ran the plan that hid them before the program ran on.
    let split = records("fork-split");
    let mut faults = back(granule(1));
    faults.extend(back(granule(3)));
    assert!(split.ends_with(&faults), "{text}");
    assert_eq!(
        split.iter().filter(|r| r.starts_with('5')).count(),
        3,
        "{text}"
    );
    assert!(
        other.contains(&format!(
            "value fork-split {:#x}",
            0x1234_5678u32 + 0x3c3c_3c3c
        )),
        "{text}"
    );
    assert!(other.contains(&"fork-child ok".to_owned()), "{text}");
    assert!(
        other.contains(&"value fork-write 0xdeadbeef".to_owned()),
        "{text}"
    );
    // (Which records the child's touches make is not checked: the kernel's
    // `svm_migrate_to_ram` migrates on a COW child's fault, the emulator shows the child's
    // copy and leaves the parent's pages where they are; see `supervisor/tracer.rs`.)
    // read() into memory in VRAM made read-only: EFAULT (the client checks it), no
    // migration, the bytes left in the pipe.
    // (The queue restore after the fork's eviction may land here: only migrations and
    // unmaps count.)
    assert!(
        records("read-only")
            .iter()
            .all(|r| !r.starts_with('5') && !r.starts_with('6') && !r.starts_with('b')),
        "{text}"
    );
    assert!(
        other.contains(&"value read-only 0xdeadbeef".to_owned()),
        "{text}"
    );
    assert!(text.ends_with("done\n"), "{text}");
}

/// A program that ptraces processes of its own under `kfd-emu run` (which traces them all)
/// gets what Linux gives it: a child `PTRACE_ATTACH`es its parent (after a `PTRACE_SEIZE`
/// the kernel refuses with `EIO`), reads a value with `PEEKDATA` and detaches, as kfdtest's
/// `KFDMemoryTest.PtraceAccess` does; a `PTRACE_TRACEME` child is stopped, read and detached
/// by its parent. Each traced process then still uses `/dev/kfd` and maps a file. A last
/// `PTRACE_TRACEME` child, continued by its parent and still traced by it, maps a file and
/// its KFD signal page (a redirected mapping: kfdtest's `KFDDBGTest.HitMemoryViolation`
/// debuggee maps its queue's so): both work while kfd-emu has lent the thread to its
/// parent (they failed with `ENOSYS` when file mmaps were `SECCOMP_RET_TRACE`d: the
/// parent, its tracer, asked for no seccomp stops). So does a child its parent
/// `PTRACE_SEIZE`s while it is blocked in `read()` (lent from an interrupt stop, its call
/// restarted), once the parent lets it read.
#[test]
fn a_program_ptraces_its_parent_and_its_child_as_on_linux() {
    let Some(probe) = build_probe(
        "ptrace_probe",
        &["/usr/include/stdio.h"],
        "libc6-dev",
        &[],
        &[],
    ) else {
        return;
    };
    let out = run_under_emulator("mi300x", true, &probe, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .collect::<Vec<_>>(),
        [
            "kfd 1",
            "attach 0",
            "after attach: kfd 1 map 1",
            "traceme 1 0",
            "traced maps 1 0",
            "seized maps 1 0",
        ],
        "{}",
        describe(&out)
    );
}

/// A HIP 5.2.3 kernel that traps (`__builtin_trap`, `s_trap 2`) under `kfd-emu run` on
/// mi210x8: the wave runs ROCr's own second-level trap handler (the model's first-level
/// one jumps there), whose interrupt reports `EC_QUEUE_WAVE_TRAP` to the runtime through
/// the queue's context save area (`kfd_send_exception_to_runtime`); ROCr's exception
/// handler calls HIP's queue callback, which aborts with HSA_STATUS_ERROR_EXCEPTION
/// (0x1016), as on a GPU. The program never returns from hipDeviceSynchronize.
#[test]
fn a_trapping_hip_kernel_aborts_with_rocrs_exception() {
    let Some(program) = build_hip_program("hip_trap", "gfx90a") else {
        return;
    };
    let out = Command::new(kfd_emu())
        .args(["run", "--machine", "mi210x8", "--"])
        .arg(&program)
        .output()
        .expect("running kfd-emu");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(text, "launch\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(134), "{}", describe(&out));
    assert!(err.contains("0x1016"), "{}", describe(&out));
}

/// hsaKmtRegisterMemory through Debian's libhsakmt 5.2.3 under `kfd-emu run` on mi300x, over
/// memory that is not plain process memory: it registers with a USERPTR ALLOC, which the
/// kernel fails at once (`init_user_pages` → `hmm_range_fault`) for a page of a BO's CPU
/// mapping (`EFAULT`: `VM_IO | VM_PFNMAP`), read-only memory (`EPERM`: KFD faults for writing)
/// and a range with a hole (`EFAULT`), each `HSAKMT_STATUS_ERROR` (1); the whole of a BO
/// libhsakmt allocated is that BO (no ioctl) and plain memory registers (0). The same on an
/// MI300X. Before `h-hostile` the BO's page and the read-only page were registered.
#[test]
fn hsakmt_register_memory_refuses_a_bos_mapping_read_only_memory_and_holes() {
    let Some(program) = build_hsakmt_program("hsakmt_register") else {
        return;
    };
    let out = run_under_emulator("mi300x", true, &program, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "bo 0\nbo-page 1\nread-only 1\nhole 1\nplain 0\ndone\n",
        "{}",
        describe(&out)
    );
}
