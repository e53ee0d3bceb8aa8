//! [`ReqwestService`]: a `reqwest::Client` as a tower service of `http::Request`s.

use super::upstream;
use bytes::Bytes;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
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
/// accepted; requests and responses keep their method, URI, headers and status. A body of
/// known length up to 64 KiB that is all in memory is handed to reqwest whole, so that
/// reqwest can follow a 307 or 308 with it; any other streams, under the length it declared
/// (as reqwest sends the body itself). Cloning is cheap: a
/// `reqwest::Client` is a handle to a shared pool.
///
/// # Errors after a redirect
///
/// reqwest follows redirects itself, and its error then still names the first URL. A
/// connect error of a redirect target would thus look like the request's own, which
/// [`default_error_class`](crate::classify::default_error_class) resends whatever the
/// method. So when the request provably reached the server, its error loses its URL
/// (`reqwest::Error::url()` is `None`) and is classed
/// [`Transport`](crate::classify::ErrorClass::Transport):
///
/// - any error, once reqwest followed a 301, 302 or 303 (it drops a whole body then);
/// - a connect error, once reqwest read a streamed body (it reads one only when connected).
///
/// A connect error of a 307 or 308 target keeps its URL and stays a connect error: the
/// server asked for the request to be sent there, so it did not act on it.
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
        let seen = Seen::default();
        let small = req
            .body()
            .size_hint()
            .exact()
            .filter(|&len| len <= WHOLE_BODY);
        let req = match small {
            Some(len) => req.map(|body| read_ready(body, len, &seen)),
            None => req.map(|body| streamed(body, &seen)),
        };
        let inner = match upstream::Request::try_from(req) {
            Ok(req) => Inner::Pending(Box::pin(self.client.execute(req)), seen),
            Err(err) => Inner::Invalid(Some(err)),
        };
        ResponseFuture { inner }
    }
}

/// A request body of known length up to this size is handed to reqwest whole when it is
/// all there already (in memory): reqwest can then send it again itself when it follows
/// a 307 or 308 redirect, which it cannot do with a stream (it returns the redirect).
const WHOLE_BODY: u64 = 64 * 1024;

/// What the request's body tells of how far the request went, shared with its future.
#[derive(Default)]
struct Seen {
    /// reqwest dropped a whole body while the request ran: it followed a 301, 302 or 303,
    /// which it does with no body. It holds a copy for a 307 or 308 until the end.
    redirected: Arc<AtomicBool>,
    /// reqwest read a streamed body: hyper reads one only over an established connection.
    connected: Arc<AtomicBool>,
}

impl Seen {
    /// `err` as it should reach the classifier: without the first URL when the request
    /// reached the server, since the failure was then elsewhere (see [`ReqwestService`]).
    fn error(&self, err: upstream::Error) -> upstream::Error {
        let elsewhere = self.redirected.load(Ordering::Acquire)
            || (err.is_connect() && self.connected.load(Ordering::Acquire));
        if elsewhere { err.without_url() } else { err }
    }
}

/// A whole body for reqwest, which tells `seen` when reqwest has dropped every copy.
fn whole(data: Bytes, seen: &Seen) -> upstream::Body {
    upstream::Body::from(Bytes::from_owner(Whole {
        data,
        dropped: seen.redirected.clone(),
    }))
}

/// The owner of a whole body's bytes: dropped with the last copy reqwest holds.
struct Whole {
    data: Bytes,
    dropped: Arc<AtomicBool>,
}

impl AsRef<[u8]> for Whole {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Whole {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Release);
    }
}

/// A streamed body for reqwest, which tells `seen` when it is first read.
fn streamed<B>(body: B, seen: &Seen) -> upstream::Body
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    upstream::Body::wrap(Read {
        body,
        read: seen.connected.clone(),
    })
}

