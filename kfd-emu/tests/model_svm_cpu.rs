//! The model's side of CPU faults on SVM pages in VRAM (`model/svm/cpu.rs`, the kernel's
//! `svm_migrate_to_ram` in `kfd_migrate.c`), driven through the backend's CPU-fault interface
//! as `kfd-emu run`'s supervisor drives it (`cpu_faults`, `cpu_protect_plan`,
//! `cpu_protect_done`, `cpu_hidden`, `cpu_fault`, `cpu_touch`, `address_space`), without a
//! traced program: the `mprotect`s of each plan are checked, not run, and the test's own
//! memory stays accessible. The `clients` tests run the same protocol under the supervisor
//! with a real program; these pin each step's answer exactly.

mod model_support;
mod model_svm_support;

use std::sync::{Arc, Mutex};

use kfd_emu::backend::{AddressSpaceChange, Backend, CallerId, CpuProtect, CpuWake};
use kfd_ioctl::SmiEvents;
use kfd_ioctl::abi::*;
use model_svm_support::*;

const NONE: u32 = libc::PROT_NONE as u32;
const R: u32 = libc::PROT_READ as u32;
const RW: u32 = (libc::PROT_READ | libc::PROT_WRITE) as u32;

/// The supervisor's stand-in: records whom the model wakes.
#[derive(Default)]
struct Waker(Mutex<Vec<i32>>);

impl CpuWake for Waker {
    fn wake(&self, tgid: i32) {
        self.0.lock().unwrap().push(tgid);
    }
    fn sync(&self) {}
}

impl Waker {
    fn take(&self) -> Vec<i32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// One `mprotect` of a plan, or one hidden span with the protection it is to get back.
fn protect(start: u64, len: u64, prot: u32) -> CpuProtect {
    CpuProtect { start, len, prot }
}

/// The migration and GPU-unmap records of GPU `gpu`.
fn smi_migrations(kfd: &kfd_ioctl::Kfd, gpu: u32) -> SmiEvents {
    let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
    smi.set_mask(
        SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END | SmiEventMask::UNMAP_FROM_GPU,
    )
    .expect("mask");
    smi
}

/// The records of `svm_migrate_to_ram` of the 2 MiB granule at `granule` (trigger
/// PAGEFAULT_CPU, its unmap from the GPU between start and end).
fn to_ram_records(pid: i32, g: u32, granule: u64) -> Vec<String> {
    let p = granule / PAGE;
    let undef = KFD_IOCTL_SVM_LOCATION_UNDEFINED;
    vec![
        format!("5 T -{pid} @{p:x}(200) {g:x}->0 {g:x}:{undef:x} 2"),
        format!("b T -{pid} @{p:x}(200) {g:x} 1"),
        format!("6 T -{pid} @{p:x}(200) {g:x}->0 2 0"),
    ]
}

/// Two 2 MiB ranges, one after the other, prefetched to the GPU (XNACK on), under a
/// supervisor that hides VRAM pages:
/// - the plan hides exactly the ranges' pages (one `PROT_NONE` for both), once; what is
///   hidden keeps the protection the program gave it;
/// - a fault outside a hidden span (before it, at its end) is not the model's; one inside
///   migrates its granule back (`svm_migrate_to_ram`'s block) and the next plan shows just
///   that granule again, each piece with its protection (also a piece the program's
///   `mprotect` changed just before, whose hiding again had not run yet); a fault there
///   before the plan ran is claimed and migrates nothing, after it it is not the model's;
/// - the program's `mprotect` over part of a hidden span wakes the supervisor, and that part
///   takes the new protection and is hidden again by the next plan, alone; one between
///   hidden spans, touching both, changes nothing;
/// - a system call's copy into a hidden span the program made read-only moves nothing (the
///   kernel's copy fails first, `EFAULT`); into a writable one it migrates the granule, and
///   the plan then shows every piece again with its own protection;
/// - memory the program made executable is hidden with that protection, memory it made
///   inaccessible itself is not hidden; ranges hidden after it hide just their own pages;
/// - a system call's copy faults home the blocks of just the pages it touches: of a span
///   hidden over two granules, the second, from a copy that starts where it begins (and
///   then just the end is shown again); the first, from a copy that ends where the second
///   begins;
/// - a hide that failed is forgotten.
#[test]
fn the_cpu_fault_protocol_hides_vram_pages_and_shows_each_faulted_granule_again() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let waker = Arc::new(Waker::default());
        view.cpu_faults(Some(Arc::clone(&waker) as Arc<dyn CpuWake>));
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_migrations(&kfd, g);
        let pid = pid();
        let caller = CallerId {
            tid: rustix::thread::gettid().as_raw_nonzero().get(),
            tgid: pid,
        };
        let mem = Anon::new(6 * MIB);
        let start = mem.addr;
        let second = start + 2 * MIB;
        let end = start + 4 * MIB;
        let after = start + 5 * MIB;
        let half = MIB / 2;
        for (at, len, prot) in [
            (
                after,
                half,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            ),
            (after + half, half, libc::PROT_NONE),
        ] {
            // SAFETY: the test's own mapping; nothing holds a reference into it.
            let r = unsafe { libc::mprotect(at as *mut libc::c_void, len as usize, prot) };
            assert_eq!(r, 0);
        }
        for at in [start, second] {
            svm_set(&kfd, at, 2 * MIB, &[access(g), prefetch(g)]).expect("prefetch");
        }
        let _ = drain(&mut smi);

