//! The tower retry layer for HTTP clients.
//!
//! What is retried, when and after how long is the [decision table](crate::RetryLayer#decisions)
//! of [`RetryLayer`](crate::RetryLayer). Settings can differ per route
//! ([`Routes`](crate::Routes)) or per request (a [`RetrySettings`](crate::RetrySettings) in
//! the request's extensions); every retry is reported to `tracing` and to an
//! [`OnRetry`](crate::OnRetry) hook, every request given up on to an
//! [`OnGiveUp`](crate::OnGiveUp) hook, and retried responses and failures carry
//! [`RetryStats`](crate::RetryStats).

mod admit;
mod delay;
mod error;
mod future;
mod hook;
#[allow(clippy::module_inception)]
mod layer;
mod policy;
mod routes;
mod service;
mod settings;
mod shared;
mod span;
mod stats;

pub use error::{AttemptTimedOut, LastResponse, RetryError};
pub use future::ResponseFuture;
pub use hook::{GiveUpEvent, OnGiveUp, OnRetry, RetryEvent};
pub use layer::RetryLayer;
pub use policy::{RetryDelay, RetryPolicy};
pub use routes::Routes;
pub use service::RetryService;
pub use settings::{DEFAULT_MAX_RETRY_AFTER, DEFAULT_RETRY_AFTER_JITTER, RetrySettings};
pub use stats::{GiveUp, RetryStats};
