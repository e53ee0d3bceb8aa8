//! tower_governor in front of an axum router, in this process: the limiter axum services
//! deploy. GCRA with one global key; its 429s carry `Retry-After` and `x-ratelimit-after`
//! (whole seconds, rounded down), its successes `x-ratelimit-limit`/`-remaining`.

use super::{RateLimit, Running};
use axum::Router;
use axum::routing::get;
use std::net::SocketAddr;
use std::time::Duration;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;

pub async fn start(limit: RateLimit) -> (SocketAddr, Running) {
    let config = GovernorConfigBuilder::default()
        .period(Duration::from_secs(1) / limit.per_second)
        .burst_size(limit.burst)
        .key_extractor(GlobalKeyExtractor)
        .use_headers()
        .finish()
        .expect("a non-zero period and burst");
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/{*path}", get(|| async { "ok" }))
        .layer(GovernorLayer::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, Running::Task(task))
}
