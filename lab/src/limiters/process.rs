//! A limiter run as its own process (HAProxy, nginx): its configuration written to a fresh
//! temporary folder, a free port, its stderr kept as its log.

use super::{ChildGuard, Unavailable, wait_for_port};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// `name` on `PATH`, or in the system folders Debian installs servers to.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs `program` with `args(folder, configuration file)`, once `config(port, folder)` is
/// written to the file `file` of a fresh folder, and waits until it listens on `port`.
/// The guard kills it and removes the folder.
pub async fn start(
    program: &Path,
    file: &str,
    config: impl Fn(u16, &Path) -> String,
    args: impl Fn(&Path, &Path) -> Vec<OsString>,
) -> Result<(SocketAddr, ChildGuard), Unavailable> {
    let name = program.file_name().unwrap_or_default().to_string_lossy();
    // A port taken from the OS, released, then bound by the server: another process may
    // bind it in between, and the server then exits at once. It gets a new port then.
    for attempt in 1..=3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Unavailable(format!("no free port: {e}")))?
            .port();
        let dir = fresh_folder(&name)?;
        let cfg = dir.join(file);
        std::fs::write(&cfg, config(port, &dir))
            .map_err(|e| Unavailable(format!("writing {}: {e}", cfg.display())))?;
        let (mut guard, log_path) = spawn(program, &name, args(&dir, &cfg), dir)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let listening = wait_for_port(addr, Duration::from_secs(5)).await;
        let exited = guard.0.try_wait().ok().flatten();
        if listening && exited.is_none() {
            return Ok((addr, guard));
        }
        if exited.is_some() && attempt < 3 {
            continue;
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("{name} did not listen on {addr} within 5 s (exit: {exited:?}); its log:\n{log}");
    }
    unreachable!("the last attempt returns or panics")
}

/// A new folder of its own for a run of `name`.
fn fresh_folder(name: &str) -> Result<PathBuf, Unavailable> {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("tower-backoff-{name}-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Unavailable(format!("temp dir: {e}")))?;
    Ok(dir)
}

/// Runs `program` with `args`, its stderr to a log in `dir`; the guard removes `dir`.
fn spawn(
    program: &Path,
    name: &str,
    args: Vec<OsString>,
    dir: PathBuf,
) -> Result<(ChildGuard, PathBuf), Unavailable> {
    let log_path = dir.join(format!("{name}.log"));
    let log =
        std::fs::File::create(&log_path).map_err(|e| Unavailable(format!("log file: {e}")))?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| Unavailable(format!("cannot run {name}: {e}")))?;
    Ok((ChildGuard(child, Some(dir)), log_path))
}
