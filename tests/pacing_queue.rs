mod support;

use support::pacing::*;
use http::{Request, Response};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::{PacingError, PacingLayer};

#[tokio::test(start_paused = true)]
async fn a_burst_from_a_new_client_is_slow_started() {
    let log = Log::default();
    let pacing = layer(100);
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    let burst: Vec<_> = (0..10)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200?sleep=20"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    // Four at first (the initial window); each success opens the window by one more.
    let offsets = log.offsets(start);
    assert_eq!(offsets[..4], [ms(0); 4]);
    assert_eq!(offsets[4..], [ms(20); 6]);

    // Without a slow start, all at once.
    let log = Log::default();
    let start = Instant::now();
    let client = PacingLayer::builder()
        .initial_window(0)
        .build()
        .unwrap()
        .layer(scripted(&log));
    let burst: Vec<_> = (0..10)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200?sleep=20"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    assert_eq!(log.offsets(start), [ms(0); 10]);
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_fails_when_its_max_wait_runs_out_and_a_dropped_one_frees_its_place() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .max_wait(ms(250))
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // The destination refuses everything: the client probes at 100, 200, 400 ms ...
    client.clone().oneshot(get("http://a/503")).await.unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/503"))))
        .collect();
    tokio::task::yield_now().await;
    // A dropped request leaves the queue: it is never sent.
    let dropped = tokio::spawn(client.clone().oneshot(get("http://a/dropped")));
    tokio::task::yield_now().await;
    dropped.abort();
    let mut results = Vec::new();
    for task in waiting {
        results.push(task.await.unwrap());
    }
    // The first probe at 100 ms is refused (next probe 200 ms later, at 300 ms): the
    // second request's 250 ms max wait runs out in the queue; so does the third's.
    assert_eq!(results[0].as_ref().unwrap().status(), 503);
    for result in &results[1..] {
        let err = result.as_ref().unwrap_err();
        assert_eq!(pacing_error(err).max_wait(), Some(ms(250)));
        assert!(pacing_error(err).wait().unwrap() > ms(250));
    }
    assert_eq!(log.offsets(start), [ms(0), ms(100)]);
    assert!(!log.uris().iter().any(|uri| uri.contains("dropped")));
}

/// Checks tower's contract: `call` only on an instance that `poll_ready` made ready.
/// As with tower's `Buffer`, a clone does not inherit the readiness.
struct Strict<S> {
    inner: S,
    ready: bool,
    readied: Arc<Mutex<usize>>,
}

impl<S: Clone> Clone for Strict<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ready: false,
            readied: Arc::clone(&self.readied),
        }
    }
}

impl<S: Service<Request<()>>> Service<Request<()>> for Strict<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        let poll = self.inner.poll_ready(cx);
        if poll.is_ready() && !self.ready {
            self.ready = true;
            *self.readied.lock().unwrap() += 1;
        }
        poll
    }

    fn call(&mut self, request: Request<()>) -> S::Future {
        assert!(self.ready, "called without poll_ready");
        self.ready = false;
        self.inner.call(request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiting_request_readies_its_own_clone_of_the_inner_service() {
    let log = Log::default();
    let readied = Arc::new(Mutex::new(0));
    let pacing = layer(100);
    let mut client = pacing.layer(Strict {
        inner: scripted(&log),
        ready: false,
        readied: Arc::clone(&readied),
    });
    send(&mut client, get("http://a/503")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 1);
    // This one waits 100 ms, with an unready clone that it readies after the wait...
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 3);
    // ...while the service's own readiness was kept for the next request.
    assert!(client.get_ref().ready);
    assert_eq!(log.len(), 2);
}
