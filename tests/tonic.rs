//! The retry layer in front of a tonic `Channel`, against a real tonic server on loopback.
//!
//! The server (tests/support/echo.rs) is tonic's own transport serving a hand-written
//! service; the client is a typed client over tonic's `Grpc`, as generated code would be.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::echo::{EchoClient, Flaky, Msg};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tower::ServiceBuilder;
use tower_backoff::classify::GrpcClassifier;
use tower_backoff::grpc::{Code as GrpcCode, GrpcCodes};
use tower_backoff::integrations::tonic::TonicRetryLayer;
use tower_backoff::{
    ConstantBackOff, PacingLayer, RetryEvent, RetryLayer, RetryReason, RetrySettings,
};

const STEP: Duration = Duration::from_millis(5);

async fn channel(url: String) -> Channel {
    Channel::from_shared(url).unwrap().connect().await.unwrap()
}

/// The gRPC preset with `max_attempts`, waiting pushbacks exactly (no spread).
fn grpc_layer(max_attempts: u32) -> RetryLayer<ConstantBackOff> {
    RetryLayer::grpc(ConstantBackOff::new(STEP).unwrap())
        .with_classifier(
            GrpcClassifier::new()
                .with_retryable_service("test.Echo")
                .unwrap(),
        )
        .with_settings(
            RetrySettings::new()
                .with_max_attempts(max_attempts)
                .unwrap()
                .with_retry_after_jitter(0.0)
                .unwrap(),
        )
}

#[tokio::test]
async fn without_the_layer_the_first_unavailable_is_final() {
    let server = Flaky::unavailable_then_pushback(2, 50);
    let url = server.clone().serve().await;
    let mut client = EchoClient::new(channel(url).await);
    let err = client.unary(Msg::text("hi")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(server.unary_calls().len(), 1);
}

#[tokio::test]
async fn unary_call_succeeds_through_unavailable_and_pushback() {
    const PUSHBACK: Duration = Duration::from_millis(60);
    let server = Flaky::unavailable_then_pushback(2, PUSHBACK.as_millis() as u64);
    let url = server.clone().serve().await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let layer = grpc_layer(5).on_retry(move |e: &RetryEvent<'_>| {
        seen.lock()
            .unwrap()
            .push((e.attempt(), e.reason(), e.delay()));
    });
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(layer))
        .service(channel(url).await);
    let mut client = EchoClient::new(channel);

    let reply = client.unary(Msg::text("hello")).await.unwrap();
    assert_eq!(reply.into_inner().text, "hello");

    // Four attempts reached the server; each retry said how many came before it.
    let calls = server.unary_calls();
    let previous: Vec<_> = calls.iter().map(|c| c.previous_attempts.clone()).collect();
    assert_eq!(
        previous,
        [None, Some("1".into()), Some("2".into()), Some("3".into())]
    );
    // The pushback was waited, not the (much shorter) backoff.
    let gap = calls[3].at.duration_since(calls[2].at);
    assert!(
        gap >= PUSHBACK,
        "retried after {gap:?}, before the pushback"
    );
    assert_eq!(
        *events.lock().unwrap(),
        [
            (1, RetryReason::Grpc(GrpcCode::Unavailable), STEP),
            (2, RetryReason::Grpc(GrpcCode::Unavailable), STEP),
            (3, RetryReason::Grpc(GrpcCode::ResourceExhausted), PUSHBACK),
        ]
    );
}

#[tokio::test]
async fn attempts_are_limited_and_the_last_status_is_returned() {
    let server = Flaky::new((0..5).map(|_| Status::unavailable("down")));
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(3)))
        .service(channel(url).await);
    let err = EchoClient::new(channel)
        .unary(Msg::text("hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(server.unary_calls().len(), 3);
}

#[tokio::test]
async fn codes_outside_the_set_and_negative_pushback_are_not_retried() {
    let mut stop = Status::resource_exhausted("go away");
    stop.metadata_mut()
        .insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
    let server = Flaky::new([
        Status::aborted("conflict"),
        Status::unavailable("down"),
        stop,
    ]);
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(5)))
        .service(channel(url).await);
    let mut client = EchoClient::new(channel);

    // ABORTED is not in the default set: returned at once.
    assert_eq!(
        client.unary(Msg::text("a")).await.unwrap_err().code(),
        Code::Aborted
    );
    assert_eq!(server.unary_calls().len(), 1);
    // UNAVAILABLE is retried, but the next answer's pushback says stop.
    assert_eq!(
        client.unary(Msg::text("b")).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    assert_eq!(server.unary_calls().len(), 3);
}

