//! A large anonymous `mmap` under `kfd-emu run` is checked against the emulated machine's
//! RAM, as the machine's kernel would check it (`__vm_enough_memory`, `OVERCOMMIT_GUESS`: a
//! mapping larger than RAM and swap fails), not the host's: kfdtest's
//! `VramOvercommitGiantRangeTest` maps VRAM + 1 GiB of private memory in one call, which
//! mi210x8 (2 × 256 GiB) makes and a smaller host refuses.
//!
//! The traced program is this test binary again, with [`ROLE`] giving the length to map.

use std::process::Command;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};

/// Selects the traced program's role: the bytes to map.
const ROLE: &str = "KFD_EMU_TEST_OVERCOMMIT_LEN";
const GIB: u64 = 1 << 30;
/// The role's exit code when its `mmap` failed with `ENOMEM`.
const ENOMEM_EXIT: i32 = 12;

/// The traced program (runs only under [`ROLE`]): one private writable anonymous mapping of
/// the length asked for, without `MAP_NORESERVE`, never touched; exits 0 when it was made,
/// [`ENOMEM_EXIT`] when the kernel refused it with `ENOMEM`, 1 otherwise.
#[test]
fn overcommit_role() {
    let Ok(len) = std::env::var(ROLE) else {
        return;
    };
    let len: usize = len.parse().expect("a length");
    // SAFETY: a fresh anonymous mapping at an address the kernel picks, never accessed, and
    // unmapped below with the same length.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        let err = std::io::Error::last_os_error();
        println!("mmap of {len} bytes: {err}");
        std::process::exit(if err.raw_os_error() == Some(libc::ENOMEM) {
            ENOMEM_EXIT
        } else {
            1
        });
    }
    // SAFETY: unmaps the mapping made above, which nothing references.
    assert_eq!(unsafe { libc::munmap(at, len) }, 0);
    println!("mmap of {len} bytes: made");
}

fn role(len: u64) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args([
            "--exact",
            "overcommit_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, len.to_string());
    command
}

/// The exit code of the role mapping `len` bytes under `kfd-emu run` on preset `machine`.
fn emulated(machine: &str, len: u64) -> Option<i32> {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model");
    kfd_emu::supervisor::spawn_command(model, &mut role(len))
        .expect("spawn")
        .code()
}

/// The host's RAM and swap together, and whether its overcommit heuristic is in force (the
/// only mode where a mapping's size alone decides).
fn host() -> (u64, bool) {
    let si = rustix::system::sysinfo();
    let unit = u64::from(si.mem_unit.max(1));
    let guess = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .is_ok_and(|mode| mode.trim() == "0");
    ((si.totalram + si.totalswap) * unit, guess)
}

/// Larger than the host's RAM and swap, within mi210x8's RAM: the host refuses it natively;
/// under `kfd-emu run --machine mi210x8` it is made. (Before: `ENOMEM` under the emulator
/// too.)
#[test]
fn a_mapping_larger_than_the_host_within_the_machines_ram_is_made() {
    let (host, guess) = host();
    let len = (host + GIB).next_multiple_of(GIB);
    let machine = Machine::preset("mi210x8").expect("preset").system_memory();
    if !guess || len > machine {
        println!("skipped: overcommit heuristic off, or the host has the machine's memory");
        return;
    }
    let native = role(len).status().expect("run natively").code();
    assert_eq!(native, Some(ENOMEM_EXIT), "the host refuses {len} bytes");
    assert_eq!(
        emulated("mi210x8", len),
        Some(0),
        "mi210x8 makes {len} bytes"
    );
}

/// Larger than the machine's RAM and swap too: refused under the emulator as on the machine.
#[test]
fn a_mapping_larger_than_the_machines_ram_still_fails() {
    let (host, guess) = host();
    let machine = Machine::preset("mi210x8").expect("preset").system_memory();
    let len = (machine + host + GIB).next_multiple_of(GIB);
    if !guess {
        println!("skipped: overcommit heuristic off");
        return;
    }
    assert_eq!(emulated("mi210x8", len), Some(ENOMEM_EXIT));
}
