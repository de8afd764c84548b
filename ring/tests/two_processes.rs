//! Two processes share one SPSC ring through the memfd of a [`HostMirror`]: this test's
//! process produces, a child process (this test binary again, running the ignored peer test)
//! maps the memfd itself and consumes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kfd_ring::{Bytes, Granule, HostMirror, ReserveError, SpscRing};

/// The environment variable that hands the memfd's descriptor number to the child.
const PEER_FD: &str = "KFD_RING_PEER_FD";
const RECORDS: u64 = 20_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// Record `seq`: its payload length (1 B – 3 KiB) and contents.
fn record(seq: u64) -> Vec<u8> {
    let len = 1 + (seq.wrapping_mul(0x9e37_79b9) % 3072) as usize;
    (0..len)
        .map(|i| (seq as usize).wrapping_mul(131).wrapping_add(i * 7) as u8)
        .collect()
}

/// An FNV-1a checksum over the sequence number and the payload.
fn checksum(seq: u64, payload: &[u8]) -> u64 {
    payload.iter().fold(0xcbf2_9ce4_8422_2325 ^ seq, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn two_processes_share_one_ring_through_the_memfd() {
    let mirror = HostMirror::new(64 << 10).unwrap();
    // A descriptor without close-on-exec, for the child to inherit.
    let inherited = rustix::io::dup(mirror.memfd()).unwrap();
    let mut tx = SpscRing::new(mirror).unwrap().into_producer().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peer_process_consumes_the_ring",
            "--ignored",
            "--test-threads=1",
        ])
        .env(PEER_FD, inherited.as_raw_fd().to_string())
        // The child's own test report stays out of ours (shown when it fails).
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(inherited);
    let start = Instant::now();
    for seq in 0..RECORDS {
        let payload = record(seq);
        let slot = loop {
            match tx.reserve(16 + payload.len()) {
                Ok(slot) => break slot,
                Err(ReserveError::Full) => {
                    if child.try_wait().unwrap().is_some() {
                        let out = child.wait_with_output().unwrap();
                        panic!(
                            "the consumer process exited early: {}\n{}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr)
                        );
                    }
                    assert!(start.elapsed() < DEADLINE, "the consumer stalled");
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        };
        // Volatile writes: the other process maps these bytes too.
        slot.write_slice(&seq.to_le_bytes(), 0).unwrap();
        slot.write_slice(&payload, 8).unwrap();
        slot.write_slice(&checksum(seq, &payload).to_le_bytes(), 8 + payload.len())
            .unwrap();
        tx.commit();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the consumer process failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The consumer released every record: a whole-capacity record fits again.
    let max = tx.max_record();
    assert!(
        tx.reserve(max).is_ok(),
        "the ring was drained by the other process"
    );
}

#[test]
#[ignore = "the child half of two_processes_share_one_ring_through_the_memfd, which runs it"]
fn peer_process_consumes_the_ring() {
    let fd: i32 = std::env::var(PEER_FD)
        .expect("run by two_processes_share_one_ring_through_the_memfd")
        .parse()
        .unwrap();
    // SAFETY: the parent process made this descriptor for us to inherit; nothing else in this
    // process owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mirror = HostMirror::from_memfd(fd, Granule::Page).unwrap();
    let mut rx = SpscRing::new(mirror).unwrap().into_consumer().unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    for seq in 0..RECORDS {
        let want = record(seq);
        loop {
            // Copied out of the shared memory (the producer is another process).
            if rx.pop_into(&mut got).unwrap() {
                assert_eq!(got.len(), 16 + want.len(), "record {seq}: length");
                assert_eq!(got[..8], seq.to_le_bytes(), "record {seq}: in order");
                assert!(got[8..8 + want.len()] == want[..], "record {seq}: payload");
                let sum = u64::from_le_bytes(got[8 + want.len()..].try_into().unwrap());
                assert_eq!(sum, checksum(seq, &want), "record {seq}: checksum");
                break;
            }
            assert!(start.elapsed() < DEADLINE, "the producer stalled");
            std::thread::yield_now();
        }
    }
}
