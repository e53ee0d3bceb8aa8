//! A real `redis-server` on 127.0.0.1 and a free port, without persistence (a restart comes
//! back empty, as after a crash), stopped on drop. The library's tests, the lab's fleets and
//! the `fleet` bench share it.

// Each includer uses a part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const NEEDS_REDIS: &str = "needs redis-server (Debian package redis-server)";

/// How long a started server has to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(5);

/// One command's figures in `INFO commandstats` since they were last reset.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct CommandStats {
    pub calls: u64,
    pub failed: u64,
    /// The time Redis spent on them, in microseconds.
    pub usec: u64,
}

impl CommandStats {
    /// The calls that did not fail.
    pub fn done(&self) -> u64 {
        self.calls - self.failed
    }
}

/// A `redis-server` this process started; it can be killed and started again on its port.
pub struct RedisServer {
    pub port: u16,
    /// Configuration on the command line, past the port and persistence.
    options: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server and waits until it answers, or says why it could not.
    pub async fn try_start() -> Result<Self, String> {
        Self::try_start_with(&[]).await
    }

    /// Starts a server configured with `options` (`--name value ...`).
    ///
    /// Its port is taken from the OS, released, then bound by the server: another process
    /// may bind it in between, and the server then exits at once. It gets a new port then.
    pub async fn try_start_with(options: &[&str]) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(|error| format!("no free port: {error}"))?
                .port();
            let options = options.iter().map(|option| option.to_string()).collect();
            let mut server = Self {
                port,
                options,
                child: None,
            };
            match server.try_restart().await {
                Ok(()) => return Ok(server),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    /// [`try_start`](Self::try_start) for a test, which fails saying what is missing.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// [`try_start_with`](Self::try_start_with) for a test.
    pub async fn start_with(options: &[&str]) -> Self {
        Self::try_start_with(options)
            .await
            .unwrap_or_else(|why| panic!("{NEEDS_REDIS}: {why}"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a valid Redis URL")
    }

    /// Stops the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on its port, empty, and waits until it answers.
    pub async fn try_restart(&mut self) -> Result<(), String> {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot run redis-server: {error}"))?;
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        while tokio::time::Instant::now() < deadline {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                return Err(format!(
                    "redis-server on port {} exited: {status}",
                    self.port
                ));
            }
            // The server that answers must be this one: another may hold the port.
            let info = self.query::<String>(&["INFO", "server"]);
            if let Ok(Ok(info)) = tokio::time::timeout(Duration::from_millis(500), info).await {
                let pid = info.lines().find_map(|l| l.strip_prefix("process_id:"));
                let ours = self.child.as_ref().map(|c| c.id().to_string());
                if pid.map(str::trim) == ours.as_deref() {
                    return Ok(());
                }
                self.kill();
                return Err(format!("another server answers on port {}", self.port));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
        Err(format!(
            "redis-server did not answer on port {} within {READY_WITHIN:?}",
            self.port
        ))
    }

    /// [`try_restart`](Self::try_restart) for a test.
    pub async fn restart(&mut self) {
        self.try_restart()
            .await
            .unwrap_or_else(|why| panic!("{NEEDS_REDIS}: {why}"));
    }

    /// The figures of `command`, named as `INFO commandstats` names it (`fcall`,
    /// `function|load`), since [`reset_stats`](Self::reset_stats); zero if never called.
    pub async fn command_stats(&self, command: &str) -> CommandStats {
        let stats: String = self.query(&["INFO", "commandstats"]).await.unwrap();
        let prefix = format!("cmdstat_{command}:");
        let Some(fields) = stats.lines().find_map(|line| line.strip_prefix(&prefix)) else {
            return CommandStats::default();
        };
        let [calls, failed, usec] = ["calls=", "failed_calls=", "usec="].map(|name| {
            let field = fields.split(',').find_map(|f| f.strip_prefix(name));
            field.and_then(|n| n.parse().ok()).unwrap_or(0)
        });
        CommandStats {
            calls,
            failed,
            usec,
        }
    }

    /// The shared pacing controller's figures: its calls as a function and as a script.
    pub async fn controller_stats(&self) -> CommandStats {
        let [function, script] = [
            self.command_stats("fcall").await,
            self.command_stats("evalsha").await,
        ];
        CommandStats {
            calls: function.calls + script.calls,
            failed: function.failed + script.failed,
            usec: function.usec + script.usec,
        }
    }

    /// Counts every command's figures from zero.
    pub async fn reset_stats(&self) {
        let _: () = self.query(&["CONFIG", "RESETSTAT"]).await.unwrap();
    }

    /// Runs one command on a connection of its own.
    pub async fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut connection = self.client().get_multiplexed_async_connection().await?;
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query_async(&mut connection).await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
