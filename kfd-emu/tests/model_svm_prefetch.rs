//! Where a prefetch puts a range (`kfd_svm.c`, `svm_range_best_prefetch_location`): its
//! prefetch location, unless a GPU that must reach the range lies outside that GPU's XGMI
//! hive — every GPU with ACCESS or ACCESS_IN_PLACE with XNACK off, only those with
//! ACCESS_IN_PLACE with it on — or the location is an APU that keeps GPU memory in system
//! memory (`apu_prefer_gtt`): then system memory, and nothing migrates.

mod model_support;
mod model_svm_support;

use std::sync::Arc;

use model_svm_support::*;

const UNDEF: u32 = kfd_ioctl::abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;

/// On mi210x8 (GPUs 0–3 and 4–7 are two hives): with XNACK `xnack`, a 2 MiB range with
/// `attrs` and PREFETCH_LOC GPU 0 ends up where (`actual_loc`).
fn prefetched_to(
    xnack: bool,
    attrs: impl Fn(&[u32]) -> Vec<kfd_ioctl::abi::kfd_ioctl_svm_attribute> + Send + 'static,
) -> (u32, u32) {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        kfd.set_xnack_mode(xnack).expect("XNACK mode");
        let mem = Anon::new(2 * MIB);
        let mut list = attrs(&g);
        list.push(prefetch(g[0]));
        svm_set(&kfd, mem.addr, mem.len, &list).expect("SET_ATTR");
        let r = view.svm_ranges(pid());
        assert!(r.iter().all(|x| x.actual_loc == r[0].actual_loc));
        (r[0].actual_loc, g[0])
    })
    .expect("attach")
}

#[test]
fn xnack_off_a_gpu_with_access_outside_the_hive_keeps_the_range_in_system_memory() {
    let (at, g0) = prefetched_to(false, |g| vec![access(g[0]), access(g[1])]);
    assert_eq!(at, g0, "GPU 1 is in GPU 0's hive");
    let (at, _) = prefetched_to(false, |g| vec![access(g[0]), access(g[4])]);
    assert_eq!(at, 0, "GPU 4 is not");
    let (at, _) = prefetched_to(false, |g| vec![access(g[0]), in_place(g[5])]);
    assert_eq!(at, 0, "nor GPU 5, in place");
}

#[test]
fn xnack_on_only_access_in_place_outside_the_hive_counts() {
    let (at, g0) = prefetched_to(true, |g| vec![access(g[4])]);
    assert_eq!(at, g0, "GPU 4 faults its own way to the range");
    let (at, _) = prefetched_to(true, |g| vec![in_place(g[4])]);
    assert_eq!(at, 0, "GPU 4 must reach it where it is");
    let (at, g0) = prefetched_to(true, |g| vec![in_place(g[3])]);
    assert_eq!(at, g0, "GPU 3 reaches GPU 0's VRAM over XGMI");
}

#[test]
fn an_apu_prefers_system_memory() {
    let model = model("mi300a");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[access(g[0]), prefetch(g[0])]).expect("SET_ATTR");
        let r = view.svm_ranges(pid());
        assert_eq!((r[0].prefetch_loc, r[0].actual_loc), (g[0], 0));
        assert_eq!(view.svm_vram_usage(g[0]), 0);
    })
    .expect("attach");
}

/// A range a GPU fault brought to VRAM has no prefetch location (UNDEFINED): a later SET_ATTR
/// of another attribute migrates nothing (`svm_range_trigger_migration` skips an undefined
/// location), so the range stays where the fault put it.
#[test]
fn set_attr_without_a_prefetch_location_leaves_a_faulted_range_in_vram() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[access(g[0])]).expect("register");
        view.gpu_read(pid(), g[0], mem.addr, &mut [0u8; 4])
            .expect("GPU read");
        let r = view.svm_ranges(pid());
        assert_eq!(
            (r[0].actual_loc, r[0].prefetch_loc),
            (g[0], kfd_ioctl::abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED)
        );
        svm_set(&kfd, mem.addr, mem.len, &[granularity(4)]).expect("SET_ATTR");
        let r = view.svm_ranges(pid());
        assert_eq!((r[0].actual_loc, r[0].granularity), (g[0], 4));
        assert_eq!(view.svm_vram_usage(g[0]), 2 * MIB);
    })
    .expect("attach");
}

/// Under the model clock a prefetch's migration lasts what moving its pages costs: between
/// MIGRATE_START and MIGRATE_END of a 2 MiB range exactly `Costs::migration_ns` of 2 MiB (the
/// pages that move are counted within the range, each once).
#[test]
fn a_prefetchs_migration_lasts_what_its_pages_cost() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
    let machine = Machine::preset("mi300x").expect("preset");
    let want = Costs::new(&machine, Timing::default()).migration_ns(0, 2 * MIB);
    let model = Model::new(ModelConfig {
        machine,
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let smi = kfd.smi_events(g[0]).expect("SMI_EVENTS");
        smi.set_mask(
            kfd_ioctl::abi::SmiEventMask::MIGRATE_START | kfd_ioctl::abi::SmiEventMask::MIGRATE_END,
        )
        .expect("mask");
        let mut smi = smi;
        let mem = Anon::new(4 * MIB);
        let start = mem.addr.next_multiple_of(2 * MIB);
        svm_set(&kfd, start, 2 * MIB, &[access(g[0]), prefetch(g[0])]).expect("prefetch");
        let records = drain_raw(&mut smi);
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(
            timestamp(&records[1]) - timestamp(&records[0]),
            want as i64,
            "{records:?}"
        );
    })
    .expect("attach");
}

