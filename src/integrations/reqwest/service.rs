//! [`ReqwestService`]: a `reqwest::Client` as a tower service of `http::Request`s.

use super::upstream;
use bytes::Bytes;
use http_body_util::BodyExt;
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
        if req
            .body()
            .size_hint()
            .exact()
            .is_some_and(|len| len <= WHOLE_BODY)
        {
            let client = self.client.clone();
            let (head, body) = req.into_parts();
            let pending = async move {
                let body = match read_whole(body).await {
                    Ok(whole) => upstream::Body::from(whole),
                    // reqwest reports the body's error as its own.
                    Err(err) => upstream::Body::wrap(Failed(Some(err))),
                };
                let req = upstream::Request::try_from(http::Request::from_parts(head, body))?;
                client.execute(req).await
            };
            return ResponseFuture {
                inner: Inner::Pending(Box::pin(pending)),
            };
        }
        let inner = match upstream::Request::try_from(req.map(upstream::Body::wrap)) {
            Ok(req) => Inner::Pending(Box::pin(self.client.execute(req))),
            Err(err) => Inner::Invalid(Some(err)),
        };
        ResponseFuture { inner }
    }
}

/// A request body of known length up to this size is handed to reqwest whole, not as a
/// stream: reqwest can then send it again itself when it follows a 307 or 308 redirect
/// (with a stream it cannot, and returns the redirect instead). A body this small that
/// is still streaming is read before the request is sent.
const WHOLE_BODY: u64 = 64 * 1024;

/// The whole of `body`, its data turned into `Bytes` frame by frame (so that nothing of a
/// type that may not be `Send` is held while waiting for the next).
async fn read_whole<B>(body: B) -> Result<Bytes, BoxError>
where
    B: http_body::Body,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut chunks: Vec<Bytes> = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(Into::into)?.into_data() {
            chunks.push(data.into());
        }
    }
    Ok(match chunks.len() {
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    })
}

/// A body that fails at once: what a request body that failed while read whole becomes.
struct Failed(Option<BoxError>);

impl http_body::Body for Failed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.take().map(Err))
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
