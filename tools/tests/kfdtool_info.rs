//! `kfdtool info` end to end: the binary runs on this machine's `/dev/kfd`, or — where there is
//! none — says so and re-runs itself under the embedded emulator.

use std::process::Command;

fn kfdtool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(args)
        .output()
        .expect("running kfdtool")
}

fn hardware() -> bool {
    std::path::Path::new("/dev/kfd").exists()
}

#[test]
fn info_json_has_the_documented_shape_and_the_emulated_mi300x_facts() {
    let out = kfdtool(&["info", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kfdtool failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(
        v["kfd_version"]
            .as_str()
            .is_some_and(|s| s.starts_with("1.")),
        "{v}"
    );
    let nodes = v["nodes"].as_array().expect("nodes");
    assert!(!nodes.is_empty());
    for node in nodes {
        for key in [
            "node",
            "kind",
            "gpu_id",
            "name",
            "gfx_target_version",
            "simd_count",
            "cu_count",
            "vram_bytes",
            "drm_render_minor",
            "hive_id",
            "svm_supported",
            "links",
        ] {
            assert!(node.get(key).is_some(), "node without {key}: {node}");
        }
        for link in node["links"].as_array().expect("links") {
            assert!(link["to"].is_u64() && link["type"].is_string() && link["weight"].is_u64());
        }
    }
    let emulated = v["emulated"].as_bool().expect("emulated");
    assert_eq!(emulated, !hardware(), "{stderr}");
    if emulated {
        assert!(
            stderr.contains("no /dev/kfd"),
            "the fallback is announced: {stderr}"
        );
        let gpu = nodes
            .iter()
            .find(|n| n["kind"] == "gpu")
            .expect("a GPU node");
        assert_eq!(gpu["gfx_target_version"], "gfx942");
        assert_eq!(gpu["cu_count"], 304);
        assert_eq!(gpu["simd_count"], 1216);
        assert_eq!(gpu["vram_bytes"], 206_141_652_992u64);
        assert_eq!(gpu["svm_supported"], true);
        assert_eq!(gpu["drm_render_minor"], 128);
        assert_eq!(gpu["xnack"], "yes");
    }
}

#[test]
fn info_table_lists_every_node_and_the_gpu_apertures() {
    let out = kfdtool(&["info"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("KFD 1."), "{text}");
    assert!(text.contains("node kind gpu_id"), "{text}");
    assert!(text.contains("gpuvm 0x"), "{text}");
    if !hardware() {
        assert!(text.contains("gfx942"), "{text}");
        assert!(
            text.contains("emulated by kfd-emu, machine mi300x"),
            "{text}"
        );
    }
}

#[test]
fn another_machine_can_be_chosen_for_the_fallback() {
    if hardware() {
        kfd_skip::skip("this machine has /dev/kfd, so --machine is not used");
        return;
    }
    let out = kfdtool(&["info", "--json", "--machine", "mi210x8"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let gpus: Vec<_> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "gpu")
        .collect();
    assert_eq!(gpus.len(), 8);
    assert!(gpus.iter().all(|g| g["gfx_target_version"] == "gfx90a"));
    let xgmi = gpus[0]["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["type"] == "xgmi")
        .count();
    assert_eq!(
        xgmi, 3,
        "each MI210 has xGMI links to the 3 others of its hive"
    );
}

#[test]
fn an_unknown_machine_is_a_one_line_error() {
    if hardware() {
        kfd_skip::skip("this machine has /dev/kfd, so --machine is not used");
        return;
    }
    let out = kfdtool(&["info", "--machine", "no-such-gpu"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no emulated machine named no-such-gpu"),
        "{stderr}"
    );
}
