//! Retry settings chosen per route (method and path prefix, or a function of the request
//! head), and per request through the request's extensions.

mod support;

use http::Method;
use support::scripted::Reply::*;
use support::scripted::{exact, get, layer, req, run, stats};
use tower_backoff::{RetrySettings, RetryStats, Routes};

// ---- routes and per-request settings ----

#[tokio::test(start_paused = true)]
async fn routes_choose_settings_by_method_and_path_prefix() {
    let routes = Routes::new()
        .route(
            Method::POST,
            "/uploads",
            exact().with_retry_non_idempotent(true),
        )
        .unwrap()
        .route_any("/payments", RetrySettings::disabled())
        .unwrap()
        .route_fn(|head| {
            (head.uri().path() == "/slow").then(|| exact().with_max_attempts(5).unwrap())
        });
    let routed = || layer().with_routes(routes.clone());

    let (_, arrivals) = run(routed(), req(Method::POST, "/uploads/1"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 2, "POST /uploads is retried");
    let (_, arrivals) = run(routed(), req(Method::POST, "/other"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 1, "other POSTs use the defaults");
    let (res, arrivals) = run(routed(), req(Method::GET, "/payments/7"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 1, "payments are never retried");
    assert!(res.unwrap().extensions().get::<RetryStats>().is_none());
    let (_, arrivals) = run(routed(), get(), &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 4);
    let (_, arrivals) = run(routed(), req(Method::GET, "/slow"), &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 5, "route_fn settings");
}

#[tokio::test(start_paused = true)]
async fn settings_in_the_request_extensions_override_the_routes() {
    let routes = Routes::new()
        .route_any("/", RetrySettings::disabled())
        .unwrap();
    let mut request = get();
    request
        .extensions_mut()
        .insert(exact().with_max_attempts(4).unwrap());
    let (res, arrivals) = run(
        layer().with_routes(routes.clone()),
        request,
        &[Status(503); 9],
    )
    .await;
    assert_eq!(arrivals.len(), 4);
    assert_eq!(stats(&res.unwrap()).attempts, 4);

    let mut request = get();
    request.extensions_mut().insert(RetrySettings::disabled());
    let (_, arrivals) = run(layer(), request, &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 1);
}

/// Servlet containers route `/payments;jsessionid=…` to `/payments` (RFC 3986 path
/// parameters): the route's settings follow every such spelling.
#[tokio::test(start_paused = true)]
async fn path_parameters_do_not_escape_a_route() {
    let routes = Routes::new()
        .route_any("/payments", RetrySettings::disabled())
        .unwrap();
    let routed = || layer().with_routes(routes.clone());
    for path in [
        "/payments;jsessionid=abc",
        "/payments;jsessionid=abc?x=1",
        "/payments/;x/123",
        "/payments;a=1/7;b",
        "/;x/payments",
        "/public/..;/payments",
        "/public/.;x/../payments/1",
    ] {
        let (_, arrivals) = run(routed(), req(Method::GET, path), &[Status(503)]).await;
        assert_eq!(arrivals.len(), 1, "{path}: payments are never retried");
    }
    for path in ["/paymentsx;y", "/pay;ments", "/payments%3Bx", "/Payments"] {
        let (_, arrivals) = run(routed(), req(Method::GET, path), &[Status(503)]).await;
        assert_eq!(arrivals.len(), 2, "{path}: another path, the defaults");
    }
}
