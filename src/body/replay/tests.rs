//! Specification of [`ReplayBody`]: each test drives a channel-backed body chunk by chunk, so
//! that attempts can be started, interrupted and replayed at exact points of the stream.

use super::*;

use http::HeaderValue;
use http_body_util::{BodyExt, Full};
use tokio::sync::mpsc;

/// An initial body and a replay of it, fed through `tx`.
struct Test {
    /// Sends the frames of the original body.
    tx: Tx,
    /// The first attempt.
    initial: ReplayBody<TestBody>,
    /// A retry, cloned before the first attempt was sent (as tower's retry does).
    replay: ReplayBody<TestBody>,
}

struct Tx(mpsc::Sender<Result<Frame<Bytes>, TestError>>);

/// A body whose frames arrive through a channel: not `Clone`, like `hyper::body::Incoming`.
///
/// With a known length, its size hint counts down like a `content-length` body's. It panics
/// if polled after it ended, so the tests also check that a finished body is left alone.
#[derive(Debug)]
struct TestBody {
    rx: mpsc::Receiver<Result<Frame<Bytes>, TestError>>,
    remaining: Option<u64>,
    ended: bool,
}

#[derive(Debug)]
struct TestError;

impl Test {
    fn new() -> Self {
        Self::build(DEFAULT_MAX_BYTES, None)
    }

    fn with_cap(max_bytes: usize) -> Self {
        Self::build(max_bytes, None)
    }

    fn with_len(len: u64) -> Self {
        Self::build(DEFAULT_MAX_BYTES, Some(len))
    }

    fn build(max_bytes: usize, len: Option<u64>) -> Self {
        let (tx, body) = TestBody::new(len);
        let initial = ReplayBody::try_new(body, max_bytes).expect("body fits under the cap");
        let replay = initial.clone();
        Self {
            tx,
            initial,
            replay,
        }
    }
}

impl Tx {
    async fn send_data(&mut self, data: &'static str) {
        self.send(Ok(Frame::data(Bytes::from_static(data.as_bytes()))))
            .await;
    }

    async fn send_bytes(&mut self, data: Bytes) {
        self.send(Ok(Frame::data(data))).await;
    }

    async fn send_trailers(&mut self, trailers: HeaderMap) {
        self.send(Ok(Frame::trailers(trailers))).await;
    }

    async fn send_error(&mut self) {
        self.send(Err(TestError)).await;
    }

    async fn send(&mut self, frame: Result<Frame<Bytes>, TestError>) {
        self.0.send(frame).await.expect("body is still alive");
    }
}

impl TestBody {
    fn new(len: Option<u64>) -> (Tx, Self) {
        let (tx, rx) = mpsc::channel(16);
        let body = Self {
            rx,
            remaining: len,
            ended: false,
        };
        (Tx(tx), body)
    }
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = TestError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, TestError>>> {
        assert!(!self.ended, "TestBody polled after it ended");
        let frame = std::task::ready!(self.rx.poll_recv(cx));
        match &frame {
            None | Some(Err(_)) => self.ended = true,
            Some(Ok(f)) if f.is_trailers() => self.ended = true,
            Some(Ok(f)) => {
                if let (Some(remaining), Some(data)) = (self.remaining.as_mut(), f.data_ref()) {
                    *remaining -= data.len() as u64;
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::new(),
        }
    }
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("test body failed")
    }
}

impl StdError for TestError {}

fn trailers() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers.insert("x-checksum", HeaderValue::from_static("abc"));
    trailers
}

/// The next data chunk of `body`, as a string; `None` at its end.
async fn chunk<B>(body: &mut ReplayBody<B>) -> Option<String>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let frame = body.frame().await?.expect("body does not fail");
    let data = frame.into_data().expect("a data frame");
    Some(String::from_utf8(data.to_vec()).unwrap())
}

