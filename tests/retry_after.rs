//! `Retry-After` and `RateLimit` parsing, as a specification table.

use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tower_backoff::retry_after::{from_headers, parse};

/// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
fn now() -> SystemTime {
    httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap()
}

const SATURATED: Duration = Duration::from_secs(u64::MAX);

fn secs(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

fn parse_str(value: &str) -> Option<Duration> {
    parse(&HeaderValue::from_str(value).unwrap(), now())
}

#[test]
fn the_rfc_example_date_is_the_fixed_now() {
    assert_eq!(now(), UNIX_EPOCH + Duration::from_secs(784_111_777));
}

#[test]
fn delay_seconds() {
    let table: &[(&str, Option<Duration>)] = &[
        ("0", secs(0)),
        ("1", secs(1)),
        ("120", secs(120)),
        ("007", secs(7)),
        (" 5", secs(5)),
        ("5 ", secs(5)),
        ("\t5\t", secs(5)),
        (" \t 42 \t ", secs(42)),
        ("4294967295", secs(u64::from(u32::MAX))),
        ("18446744073709551615", secs(u64::MAX)),
        // Saturation: too large for u64 is the largest whole-second Duration, not a failure.
        ("18446744073709551616", Some(SATURATED)),
        ("100000000000000000000", Some(SATURATED)), // 10^20
        ("1234567890123456789012345678901234567890", Some(SATURATED)), // 40 digits
        // Leading zeros never overflow.
        ("0000000000000000000000000000000000000001", secs(1)),
    ];
    for (value, expected) in table {
        assert_eq!(parse_str(value), *expected, "{value:?}");
    }
}

#[test]
fn invalid_values_are_none() {
    let table = [
        "",
        " ",
        "\t",
        " \t ",
        "+5",
        "-5",
        "-0",
        "1.5",
        "1e3",
        "0x10",
        "5s",
        "5 5",
        "5, 10",
        "five",
        "soon",
        "١٢", // Arabic-Indic digits are not DIGIT
        // Dates that do not exist or are malformed.
        "Sun, 30 Feb 2025 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 06 Nov 1994 08:60:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Mon, 06 Nov 1994 08:49:37 GMT", // wrong weekday
        "Sun, 06 Nov 1994",
        "1994-11-06T08:49:37Z",
        "Thu, 31 Dec 1969 23:59:59 GMT", // before 1970: httpdate cannot represent it
        "Sat, 01 Jan 10000 00:00:00 GMT",
    ];
    for value in table {
        assert_eq!(parse_str(value), None, "{value:?}");
    }
}

#[test]
fn non_ascii_bytes_are_none() {
    for bytes in [
        &b"\x80"[..],
        b"5\xff",
        b"\xc3\xa9",
        b"Sun, 06 Nov 1994 08:49:37 GMT\xa0",
    ] {
        let value = HeaderValue::from_bytes(bytes).unwrap();
        assert_eq!(parse(&value, now()), None, "{bytes:?}");
    }
}

#[test]
fn http_dates_in_all_three_formats() {
    let table: &[(&str, Option<Duration>)] = &[
        // Exactly now: zero.
        ("Sun, 06 Nov 1994 08:49:37 GMT", secs(0)),
        ("Sunday, 06-Nov-94 08:49:37 GMT", secs(0)),
        ("Sun Nov  6 08:49:37 1994", secs(0)),
        // In the future: the exact difference.
        ("Sun, 06 Nov 1994 08:49:38 GMT", secs(1)),
        ("Sun, 06 Nov 1994 08:50:07 GMT", secs(30)),
        ("Mon, 07 Nov 1994 08:49:37 GMT", secs(86_400)),
        ("Monday, 07-Nov-94 08:49:37 GMT", secs(86_400)),
        ("Mon Nov  7 08:49:37 1994", secs(86_400)),
        ("Sun Nov 20 08:49:37 1994", secs(14 * 86_400)),
        // Whitespace around a date.
        ("  Sun, 06 Nov 1994 08:50:07 GMT\t", secs(30)),
        // In the past: zero, retry at once.
        ("Sun, 06 Nov 1994 08:49:36 GMT", secs(0)),
        ("Thu, 01 Jan 1970 00:00:00 GMT", secs(0)),
        ("Saturday, 05-Nov-94 08:49:37 GMT", secs(0)),
        ("Sat Nov  5 08:49:37 1994", secs(0)),
    ];
    for (value, expected) in table {
        assert_eq!(parse_str(value), *expected, "{value:?}");
    }
}

#[test]
fn rfc850_two_digit_years_are_1970_to_2069() {
    // 69 is 2069, far in the future of 1994.
    let far = parse_str("Wednesday, 06-Nov-69 08:49:37 GMT").unwrap();
    let expected = httpdate::parse_http_date("Wed, 06 Nov 2069 08:49:37 GMT")
        .unwrap()
        .duration_since(now())
        .unwrap();
    assert_eq!(far, expected);
    // 70 is 1970, in the past.
    assert_eq!(parse_str("Thursday, 01-Jan-70 00:00:00 GMT"), secs(0));
}

#[test]
fn year_9999_is_huge_but_finite() {
    let last = UNIX_EPOCH + Duration::from_secs(253_402_300_799); // 9999-12-31T23:59:59Z
    let delay = parse_str("Fri, 31 Dec 9999 23:59:59 GMT").unwrap();
    assert_eq!(delay, last.duration_since(now()).unwrap());
    assert!(delay < SATURATED);
    assert!(delay > Duration::from_secs(8000 * 365 * 86_400));
}

#[test]
fn a_date_is_measured_from_the_given_now() {
    let value = HeaderValue::from_static("Sun, 06 Nov 1994 08:50:07 GMT");
    let later = now() + Duration::from_secs(10);
    assert_eq!(parse(&value, later), secs(20));
    assert_eq!(parse(&value, now() + Duration::from_secs(3600)), secs(0));
    // Sub-second clocks: the delay is exact, not rounded.
    let almost = now() + Duration::from_millis(29_500);
    assert_eq!(parse(&value, almost), Some(Duration::from_millis(500)));
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

#[test]
fn from_headers_reads_only_the_first_retry_after() {
    let map = headers(&[("retry-after", "5"), ("retry-after", "10")]);
    assert_eq!(from_headers(&map, now()), secs(5));
    let map = headers(&[
        ("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT"),
        ("retry-after", "1"),
    ]);
    assert_eq!(from_headers(&map, now()), secs(30));
    // An invalid first value is not rescued by a valid second one.
    let map = headers(&[("retry-after", "bogus"), ("retry-after", "10")]);
    assert_eq!(from_headers(&map, now()), None);
}

#[test]
fn from_headers_without_any_delay_is_none() {
    assert_eq!(from_headers(&HeaderMap::new(), now()), None);
    let map = headers(&[
        ("content-type", "text/plain"),
        ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
    ]);
    assert_eq!(from_headers(&map, now()), None);
}

#[test]
fn rate_limit_field() {
    let table: &[(&str, Option<Duration>)] = &[
        (r#""default";r=0;t=10"#, secs(10)),
        (r#"default;r=0;t=10"#, secs(10)), // a token name is accepted too
        (r#""default";t=10;r=0"#, secs(10)), // parameter order does not matter
        (r#""default";r=0;t=0"#, secs(0)),
        // The largest reset among the exhausted quotas.
        (r#""burst";r=0;t=5, "day";r=0;t=3600"#, secs(3600)),
        (r#""day";r=0;t=3600, "burst";r=0;t=5"#, secs(3600)),
        // Quotas with room left do not explain the refusal.
        (r#""burst";r=0;t=5, "day";r=100;t=3600"#, secs(5)),
        (r#""default";r=50;t=30"#, None),
        (r#""a";r=1;t=5, "b";r=2;t=1"#, None),
        // Exhausted, but no usable reset.
        (r#""default";r=0"#, None),
        (r#""default";r=0;t=-5"#, None),
        (r#""default";r=0;t=1.5"#, None),
        (r#""default";r=0;t="10""#, None),
        (r#""default";r=-1;t=10"#, None),
        (r#""default";t=10"#, None),
        // Other parameters and members are skipped.
        (
            r#""default";q=100;w=60;pk=:cHsdsRa894==:;r=0;t=30"#,
            secs(30),
        ),
        (r#"("a" "b");r=0;t=99, "c";r=0;t=2"#, secs(2)),
        // Draft 07's Dictionary: one policy.
        ("limit=10, remaining=0, reset=5", secs(5)),
        ("limit=10, remaining=3, reset=5", None),
        // Whitespace between members and around the value.
        ("  \"a\";r=0;t=1 ,\t\"b\";r=0;t=2  ", secs(2)),
        // Not a valid Structured Field List: ignored whole.
        (r#""burst";r=0;t=5,"#, None),
        (r#""burst";r=0;t=5 "day""#, None),
        (r#""burst";r=0;t=1234567890123456"#, None),
        (r#""unterminated;r=0;t=5"#, None),
        ("", None),
        ("garbage!", None),
    ];
    for (value, expected) in table {
        let map = headers(&[("ratelimit", value)]);
        assert_eq!(from_headers(&map, now()), *expected, "{value:?}");
    }
}

#[test]
fn rate_limit_lines_form_one_list() {
    let map = headers(&[
        ("ratelimit", r#""a";r=0;t=4"#),
        ("ratelimit", r#""b";r=0;t=9"#),
    ]);
    assert_eq!(from_headers(&map, now()), secs(9));
    // One invalid line voids the field.
    let map = headers(&[("ratelimit", r#""a";r=0;t=4"#), ("ratelimit", "(")]);
    assert_eq!(from_headers(&map, now()), None);
}

#[test]
fn rate_limit_field_does_not_panic_on_non_ascii() {
    let mut map = HeaderMap::new();
    map.insert(
        "ratelimit",
        HeaderValue::from_bytes(b"\"caf\xc3\xa9\";r=0;t=5").unwrap(),
    );
    assert_eq!(from_headers(&map, now()), None);
}

/// Header name/value pairs.
type Headers<'a> = &'a [(&'a str, &'a str)];

#[test]
fn legacy_rate_limit_reset() {
    let table: &[(Headers, Option<Duration>)] = &[
        (&[("ratelimit-reset", "30")], secs(30)),
        (&[("ratelimit-reset", " 30 ")], secs(30)),
        (
            &[("ratelimit-remaining", "0"), ("ratelimit-reset", "30")],
            secs(30),
        ),
        // Quota left: the reset is not a reason to wait.
        (
            &[("ratelimit-remaining", "3"), ("ratelimit-reset", "30")],
            None,
        ),
        (
            &[("ratelimit-remaining", "x"), ("ratelimit-reset", "30")],
            None,
        ),
        (&[("ratelimit-reset", "-30")], None),
        (&[("ratelimit-reset", "soon")], None),
        // A Unix timestamp (GitLab style): measured from now.
        (&[("ratelimit-reset", "784111837")], secs(784_111_837)), // below 10^9: seconds
        (&[("ratelimit-reset", "1000000000")], secs(1_000_000_000)),
        // 10^9 + 1 as a timestamp is 2001, after 1994's now.
        (
            &[("ratelimit-reset", "1000000001")],
            secs(1_000_000_001 - 784_111_777),
        ),
        // Above 10^12, a timestamp in milliseconds (10^12 s would be the year 33658).
        (
            &[("ratelimit-reset", "1000000001000")],
            secs(1_000_000_001 - 784_111_777),
        ),
        // Saturated to u64::MAX, in milliseconds: huge, but finite.
        (
            &[("ratelimit-reset", "99999999999999999999999")],
            Some(Duration::from_millis(u64::MAX) - Duration::from_secs(784_111_777)),
        ),
    ];
    for (pairs, expected) in table {
        assert_eq!(from_headers(&headers(pairs), now()), *expected, "{pairs:?}");
    }
    // A timestamp in the past of `now` is zero.
    let later = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let map = headers(&[("ratelimit-reset", "1600000000")]);
    assert_eq!(from_headers(&map, later), secs(0));
    let map = headers(&[("ratelimit-reset", "1700000060")]);
    assert_eq!(from_headers(&map, later), secs(60));
}

#[test]
fn precedence() {
    // Retry-After wins over RateLimit, which wins over RateLimit-Reset.
    let all = [
        ("retry-after", "7"),
        ("ratelimit", r#""default";r=0;t=10"#),
        ("ratelimit-reset", "20"),
    ];
    assert_eq!(from_headers(&headers(&all), now()), secs(7));
    assert_eq!(from_headers(&headers(&all[1..]), now()), secs(10));
    assert_eq!(from_headers(&headers(&all[2..]), now()), secs(20));
    // A date Retry-After also wins, even when it is in the past.
    let map = headers(&[
        ("retry-after", "Sat, 05 Nov 1994 08:49:37 GMT"),
        ("ratelimit", r#""default";r=0;t=10"#),
    ]);
    assert_eq!(from_headers(&map, now()), secs(0));
    // An invalid Retry-After is ignored, and the RateLimit reset applies.
    let map = headers(&[
        ("retry-after", "-1"),
        ("ratelimit", r#""default";r=0;t=10"#),
    ]);
    assert_eq!(from_headers(&map, now()), secs(10));
    // retry-after-ms (OpenAI's, Azure's) wins over Retry-After; then Azure's older name.
    let map = headers(&[("retry-after", "7"), ("retry-after-ms", " 1500 ")]);
    assert_eq!(from_headers(&map, now()), Some(Duration::from_millis(1500)));
    let map = headers(&[("retry-after", "7"), ("x-ms-retry-after-ms", "250")]);
    assert_eq!(from_headers(&map, now()), Some(Duration::from_millis(250)));
    let map = headers(&[("retry-after", "7"), ("retry-after-ms", "1.5")]);
    assert_eq!(from_headers(&map, now()), secs(7));
    // A RateLimit with quota left falls through to the older field.
    let map = headers(&[
        ("ratelimit", r#""default";r=5;t=10"#),
        ("ratelimit-reset", "20"),
    ]);
    assert_eq!(from_headers(&map, now()), secs(20));
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), offset in any::<u64>()) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let now = UNIX_EPOCH + Duration::from_secs(offset % 400_000_000_000);
            let _ = parse(&value, now);
            let mut map = HeaderMap::new();
            map.insert("ratelimit", value.clone());
            map.insert("ratelimit-reset", value.clone());
            let _ = from_headers(&map, now);
            map.insert("retry-after", value);
            let _ = from_headers(&map, now);
        }
    }

    #[test]
    fn date_like_strings_never_panic(
        day in 0u32..100, month in 0usize..13, year in 0u32..10_000,
        hour in 0u32..100, min in 0u32..100, sec in 0u32..100, weekday in 0usize..8,
    ) {
        const MONTHS: [&str; 13] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Foo"];
        const DAYS: [&str; 8] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Xyz"];
        let text = format!("{}, {day:02} {} {year:04} {hour:02}:{min:02}:{sec:02} GMT", DAYS[weekday], MONTHS[month]);
        if let Ok(value) = HeaderValue::from_str(&text) {
            let _ = parse(&value, UNIX_EPOCH);
        }
    }

    #[test]
    fn u32_delay_seconds_round_trip(n in any::<u32>(), leading in 0usize..3, trailing in 0usize..3) {
        let text = format!("{}{n}{}", " ".repeat(leading), "\t".repeat(trailing));
        let value = HeaderValue::from_str(&text).unwrap();
        prop_assert_eq!(parse(&value, now()), Some(Duration::from_secs(u64::from(n))));
    }

    #[test]
    fn future_dates_round_trip(delta in 0u64..(200 * 365 * 86_400)) {
        let at = now() + Duration::from_secs(delta);
        let value = HeaderValue::from_str(&httpdate::fmt_http_date(at)).unwrap();
        prop_assert_eq!(parse(&value, now()), Some(Duration::from_secs(delta)));
    }
}