pin_project_lite::pin_project! {
    /// A streamed body that notes its first read.
    struct Read<B> {
        #[pin]
        body: B,
        read: Arc<AtomicBool>,
    }
}

impl<B> http_body::Body for Read<B>
where
    B: http_body::Body,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let this = self.project();
        this.read.store(true, Ordering::Release);
        this.body
            .poll_frame(cx)
            .map_ok(|frame| frame.map_data(Into::into))
            .map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// `body` for reqwest: whole (`Bytes`) if all of it is ready now, without waiting; else
/// streamed, what was read first and then the rest (a body still arriving is not waited
/// for before the request goes, so reqwest's timeouts cover it as before).
fn read_ready<B>(body: B, len: u64, seen: &Seen) -> upstream::Body
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = Box::pin(body);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut read: Vec<Bytes> = Vec::new();
    let mut total = 0_u64;
    loop {
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    let data: Bytes = data.into();
                    total = total.saturating_add(data.len() as u64);
                    if total > len {
                        // Longer than it said: streamed under the length it said, which
                        // hyper cuts it to, as reqwest does with the body itself.
                        read.push(data);
                        return streamed(Prefixed::new(read, Some(body), len), seen);
                    }
                    read.push(data);
                }
                // Trailers: streamed, so that they go wherever reqwest sends them with the
                // body itself (over HTTP/1.1, a body of known length goes without).
                Err(frame) => {
                    let mut rest = Prefixed::<B>::new(read, None, len);
                    rest.trailers = frame.into_trailers().ok();
                    return streamed(rest, seen);
                }
            },
            // reqwest reports the body's error as its own.
            Poll::Ready(Some(Err(err))) => return upstream::Body::wrap(Failed(Some(err.into()))),
            Poll::Ready(None) => {
                let data = match read.len() {
                    1 => read.swap_remove(0),
                    _ => read.concat().into(),
                };
                return whole(data, seen);
            }
            Poll::Pending => return streamed(Prefixed::new(read, Some(body), len), seen),
        }
    }
}

/// The frames read before the request went, then the rest of the body; of the length the
/// body said (`left` of it still to come), so that it goes with a `Content-Length` as the
/// body itself would.
struct Prefixed<B> {
    read: std::collections::VecDeque<Bytes>,
    trailers: Option<http::HeaderMap>,
    rest: Option<Pin<Box<B>>>,
    left: u64,
}

impl<B> Prefixed<B> {
    fn new(read: Vec<Bytes>, rest: Option<Pin<Box<B>>>, len: u64) -> Self {
        Self {
            read: read.into(),
            trailers: None,
            rest,
            left: len,
        }
    }

    fn data(&mut self, data: Bytes) -> http_body::Frame<Bytes> {
        self.left = self.left.saturating_sub(data.len() as u64);
        http_body::Frame::data(data)
    }
}

impl<B> http_body::Body for Prefixed<B>
where
    B: http_body::Body,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        if let Some(data) = self.read.pop_front() {
            return Poll::Ready(Some(Ok(self.data(data))));
        }
        if let Some(trailers) = self.trailers.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))));
        }
        let Some(rest) = self.rest.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = match ready!(rest.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => Ok(self.data(data.into())),
                Err(frame) => Ok(frame.map_data(Into::into)),
            },
            Some(Err(err)) => Err(err.into()),
            None => return Poll::Ready(None),
        };
        Poll::Ready(Some(frame))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
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
    Pending(Pending, Seen),
    /// The request could not be converted (a URI reqwest does not accept, …).
    Invalid(Option<upstream::Error>),
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<upstream::Body>, upstream::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Pending(pending, seen) => match ready!(pending.as_mut().poll(cx)) {
                Ok(response) => Poll::Ready(Ok(into_http_response(response))),
                Err(err) => Poll::Ready(Err(seen.error(err))),
            },
            Inner::Invalid(err) => Poll::Ready(Err(err
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner {
            Inner::Pending(..) => "Pending",
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
