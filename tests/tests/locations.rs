//! Every op remembers where it was written — its token in the `kernel!` statement, or the
//! mnemonic's line and column in a `.wfir` file — and an error about it starts with
//! `file:line:column: `. The expected places are found in the sources themselves (this file's text,
//! the parsed text), not taken from the code under test.

use wavefuse::ir::{ValidationError, parse, parse_named, validate};

wavefuse::kernel! {
    /// A GEMV whose activation length is a run-time parameter that need not match the weight's K:
    /// only `validate` can tell.
    fn mismatched(k: usize, k2: usize) {
        in w: f16_nk[k, 64];
        in x: f16[1, k2];
        out y: f16[1, 64];

        y = round_f16(gemv.rep(w, x));
    }
}

/// 1-based (line, column) of the first occurrence of `needle` in `text`.
fn place(text: &str, needle: &str) -> (usize, usize) {
    let (line, l) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .unwrap_or_else(|| panic!("`{needle}` not in the text"));
    (line + 1, l[..l.find(needle).unwrap()].chars().count() + 1)
}

#[test]
fn a_dsl_kernel_error_points_at_its_statement() {
    let e = validate(&mismatched(128, 256)).unwrap_err();
    let ValidationError::Op { at, mnemonic, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*mnemonic, "gemv.rep", "{e}");
    // The op's own token: `gemv.rep` of the statement, not the statement's `y`.
    let (line, column) = place(include_str!("locations.rs"), "gemv.rep(w, x));");
    let at = at.as_ref().expect("a location");
    assert!(at.file.ends_with("locations.rs"), "{at}");
    assert_eq!(
        (at.line as usize, at.column as usize),
        (line, column),
        "{at}"
    );
    assert!(
        e.to_string()
            .starts_with(&format!("{at}: kernel `mismatched`")),
        "{e}"
    );
}

#[test]
fn a_parsed_kernel_error_points_at_the_mnemonic_and_locations_are_not_the_kernel() {
    let text = "\
kernel mismatched(tp=1) {
    buf0 = input w : f16_nk[k=128, n=64] replicated @global index=local
    buf1 = input x : f16[1, 256] replicated @global index=local
    buf2 = output y : f16[1, 64] replicated @global index=local
    v0 = load buf1
    v1 = gemv.rep buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}
";
    let k = parse_named(text, "k.wfir").unwrap();
    let (line, column) = place(text, "gemv.rep");
    let e = validate(&k).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("k.wfir:{line}:{column}: ")),
        "{e}"
    );
    // The same kernel from the DSL (other locations) and from a text without a name: equal.
    assert_eq!(mismatched(128, 256), k);
    assert_eq!(parse(text).unwrap(), k);
    assert_eq!(parse(&k.to_string()).unwrap(), k);
}

/// A lowering refusal names the op, points at where it was written and says what lowers
/// instead: two RMSNorms with no GEMV between them, the second refused at its own line.
#[test]
fn a_lowering_refusal_points_at_the_op_and_says_what_lowers() {
    let text = "\
kernel two_norms(tp=1) {
    buf0 = input x : f16[1, 1024] replicated @global index=local
    buf1 = input w : f16[1024] replicated @global index=local
    buf2 = output y : f16[1, 1024] replicated @global index=local
    v0 = load buf0
    v1 = load buf1
    v2 = rmsnorm v0, v1, eps=1e-6
    v3 = round_f16 v2
    v4 = rmsnorm v3, v1, eps=1e-6
    v5 = round_f16 v4
    store v5, buf2
}
";
    let k = parse_named(text, "two.wfir").unwrap();
    validate(&k).expect("valid: only the lowering refuses it");
    let line = text
        .lines()
        .position(|l| l.contains("v4 = rmsnorm"))
        .unwrap()
        + 1;
    let column = text.lines().nth(line - 1).unwrap().find("rmsnorm").unwrap() + 1;
    for arch in wavefuse_codegen::Arch::ALL {
        let s = wavefuse_codegen::lower::Schedule::default_for(arch, &k);
        let e = wavefuse_codegen::lower::lower(&k, arch, &s)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "two.wfir:{line}:{column}: `rmsnorm`: more than one rmsnorm"
            )),
            "{arch}: {e}"
        );
        assert!(e.contains("one RMSNorm per GEMV stage"), "{arch}: {e}");
    }
}
