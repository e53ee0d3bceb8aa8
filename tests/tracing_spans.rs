//! Each attempt is a `tracing` span, child of the caller's span, named and attributed as
//! OpenTelemetry's HTTP client conventions say (`http.request.resend_count` on resends).

use http::{Request, Response};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::{Layer, ServiceExt};
use tower_backoff::{ConstantBackOff, RetryLayer};
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};

/// A span as the subscriber saw it: its name, its parent and its fields.
#[derive(Debug, Default, Clone)]
struct Seen {
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Records every span, with the span current at its creation as its parent.
#[derive(Clone, Default)]
struct Spans {
    spans: Arc<Mutex<HashMap<u64, Seen>>>,
    next: Arc<AtomicU64>,
    stack: Arc<Mutex<Vec<u64>>>,
}

impl tracing::Subscriber for Spans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            parent: self.stack.lock().unwrap().last().copied(),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.spans.lock().unwrap().insert(id, seen);
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let seen = spans.get_mut(&span.into_u64()).unwrap();
        values.record(&mut Fields(&mut seen.fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, span: &Id) {
        self.stack.lock().unwrap().push(span.into_u64());
    }
    fn exit(&self, _: &Id) {
        self.stack.lock().unwrap().pop();
    }
}

#[tokio::test(start_paused = true)]
async fn each_attempt_is_a_client_span_under_the_request() {
    let spans = Spans::default();
    let _guard = tracing::subscriber::set_default(spans.clone());
    let mut calls = 0;
    let server = tower::service_fn(move |_: Request<String>| {
        calls += 1;
        let status = if calls == 1 { 503 } else { 200 };
        async move {
            Ok::<_, std::io::Error>(
                Response::builder()
                    .status(status)
                    .body(String::new())
                    .unwrap(),
            )
        }
    });
    let client =
        RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap()).layer(server);
    let request = Request::get("http://user:pw@api.test/orders?sig=secret")
        .body(String::new())
        .unwrap();
    let parent = tracing::info_span!("checkout");
    let res = async { client.oneshot(request).await }
        .instrument(parent)
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    let spans = spans.spans.lock().unwrap();
    let (&checkout, _) = spans.iter().find(|(_, s)| s.name == "checkout").unwrap();
    let mut attempts: Vec<&Seen> = spans
        .values()
        .filter(|s| s.name == "http.client.attempt")
        .collect();
    attempts.sort_by_key(|s| s.fields.get("http.request.resend_count").cloned());
    assert_eq!(attempts.len(), 2, "{spans:?}");
    for attempt in &attempts {
        assert_eq!(attempt.parent, Some(checkout));
        assert_eq!(attempt.fields["otel.kind"], "client");
        assert_eq!(attempt.fields["http.request.method"], "GET");
        assert_eq!(attempt.fields["server.address"], "api.test");
        let url = &attempt.fields["url.full"];
        assert!(!url.contains("pw") && !url.contains("secret"), "{url}");
    }
    assert!(!attempts[0].fields.contains_key("http.request.resend_count"));
    assert_eq!(attempts[0].fields["http.response.status_code"], "503");
    assert_eq!(attempts[0].fields["error.type"], "503");
    assert_eq!(attempts[1].fields["http.request.resend_count"], "1");
    assert_eq!(attempts[1].fields["http.response.status_code"], "200");
}