/// All the data of `body` and its trailers.
async fn body_to_string<B>(mut body: ReplayBody<B>) -> (String, Option<HeaderMap>)
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let mut data = String::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("body does not fail");
        assert!(trailers.is_none(), "no frame after the trailers");
        match frame.into_data() {
            Ok(chunk) => data.push_str(std::str::from_utf8(&chunk).unwrap()),
            Err(frame) => trailers = Some(frame.into_trailers().expect("trailers")),
        }
    }
    assert!(body.is_end_stream(), "a finished body is at its end");
    (data, trailers)
}

/// The data frames of `body`, one by one, and its trailers.
async fn frames_of<B>(mut body: ReplayBody<B>) -> (Vec<Bytes>, Option<HeaderMap>)
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let mut frames = Vec::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        match frame.expect("body does not fail").into_data() {
            Ok(data) => frames.push(data),
            Err(frame) => trailers = Some(frame.into_trailers().expect("trailers")),
        }
    }
    (frames, trailers)
}

/// The error the next frame of `body` fails with.
async fn next_error<B>(body: &mut ReplayBody<B>) -> BoxError
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    match body.frame().await {
        Some(Err(err)) => err,
        Some(Ok(_)) => panic!("expected an error, got a frame"),
        None => panic!("expected an error, got the end of the body"),
    }
}

#[tokio::test]
async fn replays_one_chunk() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    tx.send_data("hello world").await;
    drop(tx);

    assert_eq!(body_to_string(initial).await, ("hello world".into(), None));
    assert_eq!(body_to_string(replay).await, ("hello world".into(), None));
}

#[tokio::test]
async fn replays_several_chunks() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    tokio::spawn(async move {
        tx.send_data("hello").await;
        tx.send_data(" world").await;
        tx.send_data(", have lots").await;
        tx.send_data(" of fun!").await;
    });

    let expected = "hello world, have lots of fun!".to_string();
    assert_eq!(body_to_string(initial).await, (expected.clone(), None));
    assert_eq!(body_to_string(replay).await, (expected, None));
}

/// Frames of a block or more are kept as they are: a replay yields the same buffers.
#[tokio::test]
async fn replays_large_chunks_as_they_were_sent_without_copying() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::new();
    tx.send_bytes(Bytes::from(vec![b'a'; BLOCK])).await;
    tx.send_bytes(Bytes::from(vec![b'b'; 2 * BLOCK])).await;
    drop(tx);

    let first = initial.frame().await.unwrap().unwrap().into_data().unwrap();
    let second = initial.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(initial.frame().await.is_none());
    drop(initial);

    let replayed = replay.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(replayed, first);
    assert_eq!(replayed.as_ptr(), first.as_ptr(), "same buffer, not a copy");
    let replayed = replay.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(
        replayed.as_ptr(),
        second.as_ptr(),
        "same buffer, not a copy"
    );
}

/// Small frames are copied into blocks: the first attempt streams them as they come, a
/// replay yields the same bytes in a few blocks, and large frames in between stay whole.
#[tokio::test(flavor = "current_thread")]
async fn small_frames_are_copied_into_blocks_and_replay_the_same_bytes() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    let large = Bytes::from(vec![b'L'; BLOCK]);
    let mut expected = Vec::new();
    let mut frames = Vec::new();
    for i in 0..3 * BLOCK {
        let byte = b'a' + (i % 26) as u8;
        frames.push(Bytes::from(vec![byte]));
        if i == BLOCK {
            frames.push(large.clone());
        }
    }
    frames.iter().for_each(|f| expected.extend_from_slice(f));
    let sent = frames.len();
    tokio::spawn(async move {
        for frame in frames {
            tx.send_bytes(frame).await;
        }
        tx.send_trailers(trailers()).await;
    });

    let (data, trailers_seen) = frames_of(initial).await;
    assert_eq!(data.len(), sent, "the first attempt streams every frame");
    assert_eq!(data.concat(), expected);
    assert_eq!(trailers_seen, Some(trailers()));

    let (data, trailers_seen) = frames_of(replay).await;
    assert_eq!(data.concat(), expected, "the same bytes");
    assert_eq!(trailers_seen, Some(trailers()));
    assert!(
        data.len() < 16,
        "{} frames: small ones coalesced",
        data.len()
    );
    assert!(
        data.iter().all(|f| f.len() <= BLOCK),
        "no block is larger than BLOCK"
    );
    assert!(
        data.iter().any(|f| f.as_ptr() == large.as_ptr()),
        "the large frame is not copied"
    );
}

