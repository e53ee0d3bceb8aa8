//! reqwest 0.12 behind the retry layer, keeping reqwest's own types (feature
//! `reqwest-0_12`).
//!
//! The same types as `integrations::reqwest` (feature `reqwest`, reqwest 0.13), for
//! reqwest 0.12 (0.12.28 or later): see that module for the whole story. [`RetryClient`]
//! wraps a `reqwest::Client` and a tower layer; requests are built with reqwest's builder
//! methods or passed as a `reqwest::Request`, and come back as a `reqwest::Response` with
//! its real URL. Request bodies are made replayable without setup: in-memory bodies whole,
//! streaming ones up to [`RetryClient::with_max_replay_bytes`] (64 KiB by default).
//! [`RequestBuilder`] has reqwest's setters, so code written for `reqwest::Client` compiles
//! unchanged; its `json` needs the feature `reqwest-json`.
//!
//! ```no_run
//! # extern crate reqwest012 as reqwest;
//! use tower_backoff::integrations::reqwest_0_12::ClientExt;
//! use tower_backoff::{ExponentialBackOff, RetryLayer};
//!
//! # async fn run() -> Result<(), tower_backoff::integrations::reqwest_0_12::Error> {
//! let client = reqwest::Client::new().with_retry(RetryLayer::new(ExponentialBackOff::default()));
//! let response = client.get("http://127.0.0.1:8080/items").send().await?;
//! println!("{} from {}", response.status(), response.url());
//! let text = response.text().await?;
//! # drop(text);
//! # Ok(())
//! # }
//! ```

// The code is the reqwest 0.13 module's, compiled a second time against reqwest 0.12: the
// files are loaded twice on purpose.
#![allow(clippy::duplicate_mod)]

use reqwest012 as upstream;

/// The reqwest crate and this module, as the doc-tests of the shared files name them.
macro_rules! doc_crate {
    () => {
        "reqwest012"
    };
}
macro_rules! doc_module {
    () => {
        "reqwest_0_12"
    };
}

#[path = "reqwest/builder.rs"]
mod builder;
#[path = "reqwest/client.rs"]
mod client;
#[path = "reqwest/error.rs"]
mod error;
#[path = "reqwest/service.rs"]
mod service;

pub use builder::RequestBuilder;
pub use client::{ClientExt, RetryClient, RetryRequest};
pub use error::Error;
pub use service::{ReqwestService, ResponseFuture};
