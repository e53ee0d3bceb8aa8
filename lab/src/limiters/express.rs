//! express + express-rate-limit on the machine's Node, from
//! `lab/fixtures/express-limiter` (`npm ci` there first; `.ci/run` does).

use super::{ChildGuard, RateLimit, Running, Unavailable};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/express-limiter")
}

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let dir = fixture_dir();
    if !dir.join("node_modules/express-rate-limit").is_dir() {
        return Err(Unavailable(format!(
            "{} has no node_modules: run `npm ci` there (.ci/run does)",
            dir.display()
        )));
    }
    let mut child = Command::new("node")
        .arg("server.js")
        .arg(limit.per_second.to_string())
        .arg("1000")
        .arg("draft-8")
        .current_dir(&dir)
        // The server exits when its stdin closes: held open by the guard.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Unavailable(format!("cannot run node: {e}")))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let guard = ChildGuard(child, None);
    // The first line is `port=<n>`; read it off the runtime, for at most 10 s.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
        .await
        .expect("reader thread")
        .map_err(|_| Unavailable("node server.js printed no port within 10 s".into()))?;
    let port: u16 = line
        .trim()
        .strip_prefix("port=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| Unavailable(format!("node server.js printed {line:?}, not port=<n>")))?;
    Ok((
        SocketAddr::from(([127, 0, 0, 1], port)),
        Running::Process(guard, None),
    ))
}
