//! SMI event records: the kernel's text lines decoded into [`Record`], and written back.
//!
//! The one definition of the record format in the workspace: kfd-emu writes its records
//! through [`Record`]'s `Display`, and kfd-svm's `SmiEvent` is this type under its own name.
//!
//! Every record is `"<event id in lower-case hex> "` followed by the event's
//! `KFD_EVENT_FMT_*` format (see [`crate::abi`]) and a newline; `kfd_smi_event_add` in
//! the kernel's `kfd_smi_events.c` builds it with `snprintf("%x ", event)` and then the
//! format. Timestamps are `CLOCK_BOOTTIME` nanoseconds, addresses and sizes are in pages.
//!
//! Kernels have written some records in more than one shape, and the parser takes each:
//! * GPU_PRE_RESET/GPU_POST_RESET: `"%x\n"` before the reset cause was added, `"%x %s\n"`
//!   after (the cause may be empty).
//! * MIGRATE_END: without the error code before KFD 1.23, `"... %d %d\n"` with it.
//! * QUEUE_RESTORE: `"%lld -%d %x\n"` before the format macros; `"%lld -%d %x %c\n"` with
//!   `'R'` when the restore was rescheduled; with the macros, the plain restore passed the
//!   character value 0, writing a NUL byte before the newline, until it was fixed to `'0'`.
//!
//! [`Record::parse`] accepts exactly what those `printf` formats can produce (lower-case hex
//! without leading zeros, decimals without `+` or leading zeros), so for every line it accepts,
//! [`Record`]'s `Display` writes the same line back. It never panics, whatever the input.

use std::fmt;

use crate::Location;
use crate::abi;

/// Defines a trigger enum over the `i32` the kernel prints with `%d`, with a raw fallback.
macro_rules! trigger_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $raw:path,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value this crate does not know (printed as is).
            Other(i32),
        }

        impl $name {
            /// Decodes the printed value.
            pub const fn from_raw(raw: i32) -> $name {
                $(if raw == $raw as i32 {
                    return $name::$variant;
                })*
                $name::Other(raw)
            }

            /// The value the kernel prints.
            pub const fn to_raw(self) -> i32 {
                match self {
                    $($name::$variant => $raw as i32,)*
                    $name::Other(raw) => raw,
                }
            }
        }

        impl fmt::Display for $name {
            /// The number, as the kernel prints it.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.to_raw())
            }
        }
    };
}

trigger_enum! {
    /// Why pages migrated (`KFD_MIGRATE_TRIGGER_*`).
    MigrateTrigger {
        /// A prefetch (`PREFETCH_LOC` in a SET_ATTR).
        #[doc(alias = "KFD_MIGRATE_TRIGGER_PREFETCH")]
        Prefetch = abi::KFD_MIGRATE_TRIGGER_PREFETCH,
        /// Recovery of a GPU page fault.
        #[doc(alias = "KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU")]
        PageFaultGpu = abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU,
        /// Recovery of a CPU page fault on VRAM-resident pages.
        #[doc(alias = "KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU")]
        PageFaultCpu = abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU,
        /// TTM evicted the VRAM holding the pages.
        #[doc(alias = "KFD_MIGRATE_TRIGGER_TTM_EVICTION")]
        TtmEviction = abi::KFD_MIGRATE_TRIGGER_TTM_EVICTION,
    }
}

trigger_enum! {
    /// Why the process's queues were evicted (`KFD_QUEUE_EVICTION_*`).
    EvictionTrigger {
        /// An SVM range was invalidated (XNACK off, or `GPU_ALWAYS_MAPPED`).
        #[doc(alias = "KFD_QUEUE_EVICTION_TRIGGER_SVM")]
        Svm = abi::KFD_QUEUE_EVICTION_TRIGGER_SVM,
        /// A USERPTR buffer's pages moved.
        #[doc(alias = "KFD_QUEUE_EVICTION_TRIGGER_USERPTR")]
        Userptr = abi::KFD_QUEUE_EVICTION_TRIGGER_USERPTR,
        /// TTM moved a buffer.
        #[doc(alias = "KFD_QUEUE_EVICTION_TRIGGER_TTM")]
        Ttm = abi::KFD_QUEUE_EVICTION_TRIGGER_TTM,
        /// The GPU is suspending.
        #[doc(alias = "KFD_QUEUE_EVICTION_TRIGGER_SUSPEND")]
        Suspend = abi::KFD_QUEUE_EVICTION_TRIGGER_SUSPEND,
        /// A CRIU checkpoint.
        #[doc(alias = "KFD_QUEUE_EVICTION_CRIU_CHECKPOINT")]
        CriuCheckpoint = abi::KFD_QUEUE_EVICTION_CRIU_CHECKPOINT,
        /// A CRIU restore.
        #[doc(alias = "KFD_QUEUE_EVICTION_CRIU_RESTORE")]
        CriuRestore = abi::KFD_QUEUE_EVICTION_CRIU_RESTORE,
    }
}

trigger_enum! {
    /// Why a range was unmapped from a GPU (`KFD_SVM_UNMAP_TRIGGER_*`).
    UnmapTrigger {
        /// An MMU notifier: the CPU side of the pages changed.
        #[doc(alias = "KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY")]
        MmuNotify = abi::KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY,
        /// An MMU notifier for a page migration.
        #[doc(alias = "KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE")]
        MmuNotifyMigrate = abi::KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE,
        /// The CPU unmapped the memory (munmap): the range is going away.
        #[doc(alias = "KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU")]
        UnmapFromCpu = abi::KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU,
    }
}

/// The last field of a QUEUE_RESTORE record, which kernels have written four ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RestoreMark {
    /// `'R'`: the restore failed validation and was rescheduled.
    Rescheduled,
    /// `'0'`: a plain restore (kernels with the fixed format macro).
    Zero,
    /// A NUL byte: a plain restore (kernels whose macro was passed the value 0).
    Nul,
    /// Nothing: a plain restore (kernels before the format macros).
    Absent,
}

impl RestoreMark {
    /// Whether the restore was rescheduled.
    pub fn is_rescheduled(self) -> bool {
        self == RestoreMark::Rescheduled
    }
}

