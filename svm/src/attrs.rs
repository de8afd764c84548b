//! SVM attributes: the [`SvmAttrs`] builder applied with one SET_ATTR, the GET_ATTR query
//! [`get_attrs`], and [`prefetch`].
//!
//! Unsafe here is confined to forwarding the caller's promise about its memory to
//! [`Kfd::svm_set_attr`].

use std::fmt;

use kfd_ioctl::abi::{self, SvmFlags, kfd_ioctl_svm_attribute};
use kfd_ioctl::{GpuId, Kfd};

use crate::error::{Error, RangeProblem, Result};
use crate::location::{Access, Location};

/// How many attributes an [`AttrList`] holds without touching the heap (the same bound as
/// the stack buffer of [`Kfd::svm_set_attr`], so a whole SET_ATTR of that many attributes
/// allocates nothing).
pub const INLINE_ATTRS: usize = kfd_ioctl::SVM_INLINE_ATTRS;

/// The largest granularity the kernel stores (`log2` pages); larger values are clamped.
pub const MAX_GRANULARITY: u8 = 0x3f;

/// A list of raw `kfd_ioctl_svm_attribute`s: inline up to [`INLINE_ATTRS`] entries, moved to
/// the heap only beyond that.
#[derive(Clone)]
pub struct AttrList {
    inline: [kfd_ioctl_svm_attribute; INLINE_ATTRS],
    len: usize,
    /// Every entry once the list outgrew `inline` (empty, and unallocated, until then).
    spilled: Vec<kfd_ioctl_svm_attribute>,
}

impl Default for AttrList {
    fn default() -> Self {
        AttrList::new()
    }
}

impl AttrList {
    /// An empty list (no allocation).
    pub const fn new() -> AttrList {
        AttrList {
            inline: [kfd_ioctl_svm_attribute {
                r#type: 0,
                value: 0,
            }; INLINE_ATTRS],
            len: 0,
            spilled: Vec::new(),
        }
    }

    /// Appends one attribute; the first one past [`INLINE_ATTRS`] moves the list to the heap.
    pub fn push(&mut self, attr_type: u32, value: u32) {
        let attr = kfd_ioctl_svm_attribute {
            r#type: attr_type,
            value,
        };
        if self.len < INLINE_ATTRS {
            self.inline[self.len] = attr;
        } else {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline);
            }
            self.spilled.push(attr);
        }
        self.len += 1;
    }

    /// The attributes, in order.
    pub fn as_slice(&self) -> &[kfd_ioctl_svm_attribute] {
        if self.len > INLINE_ATTRS {
            &self.spilled
        } else {
            &self.inline[..self.len]
        }
    }

    /// The attributes, in order, for the kernel to overwrite (GET_ATTR).
    pub fn as_mut_slice(&mut self) -> &mut [kfd_ioctl_svm_attribute] {
        if self.len > INLINE_ATTRS {
            &mut self.spilled
        } else {
            &mut self.inline[..self.len]
        }
    }

    /// How many attributes there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the list still lives inline (it has at most [`INLINE_ATTRS`] entries).
    pub fn is_inline(&self) -> bool {
        self.len <= INLINE_ATTRS
    }
}

impl fmt::Debug for AttrList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.as_slice().iter().map(|a| SvmAttr::from_raw(*a)))
            .finish()
    }
}

impl PartialEq for AttrList {
    fn eq(&self, other: &AttrList) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for AttrList {}

/// One SVM attribute, decoded. `Debug` shows GPU ids in hex (`Access(0x7396, Access)`);
/// `Display` reads as words (`gpu 0x7396: access`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SvmAttr {
    /// `KFD_IOCTL_SVM_ATTR_PREFERRED_LOC`: where the kernel should keep the pages.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_PREFERRED_LOC")]
    PreferredLocation(Location),
    /// `KFD_IOCTL_SVM_ATTR_PREFETCH_LOC`: migrate the pages there now.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_PREFETCH_LOC")]
    PrefetchLocation(Location),
    /// `KFD_IOCTL_SVM_ATTR_ACCESS*` / `NO_ACCESS`: what the GPU with this `gpu_id` may do.
    Access(GpuId, Access),
    /// `KFD_IOCTL_SVM_ATTR_SET_FLAGS`: flags to set (in a GET answer: set on every page).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_SET_FLAGS")]
    SetFlags(SvmFlags),
    /// `KFD_IOCTL_SVM_ATTR_CLR_FLAGS`: flags to clear (in a GET answer: clear on every page).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_CLR_FLAGS")]
    ClearFlags(SvmFlags),
    /// `KFD_IOCTL_SVM_ATTR_GRANULARITY`: `log2` of the pages migrated and mapped together.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_GRANULARITY")]
    Granularity(u32),
    /// An attribute type this crate does not know.
    Unknown {
        /// The raw type.
        attr_type: u32,
        /// The raw value.
        value: u32,
    },
}

/// SVM flags by their C names without the prefix, `HOST_ACCESS|COHERENT`, or `none`.
#[derive(Debug, Clone, Copy)]
pub struct FlagNames(pub SvmFlags);

