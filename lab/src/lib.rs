//! The lab of tower-backoff: what measures the crate rather than tests it, kept out of the
//! library's build. Its binaries are `simulate` (the simulations and the limiter models, on
//! virtual time) and `limiters` (the client stacks against real rate limiters); its test
//! `rate_limiters` asserts the fast properties against those limiters; its benches are
//! criterion's. This library holds the real-limiter harness the binary and the test share.

pub mod limiters;
pub mod matrix;
