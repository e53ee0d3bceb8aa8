//! A real `redis-server` for fleets that share their pacing (issue #31): the library's
//! test server (`tests/support/redis.rs`), with the lab's errors.

use super::Unavailable;

#[path = "../../../tests/support/redis.rs"]
mod server;

pub use server::RedisServer;

impl RedisServer {
    /// Starts a server, or says why not: an error with `CI` set (CI installs redis-server,
    /// so a missing one is a broken machine), else `Ok(None)` and the caller says it skipped.
    pub async fn start_unless_missing() -> Result<Option<Self>, Unavailable> {
        match Self::try_start().await {
            Ok(server) => Ok(Some(server)),
            Err(why) if std::env::var_os("CI").is_some() => Err(Unavailable(why)),
            Err(why) => {
                eprintln!("redis-server not available, skipped: {why}");
                Ok(None)
            }
        }
    }

    /// Starts the server again on its port, empty; the lab's error if it cannot.
    pub async fn restart_or_unavailable(&mut self) -> Result<(), Unavailable> {
        self.try_restart().await.map_err(Unavailable)
    }
}
