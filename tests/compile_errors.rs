//! The compiler's errors for the usual mistakes name the fix (`tests/ui/*.stderr`).
//!
//! Run with default features only: other features add implementations that rustc lists in
//! its help, which would change the expected output. Refresh the expected output after a
//! deliberate change with `TRYBUILD=overwrite cargo test --test compile_errors`.

#[cfg(not(any(
    feature = "hyper",
    feature = "reqwest",
    feature = "reqwest-0_12",
    feature = "tonic"
)))]
#[test]
fn compile_errors_name_the_fix() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
