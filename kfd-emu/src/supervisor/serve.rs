//! The supervisor loop: receive a notification, find out who is calling, ask the backend,
//! answer.
//!
//! # Who does what
//!
//! Notifications are received and served by a pool of **workers**. One worker at a time holds
//! the **lead**: it waits on the listener, receives a notification and serves it itself, then
//! receives the next, so the common case has no hand-over between threads. A call that takes
//! longer than [`STUCK_AFTER`] (a caller whose memory cannot be read: a path in a page behind an
//! unserved userfaultfd, a hung FUSE mount; or a WAIT_EVENTS that waits) loses the lead: the
//! reaper takes it from the busy worker and gives it to an idle worker (started if there is
//! none), which goes on receiving. The stuck call holds only its own worker; every other caller
//! is delayed by at most about [`STUCK_AFTER`] once. A worker that finishes a call after losing
//! the lead waits to lead again, or ends when [`SPARE_WORKERS`] are already waiting. Caller
//! memory is only ever touched by the worker serving that caller (see [`super::caller`] for the
//! order of open, `ID_VALID` and access).
//!
//! The thread that calls [`Server::run`] is the **reaper**: it polls the pidfds of the tracked
//! processes, the listener (for its hang-up) and its [`Driver`]'s fds, releases a process's
//! state when it exits ([`Backend::process_exited`], its thread map entries, its memory file),
//! watches the worker that leads for a call that takes too long, and stops the workers when the
//! driver says so.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

use super::addrspace;
use super::caller::{NotifCaller, ProcMem};
use super::mmap::{self as file_mmap, MmapArgs, Route, SLOT_MARKER, Slots};
use super::path;
use super::seccomp::{Listener, SeccompNotif};
use super::stat;
use crate::backend::{
    Backend, Caller, CallerId, IoctlResult, MmapAction, OpenAction, StatAnswer, WriteCall,
};

/// What the loop does besides serving the listener: the fds of its owner (a shutdown eventfd,
/// the spawned child's pidfd) and when to stop.
pub(crate) trait Driver {
    /// Fds to poll for readability besides the listener and the tracked processes.
    fn watched(&self) -> Vec<BorrowedFd<'_>>;
    /// `watched()[index]` became readable; `true` stops the loop.
    fn ready(&mut self, index: usize) -> bool;
    /// Asked after each round with the number of live processes seen; `true` stops the loop.
    fn done(&self, live_processes: usize) -> bool;
}

/// Whether `tid` is a live thread of thread group `tgid` (`tgkill` with signal 0 sends nothing).
fn thread_in_group(tgid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks existence and permission; no pointers are involved.
    let ret = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, 0) };
    ret == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The thread group of `tid`, from `/proc/<tid>/status`.