impl fmt::Display for FlagNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, _) in self.0.iter_names() {
            if !first {
                f.write_str("|")?;
            }
            first = false;
            f.write_str(name)?;
        }
        let unknown = self.0.bits() & !SvmFlags::all().bits();
        if unknown != 0 {
            if !first {
                f.write_str("|")?;
            }
            first = false;
            write!(f, "{unknown:#x}")?;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SvmAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SvmAttr::PreferredLocation(l) => f.debug_tuple("PreferredLocation").field(l).finish(),
            SvmAttr::PrefetchLocation(l) => f.debug_tuple("PrefetchLocation").field(l).finish(),
            SvmAttr::Access(gpu, a) => f.debug_tuple("Access").field(gpu).field(a).finish(),
            SvmAttr::SetFlags(flags) => f.debug_tuple("SetFlags").field(flags).finish(),
            SvmAttr::ClearFlags(flags) => f.debug_tuple("ClearFlags").field(flags).finish(),
            SvmAttr::Granularity(g) => f.debug_tuple("Granularity").field(g).finish(),
            SvmAttr::Unknown { attr_type, value } => f
                .debug_struct("Unknown")
                .field("attr_type", attr_type)
                .field("value", &format_args!("{value:#x}"))
                .finish(),
        }
    }
}

impl fmt::Display for SvmAttr {
    /// What a person reads: `preferred location gpu 0x7396`, `gpu 0x7396: access`,
    /// `set flags HOST_ACCESS|COHERENT`, `granularity 9 (512 pages)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SvmAttr::PreferredLocation(l) => write!(f, "preferred location {l}"),
            SvmAttr::PrefetchLocation(l) => write!(f, "prefetch location {l}"),
            SvmAttr::Access(gpu, a) => write!(f, "gpu {gpu}: {a}"),
            SvmAttr::SetFlags(flags) => write!(f, "set flags {}", FlagNames(*flags)),
            SvmAttr::ClearFlags(flags) => write!(f, "clear flags {}", FlagNames(*flags)),
            SvmAttr::Granularity(g) if *g < 64 => {
                write!(f, "granularity {g} ({} pages)", 1u64 << g)
            }
            SvmAttr::Granularity(g) => write!(f, "granularity {g}"),
            SvmAttr::Unknown { attr_type, value } => {
                write!(f, "attribute type {attr_type} = {value:#x}")
            }
        }
    }
}

impl SvmAttr {
    /// Decodes a raw attribute.
    pub fn from_raw(raw: kfd_ioctl_svm_attribute) -> SvmAttr {
        let value = raw.value;
        match raw.r#type {
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => {
                SvmAttr::PreferredLocation(Location::from_raw(value))
            }
            abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => {
                SvmAttr::PrefetchLocation(Location::from_raw(value))
            }
            abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS => {
                SvmAttr::SetFlags(SvmFlags::from_bits_retain(value))
            }
            abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS => {
                SvmAttr::ClearFlags(SvmFlags::from_bits_retain(value))
            }
            abi::KFD_IOCTL_SVM_ATTR_GRANULARITY => SvmAttr::Granularity(value),
            attr_type => match Access::from_attr_type(attr_type) {
                Some(access) => SvmAttr::Access(GpuId(value), access),
                None => SvmAttr::Unknown { attr_type, value },
            },
        }
    }

    /// Encodes as a raw attribute.
    pub fn to_raw(self) -> kfd_ioctl_svm_attribute {
        let (r#type, value) = match self {
            SvmAttr::PreferredLocation(l) => (abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, l.to_raw()),
            SvmAttr::PrefetchLocation(l) => (abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, l.to_raw()),
            SvmAttr::Access(gpu_id, access) => (access.attr_type(), gpu_id.get()),
            SvmAttr::SetFlags(f) => (abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, f.bits()),
            SvmAttr::ClearFlags(f) => (abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, f.bits()),
            SvmAttr::Granularity(g) => (abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, g),
            SvmAttr::Unknown { attr_type, value } => (attr_type, value),
        };
        kfd_ioctl_svm_attribute { r#type, value }
    }
}

/// The attributes to give an SVM range, built up call by call and applied in one SET_ATTR.
///
/// Each kind of attribute appears at most once in the encoding, so a later call replaces an
/// earlier one (preferred/prefetch location, granularity, the access of one GPU) exactly as the
/// kernel would if both were sent (it applies the array in order, later entries winning). Flags
/// keep "the last call wins" per bit: [`SvmAttrs::set_flags`] removes those bits from the
/// pending clear mask and [`SvmAttrs::clear_flags`] from the pending set mask, so the two masks
/// stay disjoint and their order does not matter. Entries appear in the order of the first call
/// of their kind.
///
/// Up to [`INLINE_ATTRS`] attributes (all five scalar kinds plus 27 GPUs) neither building nor
/// applying allocates.
///
/// ```
/// use kfd_ioctl::abi::SvmFlags;
/// use kfd_svm::{Access, GpuId, Location, SvmAttr, SvmAttrs};
///
/// let gpu = GpuId(0x1a2b);
/// let attrs = SvmAttrs::new()
///     .preferred_location(Location::Gpu(gpu))
///     .access(gpu, Access::Access)
///     .set_flags(SvmFlags::GPU_RO)
///     .granularity(9);
/// assert_eq!(
///     attrs.iter().collect::<Vec<_>>(),
///     [
///         SvmAttr::PreferredLocation(Location::Gpu(gpu)),
///         SvmAttr::Access(gpu, Access::Access),
///         SvmAttr::SetFlags(SvmFlags::GPU_RO),
///         SvmAttr::Granularity(9),
///     ]
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SvmAttrs {
    list: AttrList,
}

