//! The shared retry budget, driven with virtual time.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use support::time::{ms, secs};
use tokio::time::advance;
use tower::retry::budget::Budget;
use tower_backoff::budget::RetryBudget;

/// Withdraws until refused (at most `limit` times); returns how many were allowed.
fn drain(budget: &RetryBudget, limit: u64) -> u64 {
    let mut n = 0;
    while n < limit && budget.withdraw() {
        n += 1;
    }
    n
}

#[tokio::test(start_paused = true)]
async fn floor_allows_min_per_sec_times_ttl_without_deposits_then_refuses() {
    let budget = RetryBudget::new(secs(10), 10, 0.0).unwrap();
    assert_eq!(budget.available(), 100);
    for left in (0..100).rev() {
        assert!(budget.withdraw());
        assert_eq!(budget.available(), left);
    }
    assert!(!budget.withdraw());
    assert!(!budget.withdraw());
    assert_eq!(budget.available(), 0);
}

#[tokio::test(start_paused = true)]
async fn floor_scales_with_a_fractional_ttl() {
    let budget = RetryBudget::new(ms(1500), 10, 0.0).unwrap();
    assert_eq!(drain(&budget, 1000), 15);
}

#[tokio::test(start_paused = true)]
async fn deposits_raise_the_allowance_by_the_ratio() {
    let budget = RetryBudget::new(secs(10), 0, 0.2).unwrap();
    assert!(!budget.withdraw(), "no floor and no deposit: no retry");
    for _ in 0..100 {
        budget.deposit();
    }
    assert_eq!(budget.available(), 20);
    assert_eq!(drain(&budget, 1000), 20);

    // Fractions accumulate: four more deposits at 0.2 are 0.8 of a retry, five make one.
    for _ in 0..4 {
        budget.deposit();
    }
    assert!(!budget.withdraw());
    budget.deposit();
    assert!(budget.withdraw());
    assert!(!budget.withdraw());
}

#[tokio::test(start_paused = true)]
async fn ratios_above_one_allow_several_retries_per_request() {
    let budget = RetryBudget::new(secs(10), 0, 2.5).unwrap();
    budget.deposit();
    budget.deposit();
    assert_eq!(drain(&budget, 1000), 5);
}

#[tokio::test(start_paused = true)]
async fn ratio_is_exact_where_floats_are_not() {
    // 0.29 × 100 is 28.999999999999996 in f64; the budget counts in millionths: 29.
    let budget = RetryBudget::new(secs(10), 0, 0.29).unwrap();
    for _ in 0..100 {
        budget.deposit();
    }
    assert_eq!(drain(&budget, 1000), 29);
}

#[tokio::test(start_paused = true)]
async fn default_budget_has_the_documented_values() {
    assert_eq!(RetryBudget::DEFAULT_TTL, secs(1));
    assert_eq!(RetryBudget::DEFAULT_MIN_PER_SEC, 10);
    assert_eq!(RetryBudget::DEFAULT_RETRY_RATIO, 0.1);
    let budget = RetryBudget::default();
    assert_eq!(budget.ttl(), secs(1));
    assert_eq!(budget.min_per_sec(), 10);
    assert_eq!(budget.retry_ratio(), 0.1);
    assert_eq!(budget.available(), 10);
    for _ in 0..1000 {
        budget.deposit();
    }
    assert_eq!(budget.available(), 110);
}

#[tokio::test(start_paused = true)]
async fn deposits_expire_after_the_ttl() {
    let budget = RetryBudget::new(secs(10), 0, 1.0).unwrap();
    for _ in 0..5 {
        budget.deposit();
    }
    advance(ms(9_999)).await;
    assert_eq!(budget.available(), 5, "still within the window");
    advance(ms(1)).await;
    assert_eq!(budget.available(), 0, "a full ttl later, they are gone");
    assert!(!budget.withdraw());
}

