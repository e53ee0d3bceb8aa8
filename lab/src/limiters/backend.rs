//! HTTP/1 servers (hyper) on loopback: [`serve_each`] answers every connection, and
//! [`serve`] is the healthy backend behind HAProxy (`200 ok` to everything), also the
//! healthy destination of the two-destination case.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `200 ok` on a free loopback port until the task is aborted.
pub async fn serve() -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let ok = |_| async { Ok(Response::new(Full::new(Bytes::from_static(b"ok")))) };
    (addr, serve_each(listener, ok))
}

/// Answers every request on every connection `listener` accepts with `answer`, until the
/// task is aborted; the task holds the connections, so that aborts them too. An error of
/// `answer` closes its connection unanswered.
pub fn serve_each<F, Fut>(listener: TcpListener, answer: F) -> JoinHandle<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<Full<Bytes>>, BoxError>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let service = hyper::service::service_fn(answer.clone());
                    connections.spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service),
                    );
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    })
}
