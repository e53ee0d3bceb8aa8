//! Pacing state kept in Redis (feature `redis`): many processes calling one API pace as
//! one client would.
//!
//! Each destination's controller lives in one Redis value, with its sends in flight beside
//! it. One atomic call per request reserves a send time on Redis's clock (a GCRA slot at
//! the shared pace). The controller is a library of Redis functions, loaded at first use;
//! before Redis 7, or for a user not allowed `FUNCTION LOAD`, it runs as a script.
//! Requests held by the pace or by the slow start's window wait in one line across the
//! fleet: the one that first asked takes the next slot, whichever process it is in. Only
//! the oldest of a process's held requests asks again; the others wait behind it. The same
//! call carries the answers this process got since its last one to that destination; an
//! answer no call carries within 2 ms goes alone, a refusal at once. A plain success from a
//! destination paced at a known rate changes no send: it waits up to 100 ms. The rules are the
//! [in-process controller's](crate::pacing), so a refusal seen by one process slows all.
//! One is the fleet's own: once a reported room ran out, the next is spread over what is
//! left of it, as processes sharing it would race for it.
//!
//! An open destination (neither paced nor in its slow start, no room reported) has no slot
//! to wait for. Once Redis says it is open, requests to it go at once, and their answers
//! are told in batches within 100 ms, which count the sends. The reply says whether it
//! still is: a refusal anywhere in the fleet reaches each process within a batch.
//!
//! Redis is never in the way: a call that fails or takes longer than
//! [`with_timeout`](RedisPacing::with_timeout) sends the request through in-process pacing.
//! The process then paces alone at its share of the fleet's sends: of the pace the fleet
//! was served at, and of a reported quota. A call every 100 ms in the background finds
//! Redis back, and requests, waiting ones too, ask it again. A Redis that answers but
//! refuses the controller (a read-only replica, or full) is not back. Idle destinations expire from
//! Redis; a state Redis lost otherwise starts at the pace the process last saw served.

mod code;
mod held;
mod store;
mod ticket;

pub(crate) use store::Store;
pub(crate) use ticket::{FleetGrant, FleetTicket, FleetTurn};

use std::fmt;
use std::time::Duration;

/// Where a fleet keeps its pacing state: a Redis server, and the prefix of its keys.
///
/// Give it to [`PacingBuilder::with_redis`](crate::pacing::PacingBuilder::with_redis). Every
/// process built with the same server and prefix paces each destination as one client.
/// The server is one primary: a read-only replica, or a cluster node that does not serve
/// a destination's slot, cannot hold the state, and requests are paced in-process (one
/// warning says so). So too while a Redis under `noeviction` is full.
///
/// Redis 7 or later runs the shared controller as a function, loaded at first use (its
/// library is named `tower_backoff_` and a hash of its code). The user needs `FCALL` and
/// `FUNCTION LOAD`; without them, or before Redis 7, it runs as a script (`EVALSHA`), which
/// costs Redis about 70 % more time per call.
///
/// Redis runs one call at a time, so its time per request bounds a fleet. On this crate's
/// benchmark machine, a request to a starting or paced destination costs it about 45 µs
/// when the next request's call carries its answer, 60 µs when the answer goes alone: some
/// 16,000 to 22,000 such requests a second per Redis. Requests to an open destination cost
/// it a few µs each.
///
/// ```
/// use tower_backoff::PacingLayer;
/// use tower_backoff::pacing::RedisPacing;
///
/// let redis = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let pacing = PacingLayer::builder()
///     .with_redis(RedisPacing::new(redis).with_prefix("billing:pacing:"))
///     .build()?;
/// # drop(pacing);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RedisPacing {
    pub(crate) client: redis::Client,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
}

impl RedisPacing {
    /// The prefix of every key: `tower-backoff:pacing:`.
    pub const DEFAULT_PREFIX: &'static str = "tower-backoff:pacing:";
    /// The longest a request waits for Redis before it is paced in-process: 100 ms.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

    /// State kept on `client`'s server. It connects on first use, and reconnects by itself.
    pub fn new(client: redis::Client) -> Self {
        Self {
            client,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// The prefix of the keys, so that unrelated fleets on one server keep apart.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest a call to Redis may take (over zero); past it, the request is paced
    /// in-process.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl fmt::Debug for RedisPacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client's address may hold a password: only its host is shown.
        f.debug_struct("RedisPacing")
            .field(
                "server",
                &self.client.get_connection_info().addr().to_string(),
            )
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests;
