//! A tonic client whose `Channel` goes through the retry layer, against a real tonic server
//! on loopback.
//!
//! The server (a hand-written `test.Echo` service, no protoc needed) fails the first two
//! unary calls with UNAVAILABLE and the third with RESOURCE_EXHAUSTED and a pushback of
//! 200 ms; the typed client only sees the answer. A client-streaming and a bidirectional
//! call then go through the same channel.
//!
//! `cargo run --example tonic_client --features tonic` (well under a second, loopback only).

#[path = "../tests/support/echo.rs"]
mod echo;

use echo::{EchoClient, Flaky, Msg};
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tower::ServiceBuilder;
use tower_backoff::classify::GrpcClassifier;
use tower_backoff::integrations::tonic::TonicRetryLayer;
use tower_backoff::{ExponentialBackOff, RetryEvent, RetryLayer, RetrySettings};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Flaky::unavailable_then_pushback(2, 200);
    let url = server.clone().serve().await;

    let backoff = ExponentialBackOff::builder()
        .with_initial_interval(Duration::from_millis(20))
        .build()?;
    // Status retries only for the methods declared safe to run twice (gRPC's A6).
    let methods = GrpcClassifier::new().with_retryable_service("test.Echo")?;
    let retry = RetryLayer::grpc(backoff)
        .with_classifier(methods)
        .with_settings(RetrySettings::new().with_max_attempts(5)?)
        .on_retry(|e: &RetryEvent<'_>| {
            println!(
                "  attempt {} failed ({}), retrying in {:?}",
                e.attempt(),
                e.reason(),
                e.delay()
            );
        });
    let channel = tonic::transport::Channel::from_shared(url)?
        .connect()
        .await?;
    // The one line: tonic's channel, wrapped.
    let channel = ServiceBuilder::new()
        .layer(TonicRetryLayer::new(retry))
        .service(channel);
    let mut client = EchoClient::new(channel);

    let start = Instant::now();
    println!("Unary(\"hello\")");
    let reply = client.unary(Msg::text("hello")).await?;
    println!(
        "  -> {:?} in {:?}",
        reply.into_inner().text,
        start.elapsed()
    );
    for (i, call) in server.unary_calls().iter().enumerate() {
        println!(
            "  server saw call {} with grpc-previous-rpc-attempts: {}",
            i + 1,
            call.previous_attempts.as_deref().unwrap_or("-")
        );
    }

    println!("Sum(1..=10), client-streaming");
    let reply = client.sum(tokio_stream::iter((1..=10).map(Msg::n))).await?;
    println!("  -> {}", reply.into_inner().n);

    println!("Chat, bidirectional");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(Msg::text("ping")).await?;
    let mut replies = client
        .chat(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    // The first answer arrives while the request stream is still open.
    println!(
        "  -> {:?}",
        replies.next().await.transpose()?.map(|m| m.text)
    );
    tx.send(Msg::text("pong")).await?;
    drop(tx);
    while let Some(reply) = replies.next().await {
        println!("  -> {:?}", reply?.text);
    }
    Ok(())
}