        assert_eq!(
            view.cpu_protect_plan(pid),
            [protect(start, 4 * MIB, NONE)],
            "the ranges' pages hidden, in one piece"
        );
        assert_eq!(view.cpu_protect_plan(pid), [], "hidden once");
        view.cpu_protect_done(pid, &[]);
        assert_eq!(view.cpu_hidden(pid), [protect(start, 4 * MIB, RW)]);

        // Not the model's: below the span, at its end.
        assert!(!view.cpu_fault(caller, start - PAGE));
        assert!(!view.cpu_fault(caller, end));
        assert_eq!(drain(&mut smi), Vec::<String>::new());

        // The program makes the second granule's first four pages read-only (a length the
        // kernel rounds up to pages); before the plan that hides them again runs, a fault in
        // the second granule brings it home; the plan shows it again.
        waker.take();
        view.address_space(
            caller,
            AddressSpaceChange::Protect {
                start: second,
                len: 3 * PAGE + 1,
                prot: R,
            },
        );
        assert_eq!(waker.take(), [pid], "the supervisor is woken");
        // The mprotect's MMU notifier unmaps the pages from the GPU (`svm_range_evict`,
        // XNACK on: trigger MMU_NOTIFY); they stay in VRAM.
        assert_eq!(
            drain(&mut smi),
            [format!("b T -{pid} @{:x}(4) {g:x} 0", second / PAGE)]
        );
        assert_eq!(
            view.cpu_hidden(pid),
            [
                protect(start, 2 * MIB, RW),
                protect(second, 4 * PAGE, R),
                protect(second + 4 * PAGE, 2 * MIB - 4 * PAGE, RW),
            ]
        );
        assert!(view.cpu_fault(caller, second + 10 * PAGE));
        assert_eq!(drain(&mut smi), to_ram_records(pid, g, second));
        assert_eq!(view.svm_page(pid, second).expect("page").location, 0);
        assert_eq!(view.svm_page(pid, start).expect("page").location, g);
        assert_eq!(
            view.cpu_protect_plan(pid),
            [
                protect(second, 4 * PAGE, R),
                protect(second + 4 * PAGE, 2 * MIB - 4 * PAGE, RW),
            ]
        );
        assert_eq!(view.cpu_hidden(pid), [protect(start, 2 * MIB, RW)]);
        // Being shown: claimed (the access goes ahead once it is), nothing migrates.
        assert!(view.cpu_fault(caller, second + PAGE));
        assert_eq!(drain(&mut smi), Vec::<String>::new());
        view.cpu_protect_done(pid, &[]);
        assert!(
            !view.cpu_fault(caller, second + PAGE),
            "shown: the program's fault"
        );
        assert_eq!(view.cpu_protect_plan(pid), []);

