//! UMF's provider rules and per-provider conformance cases (`shared/ref/anchors.md` §1.1 and
//! §1.2) through real libumf 1.2 and `kfdMemoryProviderOps()`: `tests/c/umf_conformance.c`
//! runs under `kfd-emu run --machine mi300x --check-leaks`, and the test asserts its exit and
//! the facts it printed for the creation rules and for each kind.

mod support;

use support::*;

#[test]
fn umf_provider_conformance_cases_for_every_kind() {
    let Some((umf, cc)) = umf_and_cc("umf_conformance") else {
        return;
    };
    let program = compile("umf_conformance", &umf, &cc);
    let output = run_under_emulator(&program);
    let stdout = successful_stdout("umf_conformance", &output);
    assert!(
        stdout.contains(
            "creation rules: 18 single missing ops refused, optional groups defaulted to \
             NOT_SUPPORTED, initialize errors propagated, NULL-provider ops refused, default \
             name KFD"
        ),
        "{stdout}"
    );
    for (kind, ipc) in [
        ("HOST", "argument checks"),
        ("DEVICE", "argument checks"),
        ("SHARED", "NOT_SUPPORTED"),
    ] {
        let expected = format!(
            "{kind}: alignments, WRONG_ALIGNMENT, MAX_SIZE (native 2001), purges of page+64 \
             (zero-filled), INVALID_POINTER purges and frees, names, ctl stats, split/merge, \
             IPC {ipc}: all as expected"
        );
        assert!(
            stdout.lines().any(|l| l == expected),
            "{expected}\nin:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("umf_conformance: all cases passed"),
        "{stdout}"
    );
    print!("{stdout}");
}
