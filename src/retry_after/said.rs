//! What a response said, read once for every layer that asks.

use super::{QuotaLeft, delay_asked, quota};
use crate::time::{ClockFn, clock_id, wall_now};
use http::{Extensions, HeaderMap, StatusCode};
use std::time::Duration;

/// What a response said of when to come back, and of the quota its sender still grants:
/// read once per response, with one clock, and shared by the layers that need it.
///
/// Pacing, below the retry layer, sees each response first: it reads it (the quota of
/// every response, the delay of an error or of a status it slows down on), learns from
/// it, and puts the reading into the response's extensions. The retry layer's classifier
/// takes the delay from there rather than parsing the headers again, provided the reading
/// was made with its own wall clock (the clock the retry layer lends each attempt, see
/// [`WallClock`](crate::time::WallClock)); otherwise, or without pacing, it reads the
/// headers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerSaid {
    /// The delay asked for (see [`delay_asked`]); `None` when it was not read.
    retry_after: Option<Option<Duration>>,
    /// The quota the response reports.
    quota: Option<QuotaLeft>,
    /// The clock of the reading (see [`clock_id`]).
    clock: usize,
}

impl ServerSaid {
    /// Reads the head of a response with `status`: its quota, and its delay when
    /// `wants_delay` or when the status is an error (a retry layer above may ask for it).
    /// `clock` is read only for a date or a reset timestamp.
    pub(crate) fn read(
        status: StatusCode,
        headers: &HeaderMap,
        wants_delay: bool,
        clock: Option<&ClockFn>,
    ) -> Self {
        let now = || wall_now(clock);
        let read_delay = wants_delay || status.is_client_error() || status.is_server_error();
        Self {
            retry_after: read_delay.then(|| delay_asked(headers, now)),
            quota: quota(headers, now),
            clock: clock_id(clock),
        }
    }

    /// The delay the response asks for, when it was read.
    pub(crate) fn retry_after(&self) -> Option<Option<Duration>> {
        self.retry_after
    }

    /// The quota the response reports.
    pub(crate) fn quota(&self) -> Option<QuotaLeft> {
        self.quota
    }

    /// Puts the reading into the response's `extensions` for the layers above, when it
    /// holds a delay they may ask for (a success adds nothing to its response).
    pub(crate) fn share(self, extensions: &mut Extensions) {
        if self.retry_after.is_some() {
            extensions.insert(self);
        }
    }

    /// The delay a response asks for: from the reading of a layer below when it read it
    /// with `clock`, else from its `headers`.
    pub(crate) fn retry_after_of(
        headers: &HeaderMap,
        extensions: &Extensions,
        clock: Option<&ClockFn>,
    ) -> Option<Duration> {
        extensions
            .get::<ServerSaid>()
            .filter(|said| said.clock == clock_id(clock))
            .and_then(ServerSaid::retry_after)
            .unwrap_or_else(|| delay_asked(headers, || wall_now(clock)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::headers;
    use super::*;
    use std::sync::Arc;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn an_error_is_read_for_its_delay_a_success_only_for_its_quota() {
        let h = headers(&[("retry-after", "7"), ("x-ratelimit-remaining", "0")]);
        let left = Some(QuotaLeft {
            remaining: 0,
            reset: None,
            coarse: false,
        });
        let error = ServerSaid::read(StatusCode::SERVICE_UNAVAILABLE, &h, false, None);
        assert_eq!(error.retry_after(), Some(Some(Duration::from_secs(7))));
        assert_eq!(error.quota(), left);
        let ok = ServerSaid::read(StatusCode::OK, &h, false, None);
        assert_eq!((ok.retry_after(), ok.quota()), (None, left));
        let mut extensions = Extensions::new();
        ok.share(&mut extensions);
        assert!(extensions.is_empty());
        // A status pacing slows down on is read whatever its class.
        let asked = ServerSaid::read(StatusCode::OK, &h, true, None);
        assert_eq!(asked.retry_after(), Some(Some(Duration::from_secs(7))));
    }

    #[test]
    fn a_reading_is_taken_only_by_the_clock_that_made_it() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        let clock: Arc<ClockFn> = Arc::new(move || at(1_000_000_000));
        let other: Arc<ClockFn> = Arc::new(move || at(1_000_000_010));
        let h = headers(&[("retry-after", "Sun, 09 Sep 2001 01:47:00 GMT")]);
        let mut extensions = Extensions::new();
        ServerSaid::read(StatusCode::TOO_MANY_REQUESTS, &h, true, Some(&*clock))
            .share(&mut extensions);
        let of = |clock: Option<&ClockFn>| ServerSaid::retry_after_of(&h, &extensions, clock);
        assert_eq!(of(Some(&*clock)), Some(Duration::from_secs(20)));
        // Another clock reads the headers again, with its own time.
        assert_eq!(of(Some(&*other)), Some(Duration::from_secs(10)));
        let system = of(None).expect("a date in 2001 is past: zero");
        assert!(system.is_zero() && SystemTime::now() > at(1_000_000_020));
        // Without a reading, the headers are read.
        let bare = Extensions::new();
        assert_eq!(
            ServerSaid::retry_after_of(&h, &bare, Some(&*clock)),
            Some(Duration::from_secs(20))
        );
    }
}
