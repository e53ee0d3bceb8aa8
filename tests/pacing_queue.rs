mod support;

use http::Request;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::pacing::*;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::pacing::PacingDeadline;
use tower_backoff::{PacingError, PacingLayer};

#[tokio::test(start_paused = true)]
async fn a_burst_from_a_new_client_is_slow_started() {
    let log = Log::default();
    let pacing = layer();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    let burst: Vec<_> = (0..10)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200?sleep=20"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    // Four at first (the initial window). Each success opens the window by one more, but
    // it holds at most four in flight until it may double, 100 ms after the first send.
    let offsets = log.offsets(start);
    assert_eq!(offsets[..4], [ms(0); 4]);
    assert_eq!(offsets[4..8], [ms(20); 4]);
    assert_eq!(offsets[8..], [ms(40); 2]);

    // Without a slow start, all at once.
    let log = Log::default();
    let start = Instant::now();
    let client = PacingLayer::builder()
        .with_initial_window(0)
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
    let pacing = builder().with_max_wait(ms(250)).build().unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // The destination refuses everything: the client probes at 100, 200, 400 ms ...
    client.clone().oneshot(get("http://a/429")).await.unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/429"))))
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
    assert_eq!(results[0].as_ref().unwrap().status(), 429);
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
    let pacing = layer();
    let mut client = pacing.layer(Strict {
        inner: scripted(&log),
        ready: false,
        readied: Arc::clone(&readied),
    });
    send(&mut client, get("http://a/429")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 1);
    // This one waits 100 ms, with an unready clone that it readies after the wait...
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 3);
    // ...and the service's own readiness was given back at the call: a permit or buffer
    // slot does not sit reserved while the request waits.
    assert!(!client.get_ref().ready);
    assert_eq!(log.len(), 2);
}

/// A healthy server that answers after 10 s: a burst of 100 requests loses none, even
/// with a max wait shorter than the answers, and the slow start holds it back a few
/// doubling periods (100 ms each), not round trips.
#[tokio::test(start_paused = true)]
async fn a_slow_healthy_server_loses_no_request_of_a_burst() {
    let log = Log::default();
    let pacing = builder().with_max_wait(secs(1)).build().unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    let burst: Vec<_> = (0..100)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://slow/200?sleep=10000"))))
        .collect();
    for task in burst {
        assert_eq!(task.await.unwrap().unwrap().status(), 200);
    }
    let offsets = log.offsets(start);
    assert_eq!(offsets.len(), 100);
    // 4 at once, then the stalled window doubles every 100 ms: 4, 8, 16, 32, 64 sent by
    // 400 ms, the rest (the window open) by 500 ms.
    assert_eq!(offsets[..4], [Duration::ZERO; 4]);
    assert!(offsets[4] >= ms(100), "{offsets:?}");
    assert!(offsets.iter().all(|at| *at <= ms(500)), "{offsets:?}");
}

#[tokio::test(start_paused = true)]
async fn long_polls_do_not_block_other_requests() {
    let log = Log::default();
    let client = layer().layer(scripted(&log));
    // Four 60 s long-polls fill the initial window.
    let polls: Vec<_> = (0..4)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://api/200?sleep=60000"))))
        .collect();
    tokio::time::sleep(ms(1)).await;
    let start = Instant::now();
    for _ in 0..20 {
        let before = Instant::now();
        send(&mut client.clone(), get("http://api/200?sleep=10"))
            .await
            .unwrap();
        assert!(before.elapsed() <= ms(110), "{:?}", before.elapsed());
    }
    // The first waits for the stalled window to grow (100 ms); the others go at once.
    assert!(start.elapsed() <= ms(320), "{:?}", start.elapsed());
    for poll in polls {
        poll.await.unwrap().unwrap();
    }
}