/// One SMI event, decoded from the kernel's text record.
///
/// `ns` fields are `CLOCK_BOOTTIME` nanoseconds; `*_page` and `npages` fields count pages
/// (an address is `page << 12` with 4 KiB pages); `node` is the `gpu_id` of the reporting GPU.
/// Events without a timestamp (VM fault, thermal, reset, process) are stamped by the reader.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Record {
    /// A GPU VM fault of process `pid` (`KFD_SMI_EVENT_VMFAULT`, `"%x:%s"`).
    #[doc(alias = "KFD_SMI_EVENT_VMFAULT")]
    VmFault {
        /// The faulting process (printed in hex).
        pid: u32,
        /// Its task name.
        task: String,
    },
    /// Thermal throttling (`KFD_SMI_EVENT_THERMAL_THROTTLE`, `"%llx:%llx"`).
    #[doc(alias = "KFD_SMI_EVENT_THERMAL_THROTTLE")]
    ThermalThrottle {
        /// The throttle status bitmask.
        bitmask: u64,
        /// The throttle interrupt counter.
        counter: u64,
    },
    /// A GPU reset is about to happen (`KFD_SMI_EVENT_GPU_PRE_RESET`, `"%x %s"`).
    #[doc(alias = "KFD_SMI_EVENT_GPU_PRE_RESET")]
    GpuPreReset {
        /// The reset sequence number (incremented by each pre-reset).
        seq: u32,
        /// The reset cause; `None` for kernels that print only the sequence number.
        reason: Option<String>,
    },
    /// A GPU reset happened (`KFD_SMI_EVENT_GPU_POST_RESET`, `"%x %s"`).
    #[doc(alias = "KFD_SMI_EVENT_GPU_POST_RESET")]
    GpuPostReset {
        /// The reset sequence number.
        seq: u32,
        /// The reset cause; `None` for kernels that print only the sequence number.
        reason: Option<String>,
    },
    /// Pages started migrating (`KFD_SMI_EVENT_MIGRATE_START`,
    /// `"%lld -%d @%lx(%lx) %x->%x %x:%x %d"`).
    #[doc(alias = "KFD_SMI_EVENT_MIGRATE_START")]
    MigrateStart {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The first page.
        start_page: u64,
        /// How many pages.
        npages: u64,
        /// Where the pages were.
        from: Location,
        /// Where they go.
        to: Location,
        /// The range's prefetch location.
        prefetch_loc: Location,
        /// The range's preferred location.
        preferred_loc: Location,
        /// Why.
        trigger: MigrateTrigger,
    },
    /// Pages finished migrating (`KFD_SMI_EVENT_MIGRATE_END`,
    /// `"%lld -%d @%lx(%lx) %x->%x %d %d"`).
    #[doc(alias = "KFD_SMI_EVENT_MIGRATE_END")]
    MigrateEnd {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The first page.
        start_page: u64,
        /// How many pages.
        npages: u64,
        /// Where the pages were.
        from: Location,
        /// Where they went.
        to: Location,
        /// Why.
        trigger: MigrateTrigger,
        /// 0 on success, else a negative errno; `None` for kernels before KFD 1.23, which do
        /// not print it.
        error_code: Option<i32>,
    },
    /// A GPU page fault started being handled (`KFD_SMI_EVENT_PAGE_FAULT_START`,
    /// `"%lld -%d @%lx(%x) %c"`).
    #[doc(alias = "KFD_SMI_EVENT_PAGE_FAULT_START")]
    PageFaultStart {
        /// When the fault happened.
        ns: i64,
        /// The process.
        pid: u32,
        /// The faulting page.
        addr_page: u64,
        /// The faulting GPU.
        node: u32,
        /// A write fault (`'W'`) rather than a read fault (`'R'`).
        write: bool,
    },
    /// A GPU page fault was recovered (`KFD_SMI_EVENT_PAGE_FAULT_END`,
    /// `"%lld -%d @%lx(%x) %c"`).
    #[doc(alias = "KFD_SMI_EVENT_PAGE_FAULT_END")]
    PageFaultEnd {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The faulting page.
        addr_page: u64,
        /// The faulting GPU.
        node: u32,
        /// Pages were migrated (`'M'`) rather than only mapped (`'U'`).
        migrated: bool,
    },
    /// The process's queues were evicted (`KFD_SMI_EVENT_QUEUE_EVICTION`, `"%lld -%d %x %d"`).
    #[doc(alias = "KFD_SMI_EVENT_QUEUE_EVICTION")]
    QueueEviction {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The GPU.
        node: u32,
        /// Why.
        trigger: EvictionTrigger,
    },
    /// The process's queues were restored (`KFD_SMI_EVENT_QUEUE_RESTORE`, `"%lld -%d %x %c"`).
    #[doc(alias = "KFD_SMI_EVENT_QUEUE_RESTORE")]
    QueueRestore {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The GPU.
        node: u32,
        /// Whether the restore was rescheduled, as this kernel wrote it.
        rescheduled: RestoreMark,
    },
    /// A range was unmapped from a GPU (`KFD_SMI_EVENT_UNMAP_FROM_GPU`,
    /// `"%lld -%d @%lx(%lx) %x %d"`).
    #[doc(alias = "KFD_SMI_EVENT_UNMAP_FROM_GPU")]
    UnmapFromGpu {
        /// When.
        ns: i64,
        /// The process.
        pid: u32,
        /// The first page.
        start_page: u64,
        /// How many pages.
        npages: u64,
        /// The GPU.
        node: u32,
        /// Why.
        trigger: UnmapTrigger,
    },
    /// A process started using the GPU (`KFD_SMI_EVENT_PROCESS_START`, `"%x %s"`).
    #[doc(alias = "KFD_SMI_EVENT_PROCESS_START")]
    ProcessStart {
        /// The process (printed in hex).
        pid: u32,
        /// Its task name.
        task: String,
    },
    /// A process stopped using the GPU (`KFD_SMI_EVENT_PROCESS_END`, `"%x %s"`).
    #[doc(alias = "KFD_SMI_EVENT_PROCESS_END")]
    ProcessEnd {
        /// The process (printed in hex).
        pid: u32,
        /// Its task name.
        task: String,
    },
    /// An event id this crate does not know, with the text after `"<id> "`.
    Unknown {
        /// The event id.
        id: u32,
        /// The rest of the record.
        text: String,
    },
}

/// Where and why a record did not match its event's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: expected {expected}")]
pub struct ParseError {
    /// The byte offset in the line where matching failed.
    pub offset: usize,
    /// What the format wanted there.
    pub expected: &'static str,
}

/// A cursor over a line that matches the `printf` conversions of the SMI formats exactly.
struct Cursor<'a> {
    line: &'a str,
    pos: usize,
}

type Parsed<T> = Result<T, ParseError>;