/// The blocks holding small frames never have room beyond the cap.
#[tokio::test(flavor = "current_thread")]
async fn blocks_never_reserve_past_the_cap() {
    let cap = FIRST_BLOCK + 10;
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::with_cap(cap);
    tokio::spawn(async move {
        for _ in 0..cap {
            tx.send_data("x").await;
        }
    });
    assert_eq!(body_to_string(initial).await.0, "x".repeat(cap));
    {
        let slot = replay.shared.lock();
        let state = slot.state.as_ref().expect("handed back");
        let held: usize = state.chunks.iter().map(Bytes::len).sum();
        assert!(
            held + state.tail.capacity() <= cap,
            "{held} bytes sealed and a block of {}",
            state.tail.capacity()
        );
    }
    assert_eq!(body_to_string(replay).await.0, "x".repeat(cap));
}

#[tokio::test]
async fn replays_trailers() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    let replay2 = replay.clone();
    tx.send_data("hello world").await;
    tx.send_trailers(trailers()).await;

    let expected = ("hello world".to_string(), Some(trailers()));
    assert_eq!(body_to_string(initial).await, expected);
    assert_eq!(body_to_string(replay).await, expected);
    assert_eq!(body_to_string(replay2).await, expected);
}

#[tokio::test]
async fn replays_trailers_only() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::new();
    tx.send_trailers(trailers()).await;

    let frame = initial.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_trailers().unwrap(), trailers());
    assert!(initial.is_end_stream());
    drop(initial);

    assert!(
        !replay.is_end_stream(),
        "the trailers are still to be replayed"
    );
    let frame = replay.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_trailers().unwrap(), trailers());
    assert!(replay.is_end_stream());
    assert!(replay.frame().await.is_none());
}

/// The server answered (and the first attempt was dropped) before the client finished
/// sending the body: the retry sends what was sent, then the rest of the original.
#[tokio::test(flavor = "current_thread")]
async fn replay_continues_the_original_body_where_the_first_attempt_stopped() {
    let Test {
        mut tx,
        mut initial,
        replay,
    } = Test::new();
    tx.send_data("hello").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    tx.send_data(" world").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), " world");
    drop(initial);

    tokio::spawn(async move {
        tx.send_data(", have lots of fun").await;
        tx.send_trailers(trailers()).await;
    });

    let (data, trailers_seen) = body_to_string(replay).await;
    assert_eq!(data, "hello world, have lots of fun");
    assert_eq!(trailers_seen, Some(trailers()));
}

#[tokio::test(flavor = "current_thread")]
async fn multiple_replays() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    tokio::spawn(async move {
        tx.send_data("hello").await;
        tx.send_data(" world").await;
        tx.send_trailers(trailers()).await;
    });

    let expected = ("hello world".to_string(), Some(trailers()));
    assert_eq!(body_to_string(initial).await, expected);
    let replay2 = replay.clone();
    assert_eq!(body_to_string(replay).await, expected);
    assert_eq!(body_to_string(replay2).await, expected);
}

