//! Flask-Limiter 3.3 (Debian's `python3-flask-limiter`, on the `limits` library), nothing
//! tuned on it. Its default answer: a bare 429; `LIMITERS_FLASK_HEADERS=on` adds its
//! `X-RateLimit-*` headers and a `Retry-After` rounded down.

use super::{RateLimit, Running, Unavailable, Window, process};
use std::net::SocketAddr;
use std::path::Path;

/// Which of the `limits` library's strategies counts the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// A log of the requests let through in the last window: refusals are not counted.
    MovingWindow,
    /// A fixed window whose end every request moves on, refused ones too: a client that
    /// keeps asking more often than once a window is refused for good.
    ElasticExpiry,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::MovingWindow => "moving-window",
            Strategy::ElasticExpiry => "fixed-window-elastic-expiry",
        }
    }
}

/// Debian's Python, which holds Debian's Flask-Limiter (a Python on `PATH` may not).
const PYTHON: &str = "/usr/bin/python3";

pub async fn start(
    limit: RateLimit,
    strategy: Strategy,
) -> Result<(SocketAddr, Running), Unavailable> {
    let program = Path::new(PYTHON);
    if !program.is_file() {
        let why = "no /usr/bin/python3 (apt-get install python3-flask-limiter)";
        return Err(Unavailable(why.into()));
    }
    let window = Window::of(limit)?;
    let headers = match std::env::var("LIMITERS_FLASK_HEADERS").as_deref() {
        Err(_) | Ok("off") => "False",
        Ok("on") => "True",
        Ok(other) => {
            let why = format!("LIMITERS_FLASK_HEADERS={other}: not `on` or `off`");
            return Err(Unavailable(why));
        }
    };
    let app = move |port: u16, _: &Path| {
        format!(
            r#"import logging
from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

app = Flask(__name__)
app.config["RATELIMIT_HEADERS_ENABLED"] = {headers}
limiter = Limiter(get_remote_address, app=app, strategy="{strategy}", storage_uri="memory://")

@app.route("/", defaults={{"path": ""}})
@app.route("/<path:path>")
@limiter.limit("{quota} per {seconds} second")
def index(path):
    return "ok"

logging.getLogger("werkzeug").setLevel(logging.ERROR)
app.run(host="127.0.0.1", port={port}, threaded=True)
"#,
            strategy = strategy.name(),
            quota = window.quota,
            seconds = window.seconds,
        )
    };
    let args = |_: &Path, app: &Path| vec![app.into()];
    let (addr, guard) = process::start(program, "app.py", app, args).await?;
    Ok((addr, Running::Process(guard, None)))
}
