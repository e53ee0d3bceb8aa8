//! reqwest behind the retry layer, keeping reqwest's own types (feature `reqwest`, reqwest
//! 0.13).
//!
//! [`RetryClient`] wraps a `reqwest::Client` and a tower layer: requests are built with the
//! same builder methods as reqwest's, or passed as a `reqwest::Request`, and come back as a
//! `reqwest::Response` — with its real URL, `.text()`, `.json()`, `.bytes_stream()` — after
//! the layer has retried them. Request bodies are made replayable without setup.
//!
//! ```no_run
//! use tower_backoff::integrations::reqwest::ClientExt;
//! use tower_backoff::{ExponentialBackOff, RetryLayer, RetryStats};
//!
//! # async fn run() -> Result<(), tower_backoff::integrations::reqwest::Error> {
//! let client = reqwest::Client::new().with_retry(RetryLayer::new(ExponentialBackOff::default()));
//!
//! let response = client.get("http://127.0.0.1:8080/items").send().await?;
//! let stats = response.extensions().get::<RetryStats>().copied();
//! println!("{} from {} after {stats:?}", response.status(), response.url());
//! let text = response.text().await?;
//!
//! // POSTs are retried only when the server cannot have acted on them (429, a failed
//! // connect to their own URL) or carry an `Idempotency-Key`; their body is sent again whole.
//! let created = client
//!     .post("http://127.0.0.1:8080/orders")
//!     .header("idempotency-key", "order-1234")
//!     .body(r#"{"item":42}"#)
//!     .send()
//!     .await?;
//! # drop((text, created));
//! # Ok(())
//! # }
//! ```
//!
//! Without the extension trait the same client is
//! `RetryClient::new(reqwest_client, layer)`. Any tower layer fits, a `ServiceBuilder` of
//! several too (a concurrency limit, a timeout around every attempt, …): the layers see
//! `http::Request<ReplayBody<reqwest::Body>>` ([`RetryRequest`]) and the
//! [`ReqwestService`] under them, which sends with the `reqwest::Client`.
//!
//! ```no_run
//! use http::HeaderValue;
//! use tower::ServiceBuilder;
//! use tower_backoff::integrations::reqwest::{RetryClient, RetryRequest};
//! use tower_backoff::{ExponentialBackOff, RetryLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // Retried, and every attempt stamped with a header.
//! let layers = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .map_request(|mut attempt: RetryRequest| {
//!         attempt.headers_mut().insert("x-client", HeaderValue::from_static("inventory"));
//!         attempt
//!     });
//! let client = RetryClient::new(reqwest::Client::new(), layers);
//!
//! let request = client.client().get("http://127.0.0.1:8080/items").build()?;
//! let response = client.execute(request).await?;
//! println!("{}", response.text().await?);
//! # Ok(())
//! # }
//! ```
//!
//! # Bodies
//!
//! A body reqwest holds in memory (`.body("…")`, `.body(bytes)`, `.json(…)`, `.form(…)`) is
//! replayed whole, whatever its size. A streaming body (`reqwest::Body::wrap_stream`,
//! `reqwest::Body::wrap`) is buffered as the first attempt sends it, up to
//! [`RetryClient::with_max_replay_bytes`] (64 KiB by default); a longer one is still sent
//! whole, once, and its request is not retried.
//!
//! reqwest follows redirects itself, below the retry layer. A 307 or 308 of a request with
//! a body is followed with the body sent again when reqwest holds it whole: a body of
//! known length up to 64 KiB that is all in memory reaches reqwest whole; a larger,
//! unsized or still arriving one streams (nothing is waited for before the request goes),
//! and its 307 or 308 comes back as the response. A body reqwest holds whole can also be
//! resent by reqwest 0.13's own retries (`ClientBuilder::retry`; by default only requests
//! the server refused unprocessed, by HTTP/2 protocol signals), below this layer.
//!
//! A redirect target that cannot be reached fails the request with a connect error that
//! still names the first URL. The server has then answered the request, so that error
//! loses its URL and is an ordinary transport error: only idempotent requests are resent
//! (see [`ReqwestService`], "Errors after a redirect").
//!
//! # A drop-in for `reqwest::Client`
//!
//! Code written for `reqwest::Client` compiles with only the client's construction changed.
//! [`RequestBuilder`] has reqwest's setters with reqwest's signatures: `header`, `headers`,
//! `basic_auth`, `bearer_auth`, `timeout`, `version`, `body`, `query`, `form`, `json` and
//! `send`. `query` and `form` come with the feature `reqwest`. `json` needs the feature
//! `reqwest-json`, which enables reqwest's own `json`. Others are reached with
//! [`RequestBuilder::map`]. [`RequestBuilder::retry_settings`] sets one request's
//! [`RetrySettings`](crate::RetrySettings).
//!
//! # Errors
//!
//! [`Error`] wraps the last attempt's `reqwest::Error` (or a layer's own error). It answers
//! as reqwest's does (`is_connect`, `is_timeout`, `status`, `url`, …), and carries the
//! [`RetryStats`](crate::RetryStats) ([`Error::stats`]). [`Error::reqwest`] gets reqwest's
//! error back. `?` turns it into a `Box<dyn Error + Send + Sync>` or an `anyhow::Error`.
//!
//! # reqwest versions
//!
//! This module is built against reqwest 0.13 (feature `reqwest`). For reqwest 0.12, the
//! feature `reqwest-0_12` adds the same types in `integrations::reqwest_0_12`.
//!
//! # Plain `http` types
//!
//! [`ReqwestService`] alone is `reqwest::Client` as a `tower::Service<http::Request<B>>`,
//! for stacks written in `http` types. The retry layer needs a `Clone` body there, or
//! [`RetryLayer::replay_bodies`](crate::RetryLayer::replay_bodies) in front:
//!
//! ```no_run
//! # use tower::{ServiceBuilder, ServiceExt};
//! # use tower_backoff::integrations::reqwest::ReqwestService;
//! # use tower_backoff::{ConstantBackOff, RetryLayer};
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let layer = RetryLayer::new(ConstantBackOff::new(std::time::Duration::from_millis(10)).unwrap());
//! let service = ServiceBuilder::new()
//!     .layer(layer.replay_bodies(1 << 20))
//!     .service(ReqwestService::new(reqwest::Client::new()));
//! let request = http::Request::put("http://127.0.0.1:8080/upload")
//!     .body(reqwest::Body::from("streamed"))?;
//! let response = reqwest::Response::from(service.oneshot(request).await?);
//! println!("{} from {}", response.status(), response.url());
//! # Ok(())
//! # }
//! ```

use ::reqwest as upstream;

/// The reqwest crate and this module, as the doc-tests of the shared files name them.
macro_rules! doc_crate {
    () => {
        "reqwest"
    };
}
macro_rules! doc_module {
    () => {
        "reqwest"
    };
}

mod builder;
mod client;
mod error;
mod service;

pub use builder::RequestBuilder;
pub use client::{ClientExt, RetryClient, RetryRequest};
pub use error::Error;
pub use service::{ReqwestService, ResponseFuture};
