//! The clients under test: hyper-util's legacy client under the crate's layers, built
//! from the public API only, with a counter of the attempts that reach the network.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_backoff::pacing::{PacingBuilder, RedisPacing};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Req = Request<Full<Bytes>>;
pub type Res = Response<Incoming>;
pub type HttpClient = BoxCloneService<Req, Res, BoxError>;

/// A client stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    /// hyper-util's client alone: every attempt is a request.
    Bare,
    /// `RetryLayer::new(ExponentialBackOff::default())`: the README's first snippet.
    Retry,
    /// The README's recommended stack: `RetryLayer` with `PacingLayer::new()` inside.
    RetryPacing,
    /// `RetryLayer` without its shared retry budget.
    RetryNoBudget,
    /// `RetryLayer` without its shared retry budget, `PacingLayer::new()` inside.
    RetryNoBudgetPacing,
    /// A reference, not the crate's: a client of a fleet of 8 told its share of the 50 r/s
    /// limit, tower's stack for a known share ([`at_known_share`]: `RetryLayer` with
    /// its defaults over tower's own `RateLimit`) at one request per
    /// [`TOLD_SPACING`](super::told::TOLD_SPACING), started at a random phase of it (see
    /// [`Stack::told_phase`]). What the limit allows a fleet that need not learn it.
    Told,
    /// [`Told`](Stack::Told) by the crate's own means: `RetryLayer` with its defaults over
    /// `PacingLayer` told the destination's rate ([`at_known_rate`]), from a random phase
    /// of its spacing. Built for a destination ([`Stack::build_to`]).
    ToldPacing,
    /// [`RetryPacing`](Stack::RetryPacing) with its pacing state in Redis
    /// ([`SharedPacing`]): a fleet's processes learn one pace together (issue #31).
    RetryPacingRedis,
    /// [`RetryPacingRedis`](Stack::RetryPacingRedis) told the whole fleet's rate,
    /// [`FLEET_RATE`](super::told::FLEET_RATE), once: the same value in every process.
    ToldRedis,
}

impl Stack {
    /// The stacks the example measures, in order.
    pub const MEASURED: [Stack; 4] = [
        Stack::Retry,
        Stack::RetryPacing,
        Stack::RetryNoBudget,
        Stack::RetryNoBudgetPacing,
    ];

    /// How long the told client waits before its first request: a random phase of its
    /// spacing. Processes started together and spaced alike send in step; 8 requests at
    /// once then meet a sliding window (HAProxy's) just after its period turns, when the
    /// last period still counts whole, and are refused (3 fleets in step: 86–90 % used).
    /// The Redis stacks need none: one schedule in Redis spaces the whole fleet.
    pub fn told_phase(self) -> std::time::Duration {
        match self {
            Stack::Told | Stack::ToldPacing => {
                rand::random_range(std::time::Duration::ZERO..super::told::told_spacing())
            }
            _ => std::time::Duration::ZERO,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stack::Bare => "bare",
            Stack::Retry => "retry",
            Stack::RetryPacing => "retry+pacing",
            Stack::RetryNoBudget => "retry-nobudget",
            Stack::RetryNoBudgetPacing => "retry-nobudget+pacing",
            Stack::Told => "told",
            Stack::ToldPacing => "told-pacing",
            Stack::RetryPacingRedis => "retry+pacing+redis",
            Stack::ToldRedis => "told-redis",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stack::Bare => "no layer",
            Stack::Retry => "(a) RetryLayer::new(ExponentialBackOff::default())",
            Stack::RetryPacing => "(b) RetryLayer default + PacingLayer::new() inside",
            Stack::RetryNoBudget => "(c) RetryLayer default, .without_retry_budget()",
            Stack::RetryNoBudgetPacing => {
                "(c) RetryLayer default, .without_retry_budget(), PacingLayer::new() inside"
            }
            Stack::Told => {
                "(d) reference: told its share, RetryLayer default over tower's RateLimit at 6.25 r/s"
            }
            Stack::ToldPacing => {
                "(e) told its share, RetryLayer default over PacingLayer with_known_rate at 6.25 r/s"
            }
            Stack::RetryPacingRedis => {
                "(f) RetryLayer default + PacingLayer with_redis inside (the fleet learns one pace)"
            }
            Stack::ToldRedis => {
                "(g) RetryLayer default + PacingLayer with_redis, with_known_rate 49 r/s for the whole fleet"
            }
        }
    }

    pub fn parse(name: &str) -> Option<Stack> {
        [Stack::Bare, Stack::Told, Stack::ToldPacing]
            .into_iter()
            .chain(Stack::REDIS)
            .chain(Stack::MEASURED)
            .find(|s| s.name() == name)
    }