/// A response future made, or polled once, and then left alone must not hold its
/// destination's queue: it is passed over when its turn comes, and takes the next turn
/// once polled again.
#[tokio::test(start_paused = true)]
async fn a_response_future_that_is_not_polled_does_not_hold_the_queue() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    // Probed: one request per 100 ms, so new requests queue.
    send(&mut client, get("http://a/429")).await.unwrap();
    let never = client
        .ready()
        .await
        .unwrap()
        .call(get("http://a/200?never"));
    let mut once = Box::pin(client.ready().await.unwrap().call(get("http://a/200?once")));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut once)
            .await
            .is_err()
    );
    let start = Instant::now();
    let others: Vec<_> = (0..5)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in others {
        task.await.unwrap().unwrap();
    }
    assert!(start.elapsed() < ms(500), "{:?}", start.elapsed());
    assert_eq!(log.count("never") + log.count("once"), 0);
    // Polled at last, both are sent.
    assert_eq!(Box::pin(never).await.unwrap().status(), 200);
    assert_eq!(once.await.unwrap().status(), 200);
    assert_eq!(log.count("never") + log.count("once"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_fails_fast_and_a_dropped_waiter_frees_its_place() {
    let log = Log::default();
    let pacing = builder().with_max_queue(2).build().unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/429")).await.unwrap();
    let first = tokio::spawn(client.clone().oneshot(get("http://a/200")));
    let dropped = tokio::spawn(client.clone().oneshot(get("http://a/200?dropped")));
    tokio::time::sleep(ms(1)).await;

    let before = Instant::now();
    let err = send(&mut client, get("http://a/200")).await.unwrap_err();
    assert!(
        matches!(
            pacing_error(&err),
            PacingError::QueueFull { max_queue: 2, .. }
        ),
        "{err}"
    );
    assert_eq!(Instant::now(), before, "failing fast does not wait");
    // Another destination has a queue of its own.
    send(&mut client, get("http://b/200")).await.unwrap();

    // A waiter dropped leaves the queue: there is room again, and it is never sent.
    dropped.abort();
    let _ = dropped.await;
    let third = tokio::spawn(client.clone().oneshot(get("http://a/200?third")));
    first.await.unwrap().unwrap();
    third.await.unwrap().unwrap();
    assert_eq!(log.count("dropped"), 0);
    assert_eq!(log.count("third"), 1);
}

#[tokio::test(start_paused = true)]
async fn no_request_is_sent_after_its_deadline() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    // Arriving after its deadline: not sent, though nothing would make it wait.
    let mut late = get("http://a/200");
    late.extensions_mut().insert(PacingDeadline(Instant::now()));
    tokio::time::advance(ms(1)).await;
    let err = send(&mut client, late).await.unwrap_err();
    assert_eq!(pacing_error(&err), PacingError::DeadlinePassed);
    assert_eq!(log.len(), 0);

    // Waiting for a slow start's window, which never fails for max_wait: it fails at
    // its deadline, unsent.
    let pacing = PacingLayer::builder()
        .with_initial_window(1)
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let busy = tokio::spawn(client.clone().oneshot(get("http://b/200?sleep=5000")));
    tokio::time::sleep(ms(1)).await;
    let start = Instant::now();
    let mut hurried = get("http://b/200?hurried");
    hurried
        .extensions_mut()
        .insert(PacingDeadline(start + ms(50)));
    let err = client.clone().oneshot(hurried).await.unwrap_err();
    assert_eq!(pacing_error(&err), PacingError::DeadlinePassed);
    assert_eq!(start.elapsed(), ms(50));
    busy.await.unwrap().unwrap();
    assert_eq!(log.count("hurried"), 0);
}

/// Ten thousand requests waiting for one destination are all served. (That each queue
/// operation is constant work is checked by counting, in the queue's unit tests.)
#[tokio::test(start_paused = true)]
async fn ten_thousand_waiters_are_all_served() {
    let log = Log::default();
    let pacing = builder().with_max_queue(10_000).build().unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/429")).await.unwrap();
    let tasks: Vec<_> = (0..10_000)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(log.len(), 10_001);
}

/// Many tasks on several threads, to several destinations that refuse some requests:
/// every request ends (sent or turned away), none hangs, whatever the interleaving.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_tasks_on_many_threads_all_finish() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let server = {
        let calls = Arc::clone(&calls);
        tower::service_fn(move |_: Request<()>| {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::task::yield_now().await;
                let status = if n.is_multiple_of(7) { 429 } else { 200 };
                let response = http::Response::builder().status(status);
                Ok::<_, std::convert::Infallible>(response.body(()).unwrap())
            }
        })
    };
    let pacing = PacingLayer::builder()
        .with_max_wait(ms(20))
        .with_max_queue(64)
        .build()
        .unwrap();
    let client = pacing.layer(server);
    let tasks: Vec<_> = (0..2_000)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let uri = format!("http://d{}.example/", i % 8);
                let request = get(&uri);
                match client.oneshot(request).await {
                    Ok(_) => true,
                    Err(err) => {
                        pacing_error(&err);
                        false
                    }
                }
            })
        })
        .collect();
    let all = async {
        let mut sent = 0;
        for task in tasks {
            sent += usize::from(task.await.unwrap());
        }
        sent
    };
    let sent = tokio::time::timeout(secs(10), all)
        .await
        .expect("every request ends");
    assert_eq!(sent, calls.load(Ordering::Relaxed));
    assert!(sent > 0);
}

