//! Glue for HTTP clients whose service types do not fit the retry layer as they are.
//!
//! hyper-util's legacy client and axum/hyper services need no glue: they are
//! `tower::Service<http::Request<B>>` already (with the `hyper` feature, their errors are
//! classified too). The others are behind cargo features, so the default build pulls none of
//! them:
//!
//! | feature | module | what it adds |
//! | --- | --- | --- |
//! | `reqwest` | [`reqwest`](self::reqwest) | [`ReqwestService`](self::reqwest::ReqwestService): a `reqwest::Client` as a service of `http::Request`s |
//! | `tonic` | [`tonic`](self::tonic) | [`TonicBody`](self::tonic::TonicBody): hands replayable bodies back to a tonic `Channel` |

#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tonic")]
pub mod tonic;
