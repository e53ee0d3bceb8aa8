//! [`RequestBuilder`]: reqwest's request builder, sent through a [`RetryClient`].

use super::client::{RetryClient, RetryRequest};
use super::error::Error;
use super::upstream;
use bytes::Bytes;
use std::fmt;
use std::future::Future;
use std::time::Duration;
use tower_service::Service;

use crate::RetrySettings;
use crate::error::BoxError;

/// A `reqwest::RequestBuilder` whose [`send`](Self::send) goes through a
/// [`RetryClient`]'s layer.
///
/// It has reqwest's setters with reqwest's signatures, so code written for
/// `reqwest::Client` compiles unchanged. [`json`](Self::json) needs the feature
/// `reqwest-json`; reqwest's other setters (`multipart`, …) are reached with
/// [`map`](Self::map). [`retry_settings`](Self::retry_settings) sets this request's own
/// retry settings.
///
/// ```no_run
#[doc = concat!("# extern crate ", doc_crate!(), " as reqwest;")]
/// use std::time::Duration;
#[doc = concat!("use tower_backoff::integrations::", doc_module!(), "::ClientExt;")]
/// use tower_backoff::{ExponentialBackOff, RetryLayer, RetrySettings};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = reqwest::Client::new().with_retry(RetryLayer::new(ExponentialBackOff::default()));
/// let response = client
///     .get("http://127.0.0.1:8080/search")
///     .query(&[("q", "tower"), ("page", "2")])
///     .bearer_auth("secret")
///     .timeout(Duration::from_secs(5))
///     // This request alone: one attempt, no retries.
///     .retry_settings(RetrySettings::new().with_max_attempts(1)?)
///     .send()
///     .await?;
/// println!("{}", response.text().await?);
/// # Ok(())
/// # }
/// ```
#[must_use = "a RequestBuilder does nothing until it is sent"]
pub struct RequestBuilder<S> {
    client: RetryClient<S>,
    builder: upstream::RequestBuilder,
    settings: Option<RetrySettings>,
}

impl<S> RequestBuilder<S> {
    pub(crate) fn new(client: RetryClient<S>, builder: upstream::RequestBuilder) -> Self {
        Self {
            client,
            builder,
            settings: None,
        }
    }

    /// Applies `f` to the wrapped `reqwest::RequestBuilder`, for the setters not repeated
    /// here: `.map(|b| b.multipart(form))`.
    pub fn map(
        mut self,
        f: impl FnOnce(upstream::RequestBuilder) -> upstream::RequestBuilder,
    ) -> Self {
        self.builder = f(self.builder);
        self
    }

    /// Retries this request with `settings` instead of the layer's or its route's.
    ///
    /// The [`RetryLayer`](crate::RetryLayer) reads them from the request's extensions,
    /// which `reqwest::RequestBuilder` cannot reach.
    pub fn retry_settings(mut self, settings: RetrySettings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// Adds a header (see `reqwest::RequestBuilder::header`).
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        http::HeaderName: TryFrom<K>,
        <http::HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        http::HeaderValue: TryFrom<V>,
        <http::HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    /// Adds headers (see `reqwest::RequestBuilder::headers`).
    pub fn headers(self, headers: http::HeaderMap) -> Self {
        self.map(|b| b.headers(headers))
    }

    /// Sets the body (see `reqwest::RequestBuilder::body`).
    pub fn body<T: Into<upstream::Body>>(self, body: T) -> Self {
        self.map(|b| b.body(body))
    }

    /// Sets HTTP basic authentication (see `reqwest::RequestBuilder::basic_auth`).
    pub fn basic_auth<U: fmt::Display, P: fmt::Display>(
        self,
        username: U,
        password: Option<P>,
    ) -> Self {
        self.map(|b| b.basic_auth(username, password))
    }

    /// Sets a bearer token (see `reqwest::RequestBuilder::bearer_auth`).
    pub fn bearer_auth<T: fmt::Display>(self, token: T) -> Self {
        self.map(|b| b.bearer_auth(token))
    }

    /// Sets a timeout for each attempt, from sending to the end of the response body (see
    /// `reqwest::RequestBuilder::timeout`). It bounds attempts, not the whole retried
    /// request: that is the retry layer's `max_elapsed`.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    /// Sets the HTTP version (see `reqwest::RequestBuilder::version`).
    pub fn version(self, version: http::Version) -> Self {
        self.map(|b| b.version(version))
    }

    /// Appends `query`, serialized as `application/x-www-form-urlencoded`, to the URL's
    /// query string (see `reqwest::RequestBuilder::query`).
    pub fn query<T: serde::Serialize + ?Sized>(self, query: &T) -> Self {
        self.map(|b| b.query(query))
    }

    /// Sets a form body and its `Content-Type` (see `reqwest::RequestBuilder::form`).
    pub fn form<T: serde::Serialize + ?Sized>(self, form: &T) -> Self {
        self.map(|b| b.form(form))
    }

    /// Sets a JSON body and its `Content-Type` (see `reqwest::RequestBuilder::json`).
    ///
    /// Needs the feature `reqwest-json`, which enables reqwest's `json`.
    #[cfg(feature = "reqwest-json")]
    pub fn json<T: serde::Serialize + ?Sized>(self, json: &T) -> Self {
        self.map(|b| b.json(json))
    }

    /// A copy of this builder, or `None` if its body is a stream (see
    /// `reqwest::RequestBuilder::try_clone`).
    pub fn try_clone(&self) -> Option<Self>
    where
        S: Clone,
    {
        Some(Self {
            client: self.client.clone(),
            builder: self.builder.try_clone()?,
            settings: self.settings.clone(),
        })
    }

    /// Builds the `reqwest::Request`, for [`RetryClient::execute`] or inspection.
    ///
    /// The request does not hold [`retry_settings`](Self::retry_settings): a
    /// `reqwest::Request` has no room for them.
    pub fn build(self) -> Result<upstream::Request, upstream::Error> {
        self.builder.build()
    }
}

impl<S, ResB> RequestBuilder<S>
where
    S: Service<RetryRequest, Response = http::Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ResB: http_body::Body + Send + Sync + 'static,
    ResB::Data: Into<Bytes>,
    ResB::Error: Into<BoxError>,
{
    /// Builds the request and sends it through the client's layer (see
    /// [`RetryClient::execute`]), with its [`retry_settings`](Self::retry_settings) if set.
    pub fn send(self) -> impl Future<Output = Result<upstream::Response, Error>> + use<S, ResB> {
        let request = self.builder.build();
        let client = self.client;
        let settings = self.settings;
        async move { client.execute_with(request?, settings).await }
    }
}

impl<S> fmt::Debug for RequestBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("builder", &self.builder)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
