//! `mem::Reservation` against the kernel's own account of the address space, `/proc/self/maps`.
//!
//! One test function: the checks count this process's `PROT_NONE` mappings, which another test
//! thread mapping or unmapping at the same time would disturb.

use kfd_ioctl::Errno;
use kfd_ioctl::mem::testing::fail_trim_after;
use kfd_ioctl::mem::{Reservation, page_size};

/// One line of `/proc/self/maps`: the range and whether it is an anonymous `PROT_NONE` one.
struct Vma {
    start: usize,
    end: usize,
    reserved: bool,
}

fn vmas() -> Vec<Vma> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("reading /proc/self/maps");
    maps.lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next().expect("a range");
            let perms = fields.next().expect("permissions");
            let (start, end) = range.split_once('-').expect("start-end");
            let path = line.split_whitespace().nth(5);
            Vma {
                start: usize::from_str_radix(start, 16).expect("hex start"),
                end: usize::from_str_radix(end, 16).expect("hex end"),
                reserved: perms == "---p" && path.is_none(),
            }
        })
        .collect()
}

/// Bytes of anonymous `PROT_NONE` mappings in the process.
fn reserved_bytes() -> usize {
    vmas()
        .iter()
        .filter(|v| v.reserved)
        .map(|v| v.end - v.start)
        .sum()
}

/// Whether `[start, end)` lies wholly in anonymous `PROT_NONE` mappings (adjacent ones may
/// have merged with it) and whether any byte of it is mapped at all.
fn coverage(start: usize, end: usize) -> (bool, bool) {
    let vmas = vmas();
    let reserved = vmas
        .iter()
        .filter(|v| v.reserved)
        .map(|v| v.end.min(end).saturating_sub(v.start.max(start)))
        .sum::<usize>()
        == end - start;
    let any = vmas.iter().any(|v| v.start < end && start < v.end);
    (reserved, any)
}

#[test]
#[cfg_attr(miri, ignore = "reads /proc/self/maps")]
fn reservations_are_aligned_trimmed_released_and_never_leak() {
    let page = page_size();
    let huge = 2 << 20;
    let len = 37 * page;

    // Aligned, and exactly `len` stays reserved: the slack of the over-sized request is trimmed.
    let before = reserved_bytes();
    let reservation = Reservation::new(len, huge).expect("reserving");
    let start = reservation.addr().as_ptr() as usize;
    assert_eq!(start % huge, 0, "{start:#x}");
    assert_eq!(reservation.len(), len);
    assert_eq!(
        reserved_bytes() - before,
        len,
        "the head or tail was not trimmed"
    );
    assert_eq!(coverage(start, start + len), (true, true));

    // Placed memory shows up inside it and goes back to reserved.
    // SAFETY: nothing references the fresh reservation.
    unsafe { reservation.map_anonymous(page, page, false) }.expect("placing memory");
    assert!(
        !coverage(start + page, start + 2 * page).0,
        "the page was not placed"
    );
    // SAFETY: nothing references the page just placed.
    unsafe { reservation.unmap_to_reserved(page, page) }.expect("putting the range back");
    assert_eq!(coverage(start, start + len), (true, true));
    // Placements outside the range are refused before any syscall.
    // SAFETY: refused, nothing is mapped.
    let outside = unsafe { reservation.map_anonymous(len - page, 2 * page, false) };
    assert_eq!(outside, Err(Errno::INVAL));

    // Dropping releases the whole range.
    drop(reservation);
    assert!(!coverage(start, start + len).1, "the range stays mapped");
    assert_eq!(reserved_bytes(), before);

    // A failing trim (the first, then the second) gives back everything it had.
    for trims_before_failure in 0..2 {
        fail_trim_after(Some(trims_before_failure));
        let result = Reservation::new(len, huge);
        fail_trim_after(None);
        match result {
            Err(errno) => assert_eq!(errno, Errno::NOMEM),
            // Only one trim was needed: the kernel's address happened to be aligned.
            Ok(_) => assert_eq!(trims_before_failure, 1),
        }
        assert_eq!(
            reserved_bytes(),
            before,
            "trim {trims_before_failure}: leaked"
        );
    }

    // Bad sizes are errors, not panics or rounding.
    assert_eq!(Reservation::new(0, page).err(), Some(Errno::INVAL));
    assert_eq!(Reservation::new(page + 1, page).err(), Some(Errno::INVAL));
    assert_eq!(
        Reservation::new(page, 3 * page + 1).err(),
        Some(Errno::INVAL)
    );
    assert_eq!(Reservation::new(page, 0).err(), Some(Errno::INVAL));
    // A multiple of the page size that is no power of two (UMF asks for such) is honoured.
    let odd = Reservation::new(page, 3 * page).expect("reserving at 3 pages");
    assert_eq!(odd.addr().as_ptr() as usize % (3 * page), 0);
    drop(odd);
    assert_eq!(
        Reservation::new(usize::MAX & !(page - 1), huge).err(),
        Some(Errno::NOMEM)
    );
    // An alignment below the page size is the page size.
    let small = Reservation::new(page, 8).expect("reserving one page");
    assert_eq!(small.addr().as_ptr() as usize % page, 0);
}