#[tokio::test]
async fn codes_can_be_added_to_the_set() {
    let server = Flaky::new([Status::aborted("conflict")]);
    let url = server.clone().serve().await;
    let codes = GrpcCodes::DEFAULT_RETRYABLE.with(GrpcCode::Aborted);
    let layer = RetryLayer::new(ConstantBackOff::new(STEP).unwrap()).with_classifier(
        GrpcClassifier::new()
            .with_codes(codes)
            .with_every_method_retryable(),
    );
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(layer))
        .service(channel(url).await);
    let reply = EchoClient::new(channel)
        .unary(Msg::text("x"))
        .await
        .unwrap();
    assert_eq!(reply.into_inner().text, "x");
    assert_eq!(server.unary_calls().len(), 2);
}

#[tokio::test]
async fn client_streaming_call_works_through_the_layer() {
    let server = Flaky::default();
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(3)))
        .service(channel(url).await);
    let numbers = tokio_stream::iter((1..=100).map(Msg::n));
    let reply = EchoClient::new(channel).sum(numbers).await.unwrap();
    assert_eq!(reply.into_inner().n, 5050);
    assert_eq!(server.sum_calls(), 1);
}

/// A client stream that fails at once with UNAVAILABLE is sent again, from its first
/// message: the replay buffer kept what the first attempt streamed.
#[tokio::test]
async fn client_streaming_call_is_replayed_after_unavailable() {
    let server = Flaky::default().with_sum_failures([Status::unavailable("restarting")]);
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(3)))
        .service(channel(url).await);
    let numbers = tokio_stream::iter((1..=100).map(Msg::n));
    let reply = EchoClient::new(channel).sum(numbers).await.unwrap();
    assert_eq!(reply.into_inner().n, 5050);
    assert_eq!(server.sum_calls(), 2);
}

/// Each message is sent only after the answer to the previous one came back: a layer that
/// waited for the whole request body before sending would deadlock here.
#[tokio::test]
async fn bidirectional_call_is_not_held_back_by_buffering() {
    let server = Flaky::default();
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(3)))
        .service(channel(url).await);
    let mut client = EchoClient::new(channel);

    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(Msg::text("ping 0")).await.unwrap();
    let call = client.chat(ReceiverStream::new(rx));
    let mut replies = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("response headers arrived while the request stream was still open")
        .unwrap()
        .into_inner();
    for i in 0..5 {
        let reply = tokio::time::timeout(Duration::from_secs(5), replies.next())
            .await
            .expect("each reply arrives before the next message is sent")
            .unwrap()
            .unwrap();
        assert_eq!(reply.text, format!("re: ping {i}"));
        tx.send(Msg::text(&format!("ping {}", i + 1)))
            .await
            .unwrap();
    }
    drop(tx);
    let last = replies.next().await.unwrap().unwrap();
    assert_eq!(last.text, "re: ping 5");
    assert!(replies.next().await.is_none());
    assert_eq!(server.chat_calls(), 1);
}

/// A call whose body outgrew the replay cap is sent once, in full, and not retried.
#[tokio::test]
async fn a_body_past_the_replay_cap_is_not_retried() {
    let server = Flaky::new([Status::unavailable("down")]);
    let url = server.clone().serve().await;
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(grpc_layer(3)).with_max_bytes(16))
        .service(channel(url).await);
    let mut client = EchoClient::new(channel);
    let big = "x".repeat(64);
    let err = client.unary(Msg::text(&big)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(server.unary_calls().len(), 1);
    // A small one is retried by the same client.
    let reply = client.unary(Msg::text("small")).await.unwrap();
    assert_eq!(reply.into_inner().text, "small");
}

/// A connection that cannot be made is a connect failure: retried even for a POST.
#[tokio::test]
async fn connection_refused_is_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let attempts = Arc::new(Mutex::new(0));
    let counted = attempts.clone();
    let layer = grpc_layer(3).on_retry(move |e: &RetryEvent<'_>| {
        assert_eq!(e.reason(), RetryReason::Connect);
        *counted.lock().unwrap() += 1;
    });
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(layer))
        .service(channel);
    let started = Instant::now();
    let err = EchoClient::new(channel)
        .unary(Msg::text("hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(*attempts.lock().unwrap(), 2);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// `RESOURCE_EXHAUSTED` with a pushback is gRPC's rate signal: pacing on a channel holds
/// the destination's next call for the pushback, though nothing retries the first.
#[tokio::test]
async fn pacing_holds_a_channel_for_a_resource_exhausted_pushback() {
    const PUSHBACK: Duration = Duration::from_millis(200);
    let server = Flaky::unavailable_then_pushback(0, PUSHBACK.as_millis() as u64);
    let url = server.clone().serve().await;
    let pacing = PacingLayer::new();
    let channel = ServiceBuilder::new()
        .layer(pacing.clone())
        .service(channel(url).await);
    let mut client = EchoClient::new(channel);

    let err = client.unary(Msg::text("a")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let start = Instant::now();
    client.unary(Msg::text("b")).await.unwrap();
    // A channel's requests carry no authority: one destination, cooling down.
    assert_eq!(pacing.destinations(), 1);
    assert!(start.elapsed() >= PUSHBACK, "{:?}", start.elapsed());
    assert_eq!(server.unary_calls().len(), 2);
}
