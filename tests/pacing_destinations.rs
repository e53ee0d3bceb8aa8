mod support;

use support::pacing::*;
use http::{Request, StatusCode};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::{ConfigError, Pacing, PacingError, PacingLayer};

#[tokio::test(start_paused = true)]
async fn clones_share_one_state() {
    let log = Log::default();
    let pacing = layer(100);
    let copy = pacing.clone();
    let mut first = copy.layer(scripted(&log));
    let mut second: Pacing<_> = pacing.clone().layer(scripted(&log));
    let mut third = second.clone();

    send(&mut first, get_ra("http://a/503", "3")).await.unwrap();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(3)));

    let probing = pacing.backoff_to(&authority("a")).unwrap();
    assert_eq!(probing.current(), ms(100));

    let start = Instant::now();
    send(&mut second, get("http://a/200")).await.unwrap();
    assert_eq!(start.elapsed(), secs(3));
    send(&mut third, get("http://a/200")).await.unwrap();
    assert!(start.elapsed() > secs(3), "the pace holds every clone");
}

#[tokio::test(start_paused = true)]
async fn the_host_header_names_the_destination_of_a_relative_uri() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    let request = Request::get("/503")
        .header("host", "h.example")
        .header("x-retry-after", "2")
        .body(())
        .unwrap();
    send(&mut client, request).await.unwrap();
    assert_eq!(
        pacing.cooldown(&"h.example".parse().unwrap()),
        Some(secs(2))
    );
    let start = Instant::now();
    send(&mut client, get("http://h.example/200"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), secs(2));
}

#[test]
fn invalid_settings_are_config_errors() {
    let status = |code| StatusCode::from_u16(code).unwrap();
    let cases: Vec<(Vec<StatusCode>, &str)> = vec![
        (vec![], "[]"),
        (vec![status(200)], "200"),
        (vec![status(429), status(302)], "302"),
        (vec![status(399)], "399"),
        (vec![status(600)], "600"),
        (vec![status(101)], "101"),
    ];
    for (statuses, value) in cases {
        let err: ConfigError = PacingLayer::builder()
            .slow_down_on(statuses)
            .build()
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("slow_down_on", value));
    }
    assert!(
        PacingLayer::builder()
            .slow_down_on([status(400), status(599)])
            .max_wait(Duration::MAX)
            .max_cooldown(Duration::MAX)
            .build()
            .is_ok()
    );
}

#[test]
fn the_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Send + Sync>() {}
    let log = Log::default();
    let mut client = PacingLayer::new().layer(scripted(&log));
    assert_send(&client.call(get("http://a/")));
    assert_sync::<PacingLayer>();
    assert_sync::<PacingError>();
}
