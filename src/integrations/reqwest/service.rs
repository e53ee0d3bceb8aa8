//! [`ReqwestService`]: a `reqwest::Client` as a tower service of `http::Request`s.

use super::upstream;
use bytes::Bytes;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

use crate::error::BoxError;

/// `reqwest`'s response future is not nameable, so it is boxed once per attempt (as reqwest
/// itself boxes its own pending requests).
type Pending = Pin<Box<dyn Future<Output = Result<upstream::Response, upstream::Error>> + Send>>;

/// A [`reqwest::Client`](upstream::Client) as a `tower::Service<http::Request<B>>` whose
/// responses are `http::Response<reqwest::Body>` and whose error is `reqwest::Error`.
///
/// [`RetryClient`](super::RetryClient) is built on it; use it directly to put reqwest under
/// any tower stack of `http` types. Responses keep the URL they came from:
/// `reqwest::Response::from(response).url()` is the real one.
///
/// Any body implementing [`http_body::Body`] (and `Send + Sync`, as reqwest requires) is
/// accepted; requests and responses keep their method, URI, headers and status. Cloning is
/// cheap: a `reqwest::Client` is a handle to a shared pool.
#[derive(Clone, Debug, Default)]
pub struct ReqwestService {
    client: upstream::Client,
}

impl ReqwestService {
    /// Sends requests with `client` (and its pool, timeouts and TLS settings).
    pub fn new(client: upstream::Client) -> Self {
        Self { client }
    }

    /// The client requests are sent with.
    pub fn client(&self) -> &upstream::Client {
        &self.client
    }

    /// The client, giving up the service.
    pub fn into_inner(self) -> upstream::Client {
        self.client
    }
}

impl From<upstream::Client> for ReqwestService {
    fn from(client: upstream::Client) -> Self {
        Self::new(client)
    }
}

impl<B> Service<http::Request<B>> for ReqwestService
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<upstream::Body>;
    type Error = upstream::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // reqwest queues in its pool; it is always ready to take a request.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let inner = match upstream::Request::try_from(req.map(upstream::Body::wrap)) {
            Ok(req) => Inner::Pending(Box::pin(self.client.execute(req))),
            Err(err) => Inner::Invalid(Some(err)),
        };
        ResponseFuture { inner }
    }
}

/// The response future of [`ReqwestService`].
pub struct ResponseFuture {
    inner: Inner,
}

enum Inner {
    Pending(Pending),
    /// The request could not be converted (a URI reqwest does not accept, …).
    Invalid(Option<upstream::Error>),
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<upstream::Body>, upstream::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Pending(pending) => pending.as_mut().poll(cx).map_ok(into_http_response),
            Inner::Invalid(err) => Poll::Ready(Err(err
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner {
            Inner::Pending(_) => "Pending",
            Inner::Invalid(_) => "Invalid",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

/// Converts a response for the `http` world, keeping its URL: reqwest's own conversion drops
/// it, and `reqwest::Response::from` reads it back from this extension.
fn into_http_response(response: upstream::Response) -> http::Response<upstream::Body> {
    use upstream::ResponseBuilderExt;

    let url = response.url().clone();
    let mut response = http::Response::from(response);
    // An empty builder given only an extension cannot fail to build.
    if let Ok(carrier) = http::Response::builder().url(url).body(()) {
        response
            .extensions_mut()
            .extend(carrier.into_parts().0.extensions);
    }
    response
}

impl crate::classify::AsError for upstream::Error {
    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}
