//! SMI event fds (kfd-abi.md §3.4, §4.12, `kfd_smi_events.c`): what a program reads and polls
//! natively, the enable mask it writes, the 8 KiB FIFO that drops whole records, per-GPU and
//! per-process delivery, the events older minors lack, and what process exit releases.

mod model_support;
mod model_svm_support;

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use kfd_emu::backend::{Backend, WriteCall};
use kfd_ioctl::abi::*;
use kfd_ioctl::{Errno, SmiEvents};
use model_support::{Emu, TestCaller, injected, own_fd};
use model_svm_support::*;
use rustix::event::{PollFd, PollFlags};

/// Whether `fd` has something to read, without waiting.
fn readable(fd: &impl AsFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&zero)).expect("poll") == 1
        && fds[0].revents().contains(PollFlags::IN)
}

/// Whether this thread has CAP_SYS_ADMIN (what the kernel records at open as `suser`).
fn cap_sys_admin() -> bool {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// SMI_EVENTS through the backend, as `caller`, on the `/dev/kfd` stand-in `kfd`.
fn smi_as(emu: &Emu, caller: &TestCaller, kfd: std::os::fd::BorrowedFd<'_>, gpu: u32) -> SmiEvents {
    let mut args = kfd_ioctl_smi_events_args {
        gpuid: gpu,
        anon_fd: 0,
    };
    emu.model
        .ioctl(caller, kfd, AMDKFD_IOC_SMI_EVENTS, &raw mut args as u64)
        .expect("the kfd stand-in is the model's")
        .expect("SMI_EVENTS");
    SmiEvents::from_fd(own_fd(args.anon_fd), gpu)
}

/// The event ids (the first field) of the records `smi` has pending.
fn ids(smi: &mut SmiEvents) -> Vec<String> {
    drain(smi)
        .iter()
        .map(|l| l.split(' ').next().unwrap_or("").to_owned())
        .collect()
}

/// What the supervisor hands the backend for a test caller's `write` of `mask` to `smi`
/// (the fd is not behind the filter here); the write takes 8 bytes.
fn set_mask_as(emu: &Emu, caller: &TestCaller, smi: &SmiEvents, mask: SmiEventMask) {
    let bits = mask.bits();
    let addr = &raw const bits as u64;
    let written = emu
        .model
        .write(caller, smi.as_fd(), &|| Ok(WriteCall::Write(addr, 8)));
    assert_eq!(written, Some(Ok(8)), "mask write");
}

#[test]
fn an_smi_fd_reads_without_blocking_polls_and_survives_exec() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = kfd.smi_events(g).expect("SMI_EVENTS");
        let flags = rustix::io::fcntl_getfd(&smi).expect("fd flags");
        assert!(
            !flags.contains(rustix::io::FdFlags::CLOEXEC),
            "installed like anon_inode_getfd"
        );
        let mut buf = [0u8; 64];
        assert_eq!(rustix::io::read(&smi, &mut buf), Err(Errno::AGAIN), "empty");
        assert!(!readable(&smi));
        smi.set_mask(SmiEventMask::MIGRATE_START).expect("mask");
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert!(readable(&smi), "POLLIN with a record pending");
        // Reads do not respect record boundaries.
        let n = rustix::io::read(&smi, &mut buf[..3]).expect("read");
        assert_eq!(n, 3, "three bytes of a longer record");
        let head = String::from_utf8(buf[..n].to_vec()).expect("text");
        let rest = drain_raw(&mut smi);
        assert_eq!(rest.len(), 1);
        let line = format!("{head}{}", rest[0]);
        let pid = pid();
        assert_eq!(
            shape(&line),
            format!(
                "5 T -{pid} @{:x}(200) 0->{g:x} {g:x}:ffffffff 0",
                mem.pfn(0)
            )
        );
        assert!(!readable(&smi));
        assert_eq!(
            kfd.smi_events(0x1).expect_err("no such GPU").errno(),
            Some(Errno::INVAL)
        );
    })
    .expect("attach");
}

#[test]
fn the_mask_chooses_the_events_and_holds_from_the_next_one() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = kfd.smi_events(g).expect("SMI_EVENTS");
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert_eq!(ids(&mut smi), Vec::<String>::new(), "nothing enabled yet");
        smi.set_mask(SmiEventMask::MIGRATE_END).expect("mask");
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("prefetch");
        assert_eq!(ids(&mut smi), ["6"]);
        smi.set_mask(SmiEventMask::empty()).expect("mask");
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert_eq!(ids(&mut smi), Vec::<String>::new(), "0 disables everything");
        smi.set_mask(SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END)
            .expect("mask");
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("prefetch");
        assert_eq!(ids(&mut smi), ["5", "6"]);
    })
    .expect("attach");
}

