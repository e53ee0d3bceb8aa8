//! A real `redis-server` on 127.0.0.1 and a free port, stopped on drop.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const NEEDS_REDIS: &str = "needs redis-server (Debian package redis-server)";

/// A `redis-server` this test started; it can be killed and started again on its port.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with no persistence, and waits until it answers.
    pub async fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self { port, child: None };
        server.restart().await;
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    /// Stops the server at once, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on its port, empty.
    pub async fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{NEEDS_REDIS}: {error}"));
        self.child = Some(child);
        for _ in 0..100 {
            if self.query::<String>(&["PING"]).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "redis-server did not answer on port {} within 5 s",
            self.port
        );
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
