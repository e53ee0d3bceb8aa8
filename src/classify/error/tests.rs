use super::*;
use crate::error::pacing::PacingError;
use proptest::prelude::*;
use std::fmt;
use std::time::Duration;

use crate::error::BoxError;

/// An error type the classifier does not know, wrapping another.
#[derive(Debug)]
struct Opaque(BoxError);

impl fmt::Display for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request failed")
    }
}

impl Error for Opaque {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

fn opaque(inner: impl Into<BoxError>) -> Opaque {
    Opaque(inner.into())
}

fn pacing() -> PacingError {
    PacingError::WaitTooLong {
        wait: Duration::from_secs(2),
        max_wait: Duration::from_secs(1),
    }
}

const ROUTE_KINDS: [io::ErrorKind; 3] = [
    io::ErrorKind::HostUnreachable,
    io::ErrorKind::NetworkUnreachable,
    io::ErrorKind::AddrNotAvailable,
];

#[test]
fn a_bare_connection_refused_is_a_connect_failure() {
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    assert_eq!(default_error_class(&refused), ErrorClass::Connect);
    let boxed: BoxError = Box::new(refused);
    assert_eq!(
        default_error_class(boxed.as_error().unwrap()),
        ErrorClass::Connect
    );
}

#[test]
fn a_bare_route_error_may_come_from_an_established_connection() {
    for kind in ROUTE_KINDS {
        let err = io::Error::from(kind);
        assert_eq!(default_error_class(&err), ErrorClass::Transport, "{kind:?}");
        let err = io::Error::new(kind, "no route to host");
        assert_eq!(default_error_class(&err), ErrorClass::Transport, "{kind:?}");
    }
}

#[test]
fn connection_refused_under_an_unknown_wrapper_proves_nothing() {
    let err: BoxError = Box::new(opaque(io::Error::from(io::ErrorKind::ConnectionRefused)));
    assert_eq!(
        default_error_class(err.as_error().unwrap()),
        ErrorClass::Transport
    );
    // An io::Error of another kind wrapping it, e.g. a body stream's error.
    let err = io::Error::other(io::Error::from(io::ErrorKind::ConnectionRefused));
    assert_eq!(default_error_class(&err), ErrorClass::Transport);
}

#[test]
fn other_io_errors_are_transport_errors() {
    for kind in [
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::TimedOut,
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::BrokenPipe,
    ] {
        assert_eq!(
            default_error_class(&io::Error::from(kind)),
            ErrorClass::Transport,
            "{kind:?}"
        );
        assert_eq!(
            default_error_class(&opaque(io::Error::from(kind))),
            ErrorClass::Transport,
            "{kind:?}"
        );
    }
}

#[test]
fn a_pacing_refusal_is_fatal_wherever_it_is() {
    assert_eq!(default_error_class(&pacing()), ErrorClass::Fatal);
    assert_eq!(default_error_class(&opaque(pacing())), ErrorClass::Fatal);
    let err = io::Error::new(io::ErrorKind::ConnectionRefused, pacing());
    assert_eq!(default_error_class(&err), ErrorClass::Fatal);
}

#[test]
fn only_connect_and_unprocessed_were_never_processed() {
    assert!(ErrorClass::Connect.never_processed());
    assert!(ErrorClass::Unprocessed.never_processed());
    assert!(!ErrorClass::Transport.never_processed());
    assert!(!ErrorClass::Fatal.never_processed());
}

/// A port nothing listens on: bound, never listening, for the whole test process, so no
/// server of a test running alongside can take it.
#[cfg(any(feature = "hyper", feature = "reqwest", feature = "tonic"))]
fn closed_port() -> std::net::SocketAddr {
    static CLOSED: std::sync::OnceLock<(tokio::net::TcpSocket, std::net::SocketAddr)> =
        std::sync::OnceLock::new();
    CLOSED
        .get_or_init(|| {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let addr = socket.local_addr().unwrap();
            (socket, addr)
        })
        .1
}

/// An h2 server (the `h2` crate) that resets every stream with `reason`.
#[cfg(any(feature = "hyper", feature = "tonic"))]
async fn resetting_server(reason: h2::Reason) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(stream).await.unwrap();
        while let Some(Ok((_req, mut respond))) = conn.accept().await {
            respond.send_reset(reason);
        }
    });
    format!("http://{addr}/")
}

#[cfg(feature = "hyper")]
mod hyper_client {
    //! Errors of the real hyper-util legacy client against real sockets.

    use super::*;
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    pub(super) type ClientError = hyper_util::client::legacy::Error;

    pub(super) async fn post(uri: String, http2: bool) -> ClientError {
        let client = Client::builder(TokioExecutor::new())
            .http2_only(http2)
            .build_http::<Empty<Bytes>>();
        let req = http::Request::post(uri).body(Empty::new()).unwrap();
        client.request(req).await.unwrap_err()
    }