    /// The stacks that share their pacing in Redis.
    pub const REDIS: [Stack; 2] = [Stack::RetryPacingRedis, Stack::ToldRedis];

    /// Whether the stack keeps its pacing in Redis: it is built by
    /// [`build_shared`](Self::build_shared).
    pub fn needs_redis(self) -> bool {
        Stack::REDIS.contains(&self)
    }

    /// [`build`](Self::build) for requests to `url`: [`Stack::ToldPacing`] is told the
    /// rate of its destination. The Redis stacks read their [`SharedPacing`] from the
    /// environment ([`SharedPacing::from_env`]), as a fleet's processes get it.
    pub fn build_to(self, counts: &Counts, url: &str) -> HttpClient {
        match self {
            Stack::ToldPacing => at_known_rate(counts, url, super::told::told_spacing()),
            Stack::RetryPacingRedis | Stack::ToldRedis => {
                let shared = SharedPacing::from_env().unwrap_or_else(|| {
                    panic!(
                        "{} needs {} and {} (limiters -- redis-fleet sets them)",
                        self.name(),
                        SharedPacing::URL_VAR,
                        SharedPacing::PREFIX_VAR
                    )
                });
                self.build_shared(counts, url, &shared)
            }
            _ => self.build(counts),
        }
    }

    /// [`build_to`](Self::build_to), the Redis stacks keeping their state in `shared`
    /// (other stacks ignore it). Each call makes its own `PacingLayer` and Redis client:
    /// layers of one process share nothing but Redis, as processes would.
    pub fn build_shared(self, counts: &Counts, url: &str, shared: &SharedPacing) -> HttpClient {
        let told = |builder: PacingBuilder| {
            let rate = super::told::FLEET_RATE;
            builder.with_known_rate(authority(url), rate, std::time::Duration::from_secs(1))
        };
        let pacing = match self {
            Stack::RetryPacingRedis => shared.layer(PacingLayer::builder()),
            Stack::ToldRedis => shared.layer(told(PacingLayer::builder())),
            _ => return self.build_to(counts, url),
        };
        boxed(
            ServiceBuilder::new()
                .layer(RetryLayer::new(ExponentialBackOff::default()))
                .layer(pacing)
                .service(counts.client()),
        )
    }

    /// A new client of this stack (its own connection pool, budget and pacing state),
    /// counting its attempts into `counts`. ([`Stack::ToldPacing`], told no destination,
    /// is the recommended stack.)
    pub fn build(self, counts: &Counts) -> HttpClient {
        let inner = counts.client();
        let retry = || RetryLayer::new(ExponentialBackOff::default());
        match self {
            Stack::Bare => inner,
            Stack::Retry => boxed(retry().layer(inner)),
            Stack::RetryPacing | Stack::ToldPacing => boxed(
                ServiceBuilder::new()
                    .layer(retry())
                    .layer(PacingLayer::new())
                    .service(inner),
            ),
            Stack::RetryNoBudget => boxed(retry().without_retry_budget().layer(inner)),
            Stack::RetryNoBudgetPacing => boxed(
                ServiceBuilder::new()
                    .layer(retry().without_retry_budget())
                    .layer(PacingLayer::new())
                    .service(inner),
            ),
            Stack::Told => known_share(inner, super::told::told_spacing()),
            Stack::RetryPacingRedis | Stack::ToldRedis => {
                panic!("{} is built for a destination (build_to)", self.name())
            }
        }
    }
}

/// Where the Redis stacks keep their pacing: a server, and a key prefix fresh for each
/// fleet run, so that runs share no state.
#[derive(Clone, Debug)]
pub struct SharedPacing {
    pub url: String,
    pub prefix: String,
}

impl SharedPacing {
    /// The environment that gives a fleet's processes their [`SharedPacing`].
    pub const URL_VAR: &'static str = "LIMITERS_REDIS_URL";
    pub const PREFIX_VAR: &'static str = "LIMITERS_REDIS_PREFIX";

    /// The server at `url`, under a prefix of `run` (a fresh name per fleet run).
    pub fn new(url: String, run: &str) -> Self {
        let prefix = format!("limiters:{run}:");
        Self { url, prefix }
    }

    pub fn from_env() -> Option<Self> {
        let url = std::env::var(Self::URL_VAR).ok()?;
        let prefix = std::env::var(Self::PREFIX_VAR).ok()?;
        Some(Self { url, prefix })
    }