impl<'a> Cursor<'a> {
    fn fail<T>(&self, expected: &'static str) -> Parsed<T> {
        Err(ParseError {
            offset: self.pos,
            expected,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.line.as_bytes().get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.line.len()
    }

    fn end(&self) -> Parsed<()> {
        if self.at_end() {
            Ok(())
        } else {
            self.fail("the end of the record")
        }
    }

    fn lit(&mut self, text: &'static str) -> Parsed<()> {
        let rest = self.line.as_bytes().get(self.pos..).unwrap_or_default();
        if rest.starts_with(text.as_bytes()) {
            self.pos += text.len();
            Ok(())
        } else {
            self.fail(text)
        }
    }

    /// The length of the run of bytes from `pos` that satisfy `pred`.
    fn run(&self, pred: impl Fn(u8) -> bool) -> usize {
        let rest = self.line.as_bytes().get(self.pos..).unwrap_or_default();
        rest.iter().take_while(|&&b| pred(b)).count()
    }

    /// `%x`/`%lx`/`%llx`: lower-case hex digits, no leading zero, fitting 64 bits.
    fn hex(&mut self, what: &'static str) -> Parsed<u64> {
        let n = self.run(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let digits = self.line.get(self.pos..self.pos + n).unwrap_or_default();
        if n == 0 || (n > 1 && digits.starts_with('0')) {
            return self.fail(what);
        }
        match u64::from_str_radix(digits, 16) {
            Ok(v) => {
                self.pos += n;
                Ok(v)
            }
            Err(_) => self.fail(what),
        }
    }

    fn hex32(&mut self, what: &'static str) -> Parsed<u32> {
        let start = self.pos;
        let v = self.hex(what)?;
        u32::try_from(v).or_else(|_| {
            self.pos = start;
            self.fail(what)
        })
    }

    /// `%d`/`%lld`: an optional `-`, decimal digits without a leading zero, not `-0`.
    fn dec(&mut self, what: &'static str) -> Parsed<i64> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let n = self.run(|b| b.is_ascii_digit());
        let digits = self.line.get(self.pos..self.pos + n).unwrap_or_default();
        let canonical =
            n > 0 && !(n > 1 && digits.starts_with('0')) && !(negative && digits == "0");
        let text = self.line.get(start..self.pos + n).unwrap_or_default();
        match text.parse::<i64>() {
            Ok(v) if canonical => {
                self.pos += n;
                Ok(v)
            }
            _ => {
                self.pos = start;
                self.fail(what)
            }
        }
    }

    fn dec32(&mut self, what: &'static str) -> Parsed<i32> {
        let start = self.pos;
        let v = self.dec(what)?;
        i32::try_from(v).or_else(|_| {
            self.pos = start;
            self.fail(what)
        })
    }

    /// The pid of `-%d`: a non-negative decimal.
    fn pid(&mut self) -> Parsed<u32> {
        if self.peek() == Some(b'-') {
            return self.fail("a pid");
        }
        let start = self.pos;
        let v = self.dec("a pid")?;
        u32::try_from(v).or_else(|_| {
            self.pos = start;
            self.fail("a pid")
        })
    }

    /// `%c`, one of `choices`.
    fn char_of(&mut self, choices: &[u8], what: &'static str) -> Parsed<u8> {
        match self.peek() {
            Some(c) if choices.contains(&c) => {
                self.pos += 1;
                Ok(c)
            }
            _ => self.fail(what),
        }
    }

    /// `%s` to the end of the line.
    fn rest(&mut self) -> String {
        let rest = self.line.get(self.pos..).unwrap_or_default();
        self.pos = self.line.len();
        rest.to_owned()
    }

    /// The `"%lld -%d "` that starts every timestamped record.
    fn ns_pid(&mut self) -> Parsed<(i64, u32)> {
        let ns = self.dec("a timestamp in ns")?;
        self.lit(" -")?;
        let pid = self.pid()?;
        Ok((ns, pid))
    }

    /// `" @%lx(%lx) "`: a first page and a page count.
    fn pages(&mut self) -> Parsed<(u64, u64)> {
        self.lit(" @")?;
        let start = self.hex("a page number")?;
        self.lit("(")?;
        let n = self.hex("a page count")?;
        self.lit(") ")?;
        Ok((start, n))
    }

    /// `"%x->%x"`.
    fn migration_ends(&mut self) -> Parsed<(Location, Location)> {
        let from = self.hex32("a source location")?;
        self.lit("->")?;
        let to = self.hex32("a destination location")?;
        Ok((Location::from_raw(from), Location::from_raw(to)))
    }

    /// `" @%lx(%x) %c"` of the page-fault records.
    fn fault(&mut self, chars: &[u8], what: &'static str) -> Parsed<(u64, u32, u8)> {
        self.lit(" @")?;
        let addr = self.hex("a page number")?;
        self.lit("(")?;
        let node = self.hex32("a gpu_id")?;
        self.lit(") ")?;
        let c = self.char_of(chars, what)?;
        self.end()?;
        Ok((addr, node, c))
    }

    /// `"%x"` optionally followed by `" %s"` (the reset records).
    fn reset(&mut self) -> Parsed<(u32, Option<String>)> {
        let seq = self.hex32("a reset sequence number")?;
        if self.at_end() {
            return Ok((seq, None));
        }
        self.lit(" ")?;
        Ok((seq, Some(self.rest())))
    }
}

impl Record {
    /// Decodes one record; a single trailing `'\n'` is allowed. Never panics.
    ///
    /// A known event id whose text does not match its format is an error; an unknown id is
    /// [`Record::Unknown`].
    ///
    /// ```
    /// use kfd_ioctl::Location;
    /// use kfd_ioctl::smi::{MigrateTrigger, Record};
    ///
    /// let line = "5 1234567890 -4242 @7f0000(200) 0->1a2b 1a2b:ffffffff 0\n";
    /// let event = Record::parse(line)?;
    /// assert_eq!(
    ///     event,
    ///     Record::MigrateStart {
    ///         ns: 1234567890,
    ///         pid: 4242,
    ///         start_page: 0x7f0000,
    ///         npages: 0x200,
    ///         from: Location::System,
    ///         to: Location::Gpu(kfd_ioctl::GpuId(0x1a2b)),
    ///         prefetch_loc: Location::Gpu(kfd_ioctl::GpuId(0x1a2b)),
    ///         preferred_loc: Location::Undefined,
    ///         trigger: MigrateTrigger::Prefetch,
    ///     }
    /// );
    /// assert_eq!(format!("{event}\n"), line);
    /// # Ok::<(), kfd_ioctl::smi::ParseError>(())
    /// ```
    pub fn parse(line: &str) -> Result<Record, ParseError> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let mut c = Cursor { line, pos: 0 };
        let id = c.hex32("an event id in hex")?;
        c.lit(" ")?;
        let event = match id {
            abi::KFD_SMI_EVENT_VMFAULT => {
                let pid = c.hex32("a pid in hex")?;
                c.lit(":")?;
                Record::VmFault {
                    pid,
                    task: c.rest(),
                }
            }
            abi::KFD_SMI_EVENT_THERMAL_THROTTLE => {
                let bitmask = c.hex("a throttle bitmask")?;
                c.lit(":")?;
                let counter = c.hex("a throttle counter")?;
                Record::ThermalThrottle { bitmask, counter }
            }
            abi::KFD_SMI_EVENT_GPU_PRE_RESET => {
                let (seq, reason) = c.reset()?;
                Record::GpuPreReset { seq, reason }
            }
            abi::KFD_SMI_EVENT_GPU_POST_RESET => {
                let (seq, reason) = c.reset()?;
                Record::GpuPostReset { seq, reason }
            }
            abi::KFD_SMI_EVENT_MIGRATE_START => {
                let (ns, pid) = c.ns_pid()?;
                let (start_page, npages) = c.pages()?;
                let (from, to) = c.migration_ends()?;
                c.lit(" ")?;
                let prefetch_loc = Location::from_raw(c.hex32("a prefetch location")?);
                c.lit(":")?;
                let preferred_loc = Location::from_raw(c.hex32("a preferred location")?);
                c.lit(" ")?;
                let trigger = MigrateTrigger::from_raw(c.dec32("a migration trigger")?);
                Record::MigrateStart {
                    ns,
                    pid,
                    start_page,
                    npages,
                    from,
                    to,
                    prefetch_loc,
                    preferred_loc,
                    trigger,
                }
            }
            abi::KFD_SMI_EVENT_MIGRATE_END => {
                let (ns, pid) = c.ns_pid()?;
                let (start_page, npages) = c.pages()?;
                let (from, to) = c.migration_ends()?;
                c.lit(" ")?;
                let trigger = MigrateTrigger::from_raw(c.dec32("a migration trigger")?);
                let error_code = if c.at_end() {
                    None
                } else {
                    c.lit(" ")?;
                    Some(c.dec32("an error code")?)
                };
                Record::MigrateEnd {
                    ns,
                    pid,
                    start_page,
                    npages,
                    from,
                    to,
                    trigger,
                    error_code,
                }
            }
            abi::KFD_SMI_EVENT_PAGE_FAULT_START => {
                let (ns, pid) = c.ns_pid()?;
                let (addr_page, node, rw) = c.fault(b"RW", "'R' or 'W'")?;
                Record::PageFaultStart {
                    ns,
                    pid,
                    addr_page,
                    node,
                    write: rw == b'W',
                }
            }
            abi::KFD_SMI_EVENT_PAGE_FAULT_END => {
                let (ns, pid) = c.ns_pid()?;
                let (addr_page, node, mu) = c.fault(b"MU", "'M' or 'U'")?;
                Record::PageFaultEnd {
                    ns,
                    pid,
                    addr_page,
                    node,
                    migrated: mu == b'M',
                }
            }
            abi::KFD_SMI_EVENT_QUEUE_EVICTION => {
                let (ns, pid) = c.ns_pid()?;
                c.lit(" ")?;
                let node = c.hex32("a gpu_id")?;
                c.lit(" ")?;
                let trigger = EvictionTrigger::from_raw(c.dec32("an eviction trigger")?);
                Record::QueueEviction {
                    ns,
                    pid,
                    node,
                    trigger,
                }
            }
            abi::KFD_SMI_EVENT_QUEUE_RESTORE => {
                let (ns, pid) = c.ns_pid()?;
                c.lit(" ")?;
                let node = c.hex32("a gpu_id")?;
                let rescheduled = if c.at_end() {
                    RestoreMark::Absent
                } else {
                    c.lit(" ")?;
                    match c.char_of(b"R0\0", "'R', '0' or a NUL byte")? {
                        b'R' => RestoreMark::Rescheduled,
                        b'0' => RestoreMark::Zero,
                        _ => RestoreMark::Nul,
                    }
                };
                Record::QueueRestore {
                    ns,
                    pid,
                    node,
                    rescheduled,
                }
            }
            abi::KFD_SMI_EVENT_UNMAP_FROM_GPU => {
                let (ns, pid) = c.ns_pid()?;
                let (start_page, npages) = c.pages()?;
                let node = c.hex32("a gpu_id")?;
                c.lit(" ")?;
                let trigger = UnmapTrigger::from_raw(c.dec32("an unmap trigger")?);
                Record::UnmapFromGpu {
                    ns,
                    pid,
                    start_page,
                    npages,
                    node,
                    trigger,
                }
            }
            abi::KFD_SMI_EVENT_PROCESS_START | abi::KFD_SMI_EVENT_PROCESS_END => {
                let pid = c.hex32("a pid in hex")?;
                c.lit(" ")?;
                let task = c.rest();
                if id == abi::KFD_SMI_EVENT_PROCESS_START {
                    Record::ProcessStart { pid, task }
                } else {
                    Record::ProcessEnd { pid, task }
                }
            }
            id => Record::Unknown { id, text: c.rest() },
        };
        c.end()?;
        Ok(event)
    }

    /// The event id (`KFD_SMI_EVENT_*`).
    pub fn id(&self) -> u32 {
        match self {
            Record::VmFault { .. } => abi::KFD_SMI_EVENT_VMFAULT,
            Record::ThermalThrottle { .. } => abi::KFD_SMI_EVENT_THERMAL_THROTTLE,
            Record::GpuPreReset { .. } => abi::KFD_SMI_EVENT_GPU_PRE_RESET,
            Record::GpuPostReset { .. } => abi::KFD_SMI_EVENT_GPU_POST_RESET,
            Record::MigrateStart { .. } => abi::KFD_SMI_EVENT_MIGRATE_START,
            Record::MigrateEnd { .. } => abi::KFD_SMI_EVENT_MIGRATE_END,
            Record::PageFaultStart { .. } => abi::KFD_SMI_EVENT_PAGE_FAULT_START,
            Record::PageFaultEnd { .. } => abi::KFD_SMI_EVENT_PAGE_FAULT_END,
            Record::QueueEviction { .. } => abi::KFD_SMI_EVENT_QUEUE_EVICTION,
            Record::QueueRestore { .. } => abi::KFD_SMI_EVENT_QUEUE_RESTORE,
            Record::UnmapFromGpu { .. } => abi::KFD_SMI_EVENT_UNMAP_FROM_GPU,
            Record::ProcessStart { .. } => abi::KFD_SMI_EVENT_PROCESS_START,
            Record::ProcessEnd { .. } => abi::KFD_SMI_EVENT_PROCESS_END,
            Record::Unknown { id, .. } => *id,
        }
    }

    /// The kernel's timestamp (`CLOCK_BOOTTIME` ns), for the events that carry one.
    pub fn ns(&self) -> Option<i64> {
        match self {
            Record::MigrateStart { ns, .. }
            | Record::MigrateEnd { ns, .. }
            | Record::PageFaultStart { ns, .. }
            | Record::PageFaultEnd { ns, .. }
            | Record::QueueEviction { ns, .. }
            | Record::QueueRestore { ns, .. }
            | Record::UnmapFromGpu { ns, .. } => Some(*ns),
            _ => None,
        }
    }

    /// The process the event is about, for the events that name one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Record::VmFault { pid, .. }
            | Record::MigrateStart { pid, .. }
            | Record::MigrateEnd { pid, .. }
            | Record::PageFaultStart { pid, .. }
            | Record::PageFaultEnd { pid, .. }
            | Record::QueueEviction { pid, .. }
            | Record::QueueRestore { pid, .. }
            | Record::UnmapFromGpu { pid, .. }
            | Record::ProcessStart { pid, .. }
            | Record::ProcessEnd { pid, .. } => Some(*pid),
            _ => None,
        }
    }
}