#[tokio::test(start_paused = true)]
async fn events_leave_between_nine_tenths_of_the_ttl_and_the_ttl() {
    let budget = RetryBudget::new(secs(10), 0, 1.0).unwrap();
    advance(ms(999)).await; // the end of the first slot
    budget.deposit();
    advance(ms(9_000)).await; // 9 s after the deposit, still counted
    assert_eq!(budget.available(), 1);
    advance(ms(1)).await; // 9.001 s after: its slot has left the window
    assert_eq!(budget.available(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_window_slides_old_deposits_out_and_keeps_recent_ones() {
    let budget = RetryBudget::new(secs(10), 0, 1.0).unwrap();
    budget.deposit(); // t = 0
    advance(secs(5)).await;
    budget.deposit();
    budget.deposit(); // t = 5 s
    assert_eq!(budget.available(), 3);
    advance(secs(5)).await; // t = 10 s: the first one expired
    assert_eq!(budget.available(), 2);
    advance(secs(5)).await; // t = 15 s: all expired
    assert_eq!(budget.available(), 0);
}

#[tokio::test(start_paused = true)]
async fn withdrawals_expire_after_the_ttl_so_the_floor_refills() {
    let budget = RetryBudget::new(secs(1), 3, 0.0).unwrap();
    assert_eq!(drain(&budget, 100), 3);
    advance(ms(500)).await;
    assert!(!budget.withdraw(), "the spent floor is still in the window");
    advance(ms(500)).await;
    assert_eq!(
        drain(&budget, 100),
        3,
        "a ttl later the floor is whole again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_idle_period_forgets_everything() {
    let budget = RetryBudget::new(secs(10), 1, 1.0).unwrap();
    for _ in 0..50 {
        budget.deposit();
    }
    assert_eq!(drain(&budget, 1000), 60);
    advance(Duration::from_secs(365 * 24 * 3600)).await;
    assert_eq!(budget.available(), 10);
    budget.deposit();
    assert_eq!(budget.available(), 11);
}

#[tokio::test(start_paused = true)]
async fn clones_share_the_state() {
    let budget = RetryBudget::new(secs(10), 0, 0.5).unwrap();
    let clones: Vec<RetryBudget> = (0..4).map(|_| budget.clone()).collect();
    for clone in &clones {
        clone.deposit();
        clone.deposit();
    }
    assert_eq!(budget.available(), 4);
    assert!(clones[0].withdraw());
    assert!(clones[3].withdraw());
    assert_eq!(clones[1].available(), 2);
    assert_eq!(drain(&budget, 100), 2);
    assert!(clones.iter().all(|c| !c.withdraw()));
}

#[tokio::test(start_paused = true)]
async fn works_through_the_tower_budget_trait() {
    fn spend(budget: &dyn Budget) -> bool {
        budget.withdraw()
    }
    let budget = RetryBudget::new(secs(10), 0, 1.0).unwrap();
    assert!(!spend(&budget));
    Budget::deposit(&budget);
    assert!(spend(&budget));
    assert!(!spend(&budget));
}

#[tokio::test(start_paused = true)]
async fn huge_configurations_and_counts_do_not_overflow() {
    let budget = RetryBudget::new(secs(60), u32::MAX, RetryBudget::MAX_RETRY_RATIO).unwrap();
    let floor = u64::from(u32::MAX) * 60;
    assert_eq!(budget.available(), floor);
    for _ in 0..100_000 {
        budget.deposit();
    }
    assert_eq!(budget.available(), floor + 100_000_000);
    assert!(budget.withdraw());
    assert_eq!(budget.available(), floor + 100_000_000 - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_withdrawals_never_overdraw() {
    const TASKS: usize = 8;
    let budget = RetryBudget::new(secs(60), 0, 0.5).unwrap();
    for _ in 0..1000 {
        budget.deposit();
    }
    let allowed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let budget = budget.clone();
            let allowed = allowed.clone();
            tokio::spawn(async move {
                for i in 0..300 {
                    if budget.withdraw() {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                    if i % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let allowed = allowed.load(Ordering::Relaxed);
    assert!(
        allowed <= 500,
        "overdrawn: {allowed} retries allowed for 500"
    );
    // No withdrawal is lost or double-counted: what was allowed plus what is left is the
    // whole allowance.
    assert_eq!(allowed + budget.available(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deposits_and_withdrawals_stay_within_the_ratio() {
    const TASKS: u64 = 8;
    const REQUESTS: u64 = 5_000;
    let budget = RetryBudget::new(secs(60), 0, 0.2).unwrap();
    let allowed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let budget = budget.clone();
            let allowed = allowed.clone();
            tokio::spawn(async move {
                for i in 0..REQUESTS {
                    budget.deposit();
                    // Every request fails and wants two retries.
                    for _ in 0..2 {
                        if budget.withdraw() {
                            allowed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let allowed = allowed.load(Ordering::Relaxed);
    let allowance = TASKS * REQUESTS / 5;
    assert!(allowed <= allowance, "overdrawn: {allowed} > {allowance}");
    assert_eq!(allowed + budget.available(), allowance);
    // The budget did not starve the retries either: nearly all of it was used.
    assert!(allowed >= allowance - TASKS, "{allowed} of {allowance}");
}

#[test]
fn concurrent_use_from_plain_threads() {
    let budget = RetryBudget::new(secs(60), 10, 0.0).unwrap();
    let allowed: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| s.spawn(|| drain(&budget.clone(), 1000)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(allowed <= 600);
    assert_eq!(allowed + budget.available(), 600);
}

#[test]
fn invalid_ttls_are_config_errors() {
    for ttl in [
        Duration::ZERO,
        ms(999),
        ms(60_001),
        secs(3600),
        Duration::MAX,
    ] {
        let err = RetryBudget::new(ttl, 10, 0.2).unwrap_err();
        assert_eq!(err.field(), "ttl");
        assert_eq!(err.value(), format!("{ttl:?}"));
        assert!(err.to_string().contains("between 1 s and 60 s"), "{err}");
    }
    for ttl in [secs(1), secs(60), ms(2_500)] {
        assert_eq!(RetryBudget::new(ttl, 10, 0.2).unwrap().ttl(), ttl);
    }
}

#[test]
fn invalid_ratios_are_config_errors() {
    for ratio in [
        f64::NAN,
        -0.1,
        -0.0000001,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1000.001,
        1e300,
        4e-7,
    ] {
        let err = RetryBudget::new(secs(10), 10, ratio).unwrap_err();
        assert_eq!(err.field(), "retry_ratio", "{ratio}");
        assert_eq!(err.value(), format!("{ratio:?}"));
    }
    for ratio in [0.0, 0.000001, 0.2, 1.0, 1000.0] {
        let budget = RetryBudget::new(secs(10), 10, ratio).unwrap();
        assert_eq!(budget.retry_ratio(), ratio);
    }
}

#[tokio::test(start_paused = true)]
async fn debug_shows_the_configuration_and_balance() {
    let budget = RetryBudget::new(secs(10), 1, 0.5).unwrap();
    let shown = format!("{budget:?}");
    assert!(shown.contains("ttl: 10s"), "{shown}");
    assert!(shown.contains("min_per_sec: 1"), "{shown}");
    assert!(shown.contains("retry_ratio: 0.5"), "{shown}");
    assert!(shown.contains("available: 10"), "{shown}");
}

fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}

#[test]
fn budget_is_send_sync_and_clone() {
    assert_send_sync::<RetryBudget>();
}

/// One step of a random scenario.
#[derive(Debug, Clone)]
enum Op {
    Deposit,
    Withdraw,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Deposit),
        4 => Just(Op::Withdraw),
        2 => (0u64..700).prop_map(Op::Advance),
    ]
}

/// The specification, written plainly: a list of timestamped events. The window holds
/// the events whose slot (`ttl / 10` wide, counted from the budget's creation) is one of
/// the last ten.
struct Model {
    slot_ms: u64,
    /// Floor in hundredths of a retry.
    floor: u64,
    /// Ratio in hundredths of a retry per deposit.
    ratio: u64,
    now_ms: u64,
    events: Vec<(u64, bool)>, // (time in ms, is_deposit)
}

impl Model {
    fn in_window(&self, at_ms: u64) -> bool {
        self.now_ms / self.slot_ms - at_ms / self.slot_ms < 10
    }

    fn balance(&self) -> i128 {
        let (mut deposits, mut withdrawals) = (0i128, 0i128);
        for &(at, is_deposit) in &self.events {
            if self.in_window(at) {
                if is_deposit {
                    deposits += 1;
                } else {
                    withdrawals += 1;
                }
            }
        }
        self.floor as i128 + deposits * self.ratio as i128 - withdrawals * 100
    }

    fn withdraw(&mut self) -> bool {
        let ok = self.balance() >= 100;
        if ok {
            self.events.push((self.now_ms, false));
        }
        ok
    }

    fn available(&self) -> u64 {
        (self.balance().max(0) / 100) as u64
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn matches_a_reference_model(
        ttl_s in 1u64..=5,
        min_per_sec in 0u32..4,
        ratio_pct in 0u64..300,
        ops in proptest::collection::vec(op(), 0..300),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let budget =
                RetryBudget::new(secs(ttl_s), min_per_sec, ratio_pct as f64 / 100.0).unwrap();
            let mut model = Model {
                slot_ms: ttl_s * 100,
                floor: u64::from(min_per_sec) * ttl_s * 100,
                ratio: ratio_pct,
                now_ms: 0,
                events: Vec::new(),
            };
            for (i, op) in ops.iter().enumerate() {
                match op {
                    Op::Deposit => {
                        budget.deposit();
                        model.events.push((model.now_ms, true));
                    }
                    Op::Withdraw => {
                        prop_assert_eq!(budget.withdraw(), model.withdraw(), "op {} {:?}", i, op);
                    }
                    Op::Advance(step) => {
                        advance(ms(*step)).await;
                        model.now_ms += step;
                    }
                }
                prop_assert_eq!(budget.available(), model.available(), "after op {}", i);
            }
            Ok(())
        })?;
    }
}
