//! What libdrm's `drmGetDevices2` reads of a render node besides `/dev/dri`: the PCI device
//! files under `/sys/dev/char/226:<minor>/device` and `/sys/class/drm/renderD<minor>/device`,
//! generated from the topology, under the supervisor with the real model. The expected values
//! come from the emulated topology's `properties` (read through the emulator too), never from
//! the code that writes the PCI files.

use std::collections::BTreeMap;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_emu::supervisor::run_attached;

const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

fn model(preset: &str) -> Arc<Model> {
    Model::new(ModelConfig {
        machine: Machine::preset(preset).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model")
}

/// `key value` lines of a topology `properties` file.
fn properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            Some((key.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// `KEY=value` lines of a `uevent` file.
fn uevent(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// One GPU node's PCI view as a libdrm-like reader sees it.
#[derive(Debug)]
struct Seen {
    props: BTreeMap<String, u64>,
    by_number: Result<(String, String, String, String), std::io::ErrorKind>,
    by_class: Result<(String, String), std::io::ErrorKind>,
}

fn read(path: String) -> Result<String, std::io::ErrorKind> {
    std::fs::read_to_string(path).map_err(|e| e.kind())
}

fn look(preset: &str) -> Vec<Seen> {
    run_attached(model(preset), || {
        let mut seen = Vec::new();
        for node in 0.. {
            let Ok(text) = read(format!("{TOPOLOGY}/{node}/properties")) else {
                break;
            };
            let props = properties(&text);
            let minor = props.get("drm_render_minor").copied().unwrap_or(0);
            if props.get("simd_count").copied().unwrap_or(0) == 0 {
                continue; // a CPU node
            }
            let char_dev = format!("/sys/dev/char/226:{minor}");
            let by_number = (|| {
                Ok((
                    read(format!("{char_dev}/device/uevent"))?,
                    read(format!("{char_dev}/device/vendor"))?,
                    read(format!("{char_dev}/device/device"))?,
                    read(format!("{char_dev}/dev"))?,
                ))
            })();
            let class = format!("/sys/class/drm/renderD{minor}/device");
            let by_class = (|| {
                Ok((
                    read(format!("{class}/uevent"))?,
                    read(format!("{class}/subsystem_vendor"))?,
                ))
            })();
            seen.push(Seen {
                props,
                by_number,
                by_class,
            });
        }
        seen
    })
    .expect("supervisor")
}

#[test]
fn render_nodes_have_the_topologys_pci_device_files() {
    let seen = look("mi210x8");
    assert_eq!(seen.len(), 8, "eight GPU nodes: {seen:?}");
    let mut slots = Vec::new();
    for gpu in &seen {
        let p = &gpu.props;
        let location = p["location_id"];
        let slot = format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            p.get("domain").copied().unwrap_or(0),
            location >> 8,
            (location >> 3) & 0x1f,
            location & 7
        );
        let (uevent_text, vendor, device, dev) = gpu.by_number.clone().expect("226:<minor> files");
        let u = uevent(&uevent_text);
        assert_eq!(u["DRIVER"], "amdgpu");
        assert_eq!(u["PCI_SLOT_NAME"], slot);
        assert_eq!(
            u["PCI_ID"],
            format!("{:04X}:{:04X}", p["vendor_id"], p["device_id"])
        );
        assert_eq!(vendor, format!("{:#06x}\n", p["vendor_id"]));
        assert_eq!(device, format!("{:#06x}\n", p["device_id"]));
        assert_eq!(dev, format!("226:{}\n", p["drm_render_minor"]));
        let (class_uevent, sub_vendor) = gpu.by_class.clone().expect("renderD<minor> files");
        assert_eq!(class_uevent, uevent_text);
        assert!(sub_vendor.starts_with("0x") && sub_vendor.ends_with('\n'));
        slots.push(slot);
    }
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 8, "each GPU its own PCI slot");
}

#[test]
fn other_char_devices_stay_the_hosts() {
    let (other_minor, null_dev) = run_attached(model("mi210x8"), || {
        (
            read("/sys/dev/char/226:4000/device/uevent".into()),
            read("/sys/dev/char/1:3/dev".into()),
        )
    })
    .expect("supervisor");
    assert_eq!(other_minor, Err(std::io::ErrorKind::NotFound));
    // /dev/null's entry, as the host's kernel shows it.
    assert_eq!(null_dev, read("/sys/dev/char/1:3/dev".into()));
}

/// `readlink(2)` through libc with a `size`-byte buffer: the bytes, or the errno.
fn readlink(path: &std::ffi::CStr, size: usize) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; size];
    // SAFETY: `path` is NUL-terminated and `buf` has `size` writable bytes.
    let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), size) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    buf.truncate(usize::try_from(n).unwrap_or(0));
    Ok(buf)
}

