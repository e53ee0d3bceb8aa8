//! A tiny gRPC service, `test.Echo`, written by hand with tonic's codec (no protoc): a
//! server that fails on demand, and a typed client like the ones tonic-build generates.
//!
//! - `Unary(Msg) -> Msg` echoes the text; the server fails the first calls as scripted.
//! - `Sum(stream Msg) -> Msg` adds the numbers of a client stream.
//! - `Chat(stream Msg) -> stream Msg` answers each message as soon as it arrives.

#![allow(dead_code)]

use http::uri::PathAndQuery;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio_stream::{Stream, StreamExt};
use tonic::body::Body;
use tonic::client::GrpcService;
type StdError = Box<dyn std::error::Error + Send + Sync>;
use tonic::server::NamedService;
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

/// The one message of the service.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Msg {
    #[prost(string, tag = "1")]
    pub text: String,
    #[prost(int64, tag = "2")]
    pub n: i64,
}

impl Msg {
    pub fn text(text: &str) -> Self {
        Msg {
            text: text.to_owned(),
            n: 0,
        }
    }

    pub fn n(n: i64) -> Self {
        Msg {
            text: String::new(),
            n,
        }
    }
}

/// What one `Unary` call saw, in arrival order.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    /// The `grpc-previous-rpc-attempts` header, if any.
    pub previous_attempts: Option<String>,
}

/// The server's script and what it saw. Cloned into the server; the test keeps one.
#[derive(Clone, Default)]
pub struct Flaky {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    failures: VecDeque<Status>,
    sum_failures: VecDeque<Status>,
    unary: Vec<Seen>,
    sum_calls: usize,
    chat_calls: usize,
}

impl Flaky {
    /// A server whose `Unary` fails with `failures`, in order, then echoes.
    pub fn new(failures: impl IntoIterator<Item = Status>) -> Self {
        let flaky = Flaky::default();
        flaky.state.lock().unwrap().failures = failures.into_iter().collect();
        flaky
    }

    /// `n` × UNAVAILABLE, then RESOURCE_EXHAUSTED asking for a retry in `pushback_ms`.
    pub fn unavailable_then_pushback(n: usize, pushback_ms: u64) -> Self {
        let mut failures: Vec<Status> = (0..n)
            .map(|i| Status::unavailable(format!("warming up ({i})")))
            .collect();
        let mut exhausted = Status::resource_exhausted("over quota");
        exhausted.metadata_mut().insert(
            "grpc-retry-pushback-ms",
            pushback_ms.to_string().parse().unwrap(),
        );
        failures.push(exhausted);
        Flaky::new(failures)
    }

    /// Makes the first `Sum` calls fail with `failures`, in order, before reading anything.
    pub fn with_sum_failures(self, failures: impl IntoIterator<Item = Status>) -> Self {
        self.state.lock().unwrap().sum_failures = failures.into_iter().collect();
        self
    }

    /// Every `Unary` call the server received.
    pub fn unary_calls(&self) -> Vec<Seen> {
        self.state.lock().unwrap().unary.clone()
    }

    pub fn sum_calls(&self) -> usize {
        self.state.lock().unwrap().sum_calls
    }

    pub fn chat_calls(&self) -> usize {
        self.state.lock().unwrap().chat_calls
    }

    /// Serves `test.Echo` with tonic's server on 127.0.0.1 (a free port); returns its URL.
    pub async fn serve(self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .serve_with_incoming(EchoServer(self), incoming)
                .await
                .unwrap();
        });
        format!("http://{addr}")
    }

    fn unary(&self, req: Request<Msg>) -> Result<Response<Msg>, Status> {
        let mut state = self.state.lock().unwrap();
        state.unary.push(Seen {
            at: Instant::now(),
            previous_attempts: req
                .metadata()
                .get("grpc-previous-rpc-attempts")
                .map(|v| v.to_str().unwrap().to_owned()),
        });
        match state.failures.pop_front() {
            Some(status) => Err(status),
            None => Ok(Response::new(req.into_inner())),
        }
    }
}