#[test]
fn a_record_that_does_not_fit_the_fifo_is_dropped_whole() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let smi = kfd.smi_events(g).expect("SMI_EVENTS");
        smi.set_mask(SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END)
            .expect("mask");
        let mem = Anon::new(2 * MIB);
        // 200 migrations, 400 records of about 60 bytes: three times the FIFO.
        for i in 0..200 {
            let to = if i % 2 == 0 { g } else { 0 };
            svm_set(&kfd, mem.addr, mem.len, &[prefetch(to)]).expect("prefetch");
        }
        let mut bytes = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            match rustix::io::read(&smi, &mut buf) {
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(Errno::AGAIN) => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        let text = String::from_utf8(bytes).expect("text");
        assert!(text.ends_with('\n'), "no partial record");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() < 400, "records were dropped");
        for line in &lines {
            assert!(
                line.starts_with("5 ") || line.starts_with("6 "),
                "a whole record: {line:?}"
            );
        }
        // Full: the FIFO took every record that fitted, so not even the shortest fits now.
        let shortest = lines.iter().map(|l| l.len() + 1).min().expect("records");
        assert!(text.len() <= 8192, "{} bytes", text.len());
        assert!(8192 - text.len() < shortest, "{} bytes", text.len());
        // Drained, it takes records again.
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert!(readable(&smi));
    })
    .expect("attach");
}

#[test]
fn records_go_to_the_clients_of_their_gpu() {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let all = SmiEventMask::MIGRATE_START
            | SmiEventMask::MIGRATE_END
            | SmiEventMask::QUEUE_EVICTION
            | SmiEventMask::QUEUE_RESTORE;
        let clients: Vec<SmiEvents> = [g[0], g[1], g[5]]
            .iter()
            .map(|&gpu| {
                let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
                smi.set_mask(all).expect("mask");
                smi
            })
            .collect();
        let [mut on0, mut on1, mut on5] = clients.try_into().expect("three");
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[access(g[0]), access(g[1])]).expect("map");
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g[0])]).expect("prefetch");
        let p0 = mem.pfn(0);
        let g0 = g[0];
        assert_eq!(
            drain(&mut on0),
            [
                format!("5 T -{pid} @{p0:x}(200) 0->{g0:x} {g0:x}:ffffffff 0"),
                format!("9 T -{pid} {g0:x} 0"),
                format!("6 T -{pid} @{p0:x}(200) 0->{g0:x} 0 0"),
                format!("a T -{pid} {g0:x} \0"),
            ]
        );
        // Eviction stops the process's queues on every GPU, each on its own node.
        for (smi, gpu) in [(&mut on1, g[1]), (&mut on5, g[5])] {
            assert_eq!(
                drain(smi),
                [
                    format!("9 T -{pid} {gpu:x} 0"),
                    format!("a T -{pid} {gpu:x} \0"),
                ]
            );
        }
    })
    .expect("attach");
}

#[test]
fn another_process_is_seen_only_with_all_process_and_cap_sys_admin() {
    let emu = Emu::machine("mi300x");
    let g = emu.gpu();
    let mut mine = smi_as(&emu, &emu.caller, emu.kfd.as_fd(), g);
    // A second KFD process: a real one, so that its VMAs exist.
    let other = OtherProcess::spawn();
    let child = TestCaller {
        tid: other.pid(),
        tgid: other.pid(),
    };
    let child_kfd = injected(emu.model.open(&child, "/dev/kfd", libc::O_RDWR, 0));
    let mut theirs = smi_as(&emu, &child, child_kfd.as_fd(), g);
    let (lo, hi) = other.stack();
    let prefetch_to = |to: u32| {
        let mut attrs = [prefetch(to)];
        raw_svm(
            &emu.model,
            &child,
            child_kfd.as_fd(),
            lo,
            hi - lo,
            KFD_IOCTL_SVM_OP_SET_ATTR,
            &mut attrs,
        )
        .expect("prefetch the other process's stack")
    };
    set_mask_as(&emu, &emu.caller, &mine, SmiEventMask::MIGRATE_START);
    set_mask_as(&emu, &child, &theirs, SmiEventMask::MIGRATE_START);
    prefetch_to(g);
    let start = format!(
        "5 T -{} @{:x}({:x}) 0->{g:x} {g:x}:ffffffff 0",
        other.pid(),
        lo / PAGE,
        (hi - lo) / PAGE
    );
    assert_eq!(
        drain(&mut theirs),
        std::slice::from_ref(&start),
        "its own events"
    );
    assert_eq!(drain(&mut mine), Vec::<String>::new(), "not another's");
    set_mask_as(
        &emu,
        &emu.caller,
        &mine,
        SmiEventMask::MIGRATE_START | SmiEventMask::ALL_PROCESS,
    );
    prefetch_to(g);
    let expected = if cap_sys_admin() {
        vec![start.clone()]
    } else {
        Vec::new()
    };
    assert_eq!(
        drain(&mut mine),
        expected,
        "ALL_PROCESS needs CAP_SYS_ADMIN at open"
    );
    assert_eq!(drain(&mut theirs), [start]);
}

