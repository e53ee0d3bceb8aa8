//! One `tracing` span per attempt, named and attributed as OpenTelemetry's HTTP client
//! conventions say, so that an exporter shows each attempt as a child of the request.

use super::hook::server_address;
use crate::redact::RedactedParams;
use http::{Request, StatusCode};
use tracing::Span;
use tracing::field::Empty;

/// The span of an attempt of `req`; `resend` is 0 for the first attempt, else how many
/// attempts came before (OpenTelemetry's `http.request.resend_count`, set on resends only).
///
/// Its parent is the span current where the request is called and its future polled: the
/// caller's own request span, usually. Fields are only formatted for a subscriber that
/// wants the span.
#[inline]
pub(super) fn attempt<B>(
    req: &Request<B>,
    resend: u32,
    redacted: &RedactedParams,
) -> Option<Box<Span>> {
    // Without a subscriber at INFO, no span at all: tracing's `log` fallback would still
    // turn a disabled span's every enter and exit into a `log` check on the success path.
    if tracing::level_enabled!(tracing::Level::INFO) {
        Some(Box::new(new(req, resend, redacted)))
    } else {
        None
    }
}

#[inline(never)]
fn new<B>(req: &Request<B>, resend: u32, redacted: &RedactedParams) -> Span {
    let span = tracing::info_span!(
        "http.client.attempt",
        otel.name = %req.method(),
        otel.kind = "client",
        http.request.method = %req.method(),
        url.full = %redacted.uri(req.uri()),
        server.address = server_address(req.uri()),
        http.request.resend_count = Empty,
        http.response.status_code = Empty,
        error.r#type = Empty,
    );
    if resend > 0 {
        span.record("http.request.resend_count", resend);
    }
    span
}

/// Runs `f` in `span`; with no span (no subscriber wants it), just runs it.
#[inline]
pub(super) fn within<T>(span: &Option<Box<Span>>, f: impl FnOnce() -> T) -> T {
    match span {
        Some(span) => span.in_scope(f),
        None => f(),
    }
}

/// Records what the attempt of `span` ended with: a status, or the kind of its error.
#[inline]
pub(super) fn ended(span: &Option<Box<Span>>, status: Result<StatusCode, &str>) {
    if let Some(span) = span {
        record(span, status);
    }
}

fn record(span: &Span, status: Result<StatusCode, &str>) {
    match status {
        Ok(status) => {
            span.record("http.response.status_code", status.as_u16());
            if status.is_server_error() {
                span.record("error.type", status.as_str());
            }
        }
        Err(kind) => {
            span.record("error.type", kind);
        }
    }
}