    /// `builder`'s layer with its state on this server, under this prefix.
    fn layer(&self, builder: PacingBuilder) -> PacingLayer {
        let client = redis::Client::open(self.url.as_str()).expect("a valid Redis URL");
        let redis = RedisPacing::new(client).with_prefix(self.prefix.clone());
        builder
            .with_redis(redis)
            .build()
            .expect("valid pacing settings")
    }
}

/// The destination (`host:port`) of an absolute URL, as `with_known_rate` names it.
fn authority(url: &str) -> String {
    let uri: http::Uri = url.parse().expect("a limiter's URL");
    uri.authority().expect("an absolute URL").to_string()
}

/// A client for a known share of a limit by tower's means (the README's alternative to
/// `with_known_rate` for a limit on the whole service): the retry layer with its
/// defaults over tower's `RateLimit` at one request per `spacing`, shared by a `Buffer`,
/// counting its attempts into `counts`.
pub fn at_known_share(counts: &Counts, spacing: std::time::Duration) -> HttpClient {
    known_share(counts.client(), spacing)
}

/// The crate's stack for a known rate: the retry layer with its defaults over a
/// `PacingLayer` told that `url`'s destination allows one request per `spacing`,
/// counting its attempts into `counts`.
pub fn at_known_rate(counts: &Counts, url: &str, spacing: std::time::Duration) -> HttpClient {
    let uri: http::Uri = url.parse().expect("a limiter's URL");
    let authority = uri.authority().expect("an absolute URL").as_str();
    let pacing = PacingLayer::builder()
        .with_known_rate(authority, 1, spacing)
        .build()
        .expect("a valid rate");
    boxed(
        ServiceBuilder::new()
            .layer(RetryLayer::new(ExponentialBackOff::default()))
            .layer(pacing)
            .service(counts.client()),
    )
}

/// [`at_known_share`] over `inner`. `RateLimit` is not `Clone`: a `Buffer` shares it
/// between the requests.
fn known_share(inner: HttpClient, spacing: std::time::Duration) -> HttpClient {
    boxed(
        ServiceBuilder::new()
            .layer(RetryLayer::new(ExponentialBackOff::default()))
            .buffer(64)
            .rate_limit(1, spacing)
            .service(inner),
    )
}

/// Boxes a client stack, its error (whatever the retry layer's error type) boxed too.
fn boxed<S>(service: S) -> HttpClient
where
    S: tower::Service<Req, Response = Res> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    BoxCloneService::new(service.map_err(Into::into))
}

/// With `LIMITERS_TRACE` set, the milliseconds since this process's first traced attempt;
/// each attempt is then printed on stderr as `attempt <sent> <answered> <status> <pid>
/// <wall clock> [<quota>]` (status 0: a transport error; pid and wall clock tell a fleet's
/// processes apart and set them on one clock; the quota is any `RateLimit` or
/// `X-RateLimit-Remaining` field, spaces dropped), for a timeline of what a limiter refused and when.
fn trace_clock() -> Option<f64> {
    static START: std::sync::OnceLock<Option<std::time::Instant>> = std::sync::OnceLock::new();
    let start =
        START.get_or_init(|| std::env::var_os("LIMITERS_TRACE").map(|_| std::time::Instant::now()));
    start.map(|start| start.elapsed().as_secs_f64() * 1000.0)
}

/// The quota an answer reported, as ` <field>` with no space in it, or nothing.
fn reported<B>(response: &Response<B>) -> String {
    let fields = ["ratelimit", "x-ratelimit-remaining"];
    let field = fields.iter().find_map(|name| response.headers().get(*name));
    let text = field
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if text.is_empty() {
        text
    } else {
        format!(" {text}")
    }
}

/// How far a client is from its server: the round trip added to every attempt, half on the
/// way out and half on the way back, each half varied by up to half of `jitter` either side
/// (answers then overtake each other). Zero: loopback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Distance {
    pub round_trip: std::time::Duration,
    pub jitter: std::time::Duration,
}

impl Distance {
    /// A fixed round trip, no jitter.
    pub fn round_trip(round_trip: std::time::Duration) -> Self {
        let jitter = std::time::Duration::ZERO;
        Self { round_trip, jitter }
    }

    /// As `LIMITERS_LATENCY_MS` and `LIMITERS_JITTER_MS` say (whole milliseconds; unset:
    /// zero). Read once.
    pub fn from_env() -> Self {
        static FROM_ENV: std::sync::OnceLock<Distance> = std::sync::OnceLock::new();
        *FROM_ENV.get_or_init(|| Distance {
            round_trip: env_ms("LIMITERS_LATENCY_MS"),
            jitter: env_ms("LIMITERS_JITTER_MS"),
        })
    }

