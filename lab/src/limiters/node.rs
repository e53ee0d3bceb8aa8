//! Limiters on the machine's Node, each from its folder of `lab/fixtures` (`npm ci`
//! there first; `.ci/run` does): express-rate-limit, rate-limiter-flexible and
//! @fastify/rate-limit.

use super::{ChildGuard, Running, Unavailable};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `node server.js ARGS` in `lab/fixtures/FIXTURE`, once `npm ci` installed `package`.
pub async fn start(
    fixture: &str,
    package: &str,
    args: &[String],
) -> Result<(SocketAddr, Running), Unavailable> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(fixture);
    if !dir.join("node_modules").join(package).is_dir() {
        return Err(Unavailable(format!(
            "{} has no node_modules: run `npm ci` there (.ci/run does)",
            dir.display()
        )));
    }
    let mut child = Command::new("node")
        .arg("server.js")
        .args(args)
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
        .map_err(|_| Unavailable(format!("{fixture}: node printed no port within 10 s")))?;
    let port: u16 = line
        .trim()
        .strip_prefix("port=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| Unavailable(format!("{fixture}: node printed {line:?}, not port=<n>")))?;
    Ok((
        SocketAddr::from(([127, 0, 0, 1], port)),
        Running::Process(guard, None),
    ))
}
