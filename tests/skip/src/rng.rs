//! The workspace's test generator: xorshift64*, small and deterministic, so a fuzz failure
//! reproduces from its seed. Not for anything that must be unpredictable.

/// xorshift64* (Vigna): the state is the seed, advanced by three shifts per draw; a draw is
/// the state times an odd constant. Seed 0 stays 0 forever, so seeds are nonzero.
///
/// ```
/// let mut rng = kfd_skip::Rng(0x9e37_79b9_7f4a_7c15);
/// let sizes: Vec<u64> = (0..4).map(|_| 1 + rng.below(4096)).collect();
/// assert!(sizes.iter().all(|&n| (1..=4096).contains(&n)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(
        clippy::should_implement_trait,
        reason = "an endless generator, not an Iterator of Options"
    )]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A number in `0..n` as an index or length (0 when `n` is 0).
    pub fn below_usize(&mut self, n: usize) -> usize {
        // `usize` is at most 64 bits on every target this workspace builds for, and the
        // result is below `n`, so both conversions are exact.
        self.below(n as u64) as usize
    }

    /// True with a probability of `percent` in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`, uniformly.
    ///
    /// # Panics
    ///
    /// When `items` is empty.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below_usize(items.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_sequence_is_xorshift64_star() {
        // The first draws from seed 1, worked out by hand from the published recurrence.
        let mut rng = Rng(1);
        let draws = [rng.next(), rng.next(), rng.next()];
        assert_eq!(
            draws,
            [
                0x47e4_ce4b_896c_dd1d,
                0xabcf_a6a8_e079_651d,
                0xb9d1_0d8f_eb73_1f57
            ]
        );
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut rng = Rng(0xdead_beef);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let k = rng.below_usize(7);
            seen[k] = true;
            assert!(rng.below(3) < 3);
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below_usize(0), 0);
        assert!(!rng.chance(0));
        assert!(rng.chance(100));
        assert_eq!(rng.pick(&[5u8]), 5);
    }
}
