//! The server's `Retry-After` in `RetryLayer`: the cap, clamping to it, malformed and hostile
//! values, HTTP dates against the wall clock, and (property) no server value escapes the cap
//! or the budget.

mod support;

use http::{HeaderValue, Response};
use std::io;
use std::time::Duration;
use support::scripted::Reply::*;
use support::scripted::{exact, get, layer, run, stats};
use support::time::{MS, SEC};
use tokio::time::Instant;
use tower::retry::Policy;
use tower_backoff::GiveUp;

// ---- Retry-After: cap, clamp, malformed, hostile ----

#[tokio::test(start_paused = true)]
async fn retry_after_past_the_cap_gives_up_at_once_with_the_response_unchanged() {
    let t0 = Instant::now();
    let (res, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", b"11")]).await;
    let res = res.unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO, "no sleep just to give up");
    assert_eq!(arrivals.len(), 1);
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "11");
    assert_eq!(res.body(), "body 503");
    assert_eq!(
        stats(&res).gave_up,
        Some(GiveUp::RetryAfterTooLong(11 * SEC))
    );
    // Exactly at the default cap (10 s) is still waited for.
    let (_, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", b"10")]).await;
    assert_eq!(arrivals, [Duration::ZERO, 10 * SEC]);
}

#[tokio::test(start_paused = true)]
async fn clamp_waits_for_the_cap_instead_of_giving_up() {
    let clamp = layer().with_settings(
        exact()
            .with_max_retry_after(3 * SEC)
            .unwrap()
            .with_clamp_retry_after(true),
    );
    let (res, arrivals) = run(clamp, get(), &[WithHeader(429, "retry-after", b"60")]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 3 * SEC]);
}

#[tokio::test(start_paused = true)]
async fn malformed_retry_after_falls_back_to_the_backoff() {
    let malformed: [&[u8]; 7] = [
        b"soon",
        b"-5",
        b"1.5",
        b"",
        b"\xff\xfe",
        b"5 s",
        b"Wed, 99 Foo",
    ];
    for value in malformed {
        let (res, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", value)]).await;
        assert_eq!(res.unwrap().status(), 200, "{value:?}");
        assert_eq!(arrivals, [Duration::ZERO, 100 * MS], "{value:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn hostile_retry_after_cannot_stall_the_client() {
    let hostile: [&[u8]; 3] = [
        b"100000000000000000000",
        b"18446744073709551615",
        b"Fri, 31 Dec 9999 23:59:59 GMT",
    ];
    for value in hostile {
        for clamp in [false, true] {
            let settings = exact().with_clamp_retry_after(clamp);
            let t0 = Instant::now();
            let (res, arrivals) = run(
                layer().with_settings(settings),
                get(),
                &[WithHeader(503, "retry-after", value)],
            )
            .await;
            assert!(res.is_ok());
            assert!(arrivals.len() <= 2);
            assert!(
                t0.elapsed() <= tower_backoff::layer::DEFAULT_MAX_RETRY_AFTER,
                "{value:?} clamp={clamp}: waited {:?}",
                t0.elapsed()
            );
        }
    }
    // Given up on without a wait by default; waited for exactly the cap when clamping.
    let t0 = Instant::now();
    let (res, _) = run(
        layer(),
        get(),
        &[WithHeader(429, "retry-after", hostile[0])],
    )
    .await;
    assert_eq!(res.unwrap().status(), 429);
    assert_eq!(t0.elapsed(), Duration::ZERO);
    let clamp = layer().with_settings(exact().with_clamp_retry_after(true));
    let (_, arrivals) = run(clamp, get(), &[WithHeader(429, "retry-after", hostile[0])]).await;
    assert_eq!(
        arrivals,
        [
            Duration::ZERO,
            tower_backoff::layer::DEFAULT_MAX_RETRY_AFTER
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_clamped_hostile_retry_after_still_respects_the_budget() {
    let settings = exact()
        .with_clamp_retry_after(true)
        .with_max_elapsed(5 * SEC)
        .unwrap();
    let t0 = Instant::now();
    let (res, arrivals) = run(
        layer().with_settings(settings),
        get(),
        &[WithHeader(503, "retry-after", b"100000000000000000000")],
    )
    .await;
    assert_eq!(res.unwrap().status(), 503);
    assert_eq!(arrivals.len(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

// ---- wall clock ----

/// Needs the HTTP-date parser of `retry_after`.
#[tokio::test(start_paused = true)]
async fn http_dates_are_read_against_the_injected_wall_clock() {
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let date = httpdate::fmt_http_date(now + 5 * SEC);
    let date: &'static [u8] = Box::leak(date.into_bytes().into_boxed_slice());
    let (res, arrivals) = run(
        layer().with_wall_clock(move || now),
        get(),
        &[WithHeader(503, "retry-after", date)],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 5 * SEC]);
}

// ---- property: no server value escapes the cap and the budget ----

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    #[test]
    fn no_retry_after_escapes_the_cap_or_the_budget(
        secs in proptest::prelude::any::<u64>(),
        raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..32),
        use_raw in proptest::prelude::any::<bool>(),
        code in proptest::sample::select(vec![429u16, 503, 502, 504, 408]),
        clamp in proptest::prelude::any::<bool>(),
        spent_ms in 0u32..6_000,
    ) {
        let value = if use_raw { raw } else { secs.to_string().into_bytes() };
        let Ok(value) = HeaderValue::from_bytes(&value) else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let budget = 5 * SEC;
        let cap = 2 * SEC;
        rt.block_on(async {
            let settings = exact()
                .with_max_elapsed(budget).unwrap()
                .with_max_retry_after(cap).unwrap()
                .with_clamp_retry_after(clamp);
            let mut policy = layer().with_settings(settings).policy();
            let request = get();
            let mut copy =
                <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
                    .unwrap();
            // Time already spent inside the first attempt.
            tokio::time::advance(spent_ms * MS).await;
            let mut res = Response::builder().status(code).body(String::new()).unwrap();
            res.headers_mut().insert("retry-after", value.clone());
            let mut result: Result<_, io::Error> = Ok(res);
            let t0 = Instant::now();
            match policy.retry(&mut copy, &mut result) {
                Some(wait) => {
                    wait.await;
                    let waited = t0.elapsed();
                    // The backoff's first delay is 100 ms; the server's value is capped.
                    proptest::prop_assert!(waited <= cap.max(100 * MS), "waited {waited:?}");
                    proptest::prop_assert!(spent_ms * MS + waited <= budget);
                }
                None => {
                    let res = result.unwrap();
                    proptest::prop_assert_eq!(res.status().as_u16(), code);
                    proptest::prop_assert_eq!(&res.headers()["retry-after"], &value);
                    proptest::prop_assert_eq!(t0.elapsed(), Duration::ZERO);
                }
            }
            Ok(())
        })?;
    }
}
