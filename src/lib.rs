//! Retry middleware for the tower ecosystem that survives overloaded and flaky servers.
//!
//! `tower-backoff` has two halves:
//!
//! - **Backoff strategies** ([`backoff`]): how long to wait before each retry and when to
//!   stop — [`ExponentialBackOff`] as in Go's cenkalti/backoff, constant, zero and stop, the
//!   stateless [`Table`](backoff::Table) of jittered delays, [`Linear`](backoff::Linear) and
//!   [`Fibonacci`](backoff::Fibonacci), the jitter strategies of the AWS Architecture Blog
//!   ([`FullJitter`](backoff::FullJitter), [`EqualJitter`](backoff::EqualJitter),
//!   [`DecorrelatedJitter`](backoff::DecorrelatedJitter),
//!   [`ExponentialJitter`](backoff::ExponentialJitter), [`aws::Fixed`](backoff::aws::Fixed),
//!   [`aws::Exponential`](backoff::aws::Exponential)) and the up/down
//!   [`ResponsiveBackOff`](backoff::ResponsiveBackOff). Any of them drives the plain async
//!   [`retry()`] function or a [`Ticker`](retry::Ticker).
//! - **A tower layer** ([`RetryLayer`]) for HTTP clients: its [`RetryPolicy`](layer::RetryPolicy) retries 429,
//!   503 (after the server's `Retry-After`), 502/504/408 and transport failures, never sends
//!   a non-idempotent request twice unless it could not have reached the server, and stops
//!   within per-request [`limits`] of attempts and elapsed time instead of sleeping only
//!   to give up; a shared retry [`budget`] bounds the extra load retries put on a server.
//!
//! # Quick start
//!
//! Three lines put the retry policy in front of any HTTP client service (here a stand-in;
//! in practice hyper-util's client, a tonic channel, …):
//!
//! ```
//! # let client = tower::service_fn(|_: http::Request<String>| async {
//! #     Ok::<_, std::io::Error>(http::Response::new(String::new()))
//! # });
//! use tower::ServiceBuilder;
//! use tower_backoff::{ExponentialBackOff, RetryLayer};
//!
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .service(client);
//! # drop(client);
//! ```
//!
//! What is retried, when and after how long is the [decision table](RetryLayer#decisions):
//! a [classifier](classify) decides what each attempt's result means, the policy admits a
//! retry or not, then acts. Settings can differ per route ([`Routes`]) or per request (a
//! [`RetrySettings`] in the request's extensions); every retry is reported to `tracing` and
//! to an [`OnRetry`] hook, every request given up on to an [`OnGiveUp`] hook, retried
//! responses carry [`RetryStats`], and failures come back as a [`RetryError`] carrying them.
//!
//! # Runtime
//!
//! Retries wait on tokio's timer. Outside a tokio runtime the layer does not retry: the
//! last response comes back with [`GiveUp::NoRuntime`]. Inside a runtime built without
//! its time driver, tokio itself panics at the first retry, saying to call `enable_time`
//! (or `enable_all`) on the runtime builder: tokio offers no way to detect it beforehand.
//!
//! Without tower, [`retry()`] runs any async operation under a backoff:
//!
//! ```
//! use tower_backoff::{BackOffExt, ExponentialBackOff, retry};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let mut calls = 0;
//! let value = retry(ExponentialBackOff::default().with_max_retries(5), || {
//!     calls += 1;
//!     let ok = calls >= 3;
//!     async move { if ok { Ok(42) } else { Err("not yet")? } }
//! })
//! .await;
//! assert_eq!(value, Ok(42));
//! # }
//! ```
//!
//! # Feature flags
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `hyper` | the default error classifier also reads `hyper::Error`, hyper-util's legacy client errors and HTTP/2 refusals (connect failures and refused streams are retried for every method) |
//! | `reqwest` | [`RetryClient`]: `reqwest_client.with_retry(layer)` sends reqwest's own requests through the layer and returns reqwest's own responses; classification of `reqwest::Error` |
//! | `reqwest-0_12` | the same for reqwest 0.12, in `integrations::reqwest_0_12` |
//! | `tonic` | [`TonicRetryLayer`]: the gRPC preset fitted to a tonic `Channel`; classification of `tonic::transport::Error` |
//! | `metrics` | counters and histograms through the `metrics` facade (see [`metrics`]) |
//!
//! The default build depends only on tower, http, http-body, tokio (time, rt), rand,
//! pin-project-lite, httpdate, tracing and their small helpers.
//!
//! A client behind the layer has a long type; [`client::BoxHttpClient`] names it by its
//! bodies only, for struct fields and axum's `State`.
//!
#![cfg_attr(
    feature = "reqwest",
    doc = "[`RetryClient`]: integrations::reqwest::RetryClient"
)]
#![cfg_attr(not(feature = "reqwest"), doc = "[`RetryClient`]: integrations")]
#![cfg_attr(
    feature = "tonic",
    doc = "[`TonicRetryLayer`]: integrations::tonic::TonicRetryLayer"
)]
#![cfg_attr(not(feature = "tonic"), doc = "[`TonicRetryLayer`]: integrations")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod header;
mod redact;
mod send_mark;
mod time;
pub use error::ConfigError;

/// The README's Rust snippets, compiled and run as doc-tests (they use every feature).
#[cfg(all(
    doctest,
    feature = "hyper",
    feature = "reqwest",
    feature = "tonic",
    feature = "redis"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// The root re-exports what a user names in the first five minutes: the retry layer, its
// settings, stats, error and hooks, the pacing layer and its error, the main backoffs and
// their traits, `retry()`. Everything else is reached through its module (see
// CONTRIBUTING.md).

pub mod backoff;
pub use backoff::{BackOff, BackOffExt, ConstantBackOff, ExponentialBackOff};

pub mod retry;
pub use retry::retry;

pub mod grpc;
pub mod retry_after;

pub mod budget;
pub mod classify;
pub use classify::RetryReason;
pub mod layer;
pub mod limits;
pub use layer::{
    GiveUp, GiveUpEvent, OnGiveUp, OnRetry, RetryError, RetryEvent, RetryLayer, RetrySettings,
    RetryStats, Routes,
};

pub mod body;

pub mod pacing;
pub use pacing::{PacingError, PacingLayer};

pub mod client;
pub mod integrations;
pub mod metrics;