pub(crate) fn tgid_from_proc(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The parent process of thread `tid` (`PPid:` of its `/proc` status).
pub(crate) fn ppid_from_proc(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether thread `pid` is traced by thread `tracer` and in a tracing stop (its
/// `/proc/<pid>/status`: `TracerPid` and `State: t`).
fn traced_stopped_by(pid: i32, tracer: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    field("TracerPid:").and_then(|v| v.parse::<i32>().ok()) == Some(tracer)
        && field("State:").is_some_and(|v| v.starts_with('t'))
}

fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
}

/// Answers `caller`'s ioctl with the backend's result. Failure to send is normal when the
/// caller was killed meanwhile (`ENOENT`) and is ignored: nothing is waiting for the answer.
fn answer_ioctl(caller: &NotifCaller, result: Option<IoctlResult>) {
    let listener = caller.listener();
    let id = caller.notif_id();
    let _ = match result {
        None => listener.respond_continue(id),
        Some(Ok(val)) => listener.respond_value(id, val),
        Some(Err(errno)) => listener.respond_error(id, errno),
    };
}

/// Runs the backend's ioctl, turning a panic in it into `EIO` for the caller: a model bug must
/// not take the supervisor down with every other process it serves.
fn run_ioctl(
    backend: &dyn Backend,
    caller: &NotifCaller,
    file: BorrowedFd<'_>,
    cmd: u32,
    arg: u64,
) -> Option<IoctlResult> {
    catch_unwind(AssertUnwindSafe(|| backend.ioctl(caller, file, cmd, arg))).unwrap_or_else(|_| {
        crate::own::elog!("kfd-emu: the backend panicked on ioctl {cmd:#010x}; answering EIO");
        Some(Err(Errno::IO))
    })
}

/// Where the answer to a `stat`-family call goes.
#[derive(Debug, Clone, Copy)]
enum Reply {
    /// A `struct stat` at this address of the caller.
    Stat(u64),
    /// A `struct statx` at this address of the caller.
    Statx(u64),
    /// No buffer: `access` with these `R_OK`/`W_OK`/`X_OK` bits.
    Access(i32),
    /// `getxattr`: an emulated file has none (`ENODATA`).
    GetXattr,
    /// `listxattr`: an emulated file has none (an empty list, 0).
    ListXattr,
}

/// Idle workers kept; more end after serving their call.
const SPARE_WORKERS: usize = 2;

/// How long the leading worker may serve one call before the lead is taken from it.
pub(crate) const STUCK_AFTER: Duration = Duration::from_millis(2);

/// A process that has made an intercepted call.
struct Tracked {
    /// Readable once the process has exited.
    pidfd: OwnedFd,
    /// Its memory file, shared by the callers of its threads.
    mem: Arc<ProcMem>,
}

/// The lead: who receives, and since when it has been serving a call.
#[derive(Debug, Default)]
struct Lead {
    /// A worker holds the lead (receiving, or serving the call it received).
    held: bool,
    /// Bumped whenever the lead changes hands, so that a worker knows it lost it.
    term: u64,
    /// When the holder started serving its current call; `None` while it receives.
    busy_since: Option<Instant>,
    /// Workers waiting to lead.
    waiting: usize,
}

/// How many workers there are and how many are serving a call.
#[derive(Debug, Default)]
struct Pool {
    live: usize,
    busy: usize,
}

/// What the reaper and the workers share.
struct Shared {
    listener: Arc<Listener>,
    backend: Arc<dyn Backend>,
    /// How a file `mmap`'s redirect is carried out.
    route: Route,
    /// tgid → the process, for every process that has made an intercepted call.
    processes: Mutex<HashMap<i32, Arc<Tracked>>>,
    /// tid → tgid, checked with `tgkill(tgid, tid, 0)` before each use.
    threads: Mutex<HashMap<i32, i32>>,
    /// Written when a process is tracked, so the reaper polls its pidfd.
    tracked: OwnedFd,
    /// Written (and never read) to stop the workers.
    stop_fd: OwnedFd,
    stopping: AtomicBool,
    lead: Mutex<Lead>,
    /// Signalled when the lead is free.
    lead_free: Condvar,
    pool: Mutex<Pool>,
    /// Signalled when a worker ends or, while stopping, starts serving.
    ended: Condvar,
    /// The reaper sleeps without a timeout: the next call to start must wake it (`wake_reaper`)
    /// so that it watches for a stuck call.
    reaper_idle: AtomicBool,
    /// Calls started so far. The reaper goes idle only after a look that saw no call busy
    /// and none started since its previous look, so that a steady stream of calls keeps it
    /// on its timed look instead of waking it through `wake_reaper` once per call.
    started: AtomicU64,
    /// Written to wake an idle reaper.
    wake_reaper: OwnedFd,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serves one listener until its [`Driver`] stops it or no task uses the filter any more.
pub(crate) struct Server {
    shared: Arc<Shared>,
}

impl Server {
    pub(crate) fn new(
        listener: Listener,
        backend: Arc<dyn Backend>,
        route: Route,
    ) -> Result<Self, Errno> {
        Ok(Self {
            shared: Arc::new(Shared {
                listener: Arc::new(listener),
                backend,
                route,
                processes: Mutex::new(HashMap::new()),
                threads: Mutex::new(HashMap::new()),
                tracked: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
                stop_fd: eventfd(0, EventfdFlags::CLOEXEC)?,
                stopping: AtomicBool::new(false),
                lead: Mutex::new(Lead::default()),
                lead_free: Condvar::new(),
                pool: Mutex::new(Pool::default()),
                ended: Condvar::new(),
                reaper_idle: AtomicBool::new(false),
                started: AtomicU64::new(0),
                wake_reaper: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            }),
        })
    }

    /// The listener it serves.
    pub(crate) fn listener(&self) -> Arc<Listener> {
        Arc::clone(&self.shared.listener)
    }

    /// Runs until `driver` stops it, or the listener has hung up (no task uses the filter any
    /// more) and every tracked process has exited and nothing else is watched. Workers still
    /// serving a call when it returns end once their call is answered.
    pub(crate) fn run(&mut self, driver: &mut dyn Driver) {
        self.run_opening(driver, None);
    }

    /// [`run`](Self::run), dropping `live` once the first worker runs (or could not start). Attach mode waits for
    /// it before the attached thread goes on, so that its first notified call finds a worker
    /// even while a `fork` elsewhere delays thread creation (see `crate::own`).
    pub(crate) fn run_opening(
        &mut self,
        driver: &mut dyn Driver,
        live: Option<crate::own::Opener>,
    ) {
        let shared = &self.shared;
        if Shared::start_worker(shared, live).is_err() {
            crate::own::elog!("kfd-emu: could not start a supervisor worker");
            return;
        }
        shared.reap(driver);
        shared.stop();
    }
}

impl Shared {
    /// Starts one idle worker, through the helper (see `crate::own`): the caller does not
    /// wait for the thread, which counts itself live when it runs.
    fn start_worker(this: &Arc<Shared>, live: Option<crate::own::Opener>) -> std::io::Result<()> {
        let for_worker = Arc::clone(this);
        crate::own::spawn_later("kfd-emu-worker", move || {
            lock(&for_worker.pool).live += 1;
            drop(live);
            for_worker.work();
        });
        Ok(())
    }

    /// Waits for the lead; its term, or `None` when stopping.
    fn take_lead(&self) -> Option<u64> {
        let mut lead = lock(&self.lead);
        lead.waiting += 1;
        while lead.held && !self.stopping.load(Ordering::Acquire) {
            lead = self.lead_free.wait(lead).unwrap_or_else(|e| e.into_inner());
        }
        lead.waiting -= 1;
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        lead.held = true;
        lead.term += 1;
        Some(lead.term)
    }

    /// A worker: lead, receiving and serving, until its lead is taken or the workers stop.
    fn work(self: Arc<Self>) {
        'lead: while let Some(term) = self.take_lead() {
            loop {
                let Some(notif) = self.receive() else {
                    let mut lead = lock(&self.lead);
                    if lead.term == term {
                        lead.held = false;
                        self.lead_free.notify_one();
                    }
                    break 'lead;
                };
                self.serve(term, &notif);
                let mut lead = lock(&self.lead);
                if lead.term == term {
                    lead.busy_since = None;
                    continue;
                }
                // The lead was taken while this call was served.
                if lead.waiting >= SPARE_WORKERS {
                    break 'lead;
                }
                continue 'lead;
            }
        }
        lock(&self.pool).live -= 1;
        self.ended.notify_all();
    }

    /// Serves `notif` as the holder of lead `term`, telling the reaper when it started.
    fn serve(&self, term: u64, notif: &SeccompNotif) {
        {
            let mut lead = lock(&self.lead);
            if lead.term == term {
                lead.busy_since = Some(Instant::now());
            }
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.reaper_idle.swap(false, Ordering::SeqCst) {
            let _ = rustix::io::write(&self.wake_reaper, &1u64.to_ne_bytes());
        }
        lock(&self.pool).busy += 1;
        if self.stopping.load(Ordering::Acquire) {
            self.ended.notify_all();
        }
        // The thread stops only once answered: a GPU atomic's compare-and-swap of its
        // process does not wait for it (`Wakeups::serving`).
        let traced = match &self.route {
            Route::Traced(slots) => {
                slots.cpu.serving_begin(notif.pid as i32);
                Some(slots)
            }
            Route::InProcess => None,
        };
        self.handle(notif);
        if let Some(slots) = traced {
            slots.cpu.serving_end(notif.pid as i32);
        }
        lock(&self.pool).busy -= 1;
    }

    /// Takes the lead from a worker that has served one call for longer than
    /// [`STUCK_AFTER`] and hands it to a waiting worker (or a new one). Whether a call is
    /// being served, so that the reaper keeps watching.
    fn unstick(this: &Arc<Shared>) -> bool {
        let mut lead = lock(&this.lead);
        let Some(since) = lead.busy_since else {
            return false;
        };
        if since.elapsed() < STUCK_AFTER {
            return true;
        }
        lead.held = false;
        lead.term += 1;
        lead.busy_since = None;
        if lead.waiting > 0 {
            this.lead_free.notify_one();
        } else {
            drop(lead);
            if Shared::start_worker(this, None).is_err() {
                crate::own::elog!("kfd-emu: no thread for another supervisor worker");
            }
        }
        false
    }

    /// The next notification, or `None` when the workers are to stop (told to, or the
    /// listener hung up). Called by the leader only, so the receive after a readable poll
    /// never blocks.
    fn receive(&self) -> Option<SeccompNotif> {
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return None;
            }
            let mut fds = [
                PollFd::from_borrowed_fd(self.listener.as_fd(), PollFlags::IN),
                PollFd::from_borrowed_fd(self.stop_fd.as_fd(), PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => {
                    crate::own::elog!("kfd-emu: poll in the supervisor failed: {err}");
                    self.stopping.store(true, Ordering::Release);
                    return None;
                }
            }
            if !fds[1].revents().is_empty() {
                return None;
            }
            let events = fds[0].revents();
            if events.contains(PollFlags::IN) {
                match self.listener.recv() {
                    Ok(notif) => return Some(notif),
                    // ENOENT: the caller died between the wake-up and the receive.
                    Err(Errno::NOENT | Errno::INTR) => {}
                    Err(err) => {
                        crate::own::elog!("kfd-emu: SECCOMP_IOCTL_NOTIF_RECV failed: {err}");
                        return None;
                    }
                }
            } else if events.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                // No task uses the filter any more: nothing will arrive.
                return None;
            }
        }
    }

    /// Tells the workers to stop and waits for those not serving a call to end.
    fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        // An eventfd write of 1 cannot fail short of a counter overflow.
        let _ = rustix::io::write(&self.stop_fd, &1u64.to_ne_bytes());
        drop(lock(&self.lead));
        self.lead_free.notify_all();
        let mut pool = lock(&self.pool);
        while pool.live > pool.busy {
            pool = self.ended.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The reaper's loop (see the module docs).
    fn reap(self: &Arc<Self>, driver: &mut dyn Driver) {
        // The hang-up can come before the last process's pidfd turns readable: after it the
        // listener is no longer polled, but exits still are.
        let mut hung_up = false;
        let mut seen_started = self.started.load(Ordering::SeqCst);
        loop {
            let (hang_up, watched_ready, exited, watching) = {
                let watched = driver.watched();
                let tracked: Vec<(i32, Arc<Tracked>)> = lock(&self.processes)
                    .iter()
                    .map(|(&tgid, p)| (tgid, Arc::clone(p)))
                    .collect();
                let first = 2 + usize::from(!hung_up);
                let mut fds = Vec::with_capacity(first + watched.len() + tracked.len());
                fds.push(PollFd::from_borrowed_fd(
                    self.tracked.as_fd(),
                    PollFlags::IN,
                ));
                fds.push(PollFd::from_borrowed_fd(
                    self.wake_reaper.as_fd(),
                    PollFlags::IN,
                ));
                if !hung_up {
                    // No events asked: only the hang-up (or an error) is reported.
                    fds.push(PollFd::from_borrowed_fd(
                        self.listener.as_fd(),
                        PollFlags::empty(),
                    ));
                }
                for fd in &watched {
                    fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
                }
                for (_, process) in &tracked {
                    fds.push(PollFd::from_borrowed_fd(
                        process.pidfd.as_fd(),
                        PollFlags::IN,
                    ));
                }
                // Idle first, then look: a call that starts after the look wakes the reaper.
                self.reaper_idle.store(true, Ordering::SeqCst);
                let busy = Shared::unstick(self);
                let started = self.started.load(Ordering::SeqCst);
                let recent = std::mem::replace(&mut seen_started, started) != started;
                let timeout = (busy || recent).then(|| {
                    self.reaper_idle.store(false, Ordering::SeqCst);
                    rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: (STUCK_AFTER / 2).as_nanos() as i64,
                    }
                });
                match poll(&mut fds, timeout.as_ref()) {
                    Ok(_) => {}
                    Err(Errno::INTR) => continue,
                    Err(err) => {
                        crate::own::elog!("kfd-emu: poll in the supervisor failed: {err}");
                        return;
                    }
                }
                let ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
                let mut count = [0u8; 8];
                if ready(&fds[0]) {
                    let _ = rustix::io::read(&self.tracked, &mut count);
                }
                if ready(&fds[1]) {
                    let _ = rustix::io::read(&self.wake_reaper, &mut count);
                }
                let hang_up = !hung_up && ready(&fds[2]);
                let watched_ready: Vec<usize> = (0..watched.len())
                    .filter(|&i| ready(&fds[first + i]))
                    .collect();
                let exited: Vec<(i32, Arc<Tracked>)> = tracked
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| ready(&fds[first + watched.len() + i]))
                    .map(|(_, (tgid, p))| (*tgid, Arc::clone(p)))
                    .collect();
                (hang_up, watched_ready, exited, !watched.is_empty())
            };
            hung_up |= hang_up;
            for (tgid, process) in exited {
                self.process_exited(tgid, &process);
            }
            for index in watched_ready {
                if driver.ready(index) {
                    // A process tracked after this round's snapshot was taken (its pidfd not
                    // polled) may have exited before the stop came: report it now, or no one
                    // will. (Seen under load: the reaper descheduled between snapshot and
                    // poll while a forked child was tracked, exited and was reaped.)
                    self.sweep_exited();
                    return;
                }
            }
            let live = lock(&self.processes).len();
            if driver.done(live) {
                self.sweep_exited();
                return;
            }
            if hung_up && !watching && live == 0 {
                return;
            }
        }
    }

    /// Reports every tracked process whose pidfd says it has exited.
    fn sweep_exited(&self) {
        let exited: Vec<(i32, Arc<Tracked>)> = lock(&self.processes)
            .iter()
            .filter(|(_, p)| has_exited(&p.pidfd))
            .map(|(&tgid, p)| (tgid, Arc::clone(p)))
            .collect();
        for (tgid, process) in exited {
            self.process_exited(tgid, &process);
        }
    }

    /// Releases what is kept of process `tgid` if `process` is still its entry (a worker may
    /// have replaced it with a new process reusing the pid).
    fn process_exited(&self, tgid: i32, process: &Arc<Tracked>) {
        {
            let mut processes = lock(&self.processes);
            match processes.get(&tgid) {
                Some(current) if Arc::ptr_eq(current, process) => {
                    processes.remove(&tgid);
                }
                _ => return,
            }
        }
        lock(&self.threads).retain(|_, group| *group != tgid);
        let backend = &self.backend;
        if catch_unwind(AssertUnwindSafe(|| backend.process_exited(tgid))).is_err() {
            crate::own::elog!("kfd-emu: the backend panicked releasing process {tgid}");
        }
    }

    /// The thread group of the calling thread `tid`.
    fn tgid_of(&self, tid: i32) -> Option<i32> {
        let known = lock(&self.threads).get(&tid).copied();
        if let Some(tgid) = known
            && thread_in_group(tgid, tid)
        {
            return Some(tgid);
        }
        let tgid = tgid_from_proc(tid)?;
        lock(&self.threads).insert(tid, tgid);
        Some(tgid)
    }

    /// The tracked process `tgid`, tracked now (pidfd opened) on first sight. `tid` is the
    /// caller, whose notification `id` proves `tgid` was not recycled before the pidfd.
    fn track(&self, tgid: i32, id: u64) -> Result<Arc<Tracked>, Errno> {
        let known = lock(&self.processes).get(&tgid).cloned();
        if let Some(process) = known {
            if !has_exited(&process.pidfd) {
                return Ok(process);
            }
            // A new process reusing the pid of one whose exit is not handled yet.
            self.process_exited(tgid, &process);
        }
        let pid = Pid::from_raw(tgid).ok_or(Errno::SRCH)?;
        let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
        // The caller still waiting means `tgid` was not recycled before the pidfd was taken.
        if !self.listener.id_valid(id) {
            return Err(Errno::NOENT);
        }
        let process = Arc::new(Tracked {
            pidfd,
            mem: Arc::new(ProcMem::default()),
        });
        let mut processes = lock(&self.processes);
        // Another thread of the process may have tracked it meanwhile: keep the first.
        let process = Arc::clone(processes.entry(tgid).or_insert(process));
        drop(processes);
        let _ = rustix::io::write(&self.tracked, &1u64.to_ne_bytes());
        Ok(process)
    }

    fn handle(&self, notif: &SeccompNotif) {
        let id = notif.id;
        let tid = notif.pid as i32;
        let args = notif.data.args;
        let anonymous = args[3] as u32 & libc::MAP_ANONYMOUS as u32 != 0;
        if let Route::Traced(slots) = &self.route
            && i64::from(notif.data.nr) == libc::SYS_mmap
            && !anonymous
            && (args[4] >> 32) as u32 == SLOT_MARKER
        {
            // Needs nothing of the caller but its tid: answered before tracking, so that
            // nothing can make it run without its memfd in the slot.
            self.install_slot(slots, tid, id, args[4]);
            return;
        }
        let Some(tgid) = (tid > 0).then(|| self.tgid_of(tid)).flatten() else {
            // The caller is gone or invisible in our pid namespace: let the kernel handle it.
            let _ = self.listener.respond_continue(id);
            return;
        };
        let Ok(process) = self.track(tgid, id) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let caller = NotifCaller::new(
            Arc::clone(&self.listener),
            id,
            CallerId { tid, tgid },
            Arc::clone(&process.mem),
        );
        // A traced program's SMI_EVENTS comes marked by the tracer, which puts the new fd in
        // place at the call's exit.
        let caller = if matches!(self.route, Route::Traced(_))
            && i64::from(notif.data.nr) == libc::SYS_ioctl
            && (args[1] >> 32) as u32 == SLOT_MARKER
        {
            caller.fds_moved_by_tracer()
        } else {
            caller
        };
        match i64::from(notif.data.nr) {
            libc::SYS_openat => self.open(
                &caller,
                args[0] as i32,
                args[1],
                args[2] as i32,
                args[3] as u32,
            ),
            libc::SYS_open => self.open(
                &caller,
                libc::AT_FDCWD,
                args[0],
                args[1] as i32,
                args[2] as u32,
            ),
            libc::SYS_ioctl => {
                self.ioctl(&caller, &process, args[0] as i32, args[1] as u32, args[2])
            }
            libc::SYS_mmap if !anonymous => {
                self.mmap(&caller, &process, args, notif.data.instruction_pointer);
            }
            nr @ (libc::SYS_mmap
            | libc::SYS_munmap
            | libc::SYS_mremap
            | libc::SYS_madvise
            | libc::SYS_mprotect
            | libc::SYS_brk
            | libc::SYS_fork
            | libc::SYS_clone) => {
                let traced = match &self.route {
                    Route::Traced(slots) => Some(slots),
                    Route::InProcess => None,
                };
                // An mprotect the tracer made the thread run (CPU faults, `tracer`) is no
                // call of the program's.
                if !(nr == libc::SYS_mprotect && traced.is_some_and(|s| s.cpu.is_injected(tid))) {
                    addrspace::tell(&*self.backend, caller.id(), nr, args);
                }
                if let Some(slots) = traced {
                    slots.cpu.sync();
                }
                let _ = self.listener.respond_continue(id);
            }
            libc::SYS_fstat => self.fstat(&caller, &process, args[0] as i32, Reply::Stat(args[1])),
            libc::SYS_ftruncate | libc::SYS_fallocate => {
                self.resize(&caller, &process, i64::from(notif.data.nr), args);
            }
            libc::SYS_stat | libc::SYS_lstat => {
                self.stat(
                    &caller,
                    &process,
                    libc::AT_FDCWD,
                    args[0],
                    0,
                    Reply::Stat(args[1]),
                );
            }
            libc::SYS_newfstatat => {
                let flags = args[3] as i32;
                self.stat(
                    &caller,
                    &process,
                    args[0] as i32,
                    args[1],
                    flags,
                    Reply::Stat(args[2]),
                );
            }
            libc::SYS_statx => {
                let flags = args[2] as i32;
                self.stat(
                    &caller,
                    &process,
                    args[0] as i32,
                    args[1],
                    flags,
                    Reply::Statx(args[4]),
                );
            }
            libc::SYS_access => {
                self.stat(
                    &caller,
                    &process,
                    libc::AT_FDCWD,
                    args[0],
                    0,
                    Reply::Access(args[1] as i32),
                );
            }
            libc::SYS_faccessat => {
                let how = Reply::Access(args[2] as i32);
                self.stat(&caller, &process, args[0] as i32, args[1], 0, how);
            }
            libc::SYS_getxattr | libc::SYS_lgetxattr => {
                self.stat(
                    &caller,
                    &process,
                    libc::AT_FDCWD,
                    args[0],
                    0,
                    Reply::GetXattr,
                );
            }
            libc::SYS_listxattr | libc::SYS_llistxattr => {
                self.stat(
                    &caller,
                    &process,
                    libc::AT_FDCWD,
                    args[0],
                    0,
                    Reply::ListXattr,
                );
            }
            libc::SYS_faccessat2 => {
                let how = Reply::Access(args[2] as i32);
                self.stat(
                    &caller,
                    &process,
                    args[0] as i32,
                    args[1],
                    args[3] as i32,
                    how,
                );
            }
            libc::SYS_readlink => {
                self.readlink(&caller, libc::AT_FDCWD, args[0], args[1], args[2] as i32);
            }
            libc::SYS_readlinkat => {
                self.readlink(&caller, args[0] as i32, args[1], args[2], args[3] as i32);
            }
            libc::SYS_write | libc::SYS_writev | libc::SYS_pwritev2 => {
                self.smi_write(&caller, &process, i64::from(notif.data.nr), args);
            }
            libc::SYS_mbind => {
                // mbind(start, len, mode, nmask, maxnode, flags): start must be page-aligned.
                let aligned = args[0] & 0xfff == 0;
                self.mempolicy(&caller, aligned, args[2], args[3], args[4]);
            }
            libc::SYS_set_mempolicy => self.mempolicy(&caller, true, args[0], args[1], args[2]),
            libc::SYS_ptrace => self.poke(&caller, args),
            _ => {
                let _ = self.listener.respond_continue(id);
            }
        }
    }

    /// `ptrace(PTRACE_POKETEXT or PTRACE_POKEDATA, pid, addr, data)` (the filter notifies no
    /// other request): when `pid` is a thread the caller traces and that is in a tracing
    /// stop (`ptrace_check_attach`, read from `/proc/<pid>/status`: `TracerPid` and the
    /// `t` state), the backend may write the word itself ([`Backend::poke`]: the tracee's
    /// BO mappings, which the kernel writes through `ttm_bo_vm_access` whatever their
    /// protection); everything else runs natively and gets the kernel's answer.
    fn poke(&self, caller: &NotifCaller, args: [u64; 6]) {
        let id = caller.notif_id();
        let request = args[0] as u32;
        let pid = args[1] as i32;
        let answer = (request == libc::PTRACE_POKEDATA || request == libc::PTRACE_POKETEXT)
            .then_some(())
            .filter(|()| pid > 0 && traced_stopped_by(pid, caller.id().tid))
            .and_then(|()| self.backend.poke(pid, args[2], args[3]));
        let _ = match answer {
            None => self.listener.respond_continue(id),
            Some(Ok(())) => self.listener.respond_value(id, 0),
            Some(Err(errno)) => self.listener.respond_error(id, errno),
        };
    }

    /// `mbind` or `set_mempolicy` with `mode` and the node mask at `nmask` (`maxnode` bits,
    /// of which the kernel's `get_nodes` reads `maxnode - 1`). The emulated machine's NUMA
    /// nodes ([`Backend::numa_nodes`]) are all backed by the host's memory: a valid policy
    /// that names a node the emulated machine has but the host lacks (libhsakmt binds a CPU
    /// node's system memory to its node, `bind_mem_to_numa`) succeeds without being applied,
    /// where the host's kernel would refuse it (`EINVAL`: no such node). Every other call —
    /// nodes the host has, an invalid mode or flag (`sanitize_mpol_flags`: modes up to
    /// `MPOL_PREFERRED_MANY` = 5, flags `MPOL_F_STATIC_NODES`, `MPOL_F_RELATIVE_NODES`,
    /// `MPOL_F_NUMA_BALANCING`), an unaligned `mbind`, a node past the emulated ones, a mask
    /// that cannot be read — runs natively and gets the host kernel's answer. Where it differs:
    /// an answered `mbind` does not check that its range is mapped (`EFAULT`).
    fn mempolicy(&self, caller: &NotifCaller, aligned: bool, mode: u64, nmask: u64, maxnode: u64) {
        let id = caller.notif_id();
        let answer = (|| {
            let emulated = u64::from(self.backend.numa_nodes()?);
            let host = host_numa_nodes();
            const FLAGS: u64 = (1 << 15) | (1 << 14) | (1 << 13);
            let mode = mode & 0xffff_ffff;
            if emulated <= host || !aligned || (mode & !FLAGS) > 5 || nmask == 0 || maxnode < 2 {
                return None;
            }
            // The kernel's get_nodes reads maxnode - 1 bits (at most MAX_NUMNODES, 1024 in
            // Debian's kernels, past which they must be 0: the host checks that).
            let bits = (maxnode - 1).min(1024);
            let mut words = vec![0u8; usize::try_from(bits.div_ceil(64) * 8).ok()?];
            caller.read(nmask, &mut words).ok()?;
            let nodes: Vec<u64> = (0..bits)
                .filter(|&n| words[(n / 8) as usize] & (1 << (n % 8)) != 0)
                .collect();
            let ours = !nodes.is_empty() && nodes.iter().all(|&n| n < emulated);
            (ours && nodes.iter().any(|&n| n >= host)).then_some(())
        })();
        match answer {
            Some(()) => {
                let _ = self.listener.respond_value(id, 0);
            }
            None => {
                let _ = self.listener.respond_continue(id);
            }
        }
    }

    /// `readlink`/`readlinkat`: the backend names an emulated link's target (or declines, and
    /// the kernel runs the call); at most `size` bytes of it are written, without a NUL, and
    /// the call returns their count.
    fn readlink(&self, caller: &NotifCaller, dirfd: i32, path_addr: u64, buf: u64, size: i32) {
        let id = caller.notif_id();
        let tid = caller.id().tid;
        // A size the kernel refuses (EINVAL) or a path we cannot read is the kernel's to fail.
        let path = (size > 0)
            .then(|| caller.read_path(path_addr).ok())
            .flatten()
            .and_then(|raw| path::resolve(tid, dirfd, &raw));
        let Some(path) = path.filter(|_| caller.still_valid().is_ok()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let answer = catch_unwind(AssertUnwindSafe(|| backend.readlink(caller, &path)))
            .unwrap_or_else(|_| {
                crate::own::elog!(
                    "kfd-emu: the backend panicked on a readlink of {path}; answering EIO"
                );
                Some(Err(Errno::IO))
            });
        let result = match answer {
            None => {
                let _ = self.listener.respond_continue(id);
                return;
            }
            Some(Err(errno)) => Err(errno),
            Some(Ok(target)) => {
                let len = target.len().min(usize::try_from(size).unwrap_or(0));
                let bytes = &target.as_bytes()[..len];
                caller.write(buf, bytes).map(|()| len)
            }
        };
        let _ = match result {
            Ok(len) => self
                .listener
                .respond_value(id, i64::try_from(len).unwrap_or(i64::MAX)),
            Err(errno) => self.listener.respond_error(id, errno),
        };
    }

    fn open(&self, caller: &NotifCaller, dirfd: i32, path_addr: u64, flags: i32, mode: u32) {
        let id = caller.notif_id();
        let tid = crate::backend::Caller::id(caller).tid;
        // A path we cannot read or resolve is not ours; the kernel reports EFAULT & co itself.
        let path = caller
            .read_path(path_addr)
            .ok()
            .and_then(|raw| path::resolve(tid, dirfd, &raw));
        let Some(path) = path.filter(|_| caller.still_valid().is_ok()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let action = catch_unwind(AssertUnwindSafe(|| {
            backend.open(caller, &path, flags, mode)
        }))
        .unwrap_or_else(|_| {
            crate::own::elog!("kfd-emu: the backend panicked opening {path}; answering EIO");
            OpenAction::Fail(Errno::IO)
        });
        let _ = match action {
            OpenAction::Continue => self.listener.respond_continue(id),
            OpenAction::Inject(fd) => {
                let cloexec = flags & libc::O_CLOEXEC != 0;
                match self.listener.add_fd(id, fd.as_fd(), cloexec, true) {
                    Ok(_) | Err(Errno::NOENT) => Ok(()),
                    // Not installed (EMFILE: the caller's table is full): the call is still
                    // held and must fail as the kernel's open would.
                    Err(errno) => self.listener.respond_error(id, errno),
                }
            }
            OpenAction::Fail(errno) => self.listener.respond_error(id, errno),
        };
    }

    /// A path-based `stat`-family (or xattr-read) call: the backend describes the path (or declines, and the
    /// kernel runs the call), and the answer is written in the layout the call expects.
    fn stat(
        &self,
        caller: &NotifCaller,
        process: &Tracked,
        dirfd: i32,
        path_addr: u64,
        flags: i32,
        reply: Reply,
    ) {
        let id = caller.notif_id();
        // Flags we do not know are the kernel's to refuse. `AT_SYMLINK_NOFOLLOW` changes
        // nothing: the emulated paths hold no symlinks. An empty path with `AT_EMPTY_PATH`
        // names `dirfd` itself: an `fstat` of it.
        let known = libc::AT_SYMLINK_NOFOLLOW
            | libc::AT_EMPTY_PATH
            | libc::AT_NO_AUTOMOUNT
            | libc::AT_STATX_SYNC_TYPE
            | libc::AT_EACCESS;
        let tid = caller.id().tid;
        let raw = (flags & !known == 0)
            .then(|| caller.read_path(path_addr).ok())
            .flatten();
        if flags & libc::AT_EMPTY_PATH != 0 && raw.as_ref().is_some_and(Vec::is_empty) {
            self.fstat(caller, process, dirfd, reply);
            return;
        }
        let path = raw.and_then(|raw| path::resolve(tid, dirfd, &raw));
        let Some(path) = path.filter(|_| caller.still_valid().is_ok()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let answer =
            catch_unwind(AssertUnwindSafe(|| backend.stat(caller, &path))).unwrap_or_else(|_| {
                crate::own::elog!(
                    "kfd-emu: the backend panicked on a stat of {path}; answering EIO"
                );
                Some(Err(Errno::IO))
            });
        self.answer_stat(caller, answer, reply);
    }

    /// `fstat(fd)` (or a stat of `fd` by an empty path): a stand-in the backend describes is
    /// answered as its device file; any other file, or an fd that is not open, is the
    /// kernel's.
    fn fstat(&self, caller: &NotifCaller, process: &Tracked, fd: i32, reply: Reply) {
        let id = caller.notif_id();
        let Ok(file) = pidfd_getfd(&process.pidfd, fd, PidfdGetfdFlags::empty()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let answer = catch_unwind(AssertUnwindSafe(|| backend.fstat(caller, file.as_fd())))
            .unwrap_or_else(|_| {
                crate::own::elog!("kfd-emu: the backend panicked on an fstat; answering EIO");
                Some(Err(Errno::IO))
            });
        self.answer_stat(caller, answer, reply);
    }

    /// Carries a backend's stat answer out: `None` runs the call natively.
    fn answer_stat(
        &self,
        caller: &NotifCaller,
        answer: Option<Result<StatAnswer, Errno>>,
        reply: Reply,
    ) {
        let id = caller.notif_id();
        let result = match (answer, reply) {
            (None, _) => {
                let _ = self.listener.respond_continue(id);
                return;
            }
            (Some(Err(errno)), _) => Err(errno),
            (Some(Ok(answer)), Reply::Stat(buf)) => caller.write(buf, &stat::stat_bytes(&answer)),
            (Some(Ok(answer)), Reply::Statx(buf)) => caller.write(buf, &stat::statx_bytes(&answer)),
            (Some(Ok(answer)), Reply::Access(how)) => stat::access(&answer, how),
            // The emulated files carry no extended attributes.
            (Some(Ok(_)), Reply::GetXattr) => Err(Errno::NODATA),
            (Some(Ok(_)), Reply::ListXattr) => Ok(()),
        };
        let _ = match result {
            Ok(()) => self.listener.respond_value(id, 0),
            Err(errno) => self.listener.respond_error(id, errno),
        };
    }

    /// A notified file `mmap` (see [`super::mmap`]).
    fn mmap(
        &self,
        caller: &NotifCaller,
        process: &Tracked,
        args: [u64; 6],
        instruction_pointer: u64,
    ) {
        if let Route::Traced(slots) = &self.route {
            return self.mmap_traced(slots, caller, process, args, instruction_pointer);
        }
        if (args[4] >> 32) as u32 == SLOT_MARKER {
            // Not one the tracer prepared (there is none here): an ordinary call.
            let _ = self.listener.respond_continue(caller.notif_id());
            return;
        }
        self.mmap_in_process(caller, process, MmapArgs::from_regs(args));
    }

    /// A file `mmap` of a traced program: the backend's answer, a redirect carried out by
    /// the tracer (which answers the call: see [`super::mmap`]).
    fn mmap_traced(
        &self,
        slots: &Slots,
        caller: &NotifCaller,
        process: &Tracked,
        args: [u64; 6],
        instruction_pointer: u64,
    ) {
        let id = caller.notif_id();
        let who = caller.id();
        // The `syscall` instruction (`0f 05`) the call was made at, for the calls the
        // tracer injects into the process.
        slots.note_insn(who.tgid, instruction_pointer.wrapping_sub(2));
        let regs = args;
        let args = MmapArgs::from_regs(regs);
        let (action, file) = file_mmap::ask(&*self.backend, process.pidfd.as_fd(), who, &args);
        if !matches!(action, MmapAction::Fail(_)) {
            // A MAP_FIXED file mapping replaces what is there (anonymous ones are notified).
            addrspace::tell(&*self.backend, who, libc::SYS_mmap, args.regs());
        }
        let listener = &self.listener;
        let _ = match action {
            MmapAction::Continue => listener.respond_continue(id),
            MmapAction::Fail(errno) => listener.respond_error(id, errno),
            MmapAction::Redirect { fd, offset } => {
                let same = file
                    .as_ref()
                    .and_then(|f| file_mmap::file_id(f.as_fd()))
                    .is_some_and(|f| file_mmap::file_id(fd.as_fd()) == Some(f));
                slots.request(file_mmap::Request {
                    id,
                    listener: Arc::clone(listener),
                    tid: who.tid,
                    tgid: who.tgid,
                    args: regs,
                    fd,
                    offset,
                    same,
                });
                Ok(())
            }
        };
    }

    /// A traced program's `mmap` notified for its slot marker (fd argument `fd_arg`):
    /// installs the memfd the tracer prepared for thread `tid` at a number the kernel picks
    /// (never replacing anything) and answers the call with that number, which the tracer
    /// then maps and closes (see [`super::mmap`]).
    fn install_slot(&self, slots: &Slots, tid: i32, id: u64, fd_arg: u64) {
        let listener = &self.listener;
        let marked = (fd_arg >> 32) as u32 == SLOT_MARKER;
        let Some(pending) = marked.then(|| slots.take(tid)).flatten() else {
            // Not prepared by the tracer: an ordinary call, whatever its fd argument says.
            let _ = listener.respond_continue(id);
            return;
        };
        let install = || listener.add_fd(id, pending.fd.as_fd(), true, true);
        let _ = match install() {
            Ok(_) | Err(Errno::NOENT) => Ok(()),
            // The table is full: the kernel's mmap needs no fd, so neither may this one.
            Err(Errno::MFILE) => match file_mmap::with_one_more_fd(pending.tgid, install) {
                Ok(_) | Err(Errno::NOENT) => Ok(()),
                Err(errno) => listener.respond_error(id, errno),
            },
            Err(errno) => listener.respond_error(id, errno),
        };
    }

    /// A file `mmap` of an attached caller, which shares this address space.
    fn mmap_in_process(&self, caller: &NotifCaller, process: &Tracked, args: MmapArgs) {
        let id = caller.notif_id();
        let who = caller.id();
        let (action, _file) = file_mmap::ask(&*self.backend, process.pidfd.as_fd(), who, &args);
        if !matches!(action, MmapAction::Fail(_)) {
            // A MAP_FIXED mapping the kernel will make replaces what is there.
            addrspace::tell(&*self.backend, who, libc::SYS_mmap, args.regs());
        }
        let listener = &self.listener;
        let _ = match action {
            MmapAction::Continue => listener.respond_continue(id),
            MmapAction::Fail(errno) => listener.respond_error(id, errno),
            // A forked child: another address space, which only a tracer could reach.
            MmapAction::Redirect { .. } if who.tgid != std::process::id() as i32 => {
                listener.respond_error(id, Errno::NODEV)
            }
            MmapAction::Redirect { fd, offset } => {
                match file_mmap::map_here(&args, fd.as_fd(), offset) {
                    Ok(addr) => {
                        let sent = listener.respond_value(id, addr as i64);
                        if sent.is_err() {
                            file_mmap::unmap_here(addr, args.len);
                        }
                        sent
                    }
                    Err(errno) => listener.respond_error(id, errno),
                }
            }
        };
    }

    /// `ftruncate(fd, length)` or `fallocate(fd, mode, offset, len)`: on a stand-in, the
    /// kernel's answer for a device file (see [`resize_errno`]); on anything else the kernel's
    /// own.
    fn resize(&self, caller: &NotifCaller, process: &Tracked, nr: i64, args: [u64; 6]) {
        let id = caller.notif_id();
        let Ok(file) = pidfd_getfd(&process.pidfd, args[0] as i32, PidfdGetfdFlags::empty()) else {
            // Not an open fd (EBADF) or not ours to see: the kernel answers.
            let _ = self.listener.respond_continue(id);
            return;
        };
        if !self.backend.is_standin(file.as_fd()) {
            let _ = self.listener.respond_continue(id);
            return;
        }
        let writable = rustix::fs::fcntl_getfl(&file).is_ok_and(|fl| {
            fl.contains(rustix::fs::OFlags::WRONLY) || fl.contains(rustix::fs::OFlags::RDWR)
        });
        let _ = self
            .listener
            .respond_error(id, resize_errno(nr, args, writable));
    }

    fn ioctl(&self, caller: &NotifCaller, process: &Tracked, fd: i32, cmd: u32, arg: u64) {
        let id = caller.notif_id();
        let file = match pidfd_getfd(&process.pidfd, fd, PidfdGetfdFlags::empty()) {
            Ok(file) => file,
            // Not an open fd: what the kernel's ioctl would say.
            Err(Errno::BADF) => {
                let _ = self.listener.respond_error(id, Errno::BADF);
                return;
            }
            // This process's fd table is full (a program could only get here by making the
            // supervisor hold too much): a stand-in's ioctl fails as an allocation would,
            // never runs natively on the memfd (see `holds_memfd`).
            Err(errno @ (Errno::MFILE | Errno::NFILE))
                if file_mmap::holds_memfd(caller.id().tgid, fd) =>
            {
                let _ = self.listener.respond_error(id, errno);
                return;
            }
            Err(_) => {
                let _ = self.listener.respond_continue(id);
                return;
            }
        };
        let result = run_ioctl(&*self.backend, caller, file.as_fd(), cmd, arg);
        if let Route::Traced(slots) = &self.route {
            // Memory the call moved to VRAM is hidden before the caller runs on.
            slots.cpu.sync();
        }
        answer_ioctl(caller, result);
    }
}

// SMI event fds: the write calls the filter notifies for the fd numbers in `SMI_FDS`.
impl Shared {
    /// `write(fd, buf, count)`, `writev(fd, iov, iovcnt)` or `pwritev2(fd, iov, iovcnt, -1,
    /// 0, flags)` on an fd in [`SMI_FDS`](crate::backend::SMI_FDS): the backend answers for
    /// its SMI stand-ins ([`Backend::write`]); anything else, and `pwritev2` at an offset
    /// (which a pipe refuses as the kernel's SMI file does), runs natively.
    fn smi_write(&self, caller: &NotifCaller, process: &Tracked, nr: i64, args: [u64; 6]) {
        let id = caller.notif_id();
        if nr == libc::SYS_pwritev2 && args[3] as i64 != -1 {
            let _ = self.listener.respond_continue(id);
            return;
        }
        let Ok(file) = pidfd_getfd(&process.pidfd, args[0] as i32, PidfdGetfdFlags::empty()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let segments = || write_segments(caller, nr, args);
        match self.backend.write(caller, file.as_fd(), &segments) {
            None => {
                let _ = self.listener.respond_continue(id);
            }
            Some(Ok(n)) => {
                let _ = self.listener.respond_value(id, n);
            }
            Some(Err(errno)) => {
                let _ = self.listener.respond_error(id, errno);
            }
        }
    }
}

/// The highest user address plus one on x86_64 (`TASK_SIZE_MAX` with 4-level paging): what
/// `access_ok` measures a user range against.
const USER_END: u64 = (1 << 47) - 4096;

/// The `(address, length)` pieces of a notified write call, checked as the kernel checks
/// them before the file's `write` runs: `access_ok` of a `write`'s buffer (`vfs_write`), and
/// for the vector calls `import_iovec` (more than `UIO_MAXIOV` entries or a negative length:
/// `EINVAL`; an unreadable array or a piece outside user space: `EFAULT`), then
/// `do_loop_readv_writev`'s refusal of `RWF_*` flags other than `RWF_HIPRI` (`EOPNOTSUPP`)
/// once there is something to write.
fn write_segments(caller: &NotifCaller, nr: i64, args: [u64; 6]) -> Result<WriteCall, Errno> {
    let in_user =
        |(addr, len): (u64, u64)| addr.checked_add(len).is_some_and(|end| end <= USER_END);
    if nr == libc::SYS_write {
        let piece = (args[1], args[2]);
        return if in_user(piece) {
            Ok(WriteCall::Write(piece.0, piece.1))
        } else {
            Err(Errno::FAULT)
        };
    }
    const UIO_MAXIOV: u64 = 1024;
    let (iov, count) = (args[1], args[2]);
    if count > UIO_MAXIOV {
        return Err(Errno::INVAL);
    }
    let mut raw = vec![0u8; count as usize * 16];
    caller.read(iov, &mut raw)?;
    let pieces: Vec<(u64, u64)> = raw
        .chunks_exact(16)
        .map(|entry| {
            let word = |at: usize| {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&entry[at..at + 8]);
                u64::from_ne_bytes(bytes)
            };
            (word(0), word(8))
        })
        .collect();
    // `iovec_from_user` refuses a negative length while copying, then `__import_iovec`
    // checks each piece's range.
    if pieces.iter().any(|&(_, len)| (len as i64) < 0) {
        return Err(Errno::INVAL);
    }
    if !pieces.iter().all(|&piece| in_user(piece)) {
        return Err(Errno::FAULT);
    }
    let flags = if nr == libc::SYS_pwritev2 { args[5] } else { 0 };
    if pieces.iter().any(|&(_, len)| len > 0) && flags & !(libc::RWF_HIPRI as u64) != 0 {
        return Err(Errno::OPNOTSUPP);
    }
    Ok(WriteCall::Vector(pieces))
}

/// What the kernel answers a resize of a device file (a stand-in), in its order of checks.
///
/// `ftruncate` (`ksys_ftruncate`, `do_ftruncate`): `EINVAL` for a negative length, and
/// `EINVAL` for anything but a regular file opened for writing. `fallocate`
/// (`vfs_fallocate`): `EINVAL` for a negative offset or a length that is not positive,
/// `EBADF` for a file not opened for writing, then `ENODEV` for anything but a regular file
/// or a block device. (Its checks of `mode`'s flags, which come between, are not repeated:
/// they only change the errno of a call that fails either way.)
pub(crate) fn resize_errno(nr: i64, args: [u64; 6], writable: bool) -> Errno {
    if nr == libc::SYS_ftruncate {
        return Errno::INVAL;
    }
    let (offset, len) = (args[2] as i64, args[3] as i64);
    if offset < 0 || len <= 0 {
        Errno::INVAL
    } else if !writable {
        Errno::BADF
    } else {
        Errno::NODEV
    }
}

/// Lets every call notified on `listener` run as the program issued it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) until no task uses the filter any more (`POLLHUP`).
/// What a dropped attach guard leaves behind: the filter stays on the thread, and its calls
/// go to the real kernel — address-space calls included, which a program cannot do without
/// (glibc aborts when the `munmap` of a cached thread stack fails).
pub(crate) fn pass_through(listener: &Listener) {
    loop {
        let mut fds = [PollFd::from_borrowed_fd(listener.as_fd(), PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return,
        }
        let events = fds[0].revents();
        if events.contains(PollFlags::IN) {
            match listener.recv() {
                Ok(notif) => {
                    let _ = listener.respond_continue(notif.id);
                }
                // The caller died between the wake-up and the receive.
                Err(Errno::NOENT | Errno::INTR) => {}
                Err(_) => return,
            }
        } else if events.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
            return;
        }
    }
}

/// How many NUMA nodes the host has: one past the last in its
/// `/sys/devices/system/node/possible` (read by the supervisor itself, which no filter
/// covers); 1 when it cannot be read.
fn host_numa_nodes() -> u64 {
    static HOST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/node/possible")
            .ok()
            .and_then(|text| {
                let last = text.trim().rsplit([',', '-']).next()?.parse::<u64>().ok()?;
                Some(last + 1)
            })
            .unwrap_or(1)
    })
}
