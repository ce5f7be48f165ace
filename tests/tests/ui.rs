//! Compile-fail tests of the `wavefuse::kernel!` DSL. Each `tests/ui/*.rs` is one mistake a user
//! makes; its `.stderr` is the compiler's message, with the caret under the user's token.
//! Regenerate with `TRYBUILD=overwrite cargo test -p wavefuse-tests --test ui` and review every
//! changed `.stderr` by eye.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