/// PREFETCH_LOC again to the GPU that holds the range: the current kernel migrates again
/// (`svm_range_trigger_migration` goes on when `actual_loc` is the best location, "hmm
/// migrate will pick up right pages"; the "already on best_loc" return of
/// `svm_migrate_ram_to_vram` is gone) and `migrate_vma_setup` collects only system pages
/// (`MIGRATE_VMA_SELECT_SYSTEM`): none. So the records are there — MIGRATE_START before the
/// setup, its invalidation (the GPU's mapping dropped, XNACK on), MIGRATE_END — but nothing
/// moves: the pages stay in VRAM, the range's BO is not charged again, and the modeled time
/// is the prefetch's and the empty migration's setup only. A prefetch to another GPU of the
/// hive then goes through system memory (`svm_migrate_vram_to_vram`: every page back to RAM,
/// then to the new GPU), each half with trigger PREFETCH.
#[test]
fn a_prefetch_to_the_gpu_holding_the_range_moves_nothing_and_another_gpu_goes_through_ram() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
    let machine = Machine::preset("mi210x8").expect("preset");
    let costs = Costs::new(&machine, Timing::default());
    let empty = costs.prefetch_ns() + costs.migration_ns(0, 0);
    let model = Model::new(ModelConfig {
        machine,
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = kfd.smi_events(g[0]).expect("SMI_EVENTS");
        let mut smi1 = kfd.smi_events(g[1]).expect("SMI_EVENTS");
        let mask = kfd_ioctl::abi::SmiEventMask::MIGRATE_START
            | kfd_ioctl::abi::SmiEventMask::MIGRATE_END
            | kfd_ioctl::abi::SmiEventMask::UNMAP_FROM_GPU;
        smi.set_mask(mask).expect("mask");
        smi1.set_mask(mask).expect("mask");
        let pid = pid();
        let mem = Anon::new(4 * MIB);
        let start = mem.addr.next_multiple_of(2 * MIB);
        let p0 = (start - mem.addr) / PAGE;
        let pfn = mem.pfn(p0);
        let (g0, g1) = (g[0], g[1]);
        svm_set(&kfd, start, 2 * MIB, &[access(g0), prefetch(g0)]).expect("prefetch");
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{pfn:x}(200) 0->{g0:x} {g0:x}:{UNDEF:x} 0"),
                format!("6 T -{pid} @{pfn:x}(200) 0->{g0:x} 0 0"),
            ]
        );
        let charged = view.svm_vram_usage(g0);
        assert_eq!(charged, 2 * MIB);
        // Mapped on GPU 0 (ACCESS, the range is there).
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g0, mem.page(p0 + 3), &mut seen)
            .expect("mapped");
        let _ = drain(&mut smi);
        let before = view.clock().now_ns();
        svm_set(&kfd, start, 2 * MIB, &[prefetch(g0)]).expect("prefetch again");
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{pfn:x}(200) 0->{g0:x} {g0:x}:{UNDEF:x} 0"),
                format!("b T -{pid} @{pfn:x}(200) {g0:x} 1"),
                format!("6 T -{pid} @{pfn:x}(200) 0->{g0:x} 0 0"),
            ],
            "records, and the invalidation, but no page to collect"
        );
        assert_eq!(view.clock().now_ns() - before, empty, "setup only");
        assert_eq!(view.svm_vram_usage(g0), charged, "no second BO");
        assert_eq!(
            view.svm_page(pid, mem.page(p0 + 100)).map(|p| p.location),
            Some(g0)
        );
        // To GPU 1 of the same hive: through system memory.
        svm_set(&kfd, start, 2 * MIB, &[access(g1), prefetch(g1)]).expect("prefetch to 1");
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{pfn:x}(200) {g0:x}->0 {g1:x}:{UNDEF:x} 0"),
                format!("b T -{pid} @{pfn:x}(200) {g0:x} 1"),
                format!("6 T -{pid} @{pfn:x}(200) {g0:x}->0 0 0"),
            ]
        );
        // (GPU 1's records besides: the unmaps of the range from it, which had access.)
        let migrations: Vec<String> = drain(&mut smi1)
            .into_iter()
            .filter(|r| r.starts_with('5') || r.starts_with('6'))
            .collect();
        assert_eq!(
            migrations,
            [
                format!("5 T -{pid} @{pfn:x}(200) 0->{g1:x} {g1:x}:{UNDEF:x} 0"),
                format!("6 T -{pid} @{pfn:x}(200) 0->{g1:x} 0 0"),
            ]
        );
        assert_eq!(view.svm_vram_usage(g0), 0);
        assert_eq!(view.svm_vram_usage(g1), 2 * MIB);
    })
    .expect("attach");
}
