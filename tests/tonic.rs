//! The retry layer in front of a tonic `Channel`, against a real tonic server on loopback.

mod support;

use support::echo::{EchoClient, Flaky, Msg};
use tonic::Code;
use tonic::transport::Channel;

async fn channel(url: String) -> Channel {
    Channel::from_shared(url).unwrap().connect().await.unwrap()
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
