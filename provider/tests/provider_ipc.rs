//! IPC across two real processes: a producer allocates, fills and shares memory; a consumer
//! (another process, on another GPU of the machine when it has several) opens the handle,
//! reads the producer's bytes, writes its own, and the producer sees them. On kfd-emu both
//! processes are served by one model (two supervisors over one `Model`, each its own KFD
//! process), and the parent also checks both GPUs' views of the shared bytes; with
//! `/dev/kfd` present the pair runs on the hardware too.
//!
//! The children are this test binary run again with `KFD_PROVIDER_IPC_ROLE` set: the test
//! that started them runs its role instead of the parent's part. They talk to the parent
//! through lines on stdout and stdin, and exit on EOF, so a failing parent never strands one.

mod provider_support;

use std::io::{BufRead, BufReader, Lines, PipeReader, Write};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::thread::JoinHandle;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_ioctl::topology::Topology;
use kfd_provider::{IpcHandle, KfdProvider, MemoryKind, ProviderParams, UmfResult};
use provider_support::*;

const ROLE: &str = "KFD_PROVIDER_IPC_ROLE";
const HANDLE: &str = "KFD_PROVIDER_IPC_HANDLE";

/// The allocation: more than 2 MiB, so DEVICE memory is a large-page buffer object.
fn alloc_size() -> usize {
    (2 << 20) + 4 * page()
}

/// The shared part: from one page in to one page before the end.
fn shared_range() -> (usize, usize) {
    (page(), alloc_size() - 2 * page())
}

/// What the producer writes over the whole allocation.
fn producer_bytes() -> Vec<u8> {
    pattern(alloc_size(), 1)
}

/// What the consumer writes over the first page of the shared part.
fn consumer_bytes() -> Vec<u8> {
    pattern(page(), 200)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The next line of stdin, or `None` at EOF.
fn next_command() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

/// Says `line` to the parent.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout");
}

/// The last GPU of the topology: another GPU than the producer's where there are several.
fn last_gpu() -> kfd_ioctl::GpuId {
    Topology::read()
        .expect("topology")
        .gpus()
        .filter_map(|n| n.gpu_id())
        .last()
        .expect("a GPU")
}

fn producer(kind: MemoryKind) {
    let p = KfdProvider::new(Kfd::open().unwrap(), ProviderParams::new(kind)).unwrap();
    assert!(p.host_accessible(), "the presets have large BARs");
    let size = alloc_size();
    let ptr = p.alloc(size, 0).unwrap().as_ptr();
    write(ptr, &producer_bytes());
    let (offset, len) = shared_range();
    let shared = ptr.wrapping_add(offset);
    let handle = p.get_ipc_handle(shared, len).unwrap();
    // Under Yama ptrace_scope=1 the consumer needs this; without Yama it is EINVAL.
    let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
    say(&format!(
        "PRODUCER {} {:#x} {:#x}",
        std::process::id(),
        p.gpu_id(),
        shared as usize
    ));
    say(&format!("IPC_HANDLE {}", hex(handle.as_bytes())));
    assert_eq!(next_command().as_deref(), Some("check"));
    assert_eq!(
        read(shared, page()),
        consumer_bytes(),
        "the consumer's bytes"
    );
    assert_eq!(
        read(shared.wrapping_add(page()), len - page()),
        producer_bytes()[offset + page()..offset + len],
        "the rest is the producer's"
    );
    p.put_ipc_handle(&handle).unwrap();
    p.free(ptr, size).unwrap();
    say("PRODUCER_OK");
}

fn consumer(kind: MemoryKind) {
    let handle = IpcHandle::from_bytes(&unhex(&std::env::var(HANDLE).unwrap())).unwrap();
    let gpu = last_gpu();
    let p = KfdProvider::new(Kfd::open().unwrap(), ProviderParams::new(kind).gpu(gpu)).unwrap();
    // Only the producer may put its handle.
    assert_umf(p.put_ipc_handle(&handle), UmfResult::InvalidArgument);
    let (offset, len) = shared_range();
    assert_eq!(handle.size(), Some(len));
    let q = p.open_ipc_handle(&handle).unwrap().as_ptr();
    assert_eq!(
        read(q, len),
        producer_bytes()[offset..offset + len],
        "the producer's bytes"
    );
    write(q, &consumer_bytes());
    say(&format!(
        "CONSUMER {} {:#x} {:#x}",
        std::process::id(),
        p.gpu_id(),
        q as usize
    ));
    assert_eq!(next_command().as_deref(), Some("close"));
    p.close_ipc_handle(q, len).unwrap();
    assert_umf(p.close_ipc_handle(q, len), UmfResult::InvalidArgument);
    say("CONSUMER_OK");
}

/// A child's announcement: its pid, GPU and the address of the shared bytes there.
struct Seen {
    pid: i32,
    gpu: u32,
    va: u64,
}

