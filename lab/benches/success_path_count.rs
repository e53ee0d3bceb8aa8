//! Success-path cost per request in instructions, for `valgrind --tool=callgrind`:
//! instructions do not move with the machine's load or the process's layout, as time on a
//! shared machine does (see `success_path.rs`).
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench success_path_count --no-run   # prints the binary's path
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null <binary> <variant> <requests>
//! ```
//!
//! `<variant>` is `build` (the requests built and dropped, nothing sent), `tower` (tower's
//! `Retry` with a trivial always-clone policy) or `layer` (`RetryLayer` with the defaults).
//! Each run sends 1,000 warm-up requests and then `<requests>`; run each variant at two
//! counts and divide the difference of the totals by the difference of the counts, then
//! subtract `build`'s to get what the service costs.

use std::hint::black_box;
use tower::retry::Retry;
use tower::{Layer, Service};
use tower_backoff::{ExponentialBackOff, RetryLayer};

#[path = "../../tests/support/success_path.rs"]
mod support;
use support::{AlwaysClone, Ok200, Req, Res, clone_request, request, send};

fn run<S>(mut svc: S, template: &Req, n: usize)
where
    S: Service<Req, Response = Res>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..n {
        black_box(send(&mut svc, clone_request(template)));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let template = request();
    let n = n + 1_000;
    match variant.as_str() {
        "build" => {
            for _ in 0..n {
                black_box(clone_request(&template));
            }
        }
        "tower" => run(Retry::new(AlwaysClone, Ok200), &template, n),
        "layer" => run(
            RetryLayer::new(ExponentialBackOff::default()).layer(Ok200),
            &template,
            n,
        ),
        other => {
            eprintln!("unknown variant {other:?}: build, tower or layer");
            std::process::exit(2);
        }
    }
}