impl std::str::FromStr for Record {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Record, ParseError> {
        Record::parse(line)
    }
}

impl fmt::Display for Record {
    /// The record exactly as the kernel writes it, without the final newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x} ", self.id())?;
        match self {
            Record::VmFault { pid, task } => write!(f, "{pid:x}:{task}"),
            Record::ThermalThrottle { bitmask, counter } => write!(f, "{bitmask:x}:{counter:x}"),
            Record::GpuPreReset { seq, reason } | Record::GpuPostReset { seq, reason } => {
                write!(f, "{seq:x}")?;
                match reason {
                    Some(reason) => write!(f, " {reason}"),
                    None => Ok(()),
                }
            }
            Record::MigrateStart {
                ns,
                pid,
                start_page,
                npages,
                from,
                to,
                prefetch_loc,
                preferred_loc,
                trigger,
            } => write!(
                f,
                "{ns} -{pid} @{start_page:x}({npages:x}) {:x}->{:x} {:x}:{:x} {trigger}",
                from.to_raw(),
                to.to_raw(),
                prefetch_loc.to_raw(),
                preferred_loc.to_raw(),
            ),
            Record::MigrateEnd {
                ns,
                pid,
                start_page,
                npages,
                from,
                to,
                trigger,
                error_code,
            } => {
                write!(
                    f,
                    "{ns} -{pid} @{start_page:x}({npages:x}) {:x}->{:x} {trigger}",
                    from.to_raw(),
                    to.to_raw(),
                )?;
                match error_code {
                    Some(code) => write!(f, " {code}"),
                    None => Ok(()),
                }
            }
            Record::PageFaultStart {
                ns,
                pid,
                addr_page,
                node,
                write,
            } => write!(
                f,
                "{ns} -{pid} @{addr_page:x}({node:x}) {}",
                if *write { 'W' } else { 'R' }
            ),
            Record::PageFaultEnd {
                ns,
                pid,
                addr_page,
                node,
                migrated,
            } => write!(
                f,
                "{ns} -{pid} @{addr_page:x}({node:x}) {}",
                if *migrated { 'M' } else { 'U' }
            ),
            Record::QueueEviction {
                ns,
                pid,
                node,
                trigger,
            } => write!(f, "{ns} -{pid} {node:x} {trigger}"),
            Record::QueueRestore {
                ns,
                pid,
                node,
                rescheduled,
            } => {
                write!(f, "{ns} -{pid} {node:x}")?;
                match rescheduled {
                    RestoreMark::Rescheduled => f.write_str(" R"),
                    RestoreMark::Zero => f.write_str(" 0"),
                    RestoreMark::Nul => f.write_str(" \0"),
                    RestoreMark::Absent => Ok(()),
                }
            }
            Record::UnmapFromGpu {
                ns,
                pid,
                start_page,
                npages,
                node,
                trigger,
            } => write!(
                f,
                "{ns} -{pid} @{start_page:x}({npages:x}) {node:x} {trigger}"
            ),
            Record::ProcessStart { pid, task } | Record::ProcessEnd { pid, task } => {
                write!(f, "{pid:x} {task}")
            }
            Record::Unknown { text, .. } => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use kfd_skip::Rng;

    use super::*;

    /// Fills a C `printf` format from `KFD_EVENT_FMT_*` with arguments, the way the kernel's
    /// `vsnprintf` does for the conversions those formats use, so the tests build records from
    /// the header's own format strings rather than from this parser's idea of them.
    fn printf(format: &str, args: &[Arg]) -> String {
        let mut out = String::new();
        let mut args = args.iter();
        let mut chars = format.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch != '%' {
                out.push(ch);
                continue;
            }
            let mut spec = String::new();
            while let Some(&next) = chars.peek() {
                chars.next();
                spec.push(next);
                if next.is_ascii_alphabetic() && next != 'l' {
                    break;
                }
            }
            let arg = args.next().expect("too few arguments for the format");
            match (spec.as_str(), arg) {
                ("d" | "lld", Arg::Int(v)) => out.push_str(&v.to_string()),
                ("x" | "lx" | "llx", Arg::Int(v)) => out.push_str(&format!("{:x}", *v as u64)),
                ("c", Arg::Char(c)) => out.push(*c as char),
                ("s", Arg::Str(s)) => out.push_str(s),
                (spec, arg) => panic!("conversion %{spec} with {arg:?}"),
            }
        }
        assert!(args.next().is_none(), "too many arguments for the format");
        out
    }