fn parse_seen(line: &str) -> Seen {
    let mut words = line.split_whitespace().skip(1);
    let mut next = || words.next().expect("a field");
    let pid = next().parse().expect("pid");
    let gpu = u32::from_str_radix(next().trim_start_matches("0x"), 16).expect("gpu");
    let va = u64::from_str_radix(next().trim_start_matches("0x"), 16).expect("va");
    Seen { pid, gpu, va }
}

/// Reads lines until one starts with `prefix`; panics with what came instead at EOF.
fn wait_for(lines: &mut Lines<BufReader<PipeReader>>, prefix: &str, who: &str) -> String {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("reading a child's stdout");
        if line.starts_with(prefix) {
            return line;
        }
        seen.push(line);
    }
    panic!("the {who} ended before saying {prefix:?}; it said: {seen:#?}")
}

/// Runs `command` under the emulator on `model` (or natively), on a thread of its own.
fn start(model: Option<Arc<Model>>, mut command: Command) -> JoinHandle<ExitStatus> {
    std::thread::spawn(move || match model {
        Some(model) => kfd_emu::supervisor::spawn_command(model, &mut command)
            .expect("running a child under kfd-emu"),
        None => command.status().expect("running a child"),
    })
}

/// The child command for `role` in test `test`, with stdin and stdout as pipes.
fn child(
    test: &str,
    role: &str,
    env: &[(&str, String)],
) -> (Command, Lines<BufReader<PipeReader>>, std::io::PipeWriter) {
    let (out_r, out_w) = std::io::pipe().expect("pipe");
    let (in_r, in_w) = std::io::pipe().expect("pipe");
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .stdin(in_r)
        .stdout(out_w);
    for (key, value) in env {
        command.env(key, value);
    }
    (command, BufReader::new(out_r).lines(), in_w)
}

/// One producer/consumer pair on `model` (or the hardware).
fn run_pair(test: &str, name: &str, model: Option<Arc<Model>>) {
    let (cmd, mut producer_out, mut producer_in) = child(test, "producer", &[]);
    let producer = start(model.clone(), cmd);
    let producer_seen = parse_seen(&wait_for(&mut producer_out, "PRODUCER ", "producer"));
    let handle = wait_for(&mut producer_out, "IPC_HANDLE ", "producer");
    let handle = handle.trim_start_matches("IPC_HANDLE ").to_owned();

    let (cmd, mut consumer_out, mut consumer_in) = child(test, "consumer", &[(HANDLE, handle)]);
    let consumer = start(model.clone(), cmd);
    let consumer_seen = parse_seen(&wait_for(&mut consumer_out, "CONSUMER ", "consumer"));

    // Both GPUs see the same bytes: the consumer's page, then the producer's.
    if let Some(model) = &model {
        let (offset, len) = shared_range();
        let mut expected = producer_bytes()[offset..offset + len].to_vec();
        expected[..page()].copy_from_slice(&consumer_bytes());
        for (who, seen) in [("producer", &producer_seen), ("consumer", &consumer_seen)] {
            let mut gpu_view = vec![0u8; len];
            model
                .gpu_read(seen.pid, seen.gpu, seen.va, &mut gpu_view)
                .unwrap_or_else(|e| panic!("{name}: the {who}'s GPU view: {e}"));
            assert!(
                gpu_view == expected,
                "{name}: the {who}'s GPU sees other bytes"
            );
        }
    }

    writeln!(consumer_in, "close").expect("telling the consumer");
    wait_for(&mut consumer_out, "CONSUMER_OK", "consumer");
    let status = consumer.join().expect("the consumer thread");
    assert!(status.success(), "{name}: the consumer failed: {status}");

    writeln!(producer_in, "check").expect("telling the producer");
    wait_for(&mut producer_out, "PRODUCER_OK", "producer");
    let status = producer.join().expect("the producer thread");
    assert!(status.success(), "{name}: the producer failed: {status}");
}

/// The parent's part for `kind` on every emulated machine and the hardware, or a child's
/// role when this process is one.
fn across_two_processes(test: &str, kind: MemoryKind) {
    match std::env::var(ROLE).as_deref() {
        Ok("producer") => return producer(kind),
        Ok("consumer") => return consumer(kind),
        Ok(other) => panic!("unknown {ROLE} {other:?}"),
        Err(_) => {}
    }
    for &machine in MACHINES {
        let model = Model::new(ModelConfig {
            machine: Machine::preset(machine).expect("a preset"),
            ..ModelConfig::default()
        })
        .expect("a model");
        run_pair(test, &format!("kfd-emu/{machine}"), Some(model));
    }
    if kfd_tests::hardware_present() {
        run_pair(test, "hardware", None);
    }
}

#[test]
fn host_memory_across_two_processes() {
    across_two_processes("host_memory_across_two_processes", MemoryKind::Host);
}

#[test]
fn device_memory_across_two_processes() {
    across_two_processes("device_memory_across_two_processes", MemoryKind::Device);
}
