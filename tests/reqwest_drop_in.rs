//! reqwest 0.13 (features `reqwest` and `reqwest-json`): application code written for
//! `reqwest::Client` compiles and runs with a `RetryClient`, only its construction changed.
//!
//! `support/reqwest_drop_in/app.rs` is compiled twice, with each client, against a real
//! hyper server on loopback.

mod support;

use tower_backoff::integrations::reqwest::Error;

/// The application with reqwest's own client.
mod plain {
    pub fn client() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    include!("support/reqwest_drop_in/app.rs");
}

/// The same application with its client behind the retry layer.
mod retried {
    use tower::Layer;
    use tower_backoff::integrations::reqwest::{ClientExt, ReqwestService, RetryClient};
    use tower_backoff::{ConstantBackOff, RetryLayer};

    type Client = RetryClient<<RetryLayer<ConstantBackOff> as Layer<ReqwestService>>::Service>;

    pub fn client() -> Client {
        super::plain::client().with_retry(super::layer())
    }

    include!("support/reqwest_drop_in/app.rs");
}

include!("support/reqwest_drop_in/tests.rs");