    #[derive(Debug)]
    enum Arg {
        Int(i128),
        Char(u8),
        Str(&'static str),
    }

    fn int(v: impl Into<i128>) -> Arg {
        Arg::Int(v.into())
    }

    /// A whole record as `kfd_smi_event_add` writes it: `"%x "` with the id, then the format.
    fn record(id: u32, format: &str, args: &[Arg]) -> String {
        format!("{id:x} {}", printf(format, args))
    }

    /// Every event kind, built from the header's format strings, with what it must decode to.
    fn kernel_records() -> Vec<(String, Record)> {
        vec![
            (
                record(
                    abi::KFD_SMI_EVENT_VMFAULT,
                    abi::KFD_EVENT_FMT_VMFAULT,
                    &[int(0x1f2e), Arg::Str("rocm-bench")],
                ),
                Record::VmFault {
                    pid: 0x1f2e,
                    task: "rocm-bench".into(),
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_THERMAL_THROTTLE,
                    abi::KFD_EVENT_FMT_THERMAL_THROTTLING,
                    &[int(0x8000_0000_0001u64), int(0x2a)],
                ),
                Record::ThermalThrottle {
                    bitmask: 0x8000_0000_0001,
                    counter: 0x2a,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_GPU_PRE_RESET,
                    abi::KFD_EVENT_FMT_UPDATE_GPU_RESET,
                    &[int(0x1b), Arg::Str("job hang")],
                ),
                Record::GpuPreReset {
                    seq: 0x1b,
                    reason: Some("job hang".into()),
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_GPU_POST_RESET,
                    abi::KFD_EVENT_FMT_UPDATE_GPU_RESET,
                    &[int(0x1b), Arg::Str("")],
                ),
                Record::GpuPostReset {
                    seq: 0x1b,
                    reason: Some(String::new()),
                },
            ),
            (
                // Kernels before the reset cause: "%x\n".
                record(abi::KFD_SMI_EVENT_GPU_POST_RESET, "%x\n", &[int(3)]),
                Record::GpuPostReset {
                    seq: 3,
                    reason: None,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_MIGRATE_START,
                    abi::KFD_EVENT_FMT_MIGRATE_START,
                    &[
                        int(123_456_789_012i64),
                        int(4242),
                        int(0x7_f123_4560u64),
                        int(0x200),
                        int(0),
                        int(0x1a2b),
                        int(0x1a2b),
                        int(0xffff_ffffu32),
                        int(abi::KFD_MIGRATE_TRIGGER_PREFETCH),
                    ],
                ),
                Record::MigrateStart {
                    ns: 123_456_789_012,
                    pid: 4242,
                    start_page: 0x7_f123_4560,
                    npages: 0x200,
                    from: Location::System,
                    to: Location::Gpu(crate::GpuId(0x1a2b)),
                    prefetch_loc: Location::Gpu(crate::GpuId(0x1a2b)),
                    preferred_loc: Location::Undefined,
                    trigger: MigrateTrigger::Prefetch,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_MIGRATE_END,
                    abi::KFD_EVENT_FMT_MIGRATE_END,
                    &[
                        int(123_456_999_000i64),
                        int(4242),
                        int(0x7_f123_4560u64),
                        int(0x200),
                        int(0x1a2b),
                        int(0),
                        int(abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU),
                        int(-14),
                    ],
                ),
                Record::MigrateEnd {
                    ns: 123_456_999_000,
                    pid: 4242,
                    start_page: 0x7_f123_4560,
                    npages: 0x200,
                    from: Location::Gpu(crate::GpuId(0x1a2b)),
                    to: Location::System,
                    trigger: MigrateTrigger::PageFaultCpu,
                    error_code: Some(-14),
                },
            ),
            (
                // Kernels before KFD 1.23: no error code.
                record(
                    abi::KFD_SMI_EVENT_MIGRATE_END,
                    "%lld -%d @%lx(%lx) %x->%x %d\n",
                    &[
                        int(5),
                        int(1),
                        int(0x10),
                        int(0x1),
                        int(0),
                        int(0xbeef),
                        int(abi::KFD_MIGRATE_TRIGGER_TTM_EVICTION),
                    ],
                ),
                Record::MigrateEnd {
                    ns: 5,
                    pid: 1,
                    start_page: 0x10,
                    npages: 1,
                    from: Location::System,
                    to: Location::Gpu(crate::GpuId(0xbeef)),
                    trigger: MigrateTrigger::TtmEviction,
                    error_code: None,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_PAGE_FAULT_START,
                    abi::KFD_EVENT_FMT_PAGEFAULT_START,
                    &[
                        int(99),
                        int(77),
                        int(0x7_f000_0123u64),
                        int(0x1a2b),
                        Arg::Char(b'W'),
                    ],
                ),
                Record::PageFaultStart {
                    ns: 99,
                    pid: 77,
                    addr_page: 0x7_f000_0123,
                    node: 0x1a2b,
                    write: true,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_PAGE_FAULT_END,
                    abi::KFD_EVENT_FMT_PAGEFAULT_END,
                    &[
                        int(100),
                        int(77),
                        int(0x7_f000_0123u64),
                        int(0x1a2b),
                        Arg::Char(b'U'),
                    ],
                ),
                Record::PageFaultEnd {
                    ns: 100,
                    pid: 77,
                    addr_page: 0x7_f000_0123,
                    node: 0x1a2b,
                    migrated: false,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_QUEUE_EVICTION,
                    abi::KFD_EVENT_FMT_QUEUE_EVICTION,
                    &[
                        int(1_000),
                        int(8),
                        int(0x3c4d),
                        int(abi::KFD_QUEUE_EVICTION_CRIU_RESTORE),
                    ],
                ),
                Record::QueueEviction {
                    ns: 1_000,
                    pid: 8,
                    node: 0x3c4d,
                    trigger: EvictionTrigger::CriuRestore,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_QUEUE_RESTORE,
                    abi::KFD_EVENT_FMT_QUEUE_RESTORE,
                    &[int(2_000), int(8), int(0x3c4d), Arg::Char(b'R')],
                ),
                Record::QueueRestore {
                    ns: 2_000,
                    pid: 8,
                    node: 0x3c4d,
                    rescheduled: RestoreMark::Rescheduled,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_QUEUE_RESTORE,
                    abi::KFD_EVENT_FMT_QUEUE_RESTORE,
                    &[int(2_000), int(8), int(0x3c4d), Arg::Char(b'0')],
                ),
                Record::QueueRestore {
                    ns: 2_000,
                    pid: 8,
                    node: 0x3c4d,
                    rescheduled: RestoreMark::Zero,
                },
            ),
            (
                // The macro passed the value 0: a NUL byte before the newline.
                record(
                    abi::KFD_SMI_EVENT_QUEUE_RESTORE,
                    abi::KFD_EVENT_FMT_QUEUE_RESTORE,
                    &[int(2_000), int(8), int(0x3c4d), Arg::Char(0)],
                ),
                Record::QueueRestore {
                    ns: 2_000,
                    pid: 8,
                    node: 0x3c4d,
                    rescheduled: RestoreMark::Nul,
                },
            ),
            (
                // Before the macros: "%lld -%d %x\n".
                record(
                    abi::KFD_SMI_EVENT_QUEUE_RESTORE,
                    "%lld -%d %x\n",
                    &[int(2_000), int(8), int(0x3c4d)],
                ),
                Record::QueueRestore {
                    ns: 2_000,
                    pid: 8,
                    node: 0x3c4d,
                    rescheduled: RestoreMark::Absent,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_UNMAP_FROM_GPU,
                    abi::KFD_EVENT_FMT_UNMAP_FROM_GPU,
                    &[
                        int(3_000),
                        int(9),
                        int(0x7_f000_0000u64),
                        int(0x400),
                        int(0x1a2b),
                        int(abi::KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU),
                    ],
                ),
                Record::UnmapFromGpu {
                    ns: 3_000,
                    pid: 9,
                    start_page: 0x7_f000_0000,
                    npages: 0x400,
                    node: 0x1a2b,
                    trigger: UnmapTrigger::UnmapFromCpu,
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_PROCESS_START,
                    abi::KFD_EVENT_FMT_PROCESS,
                    &[int(0x1092), Arg::Str("python3")],
                ),
                Record::ProcessStart {
                    pid: 0x1092,
                    task: "python3".into(),
                },
            ),
            (
                record(
                    abi::KFD_SMI_EVENT_PROCESS_END,
                    abi::KFD_EVENT_FMT_PROCESS,
                    &[int(0x1092), Arg::Str("python3")],
                ),
                Record::ProcessEnd {
                    pid: 0x1092,
                    task: "python3".into(),
                },
            ),
            (
                "e some future event\n".to_owned(),
                Record::Unknown {
                    id: 0xe,
                    text: "some future event".into(),
                },
            ),
        ]
    }

