//! The tower retry layer for HTTP clients.
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
pub use stats::{GiveUp, RetryStats};
