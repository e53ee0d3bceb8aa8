//! A streaming (non-`Clone`) body sent through the retry layer without `replay_bodies`.
use tower::ServiceBuilder;
use tower_backoff::client::{BoxHttpClient, box_http_client};
use tower_backoff::{ExponentialBackOff, RetryLayer};

/// Stands for hyper's `Incoming`, an axum body, a streaming upload.
struct Streaming;

fn main() {
    let upstream = tower::service_fn(|_: http::Request<Streaming>| async {
        Ok::<_, std::io::Error>(http::Response::new(()))
    });
    let client: BoxHttpClient<Streaming, ()> = box_http_client(
        ServiceBuilder::new()
            .layer(RetryLayer::new(ExponentialBackOff::default()))
            .service(upstream),
    );
    drop(client);
}