    #[test]
    fn every_kernel_format_decodes() {
        for (line, expected) in kernel_records() {
            assert!(line.ends_with('\n'), "{line:?}");
            assert!(line.len() < abi::KFD_SMI_EVENT_MSG_SIZE, "{line:?}");
            assert_eq!(Record::parse(&line), Ok(expected), "{line:?}");
        }
    }

    #[test]
    fn display_writes_the_kernel_record_back() {
        for (line, event) in kernel_records() {
            assert_eq!(format!("{event}\n"), line);
            assert_eq!(Record::parse(&event.to_string()), Ok(event.clone()));
            assert_eq!(event.to_string().parse::<Record>(), Ok(event));
        }
    }

    #[test]
    fn every_known_kind_is_covered() {
        let ids: std::collections::BTreeSet<u32> =
            kernel_records().iter().map(|(_, e)| e.id()).collect();
        for id in abi::KFD_SMI_EVENT_VMFAULT..=abi::KFD_SMI_EVENT_PROCESS_END {
            assert!(ids.contains(&id), "no record of event {id}");
        }
    }

    #[test]
    fn accessors_report_time_and_process() {
        let records = kernel_records();
        let start = &records[5].1;
        assert_eq!(start.id(), abi::KFD_SMI_EVENT_MIGRATE_START);
        assert_eq!(start.ns(), Some(123_456_789_012));
        assert_eq!(start.pid(), Some(4242));
        let thermal = &records[1].1;
        assert_eq!((thermal.ns(), thermal.pid()), (None, None));
    }

