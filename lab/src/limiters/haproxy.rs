//! HAProxy (the Debian package) with a stick-table rate limit in front of a hyper backend
//! of this process. Its configuration is written to a temporary folder; `haproxy -db`
//! runs in the foreground and is killed when the limiter is dropped.

use super::{ChildGuard, RateLimit, Running, Unavailable, backend, wait_for_port};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The configuration: every request is tracked in a one-entry table by source address
/// (all clients are 127.0.0.1: one shared limit); past `per_second` requests in the
/// sliding second, HAProxy answers 429 itself. Refused requests count in the rate too.
/// With `rate_limit_field`, every answer also carries the IETF `RateLimit` field (see
/// [`rate_limit_header`]).
pub fn config(port: u16, backend: SocketAddr, limit: RateLimit, rate_limit_field: bool) -> String {
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
    stick-table type ip size 1k expire 10s store http_req_rate(1s)
    http-request track-sc0 src
    http-request return status 429 content-type text/plain string \"too many requests\" hdr Retry-After 1 if {{ sc_http_req_rate(0) gt {rate} }}
{headers}    default_backend app

backend app
    server app1 {backend}
",
        rate = limit.per_second,
        headers = if rate_limit_field {
            rate_limit_header(limit)
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
fn rate_limit_header(limit: RateLimit) -> String {
    format!(
        "    http-after-response set-header RateLimit \"\\\"{rate}-in-1sec\\\"; r=%[sc_http_req_rate(0),neg,add({rate})]; t=1\"\n",
        rate = limit.per_second
    )
}

pub async fn start(
    limit: RateLimit,
    rate_limit_field: bool,
) -> Result<(SocketAddr, Running), Unavailable> {
    let program = which_haproxy().ok_or_else(|| {
        Unavailable("no haproxy on PATH (apt-get install haproxy; .ci/run does)".into())
    })?;
    let (backend_addr, backend) = backend::serve().await;
    // A free port for HAProxy to bind: taken from the OS, released, then bound by HAProxy.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Unavailable(format!("no free port: {e}")))?
        .port();
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tower-backoff-haproxy-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| Unavailable(format!("temp dir: {e}")))?;
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(&cfg, config(port, backend_addr, limit, rate_limit_field))
        .map_err(|e| Unavailable(format!("writing {}: {e}", cfg.display())))?;
    let log = std::fs::File::create(dir.join("haproxy.log"))
        .map_err(|e| Unavailable(format!("log file: {e}")))?;
    let child = Command::new(program)
        .arg("-f")
        .arg(&cfg)
        .arg("-db")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| Unavailable(format!("cannot run haproxy: {e}")))?;
    let mut guard = ChildGuard(child, Some(dir.clone()));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if !wait_for_port(addr, Duration::from_secs(5)).await {
        let exited = guard.0.try_wait().ok().flatten();
        let log = std::fs::read_to_string(dir.join("haproxy.log")).unwrap_or_default();
        panic!("haproxy did not listen on {addr} within 5 s (exit: {exited:?}); its log:\n{log}");
    }
    Ok((addr, Running::Process(guard, Some(backend))))
}

fn which_haproxy() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file())
}