#[test]
fn process_start_and_end_reach_every_client() {
    let emu = Emu::machine("mi300x");
    let g = emu.gpu();
    let mut mine = smi_as(&emu, &emu.caller, emu.kfd.as_fd(), g);
    set_mask_as(
        &emu,
        &emu.caller,
        &mine,
        SmiEventMask::PROCESS_START | SmiEventMask::PROCESS_END,
    );
    // The other process gets a render node stand-in the way it would have one: an fd in its
    // table, inherited (a duplicate without O_CLOEXEC keeps its number across exec).
    let render = emu.open_render(0);
    let inherited = rustix::io::dup(&render).expect("dup without O_CLOEXEC");
    let other = OtherProcess::spawn();
    let drm_fd = inherited.as_raw_fd() as u32;
    drop(inherited);
    let child = TestCaller {
        tid: other.pid(),
        tgid: other.pid(),
    };
    let child_kfd = injected(emu.model.open(&child, "/dev/kfd", libc::O_RDWR, 0));
    let mut acquire = kfd_ioctl_acquire_vm_args { drm_fd, gpu_id: g };
    emu.model
        .ioctl(
            &child,
            child_kfd.as_fd(),
            AMDKFD_IOC_ACQUIRE_VM,
            &raw mut acquire as u64,
        )
        .expect("the kfd stand-in is the model's")
        .expect("ACQUIRE_VM of the other process");
    let who = format!("{:x} sleep", other.pid());
    assert_eq!(drain(&mut mine), [format!("c {who}")], "pid 0: everyone");
    emu.model.process_exited(other.pid());
    assert_eq!(drain(&mut mine), [format!("d {who}")]);
}

#[test]
fn minors_before_1_10_have_vm_faults_only_and_a_1_kib_fifo() {
    let model = model_at("mi300x", 9);
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let kfd = kfd_ioctl::Kfd::open().expect("open");
        let gpu = &view.machine().gpus()[0];
        let g = gpu.gpu_id;
        let smi = kfd.smi_events(g).expect("SMI_EVENTS since 1.3");
        smi.set_mask(
            SmiEventMask::VMFAULT | SmiEventMask::MIGRATE_START | SmiEventMask::PROCESS_START,
        )
        .expect("mask");
        kfd.acquire_vm(g, gpu.render_minor).expect("acquire");
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert!(!readable(&smi), "no process or migration events at 1.9");
        let mut seen = [0u8; 4];
        for i in 0..100 {
            view.gpu_read(pid(), g, 0x6000_0000_0000 + i * PAGE, &mut seen)
                .expect_err("nothing mapped there");
        }
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = rustix::io::read(&smi, &mut buf) {
            bytes.extend_from_slice(&buf[..n]);
        }
        let record = bytes.iter().position(|&b| b == b'\n').expect("a record") + 1;
        assert!(bytes.starts_with(b"1 "), "VM faults are there");
        assert!(
            bytes.len() <= 1024 && bytes.len() + record > 1024,
            "{} bytes",
            bytes.len()
        );
    })
    .expect("attach");
}