    #[test]
    fn triggers_keep_unknown_values() {
        assert_eq!(MigrateTrigger::from_raw(1), MigrateTrigger::PageFaultGpu);
        assert_eq!(MigrateTrigger::from_raw(7), MigrateTrigger::Other(7));
        assert_eq!(MigrateTrigger::Other(-3).to_raw(), -3);
        assert_eq!(EvictionTrigger::from_raw(3), EvictionTrigger::Suspend);
        assert_eq!(UnmapTrigger::from_raw(1), UnmapTrigger::MmuNotifyMigrate);
        let line = "b 1 -2 @10(1) 1a2b 9";
        let event = Record::parse(line).unwrap();
        assert!(matches!(
            event,
            Record::UnmapFromGpu {
                trigger: UnmapTrigger::Other(9),
                ..
            }
        ));
        assert_eq!(event.to_string(), line);
    }

    #[test]
    fn malformed_records_are_errors_that_say_where() {
        let cases: &[(&str, usize)] = &[
            ("", 0),
            ("\n", 0),
            ("x", 0),
            ("5", 1),
            ("05 1 -2 @10(1) 0->1 0:0 0", 0),
            ("A 1:2", 0),
            ("5 1 -2 @10(1) 0->1 0:0", 22),
            ("5 1 -2 @10(1) 0->1 0:0 0 ", 24),
            ("5 1 -2 @10(1) 0->1 0:0 +0", 23),
            ("5 1 -2 @10(1) 0->1 0:0 -0", 23),
            ("5 01 -2 @10(1) 0->1 0:0 0", 2),
            ("5 1 --2 @10(1) 0->1 0:0 0", 5),
            ("5 1 -2 @1G(1) 0->1 0:0 0", 9),
            ("5 1 -2 @10(1) 0->100000000 0:0 0", 17),
            ("6 1 -2 @10(1) 0->1 0 99999999999", 21),
            ("7 1 -2 @10(1a2b) X", 17),
            ("8 1 -2 @10(1a2b) R", 17),
            ("a 1 -2 1a2b 1", 12),
            ("1 abc", 5),
            ("2 1:", 4),
            ("2 1:2:3", 5),
            ("c 1a2b", 6),
            ("5 99999999999999999999 -2 @10(1) 0->1 0:0 0", 2),
            ("5 1 -2 @10000000000000000(1) 0->1 0:0 0", 8),
        ];
        for &(line, offset) in cases {
            match Record::parse(line) {
                Err(e) => assert_eq!(e.offset, offset, "{line:?}: {e}"),
                Ok(event) => panic!("{line:?} parsed as {event:?}"),
            }
        }
        let e = Record::parse("7 1 -2 @10(1a2b) X").unwrap_err();
        assert_eq!(e.to_string(), "at byte 17: expected 'R' or 'W'");
    }

