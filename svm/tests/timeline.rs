//! The Chrome-trace export: parsed back with serde_json and checked for the structure Perfetto
//! needs and for the numbers it must show.

use std::collections::{BTreeMap, BTreeSet};

use kfd_svm::{EVENTS_TID, Location, SmiEvent, Timeline};
use serde_json::Value;

const GPU: u32 = 0x1a2b;
const PID: u32 = 4242;

/// A session as a GPU's SMI fd reports it: a 2 MiB prefetch to VRAM in two granules, a GPU
/// fault that migrates, a CPU fault that brings 16 pages back, a failed migration, a
/// migration cut off by the end of the capture, and the other event kinds.
const SESSION: &[&str] = &[
    "c 1092 bench",
    "5 1000000 -4242 @7f000(200) 0->1a2b 1a2b:1a2b 0",
    "5 1000500 -4242 @7f200(200) 0->1a2b 1a2b:1a2b 0",
    "6 1400000 -4242 @7f000(200) 0->1a2b 0 0",
    "6 1800000 -4242 @7f200(200) 0->1a2b 0 0",
    "7 2000000 -4242 @80000(1a2b) W",
    "5 2000100 -4242 @80000(1) 0->1a2b ffffffff:1a2b 1",
    "6 2000900 -4242 @80000(1) 0->1a2b 1 0",
    "8 2001000 -4242 @80000(1a2b) M",
    "9 2500000 -4242 1a2b 0",
    "5 2600000 -4242 @7f000(10) 1a2b->0 1a2b:1a2b 2",
    "6 2700000 -4242 @7f000(10) 1a2b->0 2 0",
    "a 2800000 -4242 1a2b 0",
    "5 3000000 -4242 @90000(4) 0->1a2b 1a2b:1a2b 0",
    "6 3100000 -4242 @90000(4) 0->1a2b 0 -12",
    "b 3200000 -4242 @7f000(400) 1a2b 2",
    "1 1092:bench",
    "2 1:2",
    "5 4000000 -4242 @a0000(8) 0->1a2b 1a2b:1a2b 0",
];

