//! A real `redis-server` for fleets that share their pacing (issue #31): on 127.0.0.1 and
//! a free port, without persistence, so that a restart comes back empty as after a crash.
//! It can be killed and started again on its port (the fleet's URL stays valid), and is
//! killed on drop.

use super::{ChildGuard, Unavailable};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a started server has to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(5);

/// A `redis-server` this process started.
pub struct RedisServer {
    pub port: u16,
    child: Option<ChildGuard>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    pub async fn start() -> Result<Self, Unavailable> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Unavailable(format!("no free port: {e}")))?
            .port();
        let mut server = Self { port, child: None };
        server.restart().await?;
        Ok(server)
    }

    /// [`start`](Self::start), or why not: an error with `CI` set (CI installs
    /// redis-server, so a missing one is a broken machine), else `Ok(None)` and the caller
    /// says it skipped.
    pub async fn start_unless_missing() -> Result<Option<Self>, Unavailable> {
        match Self::start().await {
            Ok(server) => Ok(Some(server)),
            Err(why) if std::env::var_os("CI").is_some() => Err(why),
            Err(why) => {
                eprintln!("redis-server not available, skipped: {why}");
                Ok(None)
            }
        }
    }

    /// [`start`](Self::start) for a test, which fails saying what is missing.
    pub async fn start_for_test() -> Self {
        Self::start().await.unwrap_or_else(|why| {
            panic!("redis-server is not available here: {why} (apt-get install redis-server; .ci/run does)")
        })
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a valid Redis URL")
    }

    /// Stops the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.child = None;
    }

    /// Starts the server again on its port, empty, and waits until it answers.
    pub async fn restart(&mut self) -> Result<(), Unavailable> {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                Unavailable(format!(
                    "cannot run redis-server: {e} (apt-get install redis-server)"
                ))
            })?;
        let mut guard = ChildGuard(child, None);
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(status)) = guard.0.try_wait() {
                return Err(Unavailable(format!(
                    "redis-server on port {} exited: {status}",
                    self.port
                )));
            }
            if self.ping().await {
                self.child = Some(guard);
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(Unavailable(format!(
            "redis-server did not answer on port {} within {READY_WITHIN:?}",
            self.port
        )))
    }

    /// Whether the server answers `PING`, on a connection of its own.
    async fn ping(&self) -> bool {
        let client = self.client();
        let pong = async {
            let mut connection = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING")
                .query_async::<String>(&mut connection)
                .await
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), pong).await,
            Ok(Ok(answer)) if answer == "PONG"
        )
    }
}
