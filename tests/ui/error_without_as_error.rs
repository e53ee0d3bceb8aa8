//! The policy used with tower's own `Retry`, over an inner service whose error type the
//! policy cannot inspect. (`RetryLayer`'s own service takes any error that converts into a
//! boxed error.)
use tower_backoff::client::{BoxHttpClient, box_http_client};
use tower_backoff::{ExponentialBackOff, RetryLayer};

#[derive(Debug)]
struct UpstreamError;

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream failed")
    }
}

impl std::error::Error for UpstreamError {}

fn main() {
    let upstream = tower::service_fn(|_: http::Request<String>| async {
        Err::<http::Response<()>, _>(UpstreamError)
    });
    let policy = RetryLayer::new(ExponentialBackOff::default()).policy();
    let client: BoxHttpClient<String, ()> =
        box_http_client(tower::retry::Retry::new(policy, upstream));
    drop(client);
}