impl SvmAttrs {
    /// No attributes: applying this registers the range with the kernel's defaults.
    pub const fn new() -> SvmAttrs {
        SvmAttrs {
            list: AttrList::new(),
        }
    }

    /// Overwrites the first entry that `matches` with `(attr_type, value)`, or appends one.
    fn upsert(
        &mut self,
        matches: impl Fn(&kfd_ioctl_svm_attribute) -> bool,
        attr_type: u32,
        value: u32,
    ) {
        match self.list.as_mut_slice().iter_mut().find(|a| matches(a)) {
            Some(entry) => {
                entry.r#type = attr_type;
                entry.value = value;
            }
            None => self.list.push(attr_type, value),
        }
    }

    fn set_scalar(&mut self, attr_type: u32, value: u32) {
        self.upsert(|a| a.r#type == attr_type, attr_type, value);
    }

    fn flags_entry(&mut self, attr_type: u32) -> Option<&mut kfd_ioctl_svm_attribute> {
        self.list
            .as_mut_slice()
            .iter_mut()
            .find(|a| a.r#type == attr_type)
    }

    /// Where the kernel should keep the pages: a GPU's VRAM, system memory, or
    /// [`Location::Undefined`] for no preference (the default).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_PREFERRED_LOC")]
    pub fn preferred_location(mut self, location: Location) -> SvmAttrs {
        self.set_scalar(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, location.to_raw());
        self
    }

    /// Migrate the pages to `location` as part of the SET_ATTR (the kernel refuses
    /// [`Location::Undefined`] with `EINVAL`). A prefetch is never "already done": sending it
    /// again re-checks every page.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_PREFETCH_LOC")]
    pub fn prefetch_location(mut self, location: Location) -> SvmAttrs {
        self.set_scalar(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, location.to_raw());
        self
    }

    /// What the GPU `gpu_id` may do with the range. Replaces an earlier access of the same GPU.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_ACCESS")]
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE")]
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_NO_ACCESS")]
    pub fn access(mut self, gpu_id: impl Into<GpuId>, access: Access) -> SvmAttrs {
        let gpu_id = gpu_id.into().get();
        self.upsert(
            |a| Access::from_attr_type(a.r#type).is_some() && a.value == gpu_id,
            access.attr_type(),
            gpu_id,
        );
        self
    }

    /// Sets `flags` (`flags |= v` in the kernel); cancels a pending clear of the same bits.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_SET_FLAGS")]
    pub fn set_flags(mut self, flags: SvmFlags) -> SvmAttrs {
        if let Some(clear) = self.flags_entry(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS) {
            clear.value &= !flags.bits();
        }
        match self.flags_entry(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS) {
            Some(set) => set.value |= flags.bits(),
            None => self
                .list
                .push(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, flags.bits()),
        }
        self
    }

    /// Clears `flags` (`flags &= ~v` in the kernel); cancels a pending set of the same bits.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_CLR_FLAGS")]
    pub fn clear_flags(mut self, flags: SvmFlags) -> SvmAttrs {
        if let Some(set) = self.flags_entry(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS) {
            set.value &= !flags.bits();
        }
        match self.flags_entry(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS) {
            Some(clear) => clear.value |= flags.bits(),
            None => self
                .list
                .push(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, flags.bits()),
        }
        self
    }

    /// The migration and mapping granule: `2^log2_pages` pages (9 = 2 MiB with 4 KiB pages, the
    /// kernel's default).
    ///
    /// The kernel stores `min(value, 0x3F)`; this clamps the same way, to
    /// [`MAX_GRANULARITY`], so what is sent is what a GET reports back.
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_GRANULARITY")]
    pub fn granularity(mut self, log2_pages: u8) -> SvmAttrs {
        let value = log2_pages.min(MAX_GRANULARITY);
        self.set_scalar(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, u32::from(value));
        self
    }

    /// These attributes followed by `later`'s, later ones winning as if both had been applied
    /// in turn: the attributes a range has after applying `self` and then `later`.
    pub fn merge(self, later: &SvmAttrs) -> SvmAttrs {
        later.iter().fold(self, SvmAttrs::with)
    }

    /// Adds one decoded attribute (an unknown one is appended as is).
    pub fn with(self, attr: SvmAttr) -> SvmAttrs {
        match attr {
            SvmAttr::PreferredLocation(l) => self.preferred_location(l),
            SvmAttr::PrefetchLocation(l) => self.prefetch_location(l),
            SvmAttr::Access(gpu_id, access) => self.access(gpu_id, access),
            SvmAttr::SetFlags(f) => self.set_flags(f),
            SvmAttr::ClearFlags(f) => self.clear_flags(f),
            SvmAttr::Granularity(g) => self.granularity(u8::try_from(g).unwrap_or(u8::MAX)),
            SvmAttr::Unknown { attr_type, value } => {
                let mut this = self;
                this.list.push(attr_type, value);
                this
            }
        }
    }

    /// The encoded attributes, in the order they will be sent.
    pub fn as_raw(&self) -> &[kfd_ioctl_svm_attribute] {
        self.list.as_slice()
    }

    /// The encoded attribute list.
    pub fn list(&self) -> &AttrList {
        &self.list
    }

    /// The attributes, decoded, in the order they will be sent.
    pub fn iter(&self) -> impl Iterator<Item = SvmAttr> + '_ {
        self.as_raw().iter().map(|a| SvmAttr::from_raw(*a))
    }

    /// How many attributes will be sent.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether no attribute will be sent.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The preferred location to be set, if any.
    pub fn preferred(&self) -> Option<Location> {
        self.iter().find_map(|a| match a {
            SvmAttr::PreferredLocation(l) => Some(l),
            _ => None,
        })
    }

    /// The prefetch location to be set, if any.
    pub fn prefetch(&self) -> Option<Location> {
        self.iter().find_map(|a| match a {
            SvmAttr::PrefetchLocation(l) => Some(l),
            _ => None,
        })
    }

    /// The access to be given to `gpu_id`, if any.
    pub fn access_of(&self, gpu_id: impl Into<GpuId>) -> Option<Access> {
        let gpu_id = gpu_id.into();
        self.iter().find_map(|a| match a {
            SvmAttr::Access(g, access) if g == gpu_id => Some(access),
            _ => None,
        })
    }

    /// The flags to be set and the flags to be cleared (disjoint).
    pub fn flags(&self) -> (SvmFlags, SvmFlags) {
        self.iter().fold(
            (SvmFlags::empty(), SvmFlags::empty()),
            |(set, clear), a| match a {
                SvmAttr::SetFlags(f) => (set | f, clear),
                SvmAttr::ClearFlags(f) => (set, clear | f),
                _ => (set, clear),
            },
        )
    }

    /// The granularity to be set, if any.
    pub fn granularity_value(&self) -> Option<u8> {
        self.iter().find_map(|a| match a {
            SvmAttr::Granularity(g) => u8::try_from(g).ok(),
            _ => None,
        })
    }

    /// `SET_ATTR` of these attributes on `[start, start + size)` (bytes), in one ioctl.
    ///
    /// The range must be page aligned, with non-zero start and size; otherwise this fails with
    /// [`Error::Range`] before any ioctl (the kernel would say `EINVAL`). Everything else is the
    /// kernel's to judge: the range must lie in mapped VMAs (`EFAULT`), overlap no GPU-mapped
    /// buffer object (`EADDRINUSE`), name only SVM-capable GPUs of the process (`EINVAL`).
    /// With no attributes it only registers the range with the defaults.
    ///
    /// Migration and mapping happen after the kernel committed the attributes, so an error
    /// from them (`EAGAIN`: retry; `ENOMEM`, `EFAULT`) leaves the new attributes in place.
    ///
    /// # Safety
    /// The range is this process's memory, and registering it lets the GPUs named here (and,
    /// with XNACK on, every GPU of the process) read and write it and the kernel migrate it.
    /// The caller must own the range for as long as it stays registered (until it is unmapped)
    /// and hold no Rust reference into it while a GPU may write it.
    #[doc(alias = "hsaKmtSVMSetAttr")]
    pub unsafe fn apply(&self, kfd: &Kfd, start: u64, size: u64) -> Result<()> {
        check_range(start, size)?;
        // SAFETY: the caller upholds the contract of `svm_set_attr`, which is this function's.
        unsafe { kfd.svm_set_attr(start, size, self.as_raw()) }?;
        Ok(())
    }
}

/// The page-aligned range that covers `[start, start + size)`: the start rounded down and the
/// end rounded up to whole pages, as ROCr takes a range in `hsa_amd_svm_attributes_set`
/// (`Runtime::SetSvmAttrib` aligns the pointer down and the end up to 4 KiB before the SVM
/// ioctl). Returns `(start, size)` in bytes.
///
/// # Errors
/// [`Error::Range`] for a zero size or start, or a range that wraps.
pub fn page_range(start: u64, size: u64) -> Result<(u64, u64)> {
    let page = rustix::param::page_size() as u64;
    let problem = |problem| Error::Range {
        start,
        size,
        problem,
    };
    if size == 0 {
        return Err(problem(RangeProblem::ZeroSize));
    }
    let base = start - start % page;
    if base == 0 {
        return Err(problem(RangeProblem::ZeroStart));
    }
    let end = start
        .checked_add(size)
        .and_then(|end| end.checked_next_multiple_of(page))
        .ok_or(problem(RangeProblem::SizeUnaligned))?;
    Ok((base, end - base))
}

impl SvmAttrs {
    /// The attributes a range has before anyone sets them (`svm_range_new`): no preferred
    /// location, `HOST_ACCESS | COHERENT` and no other flag, granularity 9 (2 MiB), and for
    /// each of `gpus` no access with XNACK off, access with it on (the kernel then lets
    /// every GPU fault pages in). A SET cannot make the prefetch location undefined again
    /// (`EINVAL`): these attributes prefetch to system memory, which moves the pages back.
    pub fn defaults(gpus: &[impl Into<GpuId> + Copy], xnack: bool) -> SvmAttrs {
        let default_flags = SvmFlags::HOST_ACCESS | SvmFlags::COHERENT;
        let access = if xnack {
            Access::Access
        } else {
            Access::NoAccess
        };
        gpus.iter().fold(
            SvmAttrs::new()
                .preferred_location(Location::Undefined)
                .prefetch_location(Location::System)
                .set_flags(default_flags)
                .clear_flags(SvmFlags::from_bits_retain(!default_flags.bits()))
                .granularity(9),
            |attrs, &gpu| attrs.access(gpu, access),
        )
    }

    /// [`SvmAttrs::apply`] on memory of the caller's that need not be page aligned (a
    /// `malloc` block): the range is widened to whole pages first ([`page_range`], as ROCr
    /// does). Returns the range registered, `(start, size)`.
    ///
    /// The widened pages hold whatever else lives there (other heap blocks): they get the
    /// attributes too, and the GPU may migrate them. `free` of a small heap block does not
    /// unmap its pages, so the kernel keeps them registered: call [`unregister`] on the range
    /// this returns before freeing, or let the library own the memory ([`crate::SvmBuffer`],
    /// no `unsafe` needed).
    ///
    /// # Errors
    /// [`Error::Range`] for a zero start or size, or a wrapping range; then those of
    /// [`SvmAttrs::apply`].
    ///
    /// # Safety
    /// As [`SvmAttrs::apply`], for the whole widened range: every byte of its pages is this
    /// process's memory, which the GPUs may read and write and the kernel migrate while it
    /// stays registered; no Rust reference into it may be live while a GPU may write it.
    #[doc(alias = "hsa_amd_svm_attributes_set")]
    pub unsafe fn apply_rounded(&self, kfd: &Kfd, start: u64, size: u64) -> Result<(u64, u64)> {
        let (start, size) = page_range(start, size)?;
        // SAFETY: the caller's guarantee covers the widened range.
        unsafe { self.apply(kfd, start, size) }?;
        Ok((start, size))
    }
}

/// Gives `[start, start + size)` (page aligned) back its default attributes
/// ([`SvmAttrs::defaults`] for `gpus` under the process's XNACK mode): the kernel has no
/// unregister, short of unmapping the memory, so this is the explicit end of an SVM range
/// over memory the caller keeps. The pages return to system memory; no GPU keeps access
/// (with XNACK off).
///
/// # Errors
/// Those of [`Kfd::xnack_mode`] and [`SvmAttrs::apply`].
///
/// # Safety
/// As [`SvmAttrs::apply`]: the range is this process's memory (the prefetch to system
/// memory migrates it back).
pub unsafe fn unregister(
    kfd: &Kfd,
    start: u64,
    size: u64,
    gpus: &[impl Into<GpuId> + Copy],
) -> Result<()> {
    let xnack = kfd.xnack_mode()?;
    // SAFETY: the caller's guarantee, passed on.
    unsafe { SvmAttrs::defaults(gpus, xnack).apply(kfd, start, size) }
}

impl FromIterator<SvmAttr> for SvmAttrs {
    fn from_iter<I: IntoIterator<Item = SvmAttr>>(iter: I) -> SvmAttrs {
        iter.into_iter().fold(SvmAttrs::new(), SvmAttrs::with)
    }
}

/// Refuses what the kernel refuses with `EINVAL` before looking at the range: a zero start
/// or size, or either not page aligned.
pub fn check_range(start: u64, size: u64) -> Result<()> {
    let page = rustix::param::page_size() as u64;
    let problem = if size == 0 {
        RangeProblem::ZeroSize
    } else if start == 0 {
        RangeProblem::ZeroStart
    } else if !start.is_multiple_of(page) {
        RangeProblem::StartUnaligned
    } else if !size.is_multiple_of(page) {
        RangeProblem::SizeUnaligned
    } else {
        return Ok(());
    };
    Err(Error::Range {
        start,
        size,
        problem,
    })
}

/// What GET_ATTR reports about a range: the intersection over the SVM ranges that overlap it.
///
/// Parts of the queried range that no SVM range covers do not count; a query that touches no
/// SVM range reports the defaults (both locations undefined, flags `HOST_ACCESS | COHERENT`,
/// granularity 9, access `Access` for every GPU with XNACK on and `NoAccess` with it off).
#[derive(Clone, PartialEq, Eq)]
pub struct SvmRangeInfo {
    /// The preferred location, or [`Location::Undefined`] when the ranges differ (or any has
    /// none).
    pub preferred_location: Location,
    /// The prefetch location, or [`Location::Undefined`] when the ranges differ.
    pub prefetch_location: Location,
    /// The flags set on every range (the kernel's AND).
    pub flags: SvmFlags,
    /// The flags clear on every range (the kernel's `~OR`); `None` on KFD before 1.6, which
    /// cannot answer that query.
    pub cleared_flags: Option<SvmFlags>,
    /// The smallest granularity of the ranges (`log2` pages).
    pub granularity: u8,
    /// The access of each queried GPU, in query order: [`Access::Access`] if every range
    /// grants it, else [`Access::AccessInPlace`] if every range grants that, else
    /// [`Access::NoAccess`].
    pub access: Vec<(GpuId, Access)>,
}

impl fmt::Debug for SvmRangeInfo {
    /// With the GPU ids of the access list in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SvmRangeInfo")
            .field("preferred_location", &self.preferred_location)
            .field("prefetch_location", &self.prefetch_location)
            .field("flags", &self.flags)
            .field("cleared_flags", &self.cleared_flags)
            .field("granularity", &self.granularity)
            .field("access", &self.access)
            .finish()
    }
}

impl SvmRangeInfo {
    /// The reported access of `gpu_id`, if it was queried.
    pub fn access_of(&self, gpu_id: impl Into<GpuId>) -> Option<Access> {
        let gpu_id = gpu_id.into();
        self.access
            .iter()
            .find_map(|&(g, access)| (g == gpu_id).then_some(access))
    }
}

/// The first KFD minor whose GET_ATTR answers a CLR_FLAGS query.
const GET_CLR_FLAGS_SINCE: u32 = 6;

/// `GET_ATTR` of every attribute of `[start, start + size)`, with an access query for each
/// GPU of `gpus`, in one ioctl.
///
/// The range rules are those of [`SvmAttrs::apply`] (checked here the same way); every
/// `gpu_id` must belong to the process (else `EINVAL`).
///
/// ```no_run
/// use kfd_ioctl::Kfd;
/// use kfd_svm::get_attrs;
///
/// let kfd = Kfd::open()?;
/// # let (start, size, gpu) = (0x7f00_0000_0000u64, 2u64 << 20, kfd_ioctl::GpuId(0x1a2b));
/// let info = get_attrs(&kfd, start, size, &[gpu])?;
/// println!("preferred {} granularity 2^{} pages", info.preferred_location, info.granularity);
/// # Ok::<(), kfd_svm::Error>(())
/// ```
#[doc(alias = "hsaKmtSVMGetAttr")]
pub fn get_attrs(
    kfd: &Kfd,
    start: u64,
    size: u64,
    gpus: &[impl Into<GpuId> + Copy],
) -> Result<SvmRangeInfo> {
    check_range(start, size)?;
    let ask_cleared = kfd.version().minor >= GET_CLR_FLAGS_SINCE;
    let mut query = AttrList::new();
    query.push(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0);
    query.push(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0);
    query.push(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0);
    query.push(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
    if ask_cleared {
        query.push(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0);
    }
    let scalars = query.len();
    for &gpu_id in gpus {
        query.push(abi::KFD_IOCTL_SVM_ATTR_ACCESS, gpu_id.into().get());
    }
    kfd.svm_get_attr(start, size, query.as_mut_slice())?;
    decode_answer(query.as_slice(), scalars)
}

/// Decodes the answer to the query [`get_attrs`] sends: four or five scalar queries, then
/// one access query per GPU.
fn decode_answer(answer: &[kfd_ioctl_svm_attribute], scalars: usize) -> Result<SvmRangeInfo> {
    let value = |i: usize| answer[i].value;
    let granularity = u8::try_from(value(3)).map_err(|_| Error::UnexpectedAttr {
        attr_type: answer[3].r#type,
        value: value(3),
        query: "a GRANULARITY query",
    })?;
    let access = answer[scalars..]
        .iter()
        .map(|a| match Access::from_attr_type(a.r#type) {
            Some(access) => Ok((GpuId(a.value), access)),
            None => Err(Error::UnexpectedAttr {
                attr_type: a.r#type,
                value: a.value,
                query: "an ACCESS query",
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SvmRangeInfo {
        preferred_location: Location::from_raw(value(0)),
        prefetch_location: Location::from_raw(value(1)),
        flags: SvmFlags::from_bits_retain(value(2)),
        cleared_flags: (scalars > 4).then(|| SvmFlags::from_bits_retain(value(4))),
        granularity,
        access,
    })
}

/// Migrates `[start, start + size)` to `to` now: a SET_ATTR of `PREFETCH_LOC` alone.
///
/// The kernel migrates in granularity-sized chunks and emits SMI `MIGRATE_START`/`MIGRATE_END`
/// with trigger `PREFETCH`; pages already at `to` stay. [`Location::Undefined`] is refused
/// (`EINVAL`).
///
/// # Safety
/// As for [`SvmAttrs::apply`]: a prefetch registers any part of the range that was not yet an
/// SVM range, which hands it to the GPUs.
pub unsafe fn prefetch(kfd: &Kfd, start: u64, size: u64, to: Location) -> Result<()> {
    let attrs = SvmAttrs::new().prefetch_location(to);
    // SAFETY: the caller upholds `apply`'s contract, which is this function's.
    unsafe { attrs.apply(kfd, start, size) }
}

#[cfg(test)]
mod display_tests {
    use super::*;

    #[test]
    fn attributes_read_as_words_with_hex_gpu_ids() {
        let shown: Vec<String> = [
            SvmAttr::PreferredLocation(Location::Gpu(GpuId(29590))),
            SvmAttr::Access(GpuId(29590), Access::AccessInPlace),
            SvmAttr::SetFlags(SvmFlags::HOST_ACCESS | SvmFlags::COHERENT),
            SvmAttr::ClearFlags(SvmFlags::empty()),
            SvmAttr::Granularity(9),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            format!("{:?}", SvmAttr::Access(GpuId(29590), Access::Access)),
            "Access(0x7396, Access)"
        );
        assert_eq!(
            format!(
                "{:?}",
                SvmAttr::PrefetchLocation(Location::Gpu(GpuId(29590)))
            ),
            "PrefetchLocation(Gpu(0x7396))"
        );
        assert_eq!(
            shown,
            [
                "preferred location gpu 0x7396",
                "gpu 0x7396: access in place",
                "set flags HOST_ACCESS|COHERENT",
                "clear flags none",
                "granularity 9 (512 pages)",
            ]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(attr_type: u32, value: u32) -> kfd_ioctl_svm_attribute {
        kfd_ioctl_svm_attribute {
            r#type: attr_type,
            value,
        }
    }

    #[test]
    fn every_kind_encodes_to_its_abi_type_and_value() {
        let attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(GpuId(0x1a2b)))
            .prefetch_location(Location::System)
            .access(GpuId(0x1a2b), Access::Access)
            .access(GpuId(0x3c4d), Access::AccessInPlace)
            .access(GpuId(0x5e6f), Access::NoAccess)
            .set_flags(SvmFlags::GPU_RO | SvmFlags::GPU_EXEC)
            .clear_flags(SvmFlags::COHERENT)
            .granularity(4);
        assert_eq!(
            attrs.as_raw(),
            [
                raw(0, 0x1a2b),
                raw(1, 0),
                raw(2, 0x1a2b),
                raw(3, 0x3c4d),
                raw(4, 0x5e6f),
                raw(5, 0x18),
                raw(6, 0x2),
                raw(7, 4),
            ]
        );
        assert!(attrs.list().is_inline());
    }

    #[test]
    fn later_calls_replace_earlier_ones_in_place() {
        let attrs = SvmAttrs::new()
            .granularity(9)
            .preferred_location(Location::System)
            .access(7, Access::Access)
            .access(8, Access::Access)
            .preferred_location(Location::Undefined)
            .access(7, Access::NoAccess)
            .granularity(0);
        assert_eq!(
            attrs.as_raw(),
            [raw(7, 0), raw(0, 0xffff_ffff), raw(4, 7), raw(2, 8)]
        );
        assert_eq!(attrs.access_of(7), Some(Access::NoAccess));
        assert_eq!(attrs.preferred(), Some(Location::Undefined));
        assert_eq!(attrs.granularity_value(), Some(0));
    }

    #[test]
    fn flags_follow_the_last_call_per_bit() {
        let a = SvmFlags::GPU_RO;
        let b = SvmFlags::GPU_EXEC;
        // set A, clear A, set A: A ends up set, as three ioctls in turn would leave it.
        let attrs = SvmAttrs::new().set_flags(a).clear_flags(a).set_flags(a | b);
        assert_eq!(attrs.flags(), (a | b, SvmFlags::empty()));
        assert_eq!(attrs.as_raw(), [raw(5, 0x18), raw(6, 0)]);
        let attrs = attrs.clear_flags(b);
        assert_eq!(attrs.flags(), (a, b));
        // Unknown bits travel untouched (the kernel does not validate flags).
        let odd = SvmFlags::from_bits_retain(0x8000_0000);
        assert_eq!(
            SvmAttrs::new().set_flags(odd).as_raw(),
            [raw(5, 0x8000_0000)]
        );
    }

    #[test]
    fn granularity_is_clamped_like_the_kernel() {
        assert_eq!(SvmAttrs::new().granularity(0x3f).as_raw(), [raw(7, 0x3f)]);
        assert_eq!(SvmAttrs::new().granularity(0x40).as_raw(), [raw(7, 0x3f)]);
        assert_eq!(
            SvmAttrs::new().granularity(u8::MAX).as_raw(),
            [raw(7, 0x3f)]
        );
    }

    #[test]
    fn merge_is_applying_one_after_the_other() {
        let first = SvmAttrs::new()
            .preferred_location(Location::Gpu(GpuId(1)))
            .access(1, Access::Access)
            .set_flags(SvmFlags::GPU_RO);
        let second = SvmAttrs::new()
            .access(1, Access::AccessInPlace)
            .access(2, Access::Access)
            .clear_flags(SvmFlags::GPU_RO)
            .granularity(3);
        let merged = first.merge(&second);
        assert_eq!(merged.preferred(), Some(Location::Gpu(GpuId(1))));
        assert_eq!(merged.access_of(1), Some(Access::AccessInPlace));
        assert_eq!(merged.access_of(2), Some(Access::Access));
        assert_eq!(merged.flags(), (SvmFlags::empty(), SvmFlags::GPU_RO));
        assert_eq!(merged.granularity_value(), Some(3));
    }

    #[test]
    fn decoding_inverts_encoding() {
        for attr in [
            SvmAttr::PreferredLocation(Location::Gpu(GpuId(3))),
            SvmAttr::PrefetchLocation(Location::Undefined),
            SvmAttr::Access(GpuId(9), Access::AccessInPlace),
            SvmAttr::SetFlags(SvmFlags::HOST_ACCESS),
            SvmAttr::ClearFlags(SvmFlags::from_bits_retain(!0)),
            SvmAttr::Granularity(21),
            SvmAttr::Unknown {
                attr_type: 8,
                value: 5,
            },
        ] {
            assert_eq!(SvmAttr::from_raw(attr.to_raw()), attr);
        }
        let rebuilt: SvmAttrs = SvmAttrs::new()
            .access(4, Access::Access)
            .set_flags(SvmFlags::COHERENT)
            .iter()
            .collect();
        assert_eq!(rebuilt.as_raw(), [raw(2, 4), raw(5, 2)]);
    }

    #[test]
    fn the_list_spills_to_the_heap_only_past_the_inline_capacity() {
        let mut attrs = SvmAttrs::new();
        for gpu in 1..=INLINE_ATTRS as u32 {
            attrs = attrs.access(gpu, Access::Access);
        }
        assert!(attrs.list().is_inline());
        assert_eq!(attrs.len(), INLINE_ATTRS);
        let attrs = attrs.access(1000, Access::NoAccess);
        assert!(!attrs.list().is_inline());
        assert_eq!(attrs.len(), INLINE_ATTRS + 1);
        assert_eq!(attrs.as_raw()[0], raw(2, 1));
        assert_eq!(attrs.as_raw()[INLINE_ATTRS], raw(4, 1000));
        // Replacing inside a spilled list edits the heap copy.
        let attrs = attrs.access(1, Access::AccessInPlace);
        assert_eq!(attrs.as_raw()[0], raw(3, 1));
    }

    #[test]
    fn ranges_the_kernel_refuses_with_einval_are_refused_first() {
        let page = rustix::param::page_size() as u64;
        let problem = |start, size| match check_range(start, size) {
            Err(Error::Range { problem, .. }) => Some(problem),
            Ok(()) => None,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(problem(page, 0), Some(RangeProblem::ZeroSize));
        assert_eq!(problem(0, page), Some(RangeProblem::ZeroStart));
        assert_eq!(problem(page + 1, page), Some(RangeProblem::StartUnaligned));
        assert_eq!(problem(page, page / 2), Some(RangeProblem::SizeUnaligned));
        assert_eq!(problem(page, 3 * page), None);
    }

    #[test]
    fn answers_decode_with_the_rewritten_access_types() {
        let answer = [
            raw(0, 0x1a2b),
            raw(1, 0xffff_ffff),
            raw(5, 0x3),
            raw(7, 9),
            raw(6, 0xffff_fffc),
            raw(2, 0x1a2b),
            raw(3, 0x3c4d),
            raw(4, 0x5e6f),
        ];
        let info = decode_answer(&answer, 5).unwrap();
        assert_eq!(
            info,
            SvmRangeInfo {
                preferred_location: Location::Gpu(GpuId(0x1a2b)),
                prefetch_location: Location::Undefined,
                flags: SvmFlags::HOST_ACCESS | SvmFlags::COHERENT,
                cleared_flags: Some(SvmFlags::from_bits_retain(0xffff_fffc)),
                granularity: 9,
                access: vec![
                    (GpuId(0x1a2b), Access::Access),
                    (GpuId(0x3c4d), Access::AccessInPlace),
                    (GpuId(0x5e6f), Access::NoAccess),
                ],
            }
        );
        assert_eq!(info.access_of(0x3c4d), Some(Access::AccessInPlace));
        assert_eq!(info.access_of(1), None);
        // Without the CLR_FLAGS query (KFD < 1.6) the GPUs start at index 4.
        let old =
            decode_answer(&[answer[0], answer[1], answer[2], answer[3], answer[5]], 4).unwrap();
        assert_eq!(old.cleared_flags, None);
        assert_eq!(old.access, vec![(GpuId(0x1a2b), Access::Access)]);
        // An access answer that is not an access type is reported, not guessed at.
        let mut bad = answer;
        bad[6] = raw(0, 0x3c4d);
        assert!(matches!(
            decode_answer(&bad, 5),
            Err(Error::UnexpectedAttr { attr_type: 0, .. })
        ));
    }
}
