//! `integrations::reqwest_0_12` (feature `reqwest-0_12`): the reqwest client types built
//! against reqwest 0.12, against a real hyper server on loopback.

mod support;

use reqwest012 as reqwest;
use std::time::Duration;
use support::upstream::{self, reply};
use tower_backoff::{ConstantBackOff, RetryLayer, RetrySettings};

/// Long enough that a retry made after it could not be mistaken for one after `Retry-After`.
const BACKOFF: Duration = Duration::from_secs(10);

fn layer() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(BACKOFF).unwrap()).with_settings(
        RetrySettings::new()
            .with_max_elapsed(Duration::from_secs(60))
            .unwrap(),
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The `RetryClient` cases of reqwest 0.13, run against 0.12.
mod shared {
    use reqwest012 as reqwest;
    use tower_backoff::integrations::reqwest_0_12::{ClientExt, RetryClient};
    include!("support/retry_client.rs");
}

/// reqwest 0.12's own verdicts decide, as for 0.13: a request that cannot be built is
/// never retried, a refused connection is a connect error (resent for every method).
#[tokio::test]
async fn reqwest_0_12_errors_are_classified_by_reqwest_verdict() {
    use tower_backoff::classify::{ErrorClass, default_error_class};
    let unbuildable = client().get("http://").build().unwrap_err();
    assert!(unbuildable.is_builder());
    assert_eq!(default_error_class(&unbuildable), ErrorClass::Fatal);
    let refused = client()
        .get(format!("http://{}/", upstream::refused_addr()))
        .send()
        .await
        .unwrap_err();
    assert!(refused.is_connect());
    assert_eq!(default_error_class(&refused), ErrorClass::Connect);
}
