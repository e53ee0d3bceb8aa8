//! Glue for HTTP clients whose service types do not fit the retry layer as they are.
//!
//! hyper-util's legacy client and axum/hyper services need no glue: they are
//! `tower::Service<http::Request<B>>` already (with the `hyper` feature, their errors are
//! classified too). The others are behind cargo features, so the default build pulls none of
//! them:
//!
//! | feature | module | what it adds |
//! | --- | --- | --- |
//! | `reqwest` | `integrations::reqwest` | `RetryClient`: a `reqwest::Client` behind a layer, with reqwest's own request and response types; `ReqwestService`: a `reqwest::Client` as a service of `http::Request`s; `AsError` for `reqwest::Error` |
//! | `reqwest-0_12` | `integrations::reqwest_0_12` | the same types for reqwest 0.12 |
//! | `reqwest-json` | either of the above | `RequestBuilder::json`, with reqwest's `json` enabled |
//! | `tonic` | `integrations::tonic` | `TonicRetryLayer`: the retry layer made to fit a tonic `Channel`; `AsError` for `tonic::transport::Error` |
//!
//! The examples `hyper_client`, `reqwest_client`, `tonic_client` and `axum_gateway` show each
//! client end to end.

#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "reqwest-0_12")]
pub mod reqwest_0_12;
#[cfg(feature = "tonic")]
pub mod tonic;
