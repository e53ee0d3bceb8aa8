//! HAProxy (the Debian package) with a stick-table rate limit in front of a hyper backend
//! of this process. Its configuration is written to a temporary folder; `haproxy -db`
//! runs in the foreground and is killed when the limiter is dropped.

use super::{RateLimit, Running, Unavailable, Window, backend, process};
use std::net::SocketAddr;
use std::path::Path;

/// The configuration: every request is tracked in a one-entry table by source address
/// (all clients are 127.0.0.1: one shared limit); past `window`'s quota in the sliding
/// window, HAProxy answers 429 itself. Refused requests count in the rate too.
/// With `rate_limit_field`, every answer also carries the IETF `RateLimit` field (see
/// [`rate_limit_header`]).
pub fn config(
    port: u16,
    backend: SocketAddr,
    Window { quota, seconds }: Window,
    rate_limit_field: bool,
) -> String {
    format!(
        "global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 30s

frontend limited
    bind 127.0.0.1:{port}
    stick-table type ip size 1k expire {expire}s store http_req_rate({seconds}s)
    http-request track-sc0 src
    http-request return status 429 content-type text/plain string \"too many requests\" hdr Retry-After 1 if {{ sc_http_req_rate(0) gt {rate} }}
{headers}    default_backend app

backend app
    server app1 {backend}
",
        rate = quota,
        expire = seconds.saturating_mul(2).max(10),
        headers = if rate_limit_field {
            rate_limit_header(quota, seconds)
        } else {
            String::new()
        }
    )
}

/// [`Kind::HaproxyRateLimit`](super::Kind::HaproxyRateLimit) (an experiment, not a target's
/// limiter): every answer also carries the IETF `RateLimit` field as a naive configuration
/// would write it,
/// `r` = the limit minus HAProxy's current count, `t=1`. A sliding window has no reset,
/// so `t=1` tells a client that the quota comes back whole in a second, which it does not.
fn rate_limit_header(quota: u32, window: u32) -> String {
    format!(
        "    http-after-response set-header RateLimit \"\\\"{quota}-in-{window}sec\\\"; r=%[sc_http_req_rate(0),neg,add({quota})]; t={window}\"\n"
    )
}

pub async fn start(
    limit: RateLimit,
    rate_limit_field: bool,
) -> Result<(SocketAddr, Running), Unavailable> {
    let program = process::which("haproxy").ok_or_else(|| {
        Unavailable("no haproxy on PATH (apt-get install haproxy; .ci/run does)".into())
    })?;
    let (backend_addr, backend) = backend::serve().await;
    let window = Window::of(limit)?;
    let config = |port, _: &Path| config(port, backend_addr, window, rate_limit_field);
    let args = |_: &Path, cfg: &Path| vec!["-f".into(), cfg.into(), "-db".into()];
    let (addr, guard) = process::start(&program, "haproxy.cfg", config, args).await?;
    Ok((addr, Running::Process(guard, Some(backend))))
}
