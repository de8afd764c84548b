//! Real UMF pools over the KFD provider: `tests/c/umf_pools.c`, compiled against the `umf`
//! 1.2.0 wheel's headers and linked with its `libumf.so` and this package's `libkfd_umf.so`,
//! runs under `kfd-emu run --machine mi300x --check-leaks`. For each kind (HOST, DEVICE,
//! SHARED) it makes a disjoint pool and a proxy pool over the provider and checks mixed
//! allocations, allocation properties, purges, split/merge, and a forked child (a new KFD
//! process) that opens the parent's IPC handle through its own pool. The test asserts the
//! program's exit (0: every check held and neither process left a KFD object behind) and the
//! facts it printed.

mod support;

use kfd_emu::machine::Machine;
use support::*;

const KINDS: [(&str, u32); 3] = [("HOST", 1), ("DEVICE", 2), ("SHARED", 3)];
const POOLS: [&str; 2] = ["disjoint", "proxy"];

/// The line of `stdout` that starts with `prefix`.
fn line<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{stdout}"))
}

#[test]
fn disjoint_and_proxy_pools_of_every_kind_under_kfd_emu() {
    let Some((umf, cc)) = umf_and_cc("umf_pools") else {
        return;
    };
    let program = compile("umf_pools", &umf, &cc);
    let output = run_under_emulator(&program);
    let stdout = successful_stdout("umf_pools", &output);
    let machine = Machine::preset(MACHINE).expect("the machine preset");
    // The provider's default GPU: the lowest gpu_id of the topology.
    let first_gpu = machine
        .gpus()
        .iter()
        .map(|g| g.gpu_id)
        .min()
        .expect("a GPU");
    let mut children = Vec::new();
    for (kind, usm_type) in KINDS {
        for pool in POOLS {
            let at = format!("{kind} {pool}: ");
            assert!(
                line(&stdout, &at).contains("33 allocations of 64 B - 2 MiB"),
                "{at}mixed allocations"
            );
            assert_eq!(
                line(&stdout, &format!("{at}properties")),
                format!("{at}properties: pointer type {usm_type}, gpu_id {first_gpu:#x}")
            );
            let trim = if pool == "disjoint" {
                "SUCCESS"
            } else {
                "NOT_SUPPORTED"
            };
            assert_eq!(
                line(&stdout, &format!("{at}purge_force")),
                format!(
                    "{at}purge_force zero-filled 1 page of 3, purge_lazy ok, unaligned purge \
                     INVALID_ALIGNMENT; pool trim {trim}"
                )
            );
            assert!(
                line(&stdout, &format!("{at}split/merge")).contains("bad merges INVALID_ARGUMENT")
            );
            let child = line(&stdout, &format!("{at}forked child "));
            assert!(
                child.contains(
                    "inherited provider refused (native 2009), own provider and pool work"
                ),
                "{child}"
            );
            children.push(child.split_whitespace().nth(4).unwrap_or("").to_owned());
            let ipc = line(&stdout, &format!("{at}IPC: "));
            if kind == "SHARED" {
                assert!(!child.contains("IPC handle"), "{child}");
                assert!(ipc.contains("umfGetIPCHandle NOT_SUPPORTED"), "{ipc}");
            } else {
                assert!(
                    child
                        .ends_with("opened the parent's IPC handle: read 300000 bytes, wrote 4096"),
                    "{child}"
                );
                assert!(
                    ipc.contains("the parent sees the child's 4096 bytes and keeps its own"),
                    "{ipc}"
                );
            }
        }
    }
    children.sort();
    children.dedup();
    assert_eq!(
        children.len(),
        6,
        "six distinct child processes: {children:?}"
    );
    assert!(
        stdout.contains("umf_pools: all 6 kind/pool combinations passed"),
        "{stdout}"
    );
    print!("{stdout}");
}