#[test]
fn render_node_links_and_dev_dri_entries() {
    let host_link = std::env::temp_dir().join(format!("kfd-emu-drm-link-{}", std::process::id()));
    let _ = std::fs::remove_file(&host_link);
    std::os::unix::fs::symlink("some/target", &host_link).expect("host symlink");
    let host_c = std::ffi::CString::new(host_link.to_str().unwrap()).unwrap();
    let (subsystem, short, by_class, not_link, missing, host, entries) =
        run_attached(model("mi210x8"), || {
            let mut entries: Vec<String> = std::fs::read_dir("/dev/dri")
                .map(|dir| {
                    dir.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            entries.sort();
            (
                readlink(c"/sys/dev/char/226:128/device/subsystem", 256),
                readlink(c"/sys/dev/char/226:128/device/subsystem", 4),
                readlink(c"/sys/class/drm/renderD129/device/subsystem", 256),
                readlink(c"/sys/dev/char/226:128/device/vendor", 256),
                readlink(c"/sys/dev/char/226:128/device/nothing", 256),
                readlink(&host_c, 256),
                entries,
            )
        })
        .expect("supervisor");
    let _ = std::fs::remove_file(&host_link);
    let subsystem = subsystem.expect("readlink of device/subsystem");
    assert!(subsystem.ends_with(b"/bus/pci"), "{subsystem:?}");
    assert_eq!(
        short.as_deref(),
        Ok(&subsystem[..4]),
        "truncated to the buffer"
    );
    assert_eq!(by_class, Ok(subsystem));
    assert_eq!(not_link, Err(libc::EINVAL));
    assert_eq!(missing, Err(libc::ENOENT));
    assert_eq!(host.as_deref(), Ok(&b"some/target"[..]));
    let mut want: Vec<String> = Machine::preset("mi210x8")
        .expect("preset")
        .gpus()
        .iter()
        .flat_map(|gpu| {
            [
                format!("card{}", gpu.render_minor - 128),
                format!("renderD{}", gpu.render_minor),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(entries, want, "a primary and a render node per GPU");
}

/// The names in directory `path`, sorted; the errno when it cannot be listed.
fn list(path: &str) -> Result<Vec<String>, i32> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .map_err(|e| e.raw_os_error().unwrap_or(0))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// What a program walking the DRM and KFD classes sees, against the topology read through
/// the emulator: `/sys/class/drm` lists `card<N>` and `renderD<128+N>` per GPU (the kernel's
/// `drm_minor_alloc` gives both minors the same index), each a link that resolves, as
/// `/sys/dev/char/226:<minor>` does, to a DRM minor under the GPU's PCI device, so
/// `realpath` of its `device` is `/sys/devices/pci<domain>:00/<PCI_SLOT_NAME>`;
/// `/dev/dri/card<N>` is a character device `226:<N>` that opens as a DRM file of the GPU;
/// and `/sys/class/kfd` lists `kfd`, which holds `dev` and `topology`.
#[test]
fn drm_and_kfd_classes_list_and_resolve_like_sysfs() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    type Node = (
        String,
        Result<std::path::PathBuf, i32>,
        Result<String, i32>,
        Result<String, i32>,
    );
    let (nodes, class_drm, class_kfd, kfd_dir, kfd_dev, cards, props) =
        run_attached(model("mi210x8"), || {
            let props: Vec<BTreeMap<String, u64>> = (0..)
                .map_while(|node| read(format!("{TOPOLOGY}/{node}/properties")).ok())
                .map(|text| properties(&text))
                .filter(|p| p.get("simd_count").is_some_and(|&n| n > 0))
                .collect();
            let class_drm = list("/sys/class/drm");
            let mut nodes: Vec<Node> = Vec::new();
            let mut cards = Vec::new();
            for name in class_drm.clone().unwrap_or_default() {
                let Some(minor) = name
                    .strip_prefix("card")
                    .map(|n| n.parse::<u32>().ok())
                    .or_else(|| name.strip_prefix("renderD").map(|n| n.parse::<u32>().ok()))
                    .flatten()
                else {
                    continue;
                };
                let by_number = format!("/sys/dev/char/226:{minor}");
                nodes.push((
                    name.clone(),
                    std::fs::canonicalize(format!("{by_number}/device"))
                        .map_err(|e| e.raw_os_error().unwrap_or(0)),
                    read(format!("{by_number}/device/uevent")).map_err(|_| 0),
                    std::fs::read_link(&by_number)
                        .map(|t| t.to_string_lossy().into_owned())
                        .map_err(|e| e.raw_os_error().unwrap_or(0)),
                ));
                if name.starts_with("card") {
                    let path = format!("/dev/dri/{name}");
                    let stat = std::fs::metadata(&path)
                        .map(|m| (m.file_type().is_char_device(), m.rdev()));
                    let fstat = std::fs::File::open(&path)
                        .and_then(|f| f.metadata())
                        .map(|m| (m.file_type().is_char_device(), m.rdev()));
                    cards.push((
                        minor,
                        stat.map_err(|e| e.kind()),
                        fstat.map_err(|e| e.kind()),
                    ));
                }
            }
            (
                nodes,
                class_drm,
                list("/sys/class/kfd"),
                list("/sys/class/kfd/kfd"),
                read("/sys/class/kfd/kfd/dev".into()),
                cards,
                props,
            )
        })
        .expect("supervisor");
    assert_eq!(props.len(), 8, "eight GPU nodes");
    let mut want_class: Vec<String> = props
        .iter()
        .flat_map(|p| {
            let render = p["drm_render_minor"];
            [format!("card{}", render - 128), format!("renderD{render}")]
        })
        .chain(["version".to_owned()])
        .collect();
    want_class.sort();
    assert_eq!(class_drm, Ok(want_class));
    assert_eq!(nodes.len(), 16, "{nodes:?}");
    for (name, real, uevent_text, link) in &nodes {
        let uevent_text = uevent_text.as_ref().expect("device/uevent");
        let slot = &uevent(uevent_text)["PCI_SLOT_NAME"];
        let domain = &slot[..4];
        assert_eq!(
            real.as_deref().map(|p| p.to_string_lossy().into_owned()),
            Ok(format!("/sys/devices/pci{domain}:00/{slot}")),
            "realpath of {name}'s device"
        );
        assert_eq!(
            link.as_deref(),
            Ok(format!("../../devices/pci{domain}:00/{slot}/drm/{name}").as_str()),
            "readlink of {name} by number"
        );
    }
    // A card and a render node of the same GPU name the same PCI device; GPUs do not share one.
    let slot_of = |name: &str| {
        nodes
            .iter()
            .find(|n| n.0 == name)
            .map(|n| n.1.clone())
            .expect("listed")
    };
    for p in &props {
        let render = p["drm_render_minor"];
        assert_eq!(
            slot_of(&format!("card{}", render - 128)),
            slot_of(&format!("renderD{render}"))
        );
    }
    let mut slots: Vec<_> = nodes.iter().map(|n| n.1.clone()).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 8);
    for (minor, stat, fstat) in cards {
        let want = Ok((true, libc::makedev(226, minor)));
        assert_eq!(stat, want, "stat of card{minor}");
        assert_eq!(fstat, want, "fstat of an opened card{minor}");
    }
    assert_eq!(class_kfd, Ok(vec!["kfd".to_owned()]));
    assert_eq!(
        kfd_dir,
        Ok(vec![
            "dev".to_owned(),
            "topology".to_owned(),
            "uevent".to_owned()
        ])
    );
    assert_eq!(kfd_dev, Ok(format!("{}:0\n", kfd_emu::model::KFD_MAJOR)));
}

#[test]
fn readlinkat_resolves_against_its_directory_and_a_zero_buffer_is_einval() {
    let (relative, zero) = run_attached(model("mi210x8"), || {
        let dir = std::fs::File::open("/sys/dev/char/226:128").map(std::os::fd::OwnedFd::from);
        let relative = dir.map_err(|e| e.raw_os_error()).map(|dir| {
            use std::os::fd::AsRawFd;
            let mut buf = [0u8; 64];
            // SAFETY: the path is NUL-terminated and `buf` has 64 writable bytes.
            let n = unsafe {
                libc::readlinkat(
                    dir.as_raw_fd(),
                    c"device/subsystem".as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            usize::try_from(n)
                .map(|n| buf[..n].to_vec())
                .map_err(|_| errno())
        });
        (
            relative,
            readlink(c"/sys/dev/char/226:128/device/subsystem", 0),
        )
    })
    .expect("supervisor");
    let target = relative.expect("open of 226:128").expect("readlinkat");
    assert!(target.ends_with(b"/pci"), "{target:?}");
    // The kernel refuses a buffer of size 0 before it looks at the path.
    assert_eq!(zero, Err(libc::EINVAL));
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `kfd_emu::counting::Counting` passes readlink on to the model it wraps (the teardown and
/// trace tests run the model through it).
#[test]
fn counting_forwards_readlink() {
    let counting = kfd_emu::counting::Counting::new(model("mi210x8"));
    let link = run_attached(counting, || {
        readlink(c"/sys/dev/char/226:128/device/subsystem", 256)
    })
    .expect("attach");
    let link = link.expect("readlink through Counting");
    assert!(
        link.ends_with(b"/bus/pci"),
        "{:?}",
        String::from_utf8_lossy(&link)
    );
}

/// A hostile buffer for an emulated link: a read-only page and a NULL pointer get EFAULT, as
/// from the kernel, nothing is written, and the supervisor goes on serving the next call.
#[test]
fn readlink_into_a_buffer_the_caller_cannot_write_is_efault() {
    let (read_only, null, after) = run_attached(model("mi210x8"), || {
        let path = c"/sys/dev/char/226:128/device/subsystem";
        // SAFETY: a fresh private anonymous page; nothing else refers to it.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        let call = |buf: *mut libc::c_char| {
            // SAFETY: the kernel (or the supervisor for it) checks the buffer; a bad one is
            // EFAULT, which is what this asks for.
            let n = unsafe { libc::readlink(path.as_ptr(), buf, 256) };
            if n < 0 {
                Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
            } else {
                Ok(n)
            }
        };
        let read_only = call(page.cast());
        let null = call(std::ptr::null_mut());
        // SAFETY: the page is ours and nothing refers into it.
        let untouched = unsafe { std::slice::from_raw_parts(page.cast::<u8>(), 4096) }
            .iter()
            .all(|&b| b == 0);
        assert!(untouched, "nothing written into the read-only page");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(page, 4096) };
        (read_only, null, readlink(path, 256))
    })
    .expect("attach");
    assert_eq!(read_only, Err(libc::EFAULT));
    assert_eq!(null, Err(libc::EFAULT));
    assert!(after.expect("served after").ends_with(b"/bus/pci"));
}
