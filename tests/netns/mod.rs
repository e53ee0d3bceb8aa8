//! A private network namespace for tests that break routes of established connections.
//!
//! The test re-executes its own binary, filtered to itself, inside `unshare -rn` (a new
//! user and network namespace: no privilege needed, and nothing outside it is touched).
//! There the client and the server get two loopback addresses of their own, and a routing
//! table consulted before the `local` one lets the test make either address unreachable:
//!
//! - server → client unreachable: the server still receives what the client sends, but its
//!   ACKs are lost, so the client keeps the request unacknowledged;
//! - client → server unreachable too: the client's retransmission finds no route, and when
//!   its TCP user timeout expires the kernel fails the connection with `EHOSTUNREACH`.
//!
//! The tests using it are `#[ignore = "needs a network namespace ..."]`: they run when asked
//! for (`cargo test --all-features -- --include-ignored`, as `.ci/run` does), and then fail
//! where `unshare` or `ip` (iproute2) is missing or user namespaces are disabled.
#![allow(dead_code)]

pub mod server;

use std::error::Error;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

/// The client's own address.
pub const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// The server's own address.
pub const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

const INSIDE: &str = "TOWER_BACKOFF_TEST_NETNS";
/// The routing table holding the unreachable routes.
const TABLE: &str = "100";

/// Runs `test` inside a fresh network namespace: `name` is the test's full name, for the
/// re-executed binary to run that test alone.
pub fn run(name: &str, test: impl FnOnce()) {
    if std::env::var_os(INSIDE).is_some() {
        setup();
        test();
        return;
    }
    if let Err(why) = usable() {
        panic!("{name} needs a network namespace (`unshare -rn`, `ip` of iproute2): {why}");
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .arg("-rn")
        .arg(exe)
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INSIDE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed in its network namespace ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

fn usable() -> Result<(), String> {
    match Command::new("unshare")
        .args(["-rn", "ip", "link", "set", "lo", "up"])
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(e) => Err(format!("unshare: {e}")),
    }
}

/// Runs `ip args…`, panicking with its message when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn setup() {
    ip(&["link", "set", "lo", "up"]);
    for addr in [CLIENT, SERVER] {
        ip(&["addr", "add", &format!("{addr}/32"), "dev", "lo"]);
    }
    // Our table first, then `local` (moved from priority 0, which nothing can precede).
    ip(&["rule", "add", "pref", "10", "table", TABLE]);
    ip(&["rule", "add", "pref", "100", "table", "local"]);
    ip(&["rule", "del", "pref", "0"]);
}

/// Makes `addr` unreachable (`EHOSTUNREACH`) from this namespace.
pub fn unreachable(addr: IpAddr) {
    ip(&[
        "route",
        "add",
        "unreachable",
        &format!("{addr}/32"),
        "table",
        TABLE,
    ]);
}

/// Makes every address reachable again.
pub fn restore() {
    ip(&["route", "flush", "table", TABLE]);
}

/// The first error of type `T` in `err`'s chain (looking inside `io::Error`s too).
pub fn find<'a, T: Error + 'static>(err: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut e = Some(err);
    while let Some(err) = e {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        e = match err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner),
            None => err.source(),
        };
    }
    None
}
