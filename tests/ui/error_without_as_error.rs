//! An inner service whose error type the retry policy cannot inspect.
use tower::ServiceBuilder;
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
    let client: BoxHttpClient<String, ()> = box_http_client(
        ServiceBuilder::new()
            .layer(RetryLayer::new(ExponentialBackOff::default()))
            .service(upstream),
    );
    drop(client);
}