#[tokio::test(flavor = "current_thread")]
async fn multiple_incomplete_replays() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::new();
    tx.send_data("hello").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    drop(initial);

    let replay2 = replay.clone();
    tx.send_data(" world").await;
    assert_eq!(chunk(&mut replay).await.unwrap(), "hello");
    assert_eq!(chunk(&mut replay).await.unwrap(), " world");
    drop(replay);

    tokio::spawn(async move {
        tx.send_data(", have lots").await;
        tx.send_data(" of fun!").await;
        tx.send_trailers(trailers()).await;
    });
    let (data, trailers_seen) = body_to_string(replay2).await;
    assert_eq!(data, "hello world, have lots of fun!");
    assert_eq!(trailers_seen, Some(trailers()));
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_a_clone_before_polling_it_changes_nothing() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::new();
    tx.send_data("hello").await;
    tx.send_trailers(trailers()).await;

    let expected = ("hello".to_string(), Some(trailers()));
    assert_eq!(body_to_string(initial).await, expected);
    drop(replay.clone());
    assert_eq!(body_to_string(replay).await, expected);
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_a_clone_mid_poll_gives_the_state_back() {
    let Test {
        mut tx,
        initial,
        mut replay,
    } = Test::new();
    let replay2 = replay.clone();
    tx.send_data("hello").await;
    assert!(!replay.is_capped());

    // The replay takes the state while the original body has nothing more to give: its
    // poll is pending, holding the state and the original body.
    drop(initial);
    let poll = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut replay).poll_frame(cx)));
    assert!(
        matches!(poll.await, Poll::Ready(Some(Ok(_)))),
        "buffered chunk"
    );
    let poll = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut replay).poll_frame(cx)));
    assert!(poll.await.is_pending(), "waits on the original body");
    drop(replay);

    tx.send_data(" world").await;
    drop(tx);
    assert_eq!(body_to_string(replay2).await, ("hello world".into(), None));
}

/// A retry polled while the previous attempt still holds the body (hyper may keep writing
/// it after the response arrived) waits for that attempt to let go, then replays everything.
#[tokio::test(flavor = "current_thread")]
async fn replay_waits_for_the_attempt_in_flight_to_drop_the_body() {
    let Test {
        mut tx,
        mut initial,
        replay,
    } = Test::new();
    tx.send_data("hello").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");

    let retry = tokio::spawn(body_to_string(replay));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !retry.is_finished(),
        "the retry waits for the first attempt"
    );

    tx.send_data(" world").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), " world");
    drop(initial);
    drop(tx);
    assert_eq!(retry.await.unwrap(), ("hello world".into(), None));
}

#[test]
#[allow(clippy::redundant_clone)]
fn empty_body_is_always_eos() {
    let initial = ReplayBody::try_new(Full::new(Bytes::new()), DEFAULT_MAX_BYTES).unwrap();
    assert!(initial.is_end_stream());
    assert_eq!(initial.size_hint().exact(), Some(0));
    let replay = initial.clone();
    assert!(replay.is_end_stream());
    let replay2 = replay.clone();
    assert!(replay2.is_end_stream());
    assert_eq!(replay2.size_hint().exact(), Some(0));
}

#[tokio::test]
async fn empty_body_replays_as_empty() {
    let initial = ReplayBody::try_new(Full::new(Bytes::new()), 0).unwrap();
    let replay = initial.clone();
    assert_eq!(body_to_string(initial).await, (String::new(), None));
    assert_eq!(body_to_string(replay).await, (String::new(), None));
    assert!(
        !ReplayBody::<Full<Bytes>>::try_new(Full::new(Bytes::new()), 0)
            .unwrap()
            .is_capped()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn eos_only_when_fully_replayed() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::new();
    assert!(!initial.is_end_stream());
    tx.send_data("hello world").await;
    drop(tx);

    assert_eq!(chunk(&mut initial).await.unwrap(), "hello world");
    assert!(chunk(&mut initial).await.is_none());
    assert!(initial.is_end_stream());
    assert!(!replay.is_end_stream(), "another clone holds the state");
    drop(initial);
    assert!(
        !replay.is_end_stream(),
        "the buffered data is still to be replayed"
    );

    assert_eq!(chunk(&mut replay).await.unwrap(), "hello world");
    assert!(replay.is_end_stream());
    assert!(chunk(&mut replay).await.is_none());

    // Cloned after its replay ended, a body still has everything to replay.
    let replay2 = replay.clone();
    assert!(!replay2.is_end_stream());
    drop(replay);
    assert!(!replay2.is_end_stream());
    assert_eq!(body_to_string(replay2).await, ("hello world".into(), None));
}

#[tokio::test(flavor = "current_thread")]
async fn caps_buffer() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::with_cap(8);

    tx.send_data("aaaaaaaa").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "aaaaaaaa");
    assert!(
        !initial.is_capped(),
        "exactly at the cap is still replayable"
    );

    // Past the cap, the attempt in flight keeps getting every byte...
    tx.send_data("bbbbbbbb").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "bbbbbbbb");
    assert!(initial.is_capped());
    assert!(replay.is_capped(), "clones share the guard");
    let guard = replay.guard();
    tx.send_data("cc").await;
    tx.send_trailers(trailers()).await;
    drop(tx);
    assert_eq!(chunk(&mut initial).await.unwrap(), "cc");
    let frame = initial.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_trailers().unwrap(), trailers());
    assert!(initial.frame().await.is_none());
    drop(initial);

    // ...but a replay fails at once.
    assert!(guard.is_capped());
    assert!(
        !replay.is_end_stream(),
        "the replay still has its error to yield"
    );
    let hint = replay.size_hint();
    assert_eq!(
        (hint.lower(), hint.upper()),
        (0, None),
        "the original hint, never \"empty\""
    );
    let err = next_error(&mut replay).await;
    assert!(err.is::<Capped>(), "{err}");
}

