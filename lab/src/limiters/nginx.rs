//! nginx (the Debian package `nginx-light`) with `limit_req`, the most deployed leaky
//! bucket, in front of a hyper backend of this process. A limiter nothing here was tuned
//! on: `nginx -e` runs it in the foreground, as one process, killed when dropped.

use super::{RateLimit, Running, Unavailable, backend, process};
use std::net::SocketAddr;
use std::path::Path;

/// The configuration: one key for every client (the server's port), `per_second`
/// requests per second drained in milliseconds, `burst` more at once (`nodelay`: past the
/// burst nginx answers 429 at once, and counts nothing of it), `Retry-After: 1` on a 429.
/// `LIMITERS_NGINX_BURST=N` sets another burst (at least 1), for a stricter limiter.
/// `LIMITERS_NGINX_MODE=delay` drops `nodelay`: nginx holds the burst's requests to the
/// rate; `default` also leaves nginx's own refusal, a bare 503 (its documentation's setup).
pub fn config(port: u16, dir: &Path, backend: SocketAddr, limit: RateLimit, mode: Mode) -> String {
    let dir = dir.display();
    let nodelay = if mode == Mode::NoDelay {
        " nodelay"
    } else {
        ""
    };
    let status = if mode == Mode::Default { 503 } else { 429 };
    format!(
        "daemon off;
master_process off;
user root root;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    limit_req_zone $server_port zone=all:1m rate={rate}r/s;
    limit_req_status {status};
    limit_req_log_level info;
    map $status $retry_after {{ 429 1; default \"\"; }}
    upstream app {{ server {backend}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            limit_req zone=all burst={burst}{nodelay};
            add_header Retry-After $retry_after always;
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }}
    }}
}}
",
        rate = limit.per_second,
        burst = limit.burst,
    )
}

/// How nginx meets requests past its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `nodelay`: the burst at once, a 429 with `Retry-After: 1` past it.
    NoDelay,
    /// The burst held to the rate, a 429 with `Retry-After: 1` past it.
    Delay,
    /// nginx's own defaults: the burst held to the rate, a bare 503 past it.
    Default,
}

/// `LIMITERS_NGINX_MODE` (`delay` or `default`) if set, else `nodelay`.
fn mode() -> Result<Mode, Unavailable> {
    match std::env::var("LIMITERS_NGINX_MODE").as_deref() {
        Err(_) => Ok(Mode::NoDelay),
        Ok("delay") => Ok(Mode::Delay),
        Ok("default") => Ok(Mode::Default),
        Ok(other) => Err(Unavailable(format!(
            "LIMITERS_NGINX_MODE={other}: not `delay` or `default`"
        ))),
    }
}

/// `LIMITERS_NGINX_BURST` if set, else `default`.
fn burst(default: u32) -> Result<u32, Unavailable> {
    let Ok(text) = std::env::var("LIMITERS_NGINX_BURST") else {
        return Ok(default);
    };
    let why = || {
        Unavailable(format!(
            "LIMITERS_NGINX_BURST={text}: not a whole number ≥ 1"
        ))
    };
    text.parse()
        .ok()
        .filter(|&burst| burst >= 1)
        .ok_or_else(why)
}

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let program = process::which("nginx").ok_or_else(|| {
        Unavailable("no nginx on PATH (apt-get install nginx-light; .ci/run does)".into())
    })?;
    let limit = RateLimit {
        burst: burst(limit.burst)?,
        ..limit
    };
    let (backend_addr, backend) = backend::serve().await;
    let mode = mode()?;
    let config = |port, dir: &Path| config(port, dir, backend_addr, limit, mode);
    let args = |dir: &Path, cfg: &Path| {
        let log = dir.join("error.log");
        [
            "-p".into(),
            dir.into(),
            "-c".into(),
            cfg.into(),
            "-e".into(),
            log.into(),
        ]
        .to_vec()
    };
    let (addr, guard) = process::start(&program, "nginx.conf", config, args).await?;
    Ok((addr, Running::Process(guard, Some(backend))))
}
