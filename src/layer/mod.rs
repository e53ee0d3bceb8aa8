//! The tower retry layer for HTTP clients.
//!
//! (Crate-level quick start, to be moved to `lib.rs` by the lead.)
//!
//! # Quick start
//!
//! Three lines put a retry policy in front of any HTTP client service (hyper, reqwest
//! through tower, tonic channels…): 429 and 503 are retried after the server's
//! `Retry-After`, 502/504/408 and connection failures after the backoff's delay, within
//! three attempts and 30 seconds, and a POST is never sent twice unless it could not
//! have reached the server.
//!
//! ```
//! # use std::time::Duration;
//! # #[derive(Clone)] struct ExponentialBackOff;
//! # impl Default for ExponentialBackOff { fn default() -> Self { Self } }
//! # impl tower_backoff::BackOff for ExponentialBackOff {
//! #     fn next_backoff(&mut self) -> Option<Duration> { Some(Duration::from_millis(100)) }
//! #     fn reset(&mut self) {}
//! # }
//! # let client = tower::service_fn(|_: http::Request<String>| async {
//! #     Ok::<_, std::io::Error>(http::Response::new(String::new()))
//! # });
//! use tower::ServiceBuilder;
//! use tower_backoff::RetryLayer;
//!
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .service(client);
//! # drop(client);
//! ```
//!
//! What is retried, when and after how long is the [decision table](crate::RetryLayer#decisions)
//! of [`RetryLayer`](crate::RetryLayer). Settings can differ per route
//! ([`Routes`](crate::Routes)) or per request (a [`RetrySettings`](crate::RetrySettings) in
//! the request's extensions); every retry is reported to `tracing` and to an
//! [`OnRetry`](crate::OnRetry) hook, and the final response carries
//! [`RetryStats`](crate::RetryStats).

mod hook;
#[allow(clippy::module_inception)]
mod layer;
mod policy;
mod routes;
mod settings;
mod stats;

pub use hook::{OnRetry, RetryEvent, RetryReason};
pub use layer::RetryLayer;
pub use policy::{RetryDelay, RetryPolicy};
pub use routes::{RequestHead, Routes};
pub use settings::{DEFAULT_MAX_RETRY_AFTER, RetrySettings};
pub use stats::RetryStats;