        // The program makes four pages of the first granule read-only: hidden again after
        // the call, alone.
        let ro = start + 4 * PAGE;
        view.address_space(
            caller,
            AddressSpaceChange::Protect {
                start: ro,
                len: 4 * PAGE,
                prot: R,
            },
        );
        assert_eq!(waker.take(), [pid]);
        assert_eq!(
            drain(&mut smi),
            [format!("b T -{pid} @{:x}(4) {g:x} 0", ro / PAGE)]
        );
        assert_eq!(view.svm_page(pid, ro).expect("page").location, g);
        let pieces = [
            protect(start, 4 * PAGE, RW),
            protect(ro, 4 * PAGE, R),
            protect(ro + 4 * PAGE, 2 * MIB - 8 * PAGE, RW),
        ];
        assert_eq!(view.cpu_hidden(pid), pieces);
        assert_eq!(
            view.cpu_protect_plan(pid),
            [protect(ro, 4 * PAGE, NONE)],
            "hidden again after the call, alone"
        );
        view.cpu_protect_done(pid, &[]);
        assert_eq!(view.cpu_protect_plan(pid), []);

        // read() into the read-only pages: the kernel's copy fails before any migration.
        assert!(!view.cpu_touch(caller, &[(ro + PAGE, ro + 3 * PAGE)], true));
        assert_eq!(drain(&mut smi), Vec::<String>::new());
        // read() into the writable pages after them: the granule comes home.
        let at = ro + 10 * PAGE;
        assert!(view.cpu_touch(caller, &[(at + 100, at + 3 * PAGE)], true));
        assert_eq!(drain(&mut smi), to_ram_records(pid, g, start));
        assert_eq!(view.svm_page(pid, at).expect("page").location, 0);
        assert_eq!(
            view.cpu_protect_plan(pid),
            pieces,
            "every piece shown with its own protection"
        );
        view.cpu_protect_done(pid, &[]);
        assert_eq!(view.cpu_hidden(pid), []);
        assert!(
            !view.cpu_touch(caller, &[(start, end)], false),
            "nothing hidden"
        );

        // The MiB after a gap goes to VRAM: its executable half is hidden with that
        // protection, its inaccessible half not at all. Then the two ranges go back: just
        // their pages are hidden, not the gap up to it.
        svm_set(&kfd, after, MIB, &[access(g), prefetch(g)]).expect("prefetch");
        assert_eq!(view.cpu_protect_plan(pid), [protect(after, half, NONE)]);
        view.cpu_protect_done(pid, &[]);
        let rwx = RW | libc::PROT_EXEC as u32;
        assert_eq!(view.cpu_hidden(pid), [protect(after, half, rwx)]);
        for at in [start, second] {
            svm_set(&kfd, at, 2 * MIB, &[prefetch(g)]).expect("prefetch");
        }
        let _ = drain(&mut smi);
        assert_eq!(view.cpu_protect_plan(pid), [protect(start, 4 * MIB, NONE)]);
        view.cpu_protect_done(pid, &[]);
        assert_eq!(
            view.cpu_hidden(pid),
            [protect(start, 4 * MIB, RW), protect(after, half, rwx)]
        );
        // An mprotect of the gap between them (ending where one begins, beginning where the
        // other ends) changes nothing hidden and wakes no one.
        waker.take();
        view.address_space(
            caller,
            AddressSpaceChange::Protect {
                start: end,
                len: after - end,
                prot: R,
            },
        );
        assert_eq!(waker.take(), []);
        assert_eq!(
            view.cpu_hidden(pid),
            [protect(start, 4 * MIB, RW), protect(after, half, rwx)]
        );
        assert_eq!(view.cpu_protect_plan(pid), []);

