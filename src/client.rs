//! [`BoxHttpClient`]: a retrying HTTP client as one short, clonable type.
//!
//! A client behind the retry layer has a type that spells out the whole stack —
//! `ReplayBodyService<RetryService<ConstantBackOff, Client<HttpConnector, …>>>` —
//! which nobody wants to write in a struct field or in axum's `State`. [`box_http_client`]
//! erases it into a [`BoxHttpClient`] named only by its request and response bodies, at
//! the cost of one boxed future per request.

use http::{Request, Response};
use std::error::Error;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use tower_service::Service;

/// Any HTTP client service taking `http::Request<ReqB>` and answering
/// `http::Response<ResB>`, boxed: `Clone + Send + Sync`, so it fits in axum's `State`, in
/// an `Arc`-free struct field, or behind a trait object.
///
/// Errors are boxed too (`Box<dyn Error + Send + Sync>`); downcast them to the client's
/// error type when needed. Build one with [`box_http_client`].
pub type BoxHttpClient<ReqB, ResB> =
    BoxCloneSyncService<Request<ReqB>, Response<ResB>, Box<dyn Error + Send + Sync>>;

/// Boxes `client` — typically a `ServiceBuilder` stack with a
/// [`RetryLayer`](crate::RetryLayer) over an HTTP client — into a [`BoxHttpClient`].
///
/// ```
/// use std::time::Duration;
/// use tower::{ServiceBuilder, ServiceExt};
/// use tower_backoff::client::{BoxHttpClient, box_http_client};
/// use tower_backoff::{ConstantBackOff, RetryLayer};
///
/// /// Application state: the type names the bodies, not the middleware stack.
/// #[derive(Clone)]
/// struct AppState {
///     upstream: BoxHttpClient<String, String>,
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// // Stands in for hyper-util's client: 503 once, then 200.
/// let mut calls = 0;
/// let http = tower::service_fn(move |_: http::Request<String>| {
///     calls += 1;
///     let status = if calls == 1 { 503 } else { 200 };
///     let res = http::Response::builder().status(status).body(String::from("ok"));
///     async move { Ok::<_, std::io::Error>(res.unwrap()) }
/// });
/// let state = AppState {
///     upstream: box_http_client(
///         ServiceBuilder::new()
///             .layer(RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap()))
///             .service(http),
///     ),
/// };
///
/// let req = http::Request::get("http://upstream/items").body(String::new()).unwrap();
/// let res = state.upstream.clone().oneshot(req).await.unwrap();
/// assert_eq!(res.status(), 200);
/// # }
/// ```
pub fn box_http_client<S, ReqB, ResB>(client: S) -> BoxHttpClient<ReqB, ResB>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + Sync + 'static,
    S::Error: Into<Box<dyn Error + Send + Sync>> + 'static,
    S::Future: Send + 'static,
{
    BoxCloneSyncService::new(client.map_err(Into::into))
}