/// An inner service that becomes ready only at `ready_at`.
struct ReadyAt<S> {
    inner: S,
    ready_at: Instant,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<S: Clone> Clone for ReadyAt<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ready_at: self.ready_at,
            sleep: None,
        }
    }
}

impl<S: Service<Request<()>>> Service<Request<()>> for ReadyAt<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        let ready_at = self.ready_at;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(ready_at)));
        std::task::ready!(sleep.as_mut().poll(cx));
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<()>) -> S::Future {
        self.inner.call(request)
    }
}

/// A request whose turn came but whose inner service is not ready by its deadline fails
/// at the deadline, unsent.
#[tokio::test(start_paused = true)]
async fn readying_the_inner_service_past_the_deadline_fails_the_request() {
    let log = Log::default();
    let pacing = layer();
    let start = Instant::now();
    let mut client = pacing.layer(ReadyAt {
        inner: scripted(&log),
        ready_at: start,
        sleep: None,
    });
    send(&mut client, get("http://a/429")).await.unwrap();
    // Its turn comes at 100 ms; the clone it waits with is ready at 300 ms.
    client.get_mut().ready_at = start + ms(300);
    client.get_mut().sleep = None;
    let mut hurried = get("http://a/200?hurried");
    hurried
        .extensions_mut()
        .insert(PacingDeadline(start + ms(150)));
    let future = client.call(hurried);
    let err = future.await.unwrap_err();
    assert_eq!(pacing_error(&err), PacingError::DeadlinePassed);
    assert_eq!(start.elapsed(), ms(150));
    assert_eq!(log.count("hurried"), 0);
}

/// Several response futures left unpolled at the head of the queue, watchers included:
/// the live waiters behind them still get through, within about a second.
#[tokio::test(start_paused = true)]
async fn several_unpolled_futures_at_the_head_do_not_hold_the_queue() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/429")).await.unwrap();
    let mut abandoned = Vec::new();
    for _ in 0..3 {
        abandoned.push(
            client
                .ready()
                .await
                .unwrap()
                .call(get("http://a/200?abandoned")),
        );
    }
    let start = Instant::now();
    let others: Vec<_> = (0..5)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in others {
        task.await.unwrap().unwrap();
    }
    assert!(start.elapsed() < ms(1500), "{:?}", start.elapsed());
    assert_eq!(log.count("abandoned"), 0);
    // Dropped, they leave the queue for good.
    drop(abandoned);
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.count("abandoned"), 0);
}
