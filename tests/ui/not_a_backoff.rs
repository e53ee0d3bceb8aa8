//! A delay given where a backoff strategy is expected.
use std::time::Duration;
use tower_backoff::RetryLayer;

fn main() {
    let _layer = RetryLayer::new(Duration::from_millis(100));
}
