//! Prints the retry schedule of a backoff strategy: for each retry, its nominal interval,
//! the range its randomized delay falls in, the time elapsed when it fires, and how often
//! the strategy has stopped by then.
//!
//! ```text
//! cargo run --example schedule -- exponential
//! cargo run --example schedule -- exponential --max-elapsed 60s --attempts 12
//! cargo run --example schedule -- constant --interval 2s --max-retries 3
//! ```
//!
//! Run with `--help` for every option.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;
use tower_backoff::backoff::{
    DecorrelatedJitter, EqualJitter, ExponentialJitter, Fibonacci, FullJitter, Linear,
    ResponsiveBackOff, Schedule, StopBackOff, Table, ZeroBackOff, aws,
};
use tower_backoff::{BackOff, BackOffExt, ConfigError, ConstantBackOff, ExponentialBackOff};

const HELP: &str = "\
Prints the retry schedule of a backoff strategy.

USAGE:
    cargo run --example schedule -- <STRATEGY> [OPTIONS]

STRATEGIES:
    exponential    randomized exponential backoff (cenkalti/backoff v4 defaults)
    constant       the same delay every time
    zero           no delay, forever
    stop           never retries
    table          a table of delays, each jittered in [0.5d, 1.5d] (\"simple backoff\")
    linear         +interval per retry, capped
    fibonacci      base x 1, 1, 2, 3, 5, 8..., capped
    fixed          AWS family: the same delay every time
    aws-exponential      AWS family: min(cap, base x step^n), no jitter
    exponential-jitter   AWS family: random in [0, min(cap, base x step^n)]
    full-jitter          AWS family: random in [0, min(cap, base x 2^n)]
    equal-jitter         AWS family: t/2 + random in [0, t/2], t = min(cap, base x 2^n)
    decorrelated         AWS family: min(cap, random in [base, 3 x previous])
    responsive     up/down backoff, shown here for consecutive failures

EXPONENTIAL OPTIONS:
    --initial <DURATION>          first interval                     [default: 500ms]
    --multiplier <NUMBER>         growth of the interval per retry   [default: 1.5]
    --randomization <NUMBER>      spread around the interval, 0..1   [default: 0.5]
    --max-interval <DURATION>     cap of the interval                [default: 60s]
    --max-elapsed <DURATION|none> total time before stopping         [default: 15m]

CONSTANT OPTIONS:
    --interval <DURATION>         the delay                          [default: 1s]

TABLE OPTIONS:
    --delays <D1,D2,...>          the table      [default: 0ms,10ms,10ms,100ms,100ms,500ms,500ms,3s,3s,5s]

LINEAR OPTIONS:
    --interval <DURATION>         added per retry                    [default: 1s]
    --max-interval <DURATION>     cap                                [default: 60s]

FIBONACCI AND AWS FAMILY OPTIONS:
    --base <DURATION>             base delay                         [default: 1s]
    --cap <DURATION>              no delay is longer                 [default: 20s]
    --step <NUMBER>               growth (aws-exponential, exponential-jitter) [default: 2]
    --interval <DURATION>         the delay of `fixed`               [default: 1s]

RESPONSIVE OPTIONS:
    --initial <DURATION>          first delay                        [default: 500ms]
    --up <NUMBER>                 multiplier on failure              [default: 1.5]
    --randomization <NUMBER>      spread, 0..1                       [default: 0.3]
    --max-interval <DURATION>     cap                                [default: 15m]

OPTIONS FOR EVERY STRATEGY:
    --max-retries <N>             stop after N retries (MaxRetries)
    --max-delay <DURATION>        cap each delay (MaxDelay)
    --attempts <N>                rows to print                      [default: 10]
    --samples <N>                 seeded runs simulated              [default: 2000]
    --seed <N>                    seed of the first run              [default: 0]
    -h, --help                    prints this help

DURATIONS are a number and a unit: 100ns, 250us, 500ms, 2s, 1.5m, 1h.

COLUMNS:
    interval     the nominal delay, before randomization (\"-\" if the strategy has none)
    randomized   the range of the delay: exact when the strategy states it (exponential:
                 interval x [1 - r, 1 + r]), otherwise the min and max over the runs
    elapsed      the time at which the retry fires, min and max over the runs
    stopped      the share of runs that stopped at or before this retry

The runs are simulated on a paused tokio clock: each run waits every delay in full and
the operation itself takes no time, so a time budget (--max-elapsed) stops a run exactly
when the strategy would. The reference table of cenkalti/backoff shows \"Stop\" on row 10
only by *assuming* the budget is exceeded there; with the default 15 minutes it is not,
and the table says so. Try --max-elapsed 60s to see runs stop from row 10 on.
";

fn main() -> ExitCode {
    match run(env::args().skip(1).collect()) {
        Ok(table) => {
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(Exit::Help) => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Err(Exit::Usage(message)) => {
            eprintln!("error: {message}\n\nRun with --help for usage.");
            ExitCode::from(2)
        }
    }
}

enum Exit {
    Help,
    Usage(String),
}

impl From<ConfigError> for Exit {
    fn from(err: ConfigError) -> Self {
        Exit::Usage(err.to_string())
    }
}

fn usage<T>(message: impl Into<String>) -> Result<T, Exit> {
    Err(Exit::Usage(message.into()))
}

type Factory = Box<dyn Fn(u64) -> Box<dyn BackOff>>;

/// What the table needs from a strategy. Adding a strategy is one arm of [`strategy`].
struct Spec {
    /// A description of the configuration, printed above the table.
    describe: String,
    /// A fresh policy drawing from the given seed.
    make: Factory,
    /// The same policy without randomization, for the `interval` column.
    nominal: Option<Factory>,
    /// The exact spread `r` of the delay around the nominal interval, if the strategy has one.
    band: Option<f64>,
}

/// The strategies [`strategy`] knows, for error messages.
const STRATEGIES: &str = "exponential, constant, zero, stop, table, linear, fibonacci, fixed, \
aws-exponential, exponential-jitter, full-jitter, equal-jitter, decorrelated, responsive";

/// Builds the strategy named on the command line, taking its options from `opts`.
///
/// To add a strategy: one arm here (randomized ones give `make` a seeded policy, and a
/// `nominal` and `band` only if they have them), its name in [`STRATEGIES`] and its
/// options in [`HELP`]. Options it does not take are reported as not applying to it.
fn strategy(name: &str, opts: &mut Options) -> Result<Spec, Exit> {
    let spec = match name {
        "exponential" => {
            let builder = ExponentialBackOff::builder()
                .with_initial_interval(
                    opts.duration("initial", ExponentialBackOff::DEFAULT_INITIAL_INTERVAL)?,
                )
                .with_multiplier(opts.number("multiplier", ExponentialBackOff::DEFAULT_MULTIPLIER)?)
                .with_randomization_factor(opts.number(
                    "randomization",
                    ExponentialBackOff::DEFAULT_RANDOMIZATION_FACTOR,
                )?)
                .with_max_interval(
                    opts.duration("max-interval", ExponentialBackOff::DEFAULT_MAX_INTERVAL)?,
                )
                .with_max_elapsed(
                    opts.optional_duration("max-elapsed", ExponentialBackOff::DEFAULT_MAX_ELAPSED)?,
                );
            let policy = builder.clone().build()?;
            let flat = builder.with_randomization_factor(0.0).build()?;
            Spec {
                describe: format!(
                    "exponential: initial {}, multiplier {:?}, randomization {:?}, max interval {}, max elapsed {}",
                    human(policy.initial_interval()),
                    policy.multiplier(),
                    policy.randomization_factor(),
                    human(policy.max_interval()),
                    policy.max_elapsed().map_or("none".into(), human),
                ),
                band: Some(policy.randomization_factor()),
                make: Box::new(move |seed| Box::new(policy.clone().with_seed(seed))),
                nominal: Some(Box::new(move |_| Box::new(flat.clone()))),
            }
        }
        "constant" => {
            let interval = opts.duration("interval", Duration::from_secs(1))?;
            let constant = ConstantBackOff::new(interval)?;
            fixed(format!("constant: {}", human(interval)), move || constant)
        }
        "zero" => fixed("zero".into(), || ZeroBackOff),
        "stop" => fixed("stop".into(), || StopBackOff),
        "table" => {
            let table = match opts.take("delays", parse_durations)? {
                Some(delays) => Table::new(delays)?,
                None => Table::default(),
            };
            sampled(format!("table: {:?}", table.delays()), table)
        }
        "linear" => {
            let linear = Linear::new(
                opts.duration("interval", Duration::from_secs(1))?,
                opts.duration("max-interval", Duration::from_secs(60))?,
            )?;
            sampled(format!("{linear:?}"), linear)
        }
        "fibonacci" => {
            let (base, cap) = base_cap(opts)?;
            sampled(
                format!("fibonacci: base {}, cap {}", human(base), human(cap)),
                Fibonacci::new(base, cap)?,
            )
        }
        "fixed" => {
            let fixed = aws::Fixed::new(opts.duration("interval", Duration::from_secs(1))?)?;
            sampled(format!("{fixed:?}"), fixed)
        }
        "aws-exponential" => {
            let (base, cap) = base_cap(opts)?;
            let s = aws::Exponential::new(base, cap)?
                .with_step(opts.number("step", aws::DEFAULT_STEP)?)?;
            sampled(format!("{s:?}"), s)
        }
        "exponential-jitter" => {
            let (base, cap) = base_cap(opts)?;
            let s = ExponentialJitter::new(base, cap)?
                .with_step(opts.number("step", aws::DEFAULT_STEP)?)?;
            sampled(format!("{s:?}"), s)
        }
        "full-jitter" => {
            let (base, cap) = base_cap(opts)?;
            let s = FullJitter::new(base, cap)?;
            sampled(format!("{s:?}"), s)
        }
        "equal-jitter" => {
            let (base, cap) = base_cap(opts)?;
            let s = EqualJitter::new(base, cap)?;
            sampled(format!("{s:?}"), s)
        }
        "decorrelated" => {
            let (base, cap) = base_cap(opts)?;
            let d = DecorrelatedJitter::new(base, cap)?;
            Spec {
                describe: format!(
                    "decorrelated jitter: base {}, cap {}",
                    human(base),
                    human(cap)
                ),
                make: Box::new(move |seed| Box::new(d.clone().with_seed(seed))),
                nominal: None,
                band: None,
            }
        }
        "responsive" => {
            let builder = ResponsiveBackOff::builder()
                .with_initial_interval(
                    opts.duration("initial", ResponsiveBackOff::DEFAULT_INITIAL_INTERVAL)?,
                )
                .with_up_multiplier(opts.number("up", ResponsiveBackOff::DEFAULT_UP_MULTIPLIER)?)
                .with_randomization_factor(opts.number(
                    "randomization",
                    ResponsiveBackOff::DEFAULT_RANDOMIZATION_FACTOR,
                )?)
                .with_max_interval(
                    opts.duration("max-interval", ResponsiveBackOff::DEFAULT_MAX_INTERVAL)?,
                );
            builder.build()?;
            Spec {
                describe: "responsive: delay after consecutive failures".into(),
                // A shared responsive backoff learns across clones, so every run builds its own.
                make: Box::new(move |seed| {
                    Box::new(builder.with_seed(seed).build().expect("validated above"))
                }),
                nominal: None,
                band: None,
            }
        }
        other => {
            return usage(format!(
                "unknown strategy `{other}` (expected one of: {STRATEGIES})"
            ));
        }
    };
    Ok(spec)
}

/// A stateless schedule whose range is sampled over seeded runs.
fn sampled<S: Schedule + Clone + 'static>(describe: String, schedule: S) -> Spec {
    Spec {
        describe,
        make: Box::new(move |seed| Box::new(schedule.clone().into_backoff().with_seed(seed))),
        nominal: None,
        band: None,
    }
}

/// `--base` and `--cap`, with the AWS family's defaults.
fn base_cap(opts: &mut Options) -> Result<(Duration, Duration), Exit> {
    Ok((
        opts.duration("base", aws::DEFAULT_BASE)?,
        opts.duration("cap", aws::DEFAULT_CAP)?,
    ))
}

/// A comma-separated list of durations.
fn parse_durations(text: &str) -> Result<Vec<Duration>, String> {
    text.split(',').map(|d| parse_duration(d.trim())).collect()
}

/// A strategy without randomness: its delay is its own nominal interval.
fn fixed<B: BackOff + 'static>(describe: String, make: impl Fn() -> B + Clone + 'static) -> Spec {
    let nominal = make.clone();
    Spec {
        describe,
        make: Box::new(move |_| Box::new(make())),
        nominal: Some(Box::new(move |_| Box::new(nominal()))),
        band: Some(0.0),
    }
}

/// Wraps every policy of `spec` with the limits asked for on the command line.
fn limit(mut spec: Spec, max_retries: Option<u32>, max_delay: Option<Duration>) -> Spec {
    let wrap = move |b: Box<dyn BackOff>| -> Box<dyn BackOff> {
        let b: Box<dyn BackOff> = match max_delay {
            Some(d) => Box::new(b.with_max_delay(d)),
            None => b,
        };
        match max_retries {
            Some(n) => Box::new(b.with_max_retries(n)),
            None => b,
        }
    };
    let make = spec.make;
    spec.make = Box::new(move |seed| wrap(make(seed)));
    // The nominal policy is not limited in retries: a stopped row still shows the interval
    // it stopped at, as in the reference table.
    if let Some(d) = max_delay {
        if let Some(nominal) = spec.nominal.take() {
            spec.nominal = Some(Box::new(move |seed| {
                Box::new(nominal(seed).with_max_delay(d))
            }));
        }
        // The cap cuts the band: fall back to the sampled range.
        spec.band = None;
        write!(spec.describe, ", max delay {}", human(d)).unwrap();
    }
    if let Some(n) = max_retries {
        write!(spec.describe, ", max retries {n}").unwrap();
    }
    spec
}

/// Per retry: the delays drawn and the elapsed times, over the runs still going.
#[derive(Default)]
struct Row {
    nominal: Option<Duration>,
    delay: Option<(Duration, Duration)>,
    elapsed: Option<(Duration, Duration)>,
    stopped: usize,
}

fn widen(range: &mut Option<(Duration, Duration)>, d: Duration) {
    *range = Some(match *range {
        Some((lo, hi)) => (lo.min(d), hi.max(d)),
        None => (d, d),
    });
}

/// The simulated clock stops short of overflowing an `Instant`.
const HORIZON: Duration = Duration::from_secs(100 * 365 * 86_400);

fn simulate(spec: &Spec, attempts: usize, samples: u64, seed: u64) -> Vec<Row> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut rows: Vec<Row> = (0..attempts).map(|_| Row::default()).collect();
        if let Some(nominal) = &spec.nominal {
            let mut b = nominal(seed);
            b.reset();
            for row in &mut rows {
                row.nominal = b.next_backoff();
            }
        }
        for run in 0..samples {
            let mut b = (spec.make)(seed.wrapping_add(run));
            b.reset();
            let (mut elapsed, mut advanced) = (Duration::ZERO, Duration::ZERO);
            for row in &mut rows {
                let Some(d) = b.next_backoff() else {
                    row.stopped += 1;
                    break;
                };
                elapsed = elapsed.saturating_add(d);
                widen(&mut row.delay, d);
                widen(&mut row.elapsed, elapsed);
                let step = d.min(HORIZON.saturating_sub(advanced));
                advanced += step;
                tokio::time::advance(step).await;
            }
        }
        // A run that stopped at row i is stopped at every later row too.
        for i in 1..rows.len() {
            rows[i].stopped += rows[i - 1].stopped;
        }
        rows
    })
}