/// The server side: a plain tower service, as tonic-build would generate it.
#[derive(Clone)]
struct EchoServer(Flaky);

impl NamedService for EchoServer {
    const NAME: &'static str = "test.Echo";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tower::Service<http::Request<Body>> for EchoServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let flaky = self.0.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Msg, Msg>::default());
            Ok(match req.uri().path() {
                "/test.Echo/Unary" => grpc.unary(UnarySvc(flaky), req).await,
                "/test.Echo/Sum" => grpc.client_streaming(SumSvc(flaky), req).await,
                "/test.Echo/Chat" => grpc.streaming(ChatSvc(flaky), req).await,
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

struct UnarySvc(Flaky);

impl tonic::server::UnaryService<Msg> for UnarySvc {
    type Response = Msg;
    type Future = std::future::Ready<Result<Response<Msg>, Status>>;

    fn call(&mut self, req: Request<Msg>) -> Self::Future {
        std::future::ready(self.0.unary(req))
    }
}

struct SumSvc(Flaky);

impl tonic::server::ClientStreamingService<Msg> for SumSvc {
    type Response = Msg;
    type Future = BoxFuture<Result<Response<Msg>, Status>>;

    fn call(&mut self, req: Request<Streaming<Msg>>) -> Self::Future {
        let failure = {
            let mut state = self.0.state.lock().unwrap();
            state.sum_calls += 1;
            state.sum_failures.pop_front()
        };
        Box::pin(async move {
            if let Some(status) = failure {
                return Err(status);
            }
            let mut stream = req.into_inner();
            let mut total = 0;
            while let Some(msg) = stream.message().await? {
                total += msg.n;
            }
            Ok(Response::new(Msg::n(total)))
        })
    }
}

struct ChatSvc(Flaky);

type ChatStream = Pin<Box<dyn Stream<Item = Result<Msg, Status>> + Send>>;

impl tonic::server::StreamingService<Msg> for ChatSvc {
    type Response = Msg;
    type ResponseStream = ChatStream;
    type Future = std::future::Ready<Result<Response<ChatStream>, Status>>;

    fn call(&mut self, req: Request<Streaming<Msg>>) -> Self::Future {
        self.0.state.lock().unwrap().chat_calls += 1;
        let replies = req.into_inner().map(|msg| {
            msg.map(|m| Msg {
                text: format!("re: {}", m.text),
                n: m.n,
            })
        });
        std::future::ready(Ok(Response::new(Box::pin(replies) as ChatStream)))
    }
}

/// The typed client, as tonic-build would generate it: works over any gRPC service,
/// a bare `Channel` or one wrapped in layers.
#[derive(Clone)]
pub struct EchoClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> EchoClient<T>
where
    T: GrpcService<Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<StdError> + Send,
{
    pub fn new(inner: T) -> Self {
        EchoClient {
            inner: tonic::client::Grpc::new(inner),
        }
    }

    async fn ready(&mut self) -> Result<(), Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {}", e.into())))
    }

    pub async fn unary(
        &mut self,
        req: impl tonic::IntoRequest<Msg>,
    ) -> Result<Response<Msg>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static("/test.Echo/Unary");
        self.inner
            .unary(req.into_request(), path, ProstCodec::<Msg, Msg>::default())
            .await
    }

    pub async fn sum(
        &mut self,
        req: impl tonic::IntoStreamingRequest<Message = Msg>,
    ) -> Result<Response<Msg>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static("/test.Echo/Sum");
        self.inner
            .client_streaming(
                req.into_streaming_request(),
                path,
                ProstCodec::<Msg, Msg>::default(),
            )
            .await
    }

    pub async fn chat(
        &mut self,
        req: impl tonic::IntoStreamingRequest<Message = Msg>,
    ) -> Result<Response<Streaming<Msg>>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static("/test.Echo/Chat");
        self.inner
            .streaming(
                req.into_streaming_request(),
                path,
                ProstCodec::<Msg, Msg>::default(),
            )
            .await
    }
}
