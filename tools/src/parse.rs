//! Parsers of `kfdtool`'s numeric arguments (shared by the subcommands).

use std::time::Duration;

/// The longest `smi watch --idle`: a year, in seconds.
const MAX_IDLE_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// A whole number, decimal or `0x` hexadecimal.
pub fn parse_whole(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|e| format!("{s}: {e}"))
}

/// A `gpu_id` (or a pid): a whole number that fits 32 bits.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let n = parse_whole(s)?;
    u32::try_from(n).map_err(|_| format!("{s} is larger than a gpu_id (32 bits)"))
}

/// `--idle`: seconds, finite, from 0 to [`MAX_IDLE_SECS`].
pub fn parse_idle(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("{s} is not a number of seconds: {e}"))?;
    if !(0.0..=MAX_IDLE_SECS).contains(&secs) {
        return Err(format!(
            "{s} is not a number of seconds from 0 to {MAX_IDLE_SECS} (a year)"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s}: {e}"))
}
