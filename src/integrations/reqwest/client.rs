//! [`RetryClient`]: a `reqwest::Client` whose requests go through a tower layer.

use super::builder::RequestBuilder;
use super::error::Error;
use super::service::ReqwestService;
use super::upstream;
use crate::body::{DEFAULT_MAX_BYTES, ReplayBody};
use bytes::Bytes;
use std::fmt;
use std::future::Future;
use tower::ServiceExt;
use tower_layer::Layer;
use tower_service::Service;

use crate::RetrySettings;
use crate::error::BoxError;

/// The request type the layers of a [`RetryClient`] see: a `reqwest::Body` made
/// replayable.
pub type RetryRequest = http::Request<ReplayBody<upstream::Body>>;

/// A `reqwest::Client` whose requests go through a tower layer — typically a
/// [`RetryLayer`](crate::RetryLayer) — while the caller keeps reqwest's own types:
/// `reqwest::RequestBuilder`-like builders, `reqwest::Request` in, `reqwest::Response` out
/// (with its real URL, `.text()`, `.json()`, …).
///
/// Built by [`RetryClient::new`] or [`ClientExt::with_retry`](super::ClientExt::with_retry).
/// Every request body is made replayable without further setup: a body held in memory
/// (`.body("…")`, `.json(…)`, `.form(…)`) is always sent again whole, and a streaming body
/// is buffered as it is sent, up to [`max_replay_bytes`](Self::with_max_replay_bytes);
/// past that it is sent once and not retried. Cloning is cheap (the pool is shared).
///
/// `S` is the layered service; to store the client, name it through the layer:
/// `RetryClient<<RetryLayer<ExponentialBackOff> as Layer<ReqwestService>>::Service>`.
pub struct RetryClient<S> {
    client: upstream::Client,
    service: S,
    max_replay_bytes: usize,
}

impl<S> RetryClient<S> {
    /// Sends the requests of `client` through `layer` (a [`RetryLayer`](crate::RetryLayer),
    /// a `tower::ServiceBuilder` of several layers, …).
    pub fn new<L>(client: upstream::Client, layer: L) -> Self
    where
        L: Layer<ReqwestService, Service = S>,
    {
        Self {
            service: layer.layer(ReqwestService::new(client.clone())),
            client,
            max_replay_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Buffers up to `max_bytes` of each *streaming* request body for retries.
    ///
    /// # Default
    ///
    /// [`DEFAULT_MAX_BYTES`] (64 KiB). Bodies held in memory are not counted: they are
    /// always replayed.
    pub fn with_max_replay_bytes(mut self, max_bytes: usize) -> Self {
        self.max_replay_bytes = max_bytes;
        self
    }

    /// The reqwest client requests are built and sent with.
    pub fn client(&self) -> &upstream::Client {
        &self.client
    }

    /// The layered service requests go through.
    pub fn service(&self) -> &S {
        &self.service
    }

    /// Starts a request with `method` to `url`; `.send()` sends it through the layer.
    pub fn request<U: upstream::IntoUrl>(
        &self,
        method: upstream::Method,
        url: U,
    ) -> RequestBuilder<S>
    where
        S: Clone,
    {
        RequestBuilder::new(self.clone(), self.client.request(method, url))
    }

    /// Starts a GET request to `url`.
    pub fn get<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::GET, url)
    }

    /// Starts a POST request to `url`.
    pub fn post<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::POST, url)
    }

    /// Starts a PUT request to `url`.
    pub fn put<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::PUT, url)
    }

    /// Starts a PATCH request to `url`.
    pub fn patch<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::PATCH, url)
    }

    /// Starts a DELETE request to `url`.
    pub fn delete<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::DELETE, url)
    }

    /// Starts a HEAD request to `url`.
    pub fn head<U: upstream::IntoUrl>(&self, url: U) -> RequestBuilder<S>
    where
        S: Clone,
    {
        self.request(upstream::Method::HEAD, url)
    }
}

impl<S, ResB> RetryClient<S>
where
    S: Service<RetryRequest, Response = http::Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ResB: http_body::Body + Send + Sync + 'static,
    ResB::Data: Into<Bytes>,
    ResB::Error: Into<BoxError>,
{
    /// Sends `request` through the layer, as `reqwest::Client::execute` would send it.
    ///
    /// The response is reqwest's own, with the URL it came from (after redirects) and,
    /// from a [`RetryLayer`](crate::RetryLayer), [`RetryStats`](crate::RetryStats) in its
    /// `extensions()`.
    pub fn execute(
        &self,
        request: upstream::Request,
    ) -> impl Future<Output = Result<upstream::Response, Error>> + use<S, ResB> {
        self.execute_with(request, None)
    }

    /// [`execute`](Self::execute), with `settings` in the request's extensions for the
    /// retry layer.
    pub(super) fn execute_with(
        &self,
        request: upstream::Request,
        settings: Option<RetrySettings>,
    ) -> impl Future<Output = Result<upstream::Response, Error>> + use<S, ResB> {
        let request = into_retry_request(request, self.max_replay_bytes).map(|mut request| {
            if let Some(settings) = settings {
                request.extensions_mut().insert(settings);
            }
            request
        });
        let service = self.service.clone();
        async move {
            let response = service.oneshot(request?).await.map_err(Error::new)?;
            Ok(upstream::Response::from(response.map(upstream::Body::wrap)))
        }
    }
}

/// Converts a reqwest request for the layers, its body made replayable: whole if reqwest
/// holds it in memory, up to `max_replay_bytes` if it streams.
fn into_retry_request(
    request: upstream::Request,
    max_replay_bytes: usize,
) -> Result<RetryRequest, Error> {
    let request = http::Request::<upstream::Body>::try_from(request)?;
    let cap = if request.body().as_bytes().is_some() {
        usize::MAX
    } else {
        max_replay_bytes
    };
    Ok(crate::body::layer::replayable(request, cap))
}

impl<S: Clone> Clone for RetryClient<S> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            service: self.service.clone(),
            max_replay_bytes: self.max_replay_bytes,
        }
    }
}

impl<S> fmt::Debug for RetryClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryClient")
            .field("client", &self.client)
            .field("max_replay_bytes", &self.max_replay_bytes)
            .finish_non_exhaustive()
    }
}

/// Puts a layer in front of a `reqwest::Client`: `client.with_retry(layer)`.
pub trait ClientExt {
    /// Sends this client's requests through `layer`; see [`RetryClient`].
    fn with_retry<L>(self, layer: L) -> RetryClient<L::Service>
    where
        L: Layer<ReqwestService>;
}

impl ClientExt for upstream::Client {
    fn with_retry<L>(self, layer: L) -> RetryClient<L::Service>
    where
        L: Layer<ReqwestService>,
    {
        RetryClient::new(self, layer)
    }
}
