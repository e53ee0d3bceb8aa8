//! Retry hooks that are not `Fn(&RetryEvent<'_>)`.
use tower_backoff::{ExponentialBackOff, RetryLayer};

fn main() {
    // The event is passed by reference.
    let _ = RetryLayer::new(ExponentialBackOff::default())
        .on_retry(|attempt: u32| println!("retry #{attempt}"));
    // Not a closure at all.
    let _ = RetryLayer::new(ExponentialBackOff::default()).on_retry("retrying");
}