    /// Whether it is away from loopback.
    pub fn far(self) -> bool {
        self != Self::default()
    }

    /// One way's delay, drawn from `rng` (nothing drawn without jitter, so seeded runs on
    /// loopback repeat).
    pub fn one_way(self, rng: &mut impl rand::Rng) -> std::time::Duration {
        if self.jitter.is_zero() {
            return self.round_trip / 2;
        }
        let half = self.round_trip.as_secs_f64() / 2.0;
        let spread = self.jitter.as_secs_f64() / 2.0;
        let drawn = half + spread * (2.0 * rng.random::<f64>() - 1.0);
        std::time::Duration::from_secs_f64(drawn.max(0.0))
    }
}

/// The whole milliseconds the variable `name` says, zero where unset. Any other value
/// stops the run: a mistyped setting would measure loopback under another name.
fn env_ms(name: &str) -> std::time::Duration {
    let Ok(text) = std::env::var(name) else {
        return std::time::Duration::ZERO;
    };
    let ms = text
        .parse()
        .unwrap_or_else(|_| panic!("{name}={text:?}: expected a whole number of milliseconds"));
    std::time::Duration::from_millis(ms)
}

/// The wall clock in milliseconds since the Unix epoch, for traces and figures from several
/// processes.
pub fn wall_clock_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Attempts as they reach the network, per destination (the request's authority), and
/// when each refusal came (a fleet's refusals set on one timeline).
#[derive(Clone, Default)]
pub struct Counts {
    sent: Arc<Mutex<HashMap<String, Count>>>,
    refusals: Arc<Mutex<Vec<f64>>>,
    /// How far the server is; `None`: as the environment says ([`Distance::from_env`]).
    away: Option<Distance>,
}

/// What one destination was sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count {
    pub attempts: u64,
    pub refused: u64,
    pub errors: u64,
}

impl Counts {
    /// Counts of a client `distance` from its server, whatever the environment says.
    pub fn away(distance: Distance) -> Self {
        let away = Some(distance);
        Self {
            away,
            ..Self::default()
        }
    }

    /// hyper-util's client, counting its attempts into these counts.
    fn client(&self) -> HttpClient {
        let client =
            Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(HttpConnector::new());
        let counts = self.clone();
        let service = tower::service_fn(move |req: Req| {
            let authority = req
                .uri()
                .authority()
                .map(ToString::to_string)
                .unwrap_or_default();
            let counts = counts.clone();
            let sent = client.request(req);
            let at = trace_clock();
            let (there, back) = {
                let distance = counts.away.unwrap_or_else(Distance::from_env);
                let mut rng = rand::rng();
                (distance.one_way(&mut rng), distance.one_way(&mut rng))
            };
            async move {
                tokio::time::sleep(there).await;
                let result = sent.await;
                tokio::time::sleep(back).await;
                if let Some(at) = at {
                    let status = result.as_ref().map_or(0, |r| r.status().as_u16());
                    let answered = trace_clock().unwrap_or(at);
                    let quota = result.as_ref().ok().map_or_else(String::new, reported);
                    // One write per line: a fleet's processes share the stream.
                    let line = format!(
                        "attempt {at:.1} {answered:.1} {status} {} {:.1}{quota}\n",
                        std::process::id(),
                        wall_clock_ms()
                    );
                    eprint!("{line}");
                }
                let mut map = counts.sent.lock().unwrap();
                let count = map.entry(authority).or_default();
                count.attempts += 1;
                match &result {
                    Ok(res) if res.status() == StatusCode::TOO_MANY_REQUESTS => {
                        count.refused += 1;
                        counts.refusals.lock().unwrap().push(wall_clock_ms());
                    }
                    Ok(_) => {}
                    Err(_) => count.errors += 1,
                }
                result.map_err(BoxError::from)
            }
        });
        BoxCloneService::new(service.boxed_clone())
    }

    /// What `authority` was sent (zero if nothing).
    pub fn of(&self, authority: &str) -> Count {
        self.sent
            .lock()
            .unwrap()
            .get(authority)
            .copied()
            .unwrap_or_default()
    }

    /// When each refusal came, in milliseconds since the Unix epoch.
    pub fn refused_at(&self) -> Vec<f64> {
        self.refusals.lock().unwrap().clone()
    }

    /// What every destination was sent, added up.
    pub fn total(&self) -> Count {
        self.sent
            .lock()
            .unwrap()
            .values()
            .fold(Count::default(), |a, c| Count {
                attempts: a.attempts + c.attempts,
                refused: a.refused + c.refused,
                errors: a.errors + c.errors,
            })
    }
}
