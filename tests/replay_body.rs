//! `ReplayBodyService` in front of hyper-util's legacy client, against a real hyper server on
//! loopback: streaming bodies that cannot be cloned are sent, then sent again.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tower::{Service, ServiceExt, service_fn};
use tower_backoff::body::{Capped, ReplayBody, ReplayBodyLayer, ReplayGuard};
use tower_layer::Layer;

type BoxError = Box<dyn StdError + Send + Sync>;

/// A streaming upload: chunks arrive through a channel, so it cannot be cloned.
struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
    remaining: Option<u64>,
}

fn channel_body(len: Option<u64>) -> (mpsc::Sender<Bytes>, ChannelBody) {
    let (tx, rx) = mpsc::channel(4);
    (tx, ChannelBody { rx, remaining: len })
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let chunk = std::task::ready!(self.rx.poll_recv(cx));
        if let (Some(remaining), Some(chunk)) = (self.remaining.as_mut(), chunk.as_ref()) {
            *remaining -= chunk.len() as u64;
        }
        Poll::Ready(chunk.map(|chunk| Ok(Frame::data(chunk))))
    }

    fn size_hint(&self) -> SizeHint {
        self.remaining
            .map_or_else(SizeHint::new, SizeHint::with_exact)
    }
}

/// What the server saw of one request.
#[derive(Debug)]
struct Seen {
    content_length: Option<String>,
    body: Bytes,
}

/// Starts a server on loopback that reads each request body frame by frame, reports its
/// first frame on `first_frames` as soon as it arrives, then the whole request on `seen`.
async fn server() -> (
    String,
    mpsc::UnboundedReceiver<()>,
    mpsc::UnboundedReceiver<Seen>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (first_tx, first_frames) = mpsc::unbounded_channel();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (first_tx, seen_tx) = (first_tx.clone(), seen_tx.clone());
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (first_tx, seen_tx) = (first_tx.clone(), seen_tx.clone());
                async move {
                    let content_length = req
                        .headers()
                        .get(http::header::CONTENT_LENGTH)
                        .map(|v| v.to_str().unwrap().to_owned());
                    let mut body = req.into_body();
                    let mut data = Vec::new();
                    while let Some(frame) = body.frame().await {
                        let Ok(chunk) = frame?.into_data() else {
                            continue;
                        };
                        if data.is_empty() {
                            let _ = first_tx.send(());
                        }
                        data.extend_from_slice(&chunk);
                    }
                    let len = data.len();
                    let _ = seen_tx.send(Seen {
                        content_length,
                        body: data.into(),
                    });
                    Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(len.to_string()))))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}/upload"), first_frames, seen)
}

fn client<B>() -> Client<HttpConnector, ReplayBody<B>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    Client::builder(TokioExecutor::new()).build_http()
}

/// Copies the head of `req` around a clone of its body: what a retry policy's
/// `clone_request` does.
fn clone_request<B>(req: &Request<ReplayBody<B>>) -> Request<ReplayBody<B>> {
    let mut clone = Request::new(req.body().clone());
    *clone.method_mut() = req.method().clone();
    *clone.uri_mut() = req.uri().clone();
    *clone.headers_mut() = req.headers().clone();
    clone
}

/// Both response bodies of a request sent twice, and whether its guard ended capped.
type TwoBodies = (Result<Bytes, BoxError>, Result<Bytes, BoxError>, bool);

/// A service that sends each request twice through `client`, the second time with a clone
/// taken before the first attempt, and returns both response bodies.
fn send_twice<B>(
    client: Client<HttpConnector, ReplayBody<B>>,
) -> impl Service<
    Request<ReplayBody<B>>,
    Response = TwoBodies,
    Error = BoxError,
    Future = impl Future + Send,
> + Clone
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    service_fn(move |req: Request<ReplayBody<B>>| {
        let client = client.clone();
        async move {
            let guard = req
                .extensions()
                .get::<ReplayGuard>()
                .cloned()
                .expect("ReplayBodyService puts the guard in the extensions");
            let retry = clone_request(&req);
            let first = send(&client, req).await;
            let capped = guard.is_capped();
            let second = send(&client, retry).await;
            Ok::<_, BoxError>((first, second, capped))
        }
    })
}

async fn send<B>(
    client: &Client<HttpConnector, ReplayBody<B>>,
    req: Request<ReplayBody<B>>,
) -> Result<Bytes, BoxError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let rsp = client.request(req).await?;
    assert_eq!(rsp.status(), StatusCode::OK);
    Ok(rsp.into_body().collect().await?.to_bytes())
}