/// A duration in the unit it was most likely written in: `500ms`, `60s`, `15m`.
fn human(d: Duration) -> String {
    let nanos = d.as_nanos();
    let units = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ];
    for (size, unit) in units {
        if nanos >= size && nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{nanos}ns")
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn range((lo, hi): (Duration, Duration)) -> String {
    format!("[{}, {}]", secs(lo), secs(hi))
}

fn render(spec: &Spec, rows: &[Row], samples: u64, seed: u64) -> String {
    let mut out = String::new();
    writeln!(out, "{}", spec.describe).unwrap();
    writeln!(
        out,
        "({samples} seeded runs from seed {seed}; every delay waited in full, operations take no time)\n"
    )
    .unwrap();
    writeln!(
        out,
        "{:>7}  {:>12}  {:<22}  {:<22}  stopped",
        "attempt", "interval (s)", "randomized (s)", "elapsed (s)"
    )
    .unwrap();
    for (i, row) in rows.iter().enumerate() {
        let interval = row.nominal.map_or("-".into(), secs);
        let randomized = match (spec.band, row.nominal, row.delay) {
            (Some(r), Some(n), Some(_)) => {
                let scale = |f: f64| {
                    Duration::try_from_secs_f64(n.as_secs_f64() * f).unwrap_or(Duration::MAX)
                };
                range((scale(1.0 - r), scale(1.0 + r)))
            }
            (_, _, Some(sampled)) => range(sampled),
            (_, _, None) => "stop".into(),
        };
        let elapsed = row.elapsed.map_or("-".into(), range);
        let stopped = match row.stopped as u64 {
            0 => "-".to_string(),
            n if n == samples => "stop".to_string(),
            n => format!("{:.1}%", 100.0 * n as f64 / samples as f64),
        };
        writeln!(
            out,
            "{:>7}  {interval:>12}  {randomized:<22}  {elapsed:<22}  {stopped}",
            i + 1
        )
        .unwrap();
    }
    out
}

/// `--name value` pairs, consumed by the strategy that uses them.
struct Options(BTreeMap<String, String>);

impl Options {
    fn parse(args: &[String]) -> Result<(Option<String>, Self), Exit> {
        let mut strategy = None;
        let mut map = BTreeMap::new();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if arg == "-h" || arg == "--help" {
                return Err(Exit::Help);
            }
            if let Some(name) = arg.strip_prefix("--") {
                let (name, value) = match name.split_once('=') {
                    Some((n, v)) => (n.to_string(), v.to_string()),
                    None => match args.next() {
                        Some(v) => (name.to_string(), v.clone()),
                        None => return usage(format!("option `--{name}` needs a value")),
                    },
                };
                if map.insert(name.clone(), value).is_some() {
                    return usage(format!("option `--{name}` given twice"));
                }
            } else if strategy.is_none() {
                strategy = Some(arg.clone());
            } else {
                return usage(format!("unexpected argument `{arg}`"));
            }
        }
        Ok((strategy, Self(map)))
    }

    fn take<T>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Exit> {
        match self.0.remove(name) {
            Some(v) => parse(&v)
                .map(Some)
                .map_err(|why| Exit::Usage(format!("invalid value `{v}` for `--{name}`: {why}"))),
            None => Ok(None),
        }
    }

    fn duration(&mut self, name: &str, default: Duration) -> Result<Duration, Exit> {
        Ok(self.take(name, parse_duration)?.unwrap_or(default))
    }

    fn optional_duration(
        &mut self,
        name: &str,
        default: Option<Duration>,
    ) -> Result<Option<Duration>, Exit> {
        let parse = |v: &str| {
            if v == "none" {
                Ok(None)
            } else {
                parse_duration(v).map(Some)
            }
        };
        Ok(self.take(name, parse)?.unwrap_or(default))
    }

    fn number(&mut self, name: &str, default: f64) -> Result<f64, Exit> {
        let parse = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| "expected a number".to_string())
        };
        Ok(self.take(name, parse)?.unwrap_or(default))
    }

    fn count<T: std::str::FromStr>(&mut self, name: &str) -> Result<Option<T>, Exit> {
        self.take(name, |v| {
            v.parse::<T>()
                .map_err(|_| "expected a whole number".to_string())
        })
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("missing unit (ns, us, ms, s, m or h)")?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` (expected ns, us, ms, s, m or h)"
            ));
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| e.to_string())
}

fn run(args: Vec<String>) -> Result<String, Exit> {
    let (name, mut opts) = Options::parse(&args)?;
    let Some(name) = name else {
        return usage(format!("missing strategy (one of: {STRATEGIES})"));
    };
    let attempts = opts.count::<usize>("attempts")?.unwrap_or(10);
    let samples = opts.count::<u64>("samples")?.unwrap_or(2_000);
    let seed = opts.count::<u64>("seed")?.unwrap_or(0);
    let max_retries = opts.count::<u32>("max-retries")?;
    let max_delay = opts.take("max-delay", parse_duration)?;
    if samples == 0 || samples > 1_000_000 {
        return usage("`--samples` must be within 1..=1000000");
    }
    if attempts > 100_000 {
        return usage("`--attempts` must be at most 100000");
    }
    let spec = strategy(&name, &mut opts)?;
    if let Some(unused) = opts.0.keys().next() {
        return usage(format!(
            "option `--{unused}` does not apply to strategy `{name}`"
        ));
    }
    let spec = limit(spec, max_retries, max_delay);
    let rows = simulate(&spec, attempts, samples, seed);
    Ok(render(&spec, &rows, samples, seed))
}
