//! Random dwords never panic the decoder: fixed seeds, thousands of streams, the dwords
//! biased towards the encodings' fixed high bits so that every decode path runs. Each answer
//! is checked for consistency: an instruction's length fits the stream, a shorter stream is
//! a truncation error, and the stream decoder advances by the lengths. `KFD_FUZZ_ITERS=N`
//! runs N draws of each test instead (by hand, for longer runs).

use kfd_gfx9::{DecodeError, Decoder, decode};
use kfd_skip::Rng;

/// The fixed high bits of each encoding (value, number of bits), from the guide's
/// "Microcode Formats" chapter.
const PREFIXES: &[(u32, u32)] = &[
    (0b10, 2),          // SOP2
    (0b1011, 4),        // SOPK
    (0b1_0111_1101, 9), // SOP1
    (0b1_0111_1110, 9), // SOPC
    (0b1_0111_1111, 9), // SOPP
    (0b11_0000, 6),     // SMEM
    (0b0, 1),           // VOP2
    (0b011_1111, 7),    // VOP1
    (0b011_1110, 7),    // VOPC
    (0b11_0100, 6),     // VOP3
    (0b1_1010_0111, 9), // VOP3P
    (0b11_0110, 6),     // DS
    (0b11_0111, 6),     // FLAT
    (0b11_1000, 6),     // MUBUF
    (0b11_1010, 6),     // MTBUF
    (0b11_1100, 6),     // MIMG (unsupported)
];

/// Draws per test: `KFD_FUZZ_ITERS`, else `default`.
fn iterations(default: usize) -> usize {
    std::env::var("KFD_FUZZ_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn biased_dword(rng: &mut Rng) -> u32 {
    let w = rng.next() as u32;
    if rng.chance(25) {
        return w;
    }
    let (value, len) = rng.pick(PREFIXES);
    let low = 32 - len;
    value << low | (w & ((1u32 << low) - 1))
}

#[test]
fn random_dwords_decode_or_fail_with_a_typed_error() {
    let mut rng = Rng(0x6f78_0000_0009_0a0a);
    let (mut ok, mut errors) = (0usize, 0usize);
    let draws = iterations(20_000);
    for _ in 0..draws {
        let len = 1 + rng.below_usize(3);
        let words: Vec<u32> = (0..len).map(|_| biased_dword(&mut rng)).collect();
        match decode(&words) {
            Ok(inst) => {
                ok += 1;
                let n = usize::from(inst.dwords);
                assert!(
                    (1..=2).contains(&n) && n <= words.len(),
                    "{words:08x?}: {inst:?}"
                );
                // The same instruction with its last dword missing is a truncation.
                if n > 1 {
                    assert!(
                        matches!(decode(&words[..n - 1]), Err(DecodeError::Truncated { .. })),
                        "{words:08x?}"
                    );
                }
                // Trailing dwords do not change the instruction.
                assert_eq!(decode(&words[..n]), Ok(inst));
            }
            Err(_) => errors += 1,
        }
    }
    // The bias reaches the decoders: most draws decode, and some fail.
    assert!(
        ok > draws / 4 && errors > draws / 20,
        "ok {ok}, errors {errors}"
    );
}

#[test]
fn random_streams_decode_on_consistent_boundaries() {
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    for _ in 0..iterations(2_000) {
        let words: Vec<u32> = (0..1 + rng.below_usize(64))
            .map(|_| biased_dword(&mut rng))
            .collect();
        let mut expected_at = 0;
        let mut failed = false;
        for (at, result) in Decoder::new(&words) {
            assert!(!failed, "the decoder goes on after an error");
            assert_eq!(at, expected_at);
            match result {
                Ok(inst) => expected_at += usize::from(inst.dwords),
                Err(_) => failed = true,
            }
        }
        assert!(failed || expected_at == words.len(), "{words:08x?}");
    }
}

#[test]
fn an_empty_stream_is_a_truncation() {
    assert_eq!(
        decode(&[]),
        Err(DecodeError::Truncated {
            needed: 1,
            available: 0
        })
    );
    assert_eq!(Decoder::new(&[]).count(), 0);
}