#[tokio::test(flavor = "current_thread")]
async fn caps_across_replays() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::with_cap(8);

    tx.send_data("aaaaaaaa").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "aaaaaaaa");
    drop(initial);
    let mut replay2 = replay.clone();

    // The first replay goes past the cap, yet sends the whole body.
    tx.send_data("bbbbbbbb").await;
    assert_eq!(chunk(&mut replay).await.unwrap(), "aaaaaaaa");
    assert!(!replay.is_capped());
    assert_eq!(chunk(&mut replay).await.unwrap(), "bbbbbbbb");
    assert!(replay.is_capped());
    drop(tx);
    assert!(chunk(&mut replay).await.is_none());
    drop(replay);

    // The second replay cannot send it.
    let err = next_error(&mut replay2).await;
    assert!(err.is::<Capped>(), "{err}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_body_over_the_cap_on_the_first_attempt_never_leaves_the_replay_hanging() {
    let Test {
        mut tx,
        initial,
        replay,
    } = Test::with_cap(4);
    tokio::spawn(async move {
        tx.send_data("hello").await;
        tx.send_data(" world").await;
    });
    assert_eq!(body_to_string(initial).await, ("hello world".into(), None));
    let err = body_to_string_err(replay).await;
    assert!(err.is::<Capped>());
}

async fn body_to_string_err(body: ReplayBody<TestBody>) -> BoxError {
    body.collect().await.expect_err("replay fails")
}

#[test]
fn body_too_big_is_handed_back_untouched() {
    let max = 8;
    assert!(ReplayBody::try_new(Full::new(Bytes::new()), max).is_ok());
    assert!(ReplayBody::try_new(Full::new(Bytes::from("x".repeat(max))), max).is_ok());
    let (_tx, unknown_len) = TestBody::new(None);
    assert!(ReplayBody::try_new(unknown_len, max).is_ok());

    let big = Full::new(Bytes::from("x".repeat(max + 1)));
    let big = ReplayBody::try_new(big, max).expect_err("over the cap");
    assert_eq!(big.size_hint().exact(), Some(max as u64 + 1));
}

#[tokio::test]
async fn unreplayable_body_streams_the_original_and_its_clones_fail() {
    let (mut tx, body) = TestBody::new(Some(11));
    let mut initial = ReplayBody::unreplayable(body);
    let mut replay = initial.clone();
    assert!(initial.is_capped());
    assert_eq!(
        replay.size_hint().exact(),
        Some(11),
        "not \"empty\": it fails"
    );
    assert!(initial.guard().is_capped());
    assert_eq!(initial.size_hint().exact(), Some(11));

    tx.send_data("hello").await;
    tx.send_data(" world").await;
    tx.send_trailers(trailers()).await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    assert_eq!(initial.size_hint().exact(), Some(6));
    assert_eq!(chunk(&mut initial).await.unwrap(), " world");
    let frame = initial.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_trailers().unwrap(), trailers());
    assert!(initial.frame().await.is_none());
    drop(initial);

    let err = next_error(&mut replay).await;
    assert!(err.is::<Capped>());
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_original_body_cannot_be_replayed() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::new();
    tx.send_data("hello").await;
    tx.send_error().await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    let err = next_error(&mut initial).await;
    assert!(
        err.is::<TestError>(),
        "the original error reaches the attempt"
    );
    assert!(initial.is_capped(), "retries are disabled");
    assert!(initial.is_end_stream());
    assert!(
        initial.frame().await.is_none(),
        "the failed body is not polled again"
    );
    drop(initial);
    assert!(!replay.is_end_stream(), "the replay has its error to yield");
    assert_eq!(
        replay.size_hint().upper(),
        None,
        "not \"5 bytes\": it fails"
    );

    let err = next_error(&mut replay).await;
    assert!(err.is::<Interrupted>(), "{err}");
}