    /// How many rounds a fuzz test runs: `KFD_FUZZ_ITERS` when set (longer runs, by hand or
    /// nightly), else `quick` — a hundredth of it under Miri, which interprets every step.
    fn fuzz_iters(quick: usize) -> usize {
        let default = if cfg!(miri) { quick / 100 } else { quick };
        std::env::var("KFD_FUZZ_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// Parses `line` and, when it is accepted, checks that it is written back unchanged;
    /// the id of the accepted event.
    fn check_total_and_canonical(line: &str) -> Option<u32> {
        match Record::parse(line) {
            Ok(event) => {
                let expected = line.strip_suffix('\n').unwrap_or(line);
                assert_eq!(event.to_string(), expected, "{line:?} -> {event:?}");
                Some(event.id())
            }
            Err(e) => {
                assert!(e.offset <= line.len(), "{line:?}: {e}");
                None
            }
        }
    }

    #[test]
    fn random_lines_never_panic_and_accepted_ones_round_trip() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        const ALPHABET: &[u8] = b"0123456789abcdefABx -@():>RWMU\0\n\xff";
        let mut accepted = 0;
        for _ in 0..fuzz_iters(20_000) {
            let len = rng.below_usize(48);
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| ALPHABET[rng.below_usize(ALPHABET.len())])
                .collect();
            // Start most lines with a known id so the generator reaches the event formats.
            if rng.below_usize(4) != 0 {
                let id = format!("{:x} ", 1 + rng.below_usize(14));
                bytes.splice(0..0, id.bytes());
            }
            let line = String::from_utf8_lossy(&bytes);
            accepted += usize::from(check_total_and_canonical(&line).is_some());
        }
        // Mostly noise, but some random lines do form records (e.g. `e …`, `3 1`).
        assert!(accepted > 0);
    }

    #[test]
    fn mutated_kernel_records_never_panic_and_accepted_ones_round_trip() {
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        let records: Vec<String> = kernel_records().into_iter().map(|(l, _)| l).collect();
        let mut accepted = 0;
        let mut total = 0;
        let mut kinds = std::collections::BTreeSet::new();
        // Enough rounds, even under Miri, for every kind to survive some mutation.
        for round in 0..fuzz_iters(4_000).max(20 * records.len()) {
            let mut bytes = records[round % records.len()].clone().into_bytes();
            for _ in 0..=rng.below_usize(3) {
                let at = rng.below_usize(bytes.len() + 1);
                let byte = rng.next() as u8;
                match rng.below_usize(4) {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    2 => bytes.insert(at, byte),
                    _ => bytes.truncate(at),
                }
            }
            let line = String::from_utf8_lossy(&bytes);
            if let Some(id) = check_total_and_canonical(&line) {
                accepted += 1;
                kinds.insert(id);
            }
            total += 1;
        }
        // Byte-level damage sometimes leaves a valid record (a digit for a digit, a cut
        // before an optional field), of every kind, and mostly does not.
        assert!(
            accepted > 0 && accepted < total / 2,
            "{accepted} of {total}"
        );
        assert!(kinds.len() >= 13, "accepted kinds {kinds:?}");
    }

    /// Numbers no kernel prints in a field, next to the limits of each field's type.
    const HUGE: &[&str] = &[
        "0",
        "7fffffff",
        "80000000",
        "ffffffff",
        "100000000",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "ffffffffffffffff",
        "10000000000000000",
        "340282366920938463463374607431768211456",
        "-0",
        "--1",
    ];

    /// The byte ranges of the numbers in `line`: runs of hex digits, with a leading `-`.
    fn number_spans(line: &str) -> Vec<(usize, usize)> {
        let bytes = line.as_bytes();
        let mut spans = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at].is_ascii_hexdigit() {
                let start = if at > 0 && bytes[at - 1] == b'-' {
                    at - 1
                } else {
                    at
                };
                let mut end = at;
                while end < bytes.len() && bytes[end].is_ascii_hexdigit() {
                    end += 1;
                }
                spans.push((start, end));
                at = end;
            } else {
                at += 1;
            }
        }
        spans
    }

    /// Every number of every kernel record replaced by each huge or odd value, and by 300
    /// nines: each line parses to an event that writes it back, or to an error inside it.
    #[test]
    #[cfg_attr(miri, ignore = "exhaustive: thousands of lines, natively in a blink")]
    fn huge_numbers_in_every_field_never_panic() {
        let long = "9".repeat(300);
        let values: Vec<&str> = HUGE.iter().copied().chain([long.as_str()]).collect();
        let mut lines = 0;
        for (line, _) in kernel_records() {
            for (start, end) in number_spans(&line) {
                for value in &values {
                    let mutated = format!("{}{value}{}", &line[..start], &line[end..]);
                    check_total_and_canonical(&mutated);
                    lines += 1;
                }
            }
        }
        assert!(lines > 1_000, "{lines}");
    }

    /// Every prefix of every kernel record, as a read that stopped early leaves it.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "exhaustive: every prefix of every record, natively in a blink"
    )]
    fn every_truncation_of_a_kernel_record_never_panics() {
        for (line, event) in kernel_records() {
            for cut in 0..line.len() {
                if line.is_char_boundary(cut) {
                    check_total_and_canonical(&line[..cut]);
                }
            }
            // Only the whole record (with or without its newline) is the whole event.
            assert_eq!(Record::parse(line.trim_end_matches('\n')), Ok(event));
        }
    }

    /// Random bytes of any value, as a misbehaving writer of the fd could send: decoded as
    /// the stream decodes them (invalid UTF-8 replaced), sometimes after a real record's id.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        for _ in 0..fuzz_iters(10_000) {
            let len = rng.below_usize(300);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if rng.below_usize(2) == 0 {
                let id = format!("{:x} ", 1 + rng.below_usize(14));
                bytes.splice(0..0, id.bytes());
            }
            check_total_and_canonical(&String::from_utf8_lossy(&bytes));
        }
    }

    /// Fields swapped between records of different kinds, tokens repeated or dropped: the
    /// structure-level damage byte mutations rarely reach.
    #[test]
    fn records_with_shuffled_fields_never_panic() {
        let mut rng = Rng(0x5eed_0f5a_1170_0042);
        let records: Vec<Vec<String>> = kernel_records()
            .into_iter()
            .map(|(line, _)| {
                line.trim_end()
                    .split(' ')
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        for _ in 0..fuzz_iters(10_000) {
            let mut tokens = records[rng.below_usize(records.len())].clone();
            for _ in 0..=rng.below_usize(3) {
                let donor = &records[rng.below_usize(records.len())];
                let token = donor[rng.below_usize(donor.len())].clone();
                let at = rng.below_usize(tokens.len());
                match rng.below_usize(3) {
                    0 => tokens[at] = token,
                    1 => tokens.insert(at, token),
                    _ if tokens.len() > 1 => {
                        tokens.remove(at);
                    }
                    _ => {}
                }
            }
            check_total_and_canonical(&tokens.join(" "));
        }
    }
}