#[test]
fn process_exit_releases_ranges_vram_and_event_fds() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let g = emu.gpu();
    let smi = smi_as(&emu, &emu.caller, emu.kfd.as_fd(), g);
    let mem = Anon::new(2 * MIB);
    let mut attrs = [prefetch(g)];
    raw_svm(
        &emu.model,
        &emu.caller,
        emu.kfd.as_fd(),
        mem.addr,
        mem.len,
        KFD_IOCTL_SVM_OP_SET_ATTR,
        &mut attrs,
    )
    .expect("prefetch");
    assert_eq!(emu.model.svm_ranges(pid()).len(), 1);
    assert_eq!(emu.model.svm_vram_usage(g), mem.len);
    emu.model.process_exited(pid());
    assert!(emu.model.svm_ranges(pid()).is_empty());
    assert_eq!(emu.model.svm_vram_usage(g), 0);
    // Its fd is still held (here): as `kfd_smi_ev_release` runs at the last close only, the
    // client lives on, with nothing to read.
    let mut buf = [0u8; 8];
    assert_eq!(rustix::io::read(&smi, &mut buf), Err(Errno::AGAIN));
}

/// `kfd_smi_ev_write` and `kfd_smi_ev_poll`, through the filter: the fd sits at a number of
/// `SMI_FDS`; a write of fewer than 8 bytes (or of 8 bytes it cannot read) is `EFAULT`; a
/// longer one takes its first 8 bytes as the mask and returns 8; a `writev` goes piece by
/// piece; a positioned write is `ESPIPE`; and `poll` reports `POLLIN` with a record pending,
/// never `POLLOUT`.
#[test]
fn writes_are_the_kernels_and_the_fd_never_polls_writable() {
    use std::io::IoSlice;
    use std::os::fd::AsRawFd;
    let model = model("mi300x");
    let view = Arc::clone(&model);
    // Through `Counting`, which must pass the writes on.
    kfd_emu::supervisor::run_attached(kfd_emu::counting::Counting::new(model), move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = kfd.smi_events(g).expect("SMI_EVENTS");
        let raw = smi.as_fd().as_raw_fd();
        assert!(
            kfd_emu::backend::SMI_FDS.contains(&(raw as u32)),
            "fd {raw} in the SMI range"
        );
        let revents = |smi: &SmiEvents| {
            let mut fds = [PollFd::new(smi, PollFlags::IN | PollFlags::OUT)];
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            rustix::event::poll(&mut fds, Some(&zero)).expect("poll");
            fds[0].revents()
        };
        assert_eq!(
            revents(&smi),
            PollFlags::empty(),
            "nothing, not even POLLOUT"
        );
        let bits = |m: SmiEventMask| m.bits().to_ne_bytes();
        assert_eq!(rustix::io::write(&smi, &[1, 2, 3, 4]), Err(Errno::FAULT));
        assert_eq!(rustix::io::write(&smi, &[]), Err(Errno::FAULT));
        // SAFETY: a write from address 0, which no mapping covers: the kernel reads nothing.
        let null = unsafe { libc::write(raw, std::ptr::null(), 8) };
        assert_eq!(
            (null, std::io::Error::last_os_error().raw_os_error()),
            (-1, Some(libc::EFAULT))
        );
        let mut two = [0u8; 16];
        two[..8].copy_from_slice(&bits(SmiEventMask::MIGRATE_START));
        two[8..].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(rustix::io::write(&smi, &two), Ok(8), "the first 8 bytes");
        assert_eq!(rustix::io::pwrite(&smi, &two, 0), Err(Errno::SPIPE));
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert_eq!(
            revents(&smi),
            PollFlags::IN,
            "POLLIN with a record pending, still no POLLOUT"
        );
        assert_eq!(ids(&mut smi), ["5"], "the mask of the first 8 bytes only");
        // writev: whole 8-byte pieces one after the other; the last one taken is the mask.
        let end = bits(SmiEventMask::MIGRATE_END);
        let both = bits(SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END);
        assert_eq!(
            rustix::io::writev(&smi, &[IoSlice::new(&end), IoSlice::new(&both)]),
            Ok(16)
        );
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("prefetch");
        assert_eq!(ids(&mut smi), ["5", "6"]);
        // A short first piece fails the call; a short later one ends it early.
        assert_eq!(
            rustix::io::writev(&smi, &[IoSlice::new(&end[..4]), IoSlice::new(&both)]),
            Err(Errno::FAULT)
        );
        assert_eq!(
            rustix::io::writev(&smi, &[IoSlice::new(&end), IoSlice::new(&both[..4])]),
            Ok(8)
        );
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        assert_eq!(ids(&mut smi), ["6"], "the mask of the last whole piece");
    })
    .expect("attach");
}