#[tokio::test(flavor = "current_thread")]
async fn size_hint_is_exact_across_replays_for_a_known_length() {
    let Test {
        mut tx,
        mut initial,
        mut replay,
    } = Test::with_len(11);
    assert_eq!(initial.size_hint().exact(), Some(11));
    assert_eq!(replay.size_hint().exact(), Some(11));

    tx.send_data("hello").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    assert_eq!(initial.size_hint().exact(), Some(6));
    assert_eq!(replay.size_hint().exact(), Some(11), "state held elsewhere");
    drop(initial);
    assert_eq!(
        replay.size_hint().exact(),
        Some(11),
        "5 buffered + 6 to come"
    );

    let replay2 = replay.clone();
    assert_eq!(chunk(&mut replay).await.unwrap(), "hello");
    assert_eq!(replay.size_hint().exact(), Some(6));
    tx.send_data(" world").await;
    assert_eq!(chunk(&mut replay).await.unwrap(), " world");
    assert_eq!(replay.size_hint().exact(), Some(0));
    drop(tx);
    assert!(chunk(&mut replay).await.is_none());
    assert_eq!(replay.size_hint().exact(), Some(0));
    drop(replay);

    assert_eq!(replay2.size_hint().exact(), Some(11));
    assert_eq!(body_to_string(replay2).await, ("hello world".into(), None));
}

#[tokio::test(flavor = "current_thread")]
async fn size_hint_becomes_exact_once_an_unknown_length_is_buffered() {
    let Test {
        mut tx,
        mut initial,
        replay,
    } = Test::new();
    assert_eq!(initial.size_hint().lower(), 0);
    assert_eq!(initial.size_hint().upper(), None);

    tx.send_data("hello").await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    drop(initial);
    let hint = replay.size_hint();
    assert_eq!(
        (hint.lower(), hint.upper()),
        (5, None),
        "at least the buffered bytes"
    );

    let mut replay2 = replay.clone();
    tx.send_data(" world").await;
    drop(tx);
    assert_eq!(body_to_string(replay).await, ("hello world".into(), None));
    assert_eq!(replay2.size_hint().exact(), Some(11));
    assert_eq!(chunk(&mut replay2).await.unwrap(), "hello");
    assert_eq!(replay2.size_hint().exact(), Some(6));
    assert_eq!(chunk(&mut replay2).await.unwrap(), " world");
    assert_eq!(replay2.size_hint().exact(), Some(0));
    assert!(replay2.is_end_stream());
}

#[tokio::test(flavor = "current_thread")]
async fn is_end_stream_is_exact_with_trailers() {
    let Test {
        mut tx,
        mut initial,
        replay,
    } = Test::new();
    tx.send_data("hello").await;
    tx.send_trailers(trailers()).await;
    assert_eq!(chunk(&mut initial).await.unwrap(), "hello");
    assert!(!initial.is_end_stream(), "trailers still to come");
    initial
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    assert!(initial.is_end_stream());
    drop(initial);

    let mut replay = replay;
    assert!(!replay.is_end_stream());
    assert_eq!(chunk(&mut replay).await.unwrap(), "hello");
    assert!(!replay.is_end_stream(), "trailers still to replay");
    replay
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    assert!(replay.is_end_stream());
    assert!(replay.frame().await.is_none());
}
