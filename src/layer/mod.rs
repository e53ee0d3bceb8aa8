//! The tower retry layer for HTTP clients.
//!
//! What is retried, when and after how long is the [decision table](RetryLayer#decisions)
//! of [`RetryLayer`]. Settings can differ per route ([`Routes`]) or per request (a
//! [`RetrySettings`] in the request's extensions); every retry is reported to `tracing`
//! and to an [`OnRetry`] hook, every request given up on to an [`OnGiveUp`] hook, and
//! retried responses and failures carry [`RetryStats`].
//!
//! The crate root re-exports what most users name: the layer, its settings and routes, its
//! stats and error, its hooks. Here are the rest: the service and its future, the policy
//! for tower's own `Retry`, the errors a failure may carry, and the defaults.

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

pub use crate::redact::DEFAULT_REDACTED_QUERY_PARAMS;