        // write() from the second granule's first pages (the first granule, just before
        // them, in VRAM too): just the second comes home, and of the span hidden over both
        // granules just it is shown again.
        assert!(view.cpu_touch(caller, &[(second, second + 12 * PAGE)], false));
        assert_eq!(drain(&mut smi), to_ram_records(pid, g, second));
        assert_eq!(view.cpu_protect_plan(pid), [protect(second, 2 * MIB, RW)]);
        assert_eq!(
            view.cpu_hidden(pid),
            [protect(start, 2 * MIB, RW), protect(after, half, rwx)]
        );
        view.cpu_protect_done(pid, &[]);

        // The second range back in VRAM: a copy from the first granule's last two pages,
        // which end where the second's begin, brings just the first granule home.
        svm_set(&kfd, second, 2 * MIB, &[prefetch(g)]).expect("prefetch");
        let _ = drain(&mut smi);
        assert_eq!(view.cpu_protect_plan(pid), [protect(second, 2 * MIB, NONE)]);
        view.cpu_protect_done(pid, &[]);
        assert!(view.cpu_touch(caller, &[(second - 2 * PAGE, second)], false));
        assert_eq!(drain(&mut smi), to_ram_records(pid, g, start));
        assert_eq!(view.cpu_protect_plan(pid), [protect(start, 2 * MIB, RW)]);
        view.cpu_protect_done(pid, &[]);
        assert_eq!(
            view.cpu_hidden(pid),
            [protect(second, 2 * MIB, RW), protect(after, half, rwx)]
        );

        // Back to VRAM; the hide fails (the program unmapped the memory meanwhile, say).
        svm_set(&kfd, start, 2 * MIB, &[prefetch(g)]).expect("prefetch");
        let _ = drain(&mut smi);
        let hide = view.cpu_protect_plan(pid);
        assert_eq!(hide, [protect(start, 2 * MIB, NONE)]);
        view.cpu_protect_done(pid, &hide);
        assert_eq!(
            view.cpu_hidden(pid),
            [protect(second, 2 * MIB, RW), protect(after, half, rwx)],
            "a failed hide is forgotten"
        );
        assert!(!view.cpu_fault(caller, start));
        assert!(view.cpu_fault(caller, after));
    })
    .expect("attach");
}

/// A system call's copy from pages of one 4 MiB range the GPU holds (two 2 MiB granules),
/// hidden: only the blocks of the pages it touches come home (`svm_migrate_to_ram` at each
/// first touch of a device-private page), from the second granule's middle just the second,
/// from the first's middle just the first; the other granule stays in VRAM and hidden.
#[test]
fn a_copy_faults_home_just_the_granules_it_touches() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let waker = Arc::new(Waker::default());
        view.cpu_faults(Some(Arc::clone(&waker) as Arc<dyn CpuWake>));
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_migrations(&kfd, g);
        let pid = pid();
        let caller = CallerId {
            tid: rustix::thread::gettid().as_raw_nonzero().get(),
            tgid: pid,
        };
        let mem = Anon::new(4 * MIB);
        let (start, second) = (mem.addr, mem.addr + 2 * MIB);
        for (touched, home, other) in [(second, second, start), (start, start, second)] {
            svm_set(&kfd, start, 4 * MIB, &[access(g), prefetch(g)]).expect("prefetch");
            let _ = drain(&mut smi);
            let _ = view.cpu_protect_plan(pid);
            view.cpu_protect_done(pid, &[]);
            assert_eq!(view.cpu_hidden(pid), [protect(start, 4 * MIB, RW)]);
            let at = touched + 8 * PAGE;
            assert!(view.cpu_touch(caller, &[(at, at + 4 * PAGE)], false));
            assert_eq!(drain(&mut smi), to_ram_records(pid, g, home));
            assert_eq!(view.svm_page(pid, other).expect("page").location, g);
            assert_eq!(view.cpu_protect_plan(pid), [protect(home, 2 * MIB, RW)]);
            view.cpu_protect_done(pid, &[]);
            assert_eq!(view.cpu_hidden(pid), [protect(other, 2 * MIB, RW)]);
            // The other granule home too, for the next round.
            assert!(view.cpu_fault(caller, other));
            let _ = drain(&mut smi);
            let _ = view.cpu_protect_plan(pid);
            view.cpu_protect_done(pid, &[]);
        }
    })
    .expect("attach");
}
