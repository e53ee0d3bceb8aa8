//! [`RequestBuilder`]: reqwest's request builder, sent through a [`RetryClient`].

use super::client::{RetryClient, RetryRequest};
use super::error::Error;
use super::upstream;
use bytes::Bytes;
use std::fmt;
use std::future::Future;
use std::time::Duration;
use tower_service::Service;

use crate::error::BoxError;

/// A `reqwest::RequestBuilder` whose [`send`](Self::send) goes through a
/// [`RetryClient`]'s layer.
///
/// The usual setters are here; reqwest's others (`json`, `query`, `form`, `multipart`,
/// which depend on reqwest's features) are reached with [`map`](Self::map).
#[must_use = "a RequestBuilder does nothing until it is sent"]
pub struct RequestBuilder<S> {
    client: RetryClient<S>,
    builder: upstream::RequestBuilder,
}

impl<S> RequestBuilder<S> {
    pub(crate) fn new(client: RetryClient<S>, builder: upstream::RequestBuilder) -> Self {
        Self { client, builder }
    }

    /// Applies `f` to the wrapped `reqwest::RequestBuilder`, for the setters not repeated
    /// here: `.map(|b| b.json(&order))`.
    pub fn map(
        mut self,
        f: impl FnOnce(upstream::RequestBuilder) -> upstream::RequestBuilder,
    ) -> Self {
        self.builder = f(self.builder);
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

    /// Builds the `reqwest::Request`, for [`RetryClient::execute`] or inspection.
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
    /// [`RetryClient::execute`]).
    pub fn send(self) -> impl Future<Output = Result<upstream::Response, Error>> + use<S, ResB> {
        let request = self.builder.build();
        let client = self.client;
        async move { client.execute(request?).await }
    }
}

impl<S> fmt::Debug for RequestBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}
