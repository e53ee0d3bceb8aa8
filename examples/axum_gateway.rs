//! An axum gateway that calls a flaky upstream, with retry settings chosen per route.
//!
//! - `GET /search` calls the upstream through a client with an aggressive retry: a short
//!   constant backoff and up to 5 attempts (a search is idempotent and cheap).
//! - `POST /checkout` calls it through a client with a cautious exponential backoff and the
//!   default method rule: a POST is retried only when the caller sent an `Idempotency-Key`
//!   (forwarded to the upstream, which can then deduplicate) or when it never reached the
//!   upstream (connection refused).
//! - `GET /inventory/{item}` shows the layer on the server side, through axum's
//!   `route_layer`: the whole handler is retried when it answers 503. axum's request body is
//!   not `Clone`, so it is made replayable first (`replay_bodies`).
//!
//! Every response says how many upstream attempts it took (`x-upstream-attempts`).
//! Everything runs on 127.0.0.1 and stops by itself: `cargo run --example axum_gateway --features hyper`.

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::time::Duration;
use tower::ServiceBuilder;
use tower::ServiceExt;
use tower_backoff::body::DEFAULT_MAX_BYTES;
use tower_backoff::body::ReplayBody;
use tower_backoff::classify::IDEMPOTENCY_KEY;
use tower_backoff::client::{BoxHttpClient, box_http_client};
use tower_backoff::{
    ConstantBackOff, ExponentialBackOff, RetryError, RetryLayer, RetrySettings, RetryStats,
};

/// The upstream client without retries.
type HttpClient = Client<HttpConnector, Full<Bytes>>;
/// The upstream client behind a retry layer, boxed: its type names the bodies, not the
/// middleware stack, and every route's client has the same type whatever its backoff.
type RetryClient = BoxHttpClient<Full<Bytes>, hyper::body::Incoming>;

/// The header telling how many upstream attempts an answer took.
pub const ATTEMPTS: &str = "x-upstream-attempts";
/// The header telling how many times the route layer ran the handler.
pub const HANDLER_ATTEMPTS: &str = "x-handler-attempts";

/// The gateway's state: one upstream client per retry need.
#[derive(Clone)]
pub struct Gateway {
    upstream: SocketAddr,
    search: RetryClient,
    checkout: RetryClient,
    plain: HttpClient,
}

impl Gateway {
    /// The gateway's clients for `upstream`.
    pub fn new(upstream: SocketAddr) -> Self {
        let http: HttpClient = Client::builder(TokioExecutor::new()).build_http();
        // Searches: retried fast and often.
        let search = box_http_client(
            ServiceBuilder::new()
                .layer(
                    RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
                        .with_settings(RetrySettings::new().with_max_attempts(5).expect("5 > 0")),
                )
                .service(http.clone()),
        );
        // Checkouts: fewer, slower retries, and POSTs only with an Idempotency-Key.
        let backoff = ExponentialBackOff::builder()
            .with_initial_interval(Duration::from_millis(50))
            .build()
            .expect("a valid backoff");
        let checkout = box_http_client(
            ServiceBuilder::new()
                .layer(RetryLayer::new(backoff))
                .service(http.clone()),
        );
        Gateway {
            upstream,
            search,
            checkout,
            plain: http,
        }
    }

    /// The gateway's routes.
    pub fn router(self) -> Router {
        // Server side: retry the whole inventory handler on 503. The body is made
        // replayable first, and handed back to axum as its own `Body` type.
        let retry_handler = ServiceBuilder::new()
            .layer(HandleErrorLayer::new(|err: RetryError| async move {
                (StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
            }))
            .map_response(handler_attempts)
            .layer(
                RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
                    .replay_bodies(DEFAULT_MAX_BYTES),
            )
            .map_request(|req: Request<ReplayBody<Body>>| req.map(Body::new));
        Router::new()
            .route("/inventory/{item}", get(inventory))
            .route_layer(retry_handler)
            .route("/search", get(search))
            .route("/checkout", post(checkout))
            .with_state(self)
    }
}

async fn search(State(gw): State<Gateway>, uri: Uri) -> Response {
    let query = uri.query().unwrap_or_default();
    let req = Request::get(format!("http://{}/search?{query}", gw.upstream))
        .body(Full::default())
        .expect("a valid request");
    relay(gw.search.oneshot(req).await).await
}

async fn checkout(State(gw): State<Gateway>, headers: HeaderMap, body: Bytes) -> Response {
    let mut req = Request::post(format!("http://{}/checkout", gw.upstream));
    if let Some(key) = headers.get(IDEMPOTENCY_KEY) {
        req = req.header(IDEMPOTENCY_KEY, key);
    }
    let req = req.body(Full::new(body)).expect("a valid request");
    relay(gw.checkout.oneshot(req).await).await
}

async fn inventory(State(gw): State<Gateway>, Path(item): Path<String>) -> Response {
    let req = Request::get(format!("http://{}/inventory/{item}", gw.upstream))
        .body(Full::default())
        .expect("a valid request");
    relay(gw.plain.oneshot(req).await).await
}

/// Answers with the upstream's response, plus the number of attempts it took.
async fn relay<E: std::fmt::Display>(
    result: Result<http::Response<hyper::body::Incoming>, E>,
) -> Response {
    match result {
        Ok(res) => {
            let attempts = res
                .extensions()
                .get::<RetryStats>()
                .map_or(1, |s| s.attempts);
            let mut res = res.map(Body::new);
            res.headers_mut()
                .insert(ATTEMPTS, HeaderValue::from(attempts));
            res
        }
        Err(err) => (StatusCode::BAD_GATEWAY, format!("upstream failed: {err}")).into_response(),
    }
}

/// Tells the caller how many times the retried handler ran.
fn handler_attempts(mut res: Response) -> Response {
    if let Some(stats) = res.extensions().get::<RetryStats>().copied() {
        res.headers_mut()
            .insert(HANDLER_ATTEMPTS, HeaderValue::from(stats.attempts));
    }
    res
}

/// Serves `router` on a free loopback port.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A demo upstream: every path fails twice with 503, then answers 200.
async fn flaky_upstream() -> SocketAddr {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let calls = calls.clone();
        async move {
            let path = uri.path().to_owned();
            let n = {
                let mut calls = calls.lock().unwrap();
                let n = calls.entry(path.clone()).or_default();
                *n += 1;
                *n
            };
            let keyed = headers.contains_key(IDEMPOTENCY_KEY);
            if n <= 2 {
                (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
            } else {
                format!("{path}: ok on call {n} (idempotency key: {keyed})").into_response()
            }
        }
    });
    serve(app).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let upstream = flaky_upstream().await;
    let gateway = serve(Gateway::new(upstream).router()).await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();

    let calls = [
        ("GET", "/search?q=tower", None),
        ("POST", "/checkout", None),
        ("POST", "/checkout", Some("order-42")),
        ("GET", "/inventory/widget", None),
    ];
    for (method, path, key) in calls {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{gateway}{path}"));
        if let Some(key) = key {
            req = req.header(IDEMPOTENCY_KEY, key);
        }
        let res = client
            .request(req.body(Full::new(Bytes::from("{}")))?)
            .await?;
        let status = res.status();
        let header = |name| {
            res.headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        let (attempts, handler) = (header(ATTEMPTS), header(HANDLER_ATTEMPTS));
        let body = res.into_body().collect().await?.to_bytes();
        println!(
            "{method} {path} (key {key:?}) -> {status}; upstream attempts {attempts}, \
             handler runs {handler}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}