    /// Connecting to a port nothing listens on.
    pub(super) async fn connect_error() -> ClientError {
        post(format!("http://{}/", closed_port()), false).await
    }

    /// The server reads the request, then aborts the connection (RST).
    pub(super) async fn send_error() -> ClientError {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0; 1024];
            let _ = stream.read(&mut buf).await;
            stream.set_zero_linger().unwrap();
        });
        post(format!("http://{addr}/"), false).await
    }

    fn has_io_kind(err: &(dyn Error + 'static), kind: io::ErrorKind) -> bool {
        let mut e = Some(err);
        while let Some(err) = e {
            if err
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == kind)
            {
                return true;
            }
            e = next_in_chain(err);
        }
        false
    }

    #[tokio::test]
    async fn a_connect_error_of_hyper_util_is_a_connect_failure() {
        let err = connect_error().await;
        assert!(err.is_connect());
        assert_eq!(default_error_class(&err), ErrorClass::Connect);
        // Its verdict holds under wrappers of any kind.
        let wrapped = io::Error::new(io::ErrorKind::HostUnreachable, opaque(err));
        assert_eq!(default_error_class(&wrapped), ErrorClass::Connect);
    }

    #[tokio::test]
    async fn a_send_error_of_hyper_util_is_a_transport_error_whatever_io_error_it_holds() {
        let err = send_error().await;
        assert!(!err.is_connect(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Transport);
        // Wrapped in an io::Error of a connect-looking kind, the client's verdict decides:
        // with the chain walked through `io::Error::source`, the client error was skipped.
        for kind in [io::ErrorKind::ConnectionRefused]
            .into_iter()
            .chain(ROUTE_KINDS)
        {
            let wrapped = io::Error::new(kind, send_error().await);
            assert_eq!(
                default_error_class(&wrapped),
                ErrorClass::Transport,
                "{kind:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_connect_error_is_told_apart_from_the_io_error_it_holds() {
        // The connect error holds the io::Error `ConnectionRefused` deep in its chain.
        let err = connect_error().await;
        assert!(
            has_io_kind(&err, io::ErrorKind::ConnectionRefused),
            "{err:?}"
        );
    }
}

#[cfg(feature = "hyper")]
mod http2 {
    //! Streams refused by a real HTTP/2 server, seen through the real hyper-util client.

    use super::hyper_client::{ClientError, post};
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    #[tokio::test]
    async fn a_stream_refused_by_the_server_was_not_processed() {
        let err = post(resetting_server(h2::Reason::REFUSED_STREAM).await, true).await;
        assert_eq!(
            default_error_class(&err),
            ErrorClass::Unprocessed,
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_stream_cancelled_by_the_server_may_have_been_processed() {
        let err = post(resetting_server(h2::Reason::CANCEL).await, true).await;
        assert_eq!(default_error_class(&err), ErrorClass::Transport, "{err:?}");
    }

    /// Writes one HTTP/2 frame.
    async fn frame(io: &mut TcpStream, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
        let mut buf = vec![len[1], len[2], len[3], kind, flags];
        buf.extend_from_slice(&stream.to_be_bytes());
        buf.extend_from_slice(payload);
        io.write_all(&buf).await.unwrap();
    }

    /// A minimal server: settles the connection, waits for the client's first request
    /// (its HEADERS frame), then sends `GOAWAY` with `last_stream_id` and closes.
    async fn go_away_server(last_stream_id: u32) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut io, _) = listener.accept().await.unwrap();
            frame(&mut io, 0x4, 0, 0, &[]).await; // SETTINGS
            let mut preface = [0; 24];
            io.read_exact(&mut preface).await.unwrap();
            loop {
                let mut head = [0; 9];
                io.read_exact(&mut head).await.unwrap();
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                let mut payload = vec![0; len];
                io.read_exact(&mut payload).await.unwrap();
                match head[3] {
                    0x4 if head[4] & 1 == 0 => frame(&mut io, 0x4, 1, 0, &[]).await,
                    0x1 => break, // HEADERS: the request
                    _ => {}
                }
            }
            let mut go_away = last_stream_id.to_be_bytes().to_vec();
            go_away.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
            frame(&mut io, 0x7, 0, 0, &go_away).await;
            io.shutdown().await.unwrap();
            let mut rest = Vec::new();
            let _ = io.read_to_end(&mut rest).await;
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn a_stream_above_the_last_stream_id_of_a_go_away_was_not_processed() {
        let err: ClientError = post(go_away_server(0).await, true).await;
        assert_eq!(
            default_error_class(&err),
            ErrorClass::Unprocessed,
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_stream_at_the_last_stream_id_of_a_go_away_may_have_been_processed() {
        // The client's first stream is 1: the server says it may process it, then closes.
        let err: ClientError = post(go_away_server(1).await, true).await;
        assert_eq!(default_error_class(&err), ErrorClass::Transport, "{err:?}");
    }
}

#[cfg(feature = "reqwest")]
mod reqwest_client {
    //! Errors of the real reqwest client.

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server answering every request on a fresh connection with `response`.
    async fn raw_server(response: &'static [u8]) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut buf = [0; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(response).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_request_reqwest_cannot_build_is_fatal() {
        let err = reqwest::Client::new()
            .get("http://")
            .send()
            .await
            .unwrap_err();
        assert!(err.is_builder(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Fatal);
    }

    #[tokio::test]
    async fn a_connect_error_of_reqwest_is_a_connect_failure() {
        let err = reqwest::Client::new()
            .post(format!("http://{}/", closed_port()))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Connect);
    }

    /// `ReqwestService` removes the URL of an error whose request reached the server (a
    /// redirect target failed): its connect verdict is then no proof, for every preset.
    #[tokio::test]
    async fn a_connect_error_without_its_url_is_a_transport_error() {
        use crate::classify::{Attempt, Classify, GrpcClassifier, HttpClassifier};
        use crate::classify::{RequestHead, Resend, StatusSet};
        let err = reqwest::Client::new()
            .post(format!("http://{}/", closed_port()))
            .send()
            .await
            .unwrap_err()
            .without_url();
        assert!(err.is_connect(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Transport);
        assert_eq!(default_error_class(&opaque(err)), ErrorClass::Transport);

        let err = reqwest::Client::new()
            .post(format!("http://{}/", closed_port()))
            .send()
            .await
            .unwrap_err()
            .without_url();
        let req = http::Request::post("/").body(()).unwrap();
        let attempt = Attempt::new(RequestHead::of(&req), 1, &StatusSet::DEFAULT);
        let http = HttpClassifier::new().classify_error(&attempt, &err);
        assert_eq!(http.resend(), Resend::IfIdempotent);
        let grpc = GrpcClassifier::new().classify_error(&attempt, &err);
        assert_eq!(grpc.resend(), Resend::IfIdempotent);
    }

    #[tokio::test]
    async fn a_redirect_loop_is_fatal() {
        let addr = raw_server(
            b"HTTP/1.1 302 Found\r\nLocation: /\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        let err = reqwest::Client::new()
            .get(format!("http://{addr}/"))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_redirect(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Fatal);
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_request_is_a_transport_error() {
        let addr = raw_server(b"").await;
        let err = reqwest::Client::new()
            .post(format!("http://{addr}/"))
            .body("{}")
            .send()
            .await
            .unwrap_err();
        assert!(!err.is_connect(), "{err:?}");
        assert_eq!(default_error_class(&err), ErrorClass::Transport);
    }
}

#[cfg(feature = "tonic")]
mod tonic_channel {
    //! Errors of a real tonic channel.

    use super::*;
    use tonic::transport::Endpoint;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_channel_that_cannot_connect_fails_with_a_connect_error() {
        let endpoint = Endpoint::from_shared(format!("http://{}", closed_port())).unwrap();
        let err = endpoint.connect().await.unwrap_err();
        assert_eq!(default_error_class(&err), ErrorClass::Connect, "{err:?}");

        // A lazy channel fails the call itself.
        let channel = endpoint.connect_lazy();
        let req = http::Request::post("/a.B/C")
            .body(tonic::body::Body::empty())
            .unwrap();
        let err = channel.oneshot(req).await.unwrap_err();
        assert_eq!(default_error_class(&err), ErrorClass::Connect, "{err:?}");
    }

    #[tokio::test]
    async fn a_call_refused_by_the_server_was_not_processed() {
        for (reason, class) in [
            (h2::Reason::REFUSED_STREAM, ErrorClass::Unprocessed),
            (h2::Reason::CANCEL, ErrorClass::Transport),
        ] {
            let uri = resetting_server(reason).await;
            let channel = Endpoint::from_shared(uri).unwrap().connect().await.unwrap();
            let req = http::Request::post("/a.B/C")
                .body(tonic::body::Body::empty())
                .unwrap();
            let err = channel.oneshot(req).await.unwrap_err();
            assert_eq!(default_error_class(&err), class, "{err:?}");
        }
    }
}

// ---- random chains ----

/// What the innermost error of a generated chain is.
#[derive(Debug, Clone)]
enum Leaf {
    Io(io::ErrorKind),
    Pacing,
    #[cfg(feature = "hyper")]
    HyperConnect,
    #[cfg(feature = "hyper")]
    HyperSend,
}

/// A wrapper around the rest of the chain.
#[derive(Debug, Clone)]
enum Wrap {
    Opaque,
    Io(io::ErrorKind),
}

fn io_kind() -> impl Strategy<Value = io::ErrorKind> {
    prop::sample::select(vec![
        io::ErrorKind::ConnectionRefused,
        io::ErrorKind::HostUnreachable,
        io::ErrorKind::NetworkUnreachable,
        io::ErrorKind::AddrNotAvailable,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::TimedOut,
        io::ErrorKind::BrokenPipe,
        io::ErrorKind::Other,
    ])
}

fn leaf() -> impl Strategy<Value = Leaf> {
    let leaves = vec![
        io_kind().prop_map(Leaf::Io).boxed(),
        Just(Leaf::Pacing).boxed(),
    ];
    #[cfg(feature = "hyper")]
    let leaves = {
        let mut leaves = leaves;
        leaves.push(Just(Leaf::HyperConnect).boxed());
        leaves.push(Just(Leaf::HyperSend).boxed());
        leaves
    };
    prop::strategy::Union::new(leaves)
}

fn wrap() -> impl Strategy<Value = Wrap> {
    prop_oneof![Just(Wrap::Opaque), io_kind().prop_map(Wrap::Io)]
}

/// Real client errors, made once, shared by every generated chain.
#[cfg(feature = "hyper")]
struct Samples {
    connect: std::sync::Arc<hyper_client::ClientError>,
    send: std::sync::Arc<hyper_client::ClientError>,
}

#[cfg(feature = "hyper")]
fn samples() -> &'static Samples {
    static SAMPLES: std::sync::OnceLock<Samples> = std::sync::OnceLock::new();
    SAMPLES.get_or_init(|| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            Samples {
                connect: hyper_client::connect_error().await.into(),
                send: hyper_client::send_error().await.into(),
            }
        })
    })
}

/// A shared client error, seen through an unknown wrapper.
#[cfg(feature = "hyper")]
#[derive(Debug)]
struct Shared(std::sync::Arc<hyper_client::ClientError>);

#[cfg(feature = "hyper")]
impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(feature = "hyper")]
impl Error for Shared {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

fn build(leaf: &Leaf, wraps: &[Wrap]) -> BoxError {
    let mut err: BoxError = match leaf {
        Leaf::Io(kind) => Box::new(io::Error::from(*kind)),
        Leaf::Pacing => Box::new(pacing()),
        #[cfg(feature = "hyper")]
        Leaf::HyperConnect => Box::new(Shared(samples().connect.clone())),
        #[cfg(feature = "hyper")]
        Leaf::HyperSend => Box::new(Shared(samples().send.clone())),
    };
    // `wraps[0]` is the outermost.
    for w in wraps.iter().rev() {
        err = match w {
            Wrap::Opaque => Box::new(Opaque(err)),
            Wrap::Io(kind) => Box::new(io::Error::new(*kind, err)),
        };
    }
    err
}

/// The rule, stated once more on the shape of the chain.
fn expected(leaf: &Leaf, wraps: &[Wrap]) -> ErrorClass {
    match leaf {
        Leaf::Pacing => return ErrorClass::Fatal,
        #[cfg(feature = "hyper")]
        Leaf::HyperConnect => return ErrorClass::Connect,
        #[cfg(feature = "hyper")]
        Leaf::HyperSend => return ErrorClass::Transport,
        Leaf::Io(_) => {}
    }
    let top = match (wraps.first(), leaf) {
        (Some(Wrap::Io(kind)), _) | (None, Leaf::Io(kind)) => Some(*kind),
        _ => None,
    };
    if top == Some(io::ErrorKind::ConnectionRefused) {
        ErrorClass::Connect
    } else {
        ErrorClass::Transport
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_chain_is_connect_only_with_proof_from_the_connect_phase(
        leaf in leaf(),
        wraps in prop::collection::vec(wrap(), 0..5),
    ) {
        let err = build(&leaf, &wraps);
        let class = default_error_class(err.as_error().unwrap());
        prop_assert_eq!(class, expected(&leaf, &wraps));

        // The safety property itself: Connect needs a connect-phase verdict, or a bare
        // ConnectionRefused at the top with no client error under it.
        if class == ErrorClass::Connect {
            #[cfg(feature = "hyper")]
            let verdict = matches!(leaf, Leaf::HyperConnect);
            #[cfg(not(feature = "hyper"))]
            let verdict = false;
            let top_refused = match wraps.first() {
                Some(Wrap::Io(kind)) => *kind == io::ErrorKind::ConnectionRefused,
                Some(Wrap::Opaque) => false,
                None => matches!(leaf, Leaf::Io(io::ErrorKind::ConnectionRefused)),
            };
            prop_assert!(
                verdict || (top_refused && matches!(leaf, Leaf::Io(_))),
                "{:?} under {:?} classed Connect", leaf, wraps
            );
        }
    }
}