fn timeline() -> Timeline {
    SESSION
        .iter()
        .map(|line| SmiEvent::parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

fn trace_events(timeline: &Timeline) -> Vec<Value> {
    let mut json = Vec::new();
    timeline.write_chrome_trace(&mut json).unwrap();
    let parsed: Value = serde_json::from_slice(&json).expect("the export is valid JSON");
    assert_eq!(parsed, timeline.to_chrome_trace());
    assert_eq!(parsed["displayTimeUnit"], "ns");
    parsed["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
        .clone()
}

fn phase(e: &Value) -> &str {
    e["ph"].as_str().expect("every event has a phase")
}

fn by_phase<'a>(events: &'a [Value], ph: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| phase(e) == ph).collect()
}

#[test]
fn every_event_is_well_formed_and_time_ordered() {
    let events = trace_events(&timeline());
    let phases: BTreeSet<&str> = events.iter().map(phase).collect();
    assert_eq!(phases, BTreeSet::from(["C", "M", "X", "i"]));
    // Metadata first, then everything else by time.
    let first_timed = events.iter().position(|e| phase(e) != "M").unwrap();
    assert!(events[first_timed..].iter().all(|e| phase(e) != "M"));
    let times: Vec<f64> = events[first_timed..]
        .iter()
        .map(|e| e["ts"].as_f64().expect("a numeric ts"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for e in &events {
        assert!(e["name"].is_string(), "{e}");
        assert!(e["pid"].is_u64(), "{e}");
        match phase(e) {
            "X" => {
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
                assert!(e["tid"].is_u64(), "{e}");
            }
            "i" => {
                assert_eq!(e["s"], "t", "{e}");
                assert!(e["tid"].is_u64(), "{e}");
            }
            "C" => assert!(e["args"]["bytes"].is_u64(), "{e}"),
            "M" => assert!(e["args"]["name"].is_string(), "{e}"),
            other => panic!("unexpected phase {other}"),
        }
    }
}

#[test]
fn migrations_are_slices_on_the_destination_track_with_microsecond_times() {
    let events = trace_events(&timeline());
    let slices = by_phase(&events, "X");
    // Five of the six starts met their end; the one at 4 ms did not.
    assert_eq!(slices.len(), 5);
    let first = slices[0];
    assert_eq!(first["ts"].as_f64(), Some(1000.0));
    assert_eq!(first["dur"].as_f64(), Some(400.0));
    assert_eq!(
        (first["pid"].as_u64(), first["tid"].as_u64()),
        (Some(4242), Some(0x1a2b))
    );
    assert_eq!(first["args"]["npages"], 0x200);
    assert_eq!(first["args"]["bytes"], 0x200 * 4096);
    assert_eq!(first["args"]["addr"], "0x7f000000");
    assert_eq!(first["args"]["trigger"], "prefetch");
    assert_eq!(first["name"], "migrate system -> gpu 0x1a2b (prefetch)");
    // The second granule overlaps the first in time and pairs with its own end.
    assert_eq!(slices[1]["ts"].as_f64(), Some(1000.5));
    assert_eq!(slices[1]["dur"].as_f64(), Some(799.5));
    // The CPU fault brings pages back: its slice is on the system-memory track.
    let back = slices
        .iter()
        .find(|s| s["args"]["trigger"] == "cpu page fault")
        .unwrap();
    assert_eq!(back["tid"].as_u64(), Some(0));
    // The failed migration keeps its error code.
    let failed = slices
        .iter()
        .find(|s| s["args"]["error_code"] == -12)
        .unwrap();
    assert_eq!(failed["args"]["npages"], 4);
    // The start whose end never came is an instant that says so.
    let cut = events
        .iter()
        .find(|e| e["name"] == "migrate start (end not seen)")
        .expect("an instant for the unfinished migration");
    assert_eq!(cut["ts"].as_f64(), Some(4000.0));
}

#[test]
fn counters_total_the_bytes_of_successful_migrations_per_direction() {
    let timeline = timeline();
    let events = trace_events(&timeline);
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut first: BTreeMap<String, u64> = BTreeMap::new();
    for c in by_phase(&events, "C") {
        assert_eq!(c["pid"].as_u64(), Some(u64::from(PID)));
        let name = c["name"].as_str().unwrap().to_owned();
        let bytes = c["args"]["bytes"].as_u64().unwrap();
        first.entry(name.clone()).or_insert(bytes);
        let previous = last.insert(name, bytes).unwrap_or(0);
        assert!(bytes >= previous, "counters only grow");
    }
    assert!(
        first.values().all(|&b| b == 0),
        "each counter starts at 0: {first:?}"
    );
    let to_gpu = (0x200 + 0x200 + 1) * 4096;
    let to_sys = 0x10 * 4096;
    assert_eq!(
        last,
        BTreeMap::from([
            ("bytes gpu 0x1a2b -> system".to_owned(), to_sys),
            ("bytes system -> gpu 0x1a2b".to_owned(), to_gpu),
        ])
    );
    assert_eq!(
        timeline.bytes_migrated(),
        BTreeMap::from([
            (
                (Location::Gpu(kfd_ioctl::GpuId(GPU)), Location::System),
                to_sys
            ),
            (
                (Location::System, Location::Gpu(kfd_ioctl::GpuId(GPU))),
                to_gpu
            ),
        ])
    );
}

#[test]
fn faults_and_the_rest_are_instants_and_every_track_is_named() {
    let events = trace_events(&timeline());
    let instants = by_phase(&events, "i");
    let names: Vec<&str> = instants
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for expected in [
        "process start",
        "gpu page fault (write)",
        "gpu page fault recovered (migrated)",
        "queues evicted (svm)",
        "queues restored",
        "unmap from gpu (cpu unmap)",
        "vm fault",
        "thermal throttle",
        "migrate start (end not seen)",
    ] {
        assert_eq!(
            names.iter().filter(|n| **n == expected).count(),
            1,
            "{expected} in {names:?}"
        );
    }
    assert_eq!(instants.len(), 9);
    let fault = instants
        .iter()
        .find(|e| e["name"] == "gpu page fault (write)")
        .unwrap();
    assert_eq!(fault["tid"].as_u64(), Some(u64::from(GPU)));
    assert_eq!(fault["args"]["addr"], "0x80000000");
    // Untimed events take the time of the event before them.
    let vm_fault = instants.iter().find(|e| e["name"] == "vm fault").unwrap();
    assert_eq!(vm_fault["ts"].as_f64(), Some(3200.0));
    assert_eq!(vm_fault["tid"].as_u64(), Some(u64::from(EVENTS_TID)));
    // The process start came before any timestamp: it takes the first one.
    let start = instants
        .iter()
        .find(|e| e["name"] == "process start")
        .unwrap();
    assert_eq!(start["ts"].as_f64(), Some(1000.0));

    let meta = by_phase(&events, "M");
    let thread_names: BTreeMap<(u64, u64), &str> = meta
        .iter()
        .filter(|m| m["name"] == "thread_name")
        .map(|m| {
            let key = (m["pid"].as_u64().unwrap(), m["tid"].as_u64().unwrap());
            (key, m["args"]["name"].as_str().unwrap())
        })
        .collect();
    let process_names: BTreeMap<u64, &str> = meta
        .iter()
        .filter(|m| m["name"] == "process_name")
        .map(|m| {
            (
                m["pid"].as_u64().unwrap(),
                m["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    for e in events
        .iter()
        .filter(|e| matches!(phase(e), "X" | "i" | "C"))
    {
        let pid = e["pid"].as_u64().unwrap();
        assert!(process_names.contains_key(&pid), "no process_name for {e}");
        if phase(e) != "C" {
            let tid = e["tid"].as_u64().unwrap();
            assert!(
                thread_names.contains_key(&(pid, tid)),
                "no thread_name for {e}"
            );
        }
    }
    assert_eq!(process_names[&u64::from(PID)], "bench (pid 4242)");
    assert_eq!(process_names[&0], "kfd");
    assert_eq!(
        thread_names[&(u64::from(PID), u64::from(GPU))],
        "gpu 0x1a2b"
    );
    assert_eq!(thread_names[&(u64::from(PID), 0)], "system memory");
    assert_eq!(
        thread_names[&(u64::from(PID), u64::from(EVENTS_TID))],
        "events"
    );
}

#[test]
fn an_end_without_its_start_is_an_instant_and_still_counts() {
    let timeline: Timeline = ["6 50000 -7 @100(2) 0->1a2b 0 0"]
        .iter()
        .map(|l| SmiEvent::parse(l).unwrap())
        .collect();
    let events = trace_events(&timeline);
    assert!(by_phase(&events, "X").is_empty());
    let instants = by_phase(&events, "i");
    assert_eq!(instants.len(), 1);
    assert_eq!(instants[0]["name"], "migrate end (start not seen)");
    let counters = by_phase(&events, "C");
    assert_eq!(counters.last().unwrap()["args"]["bytes"], 2 * 4096);
}

#[test]
fn page_size_scales_bytes() {
    let mut timeline = Timeline::with_page_size(64 << 10);
    timeline.extend(
        [
            "5 1 -7 @100(2) 0->1a2b 1a2b:1a2b 0",
            "6 2 -7 @100(2) 0->1a2b 0 0",
        ]
        .iter()
        .map(|l| SmiEvent::parse(l).unwrap()),
    );
    assert_eq!(
        timeline.bytes_migrated().values().sum::<u64>(),
        2 * (64 << 10)
    );
    let events = trace_events(&timeline);
    assert_eq!(by_phase(&events, "X")[0]["args"]["addr"], "0x1000000");
}

#[test]
fn an_empty_timeline_is_an_empty_trace() {
    let events = trace_events(&Timeline::new());
    assert!(events.is_empty());
}
