//! Retry middleware for the tower ecosystem that survives overloaded and flaky servers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod error;
pub use error::ConfigError;

// ---- backoff core ----
pub mod backoff;
pub use backoff::{BackOff, Schedule, Scheduled};

// ---- plain async retry (section A) ----
pub mod retry;
mod ticker;

pub use backoff::{
    BackOffExt, ConstantBackOff, ExponentialBackOff, ExponentialBackOffBuilder, MaxDelay,
    MaxElapsed, MaxRetries, StopBackOff, ZeroBackOff,
};
pub use retry::{retry, retry_notify};
pub use ticker::Ticker;

// ---- end section A ----

// ---- retry-after (section C) ----
pub mod grpc;
pub mod retry_after;

// ---- end section C ----

// ---- tower layer (section D) ----
pub mod budget;
pub mod classify;
mod layer;

// ---- end section D ----

// ---- bodies (section E) ----
pub mod body;

// ---- end section E ----

// ---- strategies (section B) ----
pub use backoff::aws;
pub use backoff::{
    DecorrelatedJitter, EqualJitter, ExponentialJitter, Fibonacci, FullJitter, Linear,
    ResponsiveBackOff, ResponsiveBackOffBuilder, ResponsiveMetrics, Table,
};

// ---- end section B ----

// ---- client integrations (section G) ----
pub mod integrations;

// ---- end section G ----