/// Whether `err` or one of its sources is a [`Capped`].
fn is_capped_error(err: &(dyn StdError + 'static)) -> bool {
    let mut err = Some(err);
    while let Some(e) = err {
        if e.is::<Capped>() {
            return true;
        }
        err = e.source();
    }
    false
}

/// Fails instead of hanging if a body is not streamed.
async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn a_streaming_body_is_sent_whole_twice_through_hyper() {
    let (url, mut first_frames, mut seen) = server().await;
    let svc = ReplayBodyLayer::new().layer(send_twice(client()));

    let chunks = ["chunk-0;", "chunk-1;", "chunk-2;", "chunk-3;"];
    let (tx, body) = channel_body(None);
    let req = Request::post(&url).body(body).unwrap();
    let call = tokio::spawn(svc.oneshot(req));

    // The first attempt streams: the server holds the first chunk while the rest of the
    // body does not exist yet. Collecting the body before sending it would hang here.
    tx.send(Bytes::from_static(chunks[0].as_bytes()))
        .await
        .unwrap();
    within("first chunk reaches the server", first_frames.recv()).await;
    for chunk in &chunks[1..] {
        tx.send(Bytes::from_static(chunk.as_bytes())).await.unwrap();
    }
    drop(tx);

    let (first, second, capped) = within("both attempts", call).await.unwrap().unwrap();
    let whole = chunks.concat();
    assert_eq!(first.unwrap(), whole.len().to_string());
    assert!(!capped);
    assert_eq!(second.unwrap(), whole.len().to_string());
    assert_eq!(seen.recv().await.unwrap().body, whole);
    let retry = seen.recv().await.unwrap();
    assert_eq!(retry.body, whole);
    assert_eq!(
        retry.content_length,
        Some(whole.len().to_string()),
        "the replay knows its exact length"
    );
}

#[tokio::test]
async fn a_known_length_body_keeps_its_content_length_on_the_retry() {
    let (url, _first_frames, mut seen) = server().await;
    let svc = ReplayBodyLayer::new().layer(send_twice(client()));

    let (tx, body) = channel_body(Some(10));
    let req = Request::post(&url).body(body).unwrap();
    let call = tokio::spawn(svc.oneshot(req));
    tx.send(Bytes::from_static(b"01234")).await.unwrap();
    tx.send(Bytes::from_static(b"56789")).await.unwrap();
    drop(tx);

    let (first, second, _) = within("both attempts", call).await.unwrap().unwrap();
    assert_eq!(first.unwrap(), "10");
    assert_eq!(second.unwrap(), "10");
    for _ in 0..2 {
        let req = seen.recv().await.unwrap();
        assert_eq!(req.content_length.as_deref(), Some("10"));
        assert_eq!(req.body, "0123456789");
    }
}

/// A proxy: the body to retry is hyper's own `Incoming`, received by a front server and
/// forwarded twice to the backend.
#[tokio::test]
async fn an_incoming_body_is_forwarded_twice_by_a_proxy() {
    let (backend, _first_frames, mut seen) = server().await;

    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front_addr = front.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = front.accept().await.unwrap();
        let forward = ReplayBodyLayer::new().layer(send_twice::<Incoming>(client()));
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let forward = forward.clone();
            let backend = backend.clone();
            async move {
                let (mut parts, body) = req.into_parts();
                parts.uri = backend.parse().unwrap();
                let (first, second, capped) = forward
                    .oneshot(Request::from_parts(parts, body))
                    .await
                    .expect("both attempts are sent");
                let (first, second) = (first.expect("first"), second.expect("second"));
                let (first, second) = (
                    String::from_utf8_lossy(&first),
                    String::from_utf8_lossy(&second),
                );
                let text = format!("{first} {second} {capped}");
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
            }
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), svc)
            .await
            .unwrap();
    });

    let (tx, body) = channel_body(None);
    let user: Client<HttpConnector, ChannelBody> =
        Client::builder(TokioExecutor::new()).build_http();
    let req = Request::post(format!("http://{front_addr}/"))
        .body(body)
        .unwrap();
    let call = tokio::spawn(user.request(req));
    for chunk in ["hello", " ", "proxied", " ", "world"] {
        tx.send(Bytes::from_static(chunk.as_bytes())).await.unwrap();
    }
    drop(tx);

    let rsp = within("proxy answers", call).await.unwrap().unwrap();
    let text = rsp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(text, "19 19 false", "the backend got 19 bytes twice");
    assert_eq!(seen.recv().await.unwrap().body, "hello proxied world");
    assert_eq!(seen.recv().await.unwrap().body, "hello proxied world");
}

#[tokio::test]
async fn a_body_that_outgrows_the_cap_is_sent_once_and_its_retry_fails() {
    let (url, _first_frames, mut seen) = server().await;
    let svc = ReplayBodyLayer::new()
        .with_max_bytes(8)
        .layer(send_twice(client()));

    let (tx, body) = channel_body(None);
    let req = Request::post(&url).body(body).unwrap();
    let call = tokio::spawn(svc.oneshot(req));
    tx.send(Bytes::from_static(b"aaaaaaaa")).await.unwrap();
    tx.send(Bytes::from_static(b"bbbbbbbb")).await.unwrap();
    drop(tx);

    let (first, second, capped) = within("both attempts", call).await.unwrap().unwrap();
    assert_eq!(first.unwrap(), "16", "the first attempt is sent whole");
    assert!(capped, "the guard tells the retry policy not to retry");
    let err = second.expect_err("a capped body cannot be replayed");
    assert!(is_capped_error(&*err), "{err:?}");
    assert_eq!(seen.recv().await.unwrap().body, "aaaaaaaabbbbbbbb");
}

#[tokio::test]
async fn a_body_known_to_be_over_the_cap_passes_through_untouched() {
    let (url, _first_frames, mut seen) = server().await;
    let client = client::<ChannelBody>();
    let mut svc = ReplayBodyLayer::new().with_max_bytes(4).layer(service_fn(
        move |req: Request<ReplayBody<ChannelBody>>| {
            let client = client.clone();
            async move {
                let guard = req.extensions().get::<ReplayGuard>().cloned().unwrap();
                assert!(guard.is_capped(), "over the cap from the start");
                assert!(req.body().is_capped());
                assert_eq!(req.body().size_hint().exact(), Some(6));
                send(&client, req).await
            }
        },
    ));

    let (tx, body) = channel_body(Some(6));
    let req = Request::post(&url).body(body).unwrap();
    let call = svc.ready().await.unwrap().call(req);
    tx.send(Bytes::from_static(b"abcdef")).await.unwrap();
    drop(tx);

    assert_eq!(within("the attempt", call).await.unwrap(), "6");
    let req = seen.recv().await.unwrap();
    assert_eq!(req.body, "abcdef");
    assert_eq!(req.content_length.as_deref(), Some("6"));
}
