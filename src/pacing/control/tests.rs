//! The controller on tables of answers: each row a sequence of events and what the pace,
//! the wait or the cool-down is after it.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn config() -> Config {
    Config {
        known: None,
        max_cooldown: Duration::from_secs(300),
        first_probe: FIRST_PROBE,
        max_probe: MAX_PROBE,
        fleet: false,
    }
}

/// The defaults, told the destination allows `rate` requests per second.
fn known(rate: f64) -> Config {
    Config {
        known: Some(rate),
        ..config()
    }
}

/// An event at a time (ms from the start).
#[derive(Clone, Copy)]
enum Event {
    /// A request sent and served.
    Ok(u64),
    /// A request sent and refused, with the delay asked (ms).
    No(u64, Option<u64>),
    /// A request sent and answered with a bare 5xx.
    Fail(u64),
}

/// Plays `events` (each a send then its answer at the same instant) from `t0`.
fn play(control: &mut Controller, t0: Instant, events: &[Event]) {
    for event in events {
        let (at, answer) = match *event {
            Event::Ok(at) => (at, Answer::Served),
            Event::No(at, asked) => (at, Answer::Refused(asked.map(|ms| MS * ms as u32))),
            Event::Fail(at) => (at, Answer::Other),
        };
        let now = t0 + MS * at as u32;
        let sent = control.send(now);
        control.answered(sent, answer, None, now);
        control.release(sent);
    }
}

fn burst(from: u64, n: u64) -> Vec<Event> {
    (0..n).map(|i| Event::Ok(from + i)).collect()
}

/// A quota report: `remaining` left until a reset a second away.
fn left(remaining: u64) -> QuotaLeft {
    QuotaLeft {
        remaining,
        reset: Some(Duration::from_secs(1)),
        coarse: false,
    }
}

#[test]
fn the_pace_after_each_sequence_of_answers() {
    use Event::*;
    let rows: Vec<(&str, Vec<Event>, u64, Option<f64>)> = vec![
        ("never refused: not paced", burst(0, 50), 60, None),
        (
            "bare 5xx: not paced",
            vec![Fail(0), Fail(1), Fail(2)],
            3,
            None,
        ),
        // Ten served in the last window: a start-up from 10 r/s, doubling per 100 ms.
        (
            "first refusal",
            [burst(0, 10), vec![No(10, None)]].concat(),
            10,
            Some(10.0),
        ),
        // Four served since the refusal (20 r/s): 40 r/s, twice what it delivers.
        (
            "start-up, 200 ms on",
            [
                burst(0, 10),
                vec![No(10, None), Ok(60), Ok(110), Ok(160), Ok(200)],
            ]
            .concat(),
            210,
            Some(40.0),
        ),
        // The burst before the first refusal is not a rate: none served since, twice the base.
        (
            "start-up, nothing served since",
            [burst(0, 10), vec![No(10, None)]].concat(),
            210,
            Some(20.0),
        ),
        // Refused again at 20 r/s (sent after the first cut): CUBIC's cut to 14.
        (
            "out of the start-up",
            [burst(0, 10), vec![No(10, None), Ok(150), No(210, None)]].concat(),
            210,
            Some(14.0),
        ),
        // A window's room served in a burst is not a rate: the cut is of the last second's
        // delivery rate (10 × 0.48 + 20 = 24.8 r/s), not of the 400 r/s the start-up reached.
        (
            "out of the start-up, after a burst",
            [
                burst(0, 10),
                vec![No(10, None)],
                burst(1500, 20),
                vec![No(1520, None)],
            ]
            .concat(),
            1520,
            Some(BETA * 24.8),
        ),
        // Nothing ever served: probed at one request per first probing delay.
        ("nothing served", vec![No(0, None)], 0, Some(10.0)),
        // Ten seconds without a refusal: open again.
        (
            "quiet",
            [burst(0, 10), vec![No(10, None)]].concat(),
            10_010,
            None,
        ),
    ];
    for (name, events, at, pace) in rows {
        let t0 = Instant::now();
        let mut control = Controller::new(0, config(), t0);
        play(&mut control, t0, &events);
        let rate = control.rate(t0 + MS * at as u32);
        let close = match (rate, pace) {
            (Some(rate), Some(pace)) => (rate - pace).abs() < 0.01 * pace,
            (rate, pace) => rate == pace,
        };
        assert!(close, "{name}: {rate:?}, expected {pace:?}");
    }
}

#[test]
fn a_round_is_cut_once() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    play(&mut control, t0, &burst(0, 10));
    // Five sent at once, all refused: one cut.
    let sent: Vec<_> = (0..5).map(|_| control.send(t0 + MS * 10)).collect();
    for sent in sent {
        control.answered(sent, Answer::Refused(None), None, t0 + MS * 10);
    }
    assert_eq!(control.rate(t0 + MS * 10), Some(10.0));
}

#[test]
fn what_closes_a_destination_and_for_how_long() {
    use Event::*;
    let s = |n: u64| Some(n);
    let rows: Vec<(&str, Vec<Event>, Option<u64>)> = vec![
        // Nothing served, 2 s asked: closed 2 s.
        ("refusing everything", vec![No(0, s(2000))], s(2000)),
        // Nothing served, no delay asked: probed after 100 ms, then 200 ms.
        ("probed", vec![No(0, None)], s(100)),
        ("probed again", vec![No(0, None), No(100, None)], s(200)),
        // Served lately: a refusal cuts the pace and closes nothing.
        (
            "serving",
            [burst(0, 10), vec![No(10, s(5000))]].concat(),
            None,
        ),
        // Nothing served for a window: each delay asked is kept, not only the first.
        (
            "refusing everything, asked again",
            vec![No(0, s(1000)), No(1000, s(1000)), No(2000, s(1000))],
            s(1000),
        ),
        // Asked none, the probing delay doubles up to 2 s.
        (
            "probed for long",
            (0..8).map(|i| No(i * 2000, None)).collect(),
            s(2000),
        ),
        // Served this window but not since the cut: probed, the asked delay not kept.
        (
            "a limiter still counting",
            [burst(0, 10), vec![No(10, s(1000)), No(200, s(1000))]].concat(),
            s(100),
        ),
    ];
    for (name, events, closed) in rows {
        let t0 = Instant::now();
        let mut control = Controller::new(0, config(), t0);
        play(&mut control, t0, &events);
        let last = match events.last() {
            Some(Event::Ok(at) | Event::No(at, _) | Event::Fail(at)) => *at,
            None => 0,
        };
        let now = t0 + MS * last as u32;
        let left = control
            .cooldown(now)
            .map(|until| (until - now).as_millis() as u64);
        assert_eq!(left, closed, "{name}");
    }
}

/// Everything refused for longer than a window, then a success: a destination that never
/// served starts over as a new one, not paced, its slow start from the initial window; one
/// that served resumes the pace it was cut to, from its start. A silence within its first
/// window keeps the probes' pace: the first refusal of a new destination.
#[test]
fn the_first_success_after_a_silence_resumes_or_starts_over() {
    use Event::*;
    let t0 = Instant::now();
    let rows = [
        ("never served", 0, 2000, None),
        ("young", 0, 0, Some(10.0)),
        ("served", 20, 2000, Some(20.0)),
    ];
    for (name, served, refused_for, pace) in rows {
        let mut control = Controller::new(4, config(), t0);
        play(&mut control, t0, &burst(0, served));
        let refusals = (0..=refused_for / 500).map(|i| No(served + i * 500, Some(500)));
        play(&mut control, t0, &refusals.collect::<Vec<_>>());
        let at = served + refused_for + 500;
        let now = t0 + MS * at as u32;
        assert!(control.ready_at(now).is_none(), "{name}: the probe goes");
        play(&mut control, t0, &[Ok(at)]);
        let rate = control
            .rate(now)
            .map(|rate| (rate * 1000.0).round() / 1000.0);
        assert_eq!(rate, pace, "{name}");
        assert_eq!(control.starting(), pace.is_none(), "{name}");
    }
}

/// A burst's refusal may come back before its successes (a limiter answers at once, the
/// backend later): at a new destination with others of it pending, nothing served yet is
/// no sign of a spent quota. Probed after 100 ms, not closed for the second asked. A
/// refusal with nothing else pending, a window after the destination's first send, at a
/// rate told, or of a fleet's process (Redis away), is closed for it, as a server down or a
/// spent quota is.
#[test]
fn a_new_destination_is_closed_for_the_delay_asked_only_with_nothing_else_pending() {
    let second = Some(Duration::from_secs(1));
    let t0 = Instant::now();
    let mut control = Controller::new(4, config(), t0);
    let burst: Vec<_> = (0..4).map(|_| control.send(t0)).collect();
    let now = t0 + MS;
    control.answered(burst[3], Answer::Refused(second), None, now);
    assert_eq!(control.cooldown(now), Some(now + FIRST_PROBE));
    // Alone, a window on, told its rate, or a fleet's process while Redis is away.
    let told = known(10.0);
    let fleet = Config {
        fleet: true,
        ..config()
    };
    for (pending, at, config) in [
        (false, 1, config()),
        (true, 1_000, config()),
        (true, 1, told),
        (true, 1, fleet),
    ] {
        let mut control = Controller::new(4, config, t0);
        let now = t0 + MS * at;
        if pending {
            control.send(now);
        }
        let sent = control.send(now);
        control.answered(sent, Answer::Refused(second), None, now);
        let closed = Some(now + Duration::from_secs(1));
        assert_eq!(
            control.cooldown(now),
            closed,
            "at {at} ms, another pending: {pending}, told {:?}, fleet {}",
            config.known,
            config.fleet
        );
    }
}

#[test]
fn a_known_rate_is_paced_from_the_first_request_and_never_passed() {
    let t0 = Instant::now();
    let mut control = Controller::new(4, known(20.0), t0);
    assert_eq!(control.rate(t0), Some(20.0));
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, None, t0);
    assert_eq!(control.ready_at(t0), Some(t0 + MS * 50));
    // A refusal cuts it; CUBIC brings it back to 20 and no further.
    let sent = control.send(t0 + MS * 50);
    control.answered(sent, Answer::Refused(None), None, t0 + MS * 50);
    assert!(control.rate(t0 + MS * 60).unwrap() < 20.0);
    assert_eq!(control.rate(t0 + Duration::from_secs(30)), Some(20.0));
}

#[test]
fn reported_room_holds_and_spreads() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    // Two left: two more sends, then held until the reset.
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(2)), t0);
    control.release(sent);
    let mut flying = Vec::new();
    for _ in 0..2 {
        assert_eq!(control.ready_at(t0), None);
        flying.push(control.send(t0));
    }
    assert_eq!(control.ready_at(t0), Some(t0 + Duration::from_secs(1)));
    // One still in flight counts against the room: it may reach the server after.
    control.release(flying[0]);
    assert_eq!(control.ready_at(t0), Some(t0 + Duration::from_secs(1)));
    control.release(flying[1]);
    // Once paced (a refusal the room does not explain), the room left is spread until
    // the reset: 10 in a second.
    let now = t0 + Duration::from_secs(1);
    let sent = control.send(now);
    control.answered(sent, Answer::Refused(None), None, now);
    control.release(sent);
    let later = now + Duration::from_millis(500);
    let sent = control.send(later);
    control.answered(sent, Answer::Served, Some(left(10)), later);
    control.release(sent);
    assert_eq!(control.rate(later), Some(10.0));
}

/// A known rate spreads the sends already: a room reported a little late in its window
/// does not slow it, but a spent room still holds it until the reset.
#[test]
fn a_known_rate_is_not_spread_by_a_room_but_held_when_it_is_spent() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, known(20.0), t0);
    // Two left for a second: spread, 2 r/s; known, 20 r/s.
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(2)), t0);
    control.release(sent);
    assert_eq!(control.rate(t0), Some(20.0));
    for k in 1..=2 {
        let at = t0 + MS * (50 * k);
        assert_eq!(control.ready_at(at), None, "send {k}");
        let sent = control.send(at);
        control.release(sent);
    }
    assert_eq!(
        control.ready_at(t0 + MS * 150),
        Some(t0 + Duration::from_secs(1))
    );
}

/// Others sharing the quota (a share under 1) may leave less than a known rate needs:
/// the room left is spread until the reset.
#[test]
fn a_known_rate_sharing_a_quota_is_spread_by_its_room() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, known(20.0), t0);
    control.retell_share(0.5);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(2)), t0);
    control.release(sent);
    let pace = control.rate(t0).unwrap();
    assert!(pace < 20.0, "{pace}");
}

#[test]
fn an_older_sends_report_with_less_room_is_the_newer_count() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    let sent: Vec<Sent> = (0..10).map(|_| control.send(t0)).collect();
    for dropped in sent.iter().filter(|s| ![8, 10].contains(&s.number)) {
        control.release(*dropped);
    }
    // Send 10 reaches the server first (5 left), send 8 after it (2 left).
    for (sent, remaining) in [(sent[9], 5), (sent[7], 2)] {
        control.answered(sent, Answer::Served, Some(left(remaining)), t0);
        control.release(sent);
    }
    for _ in 0..2 {
        assert_eq!(control.ready_at(t0), None);
        control.send(t0);
    }
    assert_eq!(control.ready_at(t0), Some(t0 + Duration::from_secs(1)));
}

#[test]
fn a_newer_sends_report_with_more_room_is_a_new_window_only_if_it_left_after_a_report() {
    let t0 = Instant::now();
    let report = |control: &mut Controller, sent: Sent, remaining| {
        control.answered(sent, Answer::Served, Some(left(remaining)), t0);
        control.release(sent);
    };
    let mut control = Controller::new(0, config(), t0);
    let first = control.send(t0);
    report(&mut control, first, 49);
    // Ten leave together; the server counts send 11 first (48 left) and send 2 last (39).
    let sent: Vec<Sent> = (0..10).map(|_| control.send(t0)).collect();
    report(&mut control, sent[0], 39);
    report(&mut control, sent[9], 48);
    sent[1..9].iter().for_each(|&sent| control.release(sent));
    assert_eq!(sends_now(&mut control, t0), 39);
    // A send that left after the report of 39 (counted after it) and reports 45: the
    // window began again.
    let later = control.send(t0);
    report(&mut control, later, 45);
    assert_eq!(sends_now(&mut control, t0), 45);
}

#[test]
fn a_client_alone_reads_all_of_a_count_that_took_its_sends_in_flight_after_the_first_report() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    // Three in flight; the third's report comes first: the server counted the first before
    // it (48 of 50 left), the second after it.
    let sends: Vec<_> = (0..3).map(|_| control.send(t0)).collect();
    for (sent, remaining) in [(sends[2], 48), (sends[0], 49), (sends[1], 47)] {
        control.answered(sent, Answer::Served, Some(left(remaining)), t0);
        control.release(sent);
    }
    // Ten more, each counted one by one: the quota lost 11 since the first report, this
    // client sent 10 since and had 2 in flight then. It is alone.
    for remaining in (37..47).rev() {
        let sent = control.send(t0);
        control.answered(sent, Answer::Served, Some(left(remaining)), t0);
        control.release(sent);
    }
    assert_eq!(control.share(), 1.0);
}

#[test]
fn a_told_share_of_a_quota_outlives_its_window() {
    let t0 = Instant::now();
    let report = |control: &mut Controller, remaining, now| {
        assert_eq!(control.ready_at(now), None);
        let sent = control.send(now);
        control.answered(sent, Answer::Served, Some(left(remaining)), now);
        control.release(sent);
    };
    // A fleet's process going alone is told its share (a half), and keeps it: each window
    // it takes half of what is left, though measured alone it would seem to take it all.
    let mut alone = Controller::new(0, config(), t0);
    alone.retell_share(0.5);
    for window in [t0, t0 + Duration::from_millis(1100)] {
        report(&mut alone, 40, window);
        report(&mut alone, 39, window);
        assert_eq!(sends_now(&mut alone, window), 19);
    }
    // A measured share lasts as long as its room: a quarter, then all in the next window.
    let mut control = Controller::new(0, config(), t0);
    report(&mut control, 40, t0);
    report(&mut control, 36, t0);
    assert_eq!(sends_now(&mut control, t0), 9);
    let next = t0 + Duration::from_millis(1100);
    report(&mut control, 40, next);
    assert_eq!(sends_now(&mut control, next), 40);
}

#[test]
fn a_report_of_a_send_before_the_reset_tells_of_the_window_that_ended() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(5)), t0);
    control.release(sent);
    // Sent at 900 ms, answered after the reset at 1 s: "none left, 1 s to the reset" was
    // the ended window's count, rounded up. It does not hold the new window.
    let late = control.send(t0 + ms(900));
    assert_eq!(control.ready_at(t0 + ms(1100)), None);
    control.answered(late, Answer::Served, Some(left(0)), t0 + ms(1100));
    control.release(late);
    assert_eq!(control.ready_at(t0 + ms(1100)), None);
    // One with more room than the ended window had left tells of the new window.
    let mut twin = Controller::new(0, config(), t0);
    let sent = twin.send(t0);
    twin.answered(sent, Answer::Served, Some(left(5)), t0);
    twin.release(sent);
    let late = twin.send(t0 + ms(950));
    twin.answered(late, Answer::Served, Some(left(40)), t0 + ms(1100));
    twin.release(late);
    assert_eq!(sends_now(&mut twin, t0 + ms(1100)), 40);
    // The same report of a send after the reset does.
    let sent = control.send(t0 + ms(1100));
    control.answered(sent, Answer::Served, Some(left(0)), t0 + ms(1110));
    control.release(sent);
    assert_eq!(control.ready_at(t0 + ms(1110)), Some(t0 + ms(2110)));
}

#[test]
fn the_window_after_a_reset_is_guessed_as_full_as_the_last() {
    let t0 = Instant::now();
    let (second, ms) = (Duration::from_secs(1), Duration::from_millis);
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(49)), t0);
    control.release(sent);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(48)), t0 + ms(10));
    control.release(sent);
    assert_eq!(sends_now(&mut control, t0 + ms(10)), 48);
    // At the first reset, one goes alone, for two of the window's longest round trips at
    // most: a sliding window would count a burst into a window still full. Its report shows
    // a count that started over: 49 more go, not every request waiting for the reset.
    // Later resets are taken at their word.
    let first = control.send(t0 + second);
    assert_eq!(control.ready_at(t0 + second), Some(t0 + second + ms(20)));
    control.answered(first, Answer::Served, Some(left(49)), t0 + second);
    control.release(first);
    assert_eq!(sends_now(&mut control, t0 + second), 49);
    assert_eq!(sends_now(&mut control, t0 + second * 2), 49);
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(49)), t0);
    control.release(sent);
    assert_eq!(sends_now(&mut control, t0), 49);
    // A report in the guessed window sets its end: a guess bounds nothing.
    let later = QuotaLeft {
        remaining: 49,
        reset: Some(Duration::from_millis(1500)),
        coarse: false,
    };
    let sent = control.send(t0 + second);
    control.answered(sent, Answer::Served, Some(later), t0 + second);
    control.release(sent);
    assert_eq!(sends_now(&mut control, t0 + second), 49);
    let end = t0 + Duration::from_millis(2500);
    assert_eq!(control.ready_at(t0 + second), Some(end));
    // A quota lowered to 30: the next window is guessed from this one's first report.
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(49)), t0);
    control.release(sent);
    let sent = control.send(t0 + second);
    control.answered(sent, Answer::Served, Some(left(29)), t0 + second);
    control.release(sent);
    assert_eq!(sends_now(&mut control, t0 + second * 2), 29);
    // With no report at all, a guess lapses after one window. (Answered at once, the
    // first send after the reset holds the others for no time.)
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(left(49)), t0);
    control.release(sent);
    assert_eq!(sends_now(&mut control, t0 + second), 49);
    assert_eq!(sends_now(&mut control, t0 + second * 2), 100);
}

#[test]
fn a_count_that_does_not_start_over_at_its_reset_is_not_read_as_a_window() {
    let t0 = Instant::now();
    let second = Duration::from_secs(1);
    // Ten a second, each report saying the reset is a second away: ten sends spend it.
    let spend = |control: &mut Controller, first_left: u64| {
        for remaining in (0..=first_left).rev() {
            let sent = control.send(t0);
            control.answered(sent, Answer::Served, Some(left(remaining)), t0);
            control.release(sent);
        }
        assert_eq!(control.ready_at(t0), Some(t0 + second));
    };
    let after_reset = |control: &mut Controller, remaining| {
        let sent = control.send(t0 + second);
        control.answered(sent, Answer::Served, Some(left(remaining)), t0 + second);
        control.release(sent);
    };
    // A fixed window starts over: the first report since counts that send alone.
    let mut fixed = Controller::new(0, config(), t0);
    spend(&mut fixed, 9);
    after_reset(&mut fixed, 8);
    after_reset(&mut fixed, 0);
    assert_eq!(fixed.ready_at(t0 + second), Some(t0 + second * 2));
    // A sliding window still counts 6 of the sends before the reset: its "reset" is only
    // its length, and its reports are not read from then on. It is paced at its quota
    // over that length: 9 a second.
    let mut sliding = Controller::new(0, config(), t0);
    spend(&mut sliding, 9);
    after_reset(&mut sliding, 3);
    after_reset(&mut sliding, 0);
    let spacing = Duration::from_secs_f64(1.0 / 9.0);
    assert_eq!(sliding.ready_at(t0 + second), Some(t0 + second + spacing));
    // Sends leaving together are counted in any order: the first answer read may tell the
    // count after all of them. Still a window that started over.
    let mut together = Controller::new(0, config(), t0);
    spend(&mut together, 9);
    let sent: Vec<_> = (0..4).map(|_| together.send(t0 + second)).collect();
    for (&sent, remaining) in sent.iter().zip([5, 6, 7, 8]) {
        together.answered(sent, Answer::Served, Some(left(remaining)), t0 + second);
        together.release(sent);
    }
    after_reset(&mut together, 0);
    assert_eq!(together.ready_at(t0 + second), Some(t0 + second * 2));
    // More than this client sent is others' use (or a smaller quota): still a window.
    let mut shared = Controller::new(0, config(), t0);
    spend(&mut shared, 2);
    let sent = shared.send(t0 + second);
    shared.answered(sent, Answer::Served, Some(left(9 - 6)), t0 + second);
    shared.release(sent);
    after_reset(&mut shared, 0);
    assert_eq!(shared.ready_at(t0 + second), Some(t0 + second * 2));
}

#[test]
fn a_send_unanswered_for_a_window_does_not_hold_the_next() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    // Sent by a fleet's process that is gone: never answered.
    control.send(t0);
    let now = t0 + Duration::from_millis(1500);
    let sent = control.send(now);
    control.answered(sent, Answer::Served, Some(left(1)), now);
    control.release(sent);
    assert_eq!(control.in_flight(), 1);
    assert_eq!(sends_now(&mut control, now), 1);
}

#[test]
fn a_send_late_by_less_than_a_spacing_keeps_the_beat() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut control = Controller::new(0, known(20.0), t0);
    control.send(t0);
    assert_eq!(control.ready_at(t0), Some(t0 + ms(50)));
    // 10 ms late: the next slot is still at 100 ms, as GCRA's theoretical arrival time.
    control.send(t0 + ms(60));
    assert_eq!(control.ready_at(t0 + ms(60)), Some(t0 + ms(100)));
    // A whole spacing late, within a timer tick: counted a tick before it left.
    control.send(t0 + ms(150));
    assert_eq!(control.ready_at(t0 + ms(150)), Some(t0 + ms(199)));
    // Later still: the beat restarts, no burst to catch up.
    control.send(t0 + ms(300));
    assert_eq!(control.ready_at(t0 + ms(300)), Some(t0 + ms(350)));
}

/// Woken a little after whole milliseconds only, as tokio's timers wake, a pace of
/// 2000 r/s still sends 2000 a second: the sends due since the tick, or within the next,
/// leave together. Each counts at its slot, so no more leave.
#[test]
fn a_pace_faster_than_the_timer_keeps_its_rate() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, known(2000.0), t0);
    let (mut now, mut sent) = (t0, 0);
    while now < t0 + Duration::from_secs(1) {
        while control.send_at(now).is_none() {
            control.send(now);
            sent += 1;
        }
        // Sleeps end on the tick after the instant asked, and a fifth of one later.
        let at = control.send_at(now).expect("paced");
        let ticks = at.duration_since(t0).as_nanos().div_ceil(MS.as_nanos());
        now = t0 + MS * u32::try_from(ticks).unwrap() + MS / 5;
    }
    assert!((1999..=2002).contains(&sent), "{sent} sent in a second");
}

/// How many requests may leave at `now` (at most 100), sent together, then answered
/// without a report.
fn sends_now(control: &mut Controller, now: Instant) -> usize {
    let mut sent = Vec::new();
    while sent.len() < 100 && control.ready_at(now).is_none() {
        sent.push(control.send(now));
    }
    sent.iter().for_each(|&sent| control.release(sent));
    sent.len()
}

#[test]
fn the_expected_wait_follows_the_start_up() {
    let t0 = Instant::now();
    let mut control = Controller::new(0, config(), t0);
    play(&mut control, t0, &[Event::No(0, None)]);
    // Probing at 10 r/s, doubling once it serves: 100 behind take under a second, not
    // the 10 s they would at 10 r/s.
    let wait = control.expected_wait(100, t0);
    assert!(wait < Duration::from_secs(1), "{wait:?}");
}

#[test]
fn the_slow_start_counts_young_requests_and_grows_with_successes() {
    let t0 = Instant::now();
    let mut control = Controller::new(2, config(), t0);
    let first = control.send(t0);
    control.send(t0);
    // Full at 2 until the oldest has flown for a doubling period (a slow answer, a long-poll):
    // then both leave the count and widen the window, as answers would.
    assert_eq!(control.ready_at(t0), Some(t0 + STARTUP_DOUBLING));
    assert_eq!(control.ready_at(t0 + STARTUP_DOUBLING), None);
    assert_eq!(control.window, Some(4));
    // A success widens it by one.
    control.answered(first, Answer::Served, None, t0 + STARTUP_DOUBLING);
    control.release(first);
    assert_eq!(control.window, Some(5));
    control.window = Some(OPEN_WINDOW);
    let later = t0 + STARTUP_DOUBLING * 10;
    assert_eq!(control.window_at(later), None, "open at {OPEN_WINDOW}");
    assert!(!control.starting());
    assert_eq!(Controller::new(0, config(), t0).window, None);
}

/// How many requests may leave at `now` (at most 100), sent together, then served at once,
/// each answer reporting `remaining` (until a reset a second away).
fn served_now(control: &mut Controller, now: Instant, remaining: Option<u64>) -> usize {
    let mut sent = Vec::new();
    while sent.len() < 100 && control.ready_at(now).is_none() {
        sent.push(control.send(now));
    }
    for &one in &sent {
        control.answered(one, Answer::Served, remaining.map(left), now);
        control.release(one);
    }
    sent.len()
}

#[test]
fn the_slow_start_at_most_doubles_per_period_however_fast_the_answers() {
    let t0 = Instant::now();
    let mut control = Controller::new(4, config(), t0);
    // Answered at once (a loopback server), the window grows past the cap: the cap holds.
    for (period, limit) in [4, 8, 16, 32].into_iter().enumerate() {
        let now = t0 + STARTUP_DOUBLING * u32::try_from(period).unwrap();
        assert_eq!(
            served_now(&mut control, now, None),
            limit,
            "period {period}"
        );
        assert_eq!(
            served_now(&mut control, now, None),
            limit,
            "period {period}, again"
        );
    }
    // Full, it waits for the next doubling, not for a stalled send.
    let now = t0 + STARTUP_DOUBLING * 3 + Duration::from_millis(30);
    for _ in 0..32 {
        control.send(now);
    }
    assert_eq!(control.ready_at(now), Some(t0 + STARTUP_DOUBLING * 4));
    assert_eq!(control.ready_at(t0 + STARTUP_DOUBLING * 4), None);
    assert!(!control.starting(), "open at {OPEN_WINDOW}");
}

#[test]
fn a_reported_room_bounds_the_slow_start_in_place_of_the_cap() {
    let t0 = Instant::now();
    let mut control = Controller::new(4, config(), t0);
    assert_eq!(served_now(&mut control, t0, Some(100)), 4);
    assert_eq!(served_now(&mut control, t0, None), 8);
}

mod served {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_steady_rate_reads_as_itself_and_a_burst_as_a_few_in_a_second() {
        let t0 = Instant::now();
        let mut served = Served::new(t0);
        for i in 0..10 {
            served.add(true, t0 + ms(i));
        }
        assert_eq!(served.in_window(t0 + ms(10)), 10.0);
        assert_eq!(served.rate(ms(100), t0 + ms(10)), 100.0);
        let mut steady = Served::new(t0);
        for i in 0..150 {
            steady.add(true, t0 + ms(20 * i));
        }
        let rate = steady.rate(ms(100), t0 + ms(2990));
        assert!((rate - 50.0).abs() < 1.5, "{rate}");
    }

    #[test]
    fn a_quiet_destination_reads_zero_and_since_counts_from_the_last_take() {
        let t0 = Instant::now();
        let mut served = Served::new(t0);
        served.add(true, t0);
        served.add(true, t0 + ms(5));
        assert_eq!(served.take_since(), 2);
        assert_eq!(served.take_since(), 0);
        assert_eq!(served.in_window(t0 + ms(5000)), 0.0);
    }
}

mod room {
    use super::*;

    /// Send `number`, left after `room`'s latest report.
    fn after(room: Option<Room>, number: u64) -> (u64, Option<Seen>) {
        (number, room.and_then(|room| room.seen()))
    }

    #[test]
    fn the_room_is_counted_down_by_later_sends_until_the_reset() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let room = Room::reported(None, after(None, 10), left(2), max, t0).unwrap();
        assert_eq!(room.spent_until(1.0, 11, 0, t0), None);
        let reset = t0 + Duration::from_secs(1);
        assert_eq!(room.spent_until(1.0, 12, 0, t0), Some(reset));
        assert_eq!(room.spent_until(1.0, 12, 0, reset), None);
        // Two sent before the report and still unanswered may reach the server after it.
        assert_eq!(room.spent_until(1.0, 10, 2, t0), Some(reset));
        assert_eq!(room.pace(1.0, 10, 0, reset, t0), Some(2.0));
        assert_eq!(
            room.pace(1.0, 11, 0, reset, t0 + Duration::from_millis(500)),
            Some(2.0)
        );
        let no_reset = QuotaLeft {
            remaining: 0,
            reset: None,
            coarse: false,
        };
        assert!(Room::reported(None, after(None, 10), no_reset, max, t0).is_none());
    }

    #[test]
    fn a_client_sharing_the_quota_counts_its_share_of_the_room() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let first = Room::reported(None, after(None, 1), left(40), max, t0);
        assert_eq!(first.unwrap().share(1), None);
        // Two of this client's sends later, the quota lost 8: others took 6.
        let later = Room::reported(first, after(first, 3), left(32), max, t0).unwrap();
        assert_eq!(later.share(3), Some(0.25));
        assert_eq!(later.left(0.25, 3, 0), 8);
        // A new window (the count went up) has no measure of its own yet.
        let next = Room::reported(Some(later), after(Some(later), 4), left(50), max, t0).unwrap();
        assert_eq!(next.share(4), None);
        // Its eight sends took eight: the others have not come yet. Its part is a quarter
        // of the window's 40, not of the 32 left.
        let first = Room::reported(None, after(None, 1), left(40), max, t0);
        let alone = Room::reported(first, after(first, 9), left(32), max, t0).unwrap();
        assert_eq!(alone.left(0.25, 9, 0), 2);
    }

    #[test]
    fn a_reset_rounded_up_is_tightened_by_each_report_of_its_window() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let ms = Duration::from_millis;
        // The window's first report, sent as it began, says "2 s": its 1 s rounded up.
        let first = QuotaLeft {
            remaining: 49,
            reset: Some(Duration::from_secs(2)),
            coarse: false,
        };
        let opened = Room::reported(None, after(None, 1), first, max, t0);
        assert_eq!(opened.unwrap().reset_at, t0 + ms(2000));
        // The next says "1 s": the window ends by 1.04 s, and later reports keep that bound.
        let next = Room::reported(opened, after(opened, 2), left(48), max, t0 + ms(40));
        assert_eq!(next.unwrap().reset_at, t0 + ms(1040));
        let later = Room::reported(next, after(next, 3), left(47), max, t0 + ms(80)).unwrap();
        assert_eq!(later.reset_at, t0 + ms(1040));
    }

    #[test]
    fn a_reset_rounded_up_is_tightened_by_the_windows_first_report() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let ms = Duration::from_millis;
        // Every report says "1 s" (a fixed window's reset, rounded up to whole seconds).
        let old = Room::reported(None, after(None, 1), left(3), max, t0);
        // The count went up at 300 ms: a window began, and ends by 1.3 s.
        let opened = Room::reported(old, after(old, 2), left(49), max, t0 + ms(300));
        assert_eq!(opened.unwrap().reset_at, t0 + ms(1300));
        // At 900 ms, after 39 sends, it still says "1 s": 10 left in the 400 ms to the end.
        let later = Room::reported(opened, after(opened, 41), left(10), max, t0 + ms(900)).unwrap();
        assert_eq!(later.reset_at, t0 + ms(1300));
        assert_eq!(
            later.pace(1.0, 41, 0, later.reset_at, t0 + ms(900)),
            Some(25.0)
        );
        // Past that end with no new window seen, a report starts a new bound.
        let stale = Room::reported(
            Some(later),
            after(Some(later), 42),
            left(5),
            max,
            t0 + ms(1400),
        )
        .unwrap();
        assert_eq!(stale.reset_at, t0 + ms(2400));
    }
}

/// A reset given in whole Unix seconds may pass up to a second sooner (rate-limiter-flexible
/// rounds it up). A spent room then sends one probe at a time, halfway to the reset, each
/// refusal halving what is left, until less than a probing delay is.
#[test]
fn a_spent_room_known_only_to_the_second_is_probed_halfway_to_its_reset() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let coarse = |remaining, reset: Duration| QuotaLeft {
        remaining,
        reset: Some(reset),
        coarse: true,
    };
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(coarse(0, ms(1500))), t0);
    control.release(sent);
    // The reset is between 0.5 s and 1.5 s: the first probe goes at 1 s.
    assert_eq!(control.ready_at(t0), Some(t0 + ms(1000)));
    let mut probe_at = ms(1000);
    for next in [1250, 1375, 1437, 1500] {
        assert_eq!(control.ready_at(t0 + probe_at), None, "{probe_at:?}");
        let probe = control.send(t0 + probe_at);
        // In flight, it holds the others until the reset.
        assert_eq!(control.ready_at(t0 + probe_at), Some(t0 + ms(1500)));
        // One refusal reports nothing: its send time alone bounds the reset.
        let left = (next != 1375).then(|| coarse(0, ms(1500) - probe_at));
        control.answered(probe, Answer::Refused(None), left, t0 + probe_at);
        control.release(probe);
        let held = control.ready_at(t0 + probe_at).unwrap() - t0;
        // Under a probing delay (100 ms) from the reset, it waits for it.
        assert!(held.abs_diff(ms(next)) <= ms(1), "{held:?} for {next} ms");
        probe_at = held;
    }
    // A probe that finds the next window sends on at once.
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(coarse(0, ms(1500))), t0);
    control.release(sent);
    let probe = control.send(t0 + ms(1000));
    control.answered(
        probe,
        Answer::Served,
        Some(coarse(9, ms(1000))),
        t0 + ms(1000),
    );
    control.release(probe);
    assert_eq!(sends_now(&mut control, t0 + ms(1000)), 9);
    // A fleet's process alone (Redis away) waits for the reset: the others would probe too.
    let alone = Config {
        fleet: true,
        ..config()
    };
    let mut control = Controller::new(0, alone, t0);
    let sent = control.send(t0);
    control.answered(sent, Answer::Served, Some(coarse(0, ms(1500))), t0);
    control.release(sent);
    assert_eq!(control.ready_at(t0), Some(t0 + ms(1500)));
    // A reset in seconds from now is known to the report: it is waited for.
    let mut control = Controller::new(0, config(), t0);
    let sent = control.send(t0);
    let exact = QuotaLeft {
        coarse: false,
        ..coarse(0, ms(1500))
    };
    control.answered(sent, Answer::Served, Some(exact), t0);
    control.release(sent);
    assert_eq!(control.ready_at(t0), Some(t0 + ms(1500)));
}

/// A refused probe's `Retry-After` that ends within a second of a reset known only to the
/// second (express-rate-limit's legacy headers: both rounded up) bounds that reset, and
/// the probes go on; one asking longer is waited for.
#[test]
fn a_probes_delay_asked_near_a_reset_known_to_the_second_bounds_it() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let coarse = |reset: Duration| QuotaLeft {
        remaining: 0,
        reset: Some(reset),
        coarse: true,
    };
    for (asked, next) in [(400, 1200), (1000, 1250), (5000, 6000)] {
        let mut control = Controller::new(0, config(), t0);
        let sent = control.send(t0);
        control.answered(sent, Answer::Served, Some(coarse(ms(1500))), t0);
        control.release(sent);
        let probe = control.send(t0 + ms(1000));
        let refused = Answer::Refused(Some(ms(asked)));
        control.answered(probe, refused, Some(coarse(ms(500))), t0 + ms(1000));
        control.release(probe);
        let held = control.ready_at(t0 + ms(1000)).unwrap() - t0;
        assert!(
            held.abs_diff(ms(next)) <= ms(1),
            "asked {asked} ms: {held:?}"
        );
    }
}

/// A window spent, then refusals that ask no delay (rate-limiter-flexible's `Retry-After`
/// in fractions of a second is none): the probes double, but the last comes a window
/// after the cut at the latest, when a window's count has passed. Asked a delay, they
/// double on up to the longest (HAProxy's refusals count, and a probe too early is one more).
#[test]
fn probes_unasked_come_by_a_window_after_the_cut() {
    use Event::*;
    let t0 = Instant::now();
    for (asked, last) in [(None, 1010), (Some(1000), 1530)] {
        let mut control = Controller::new(0, config(), t0);
        play(&mut control, t0, &burst(0, 50));
        // The cut at 10 ms; then probes refused at 30, 130, 330 and 730 ms.
        let probes = [10, 30, 130, 330, 730].map(|at| No(at, asked));
        play(&mut control, t0, &probes);
        let closed = control.closed_until(t0 + MS * 730).unwrap();
        assert_eq!(closed, t0 + MS * last, "asked {asked:?}");
    }
}

/// A window opened by its first request lasts a fixed length. A new window's opener bounds
/// it from above, a refused probe from below; a spent room bisects what they leave of its
/// reset's second, waits for its end once under a probing delay, and forgets bounds that cross.
#[test]
fn the_length_of_windows_opened_by_a_request_is_learned() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut control = Controller::new(0, config(), t0);
    // Answers at `ms`, each with a room reported until the whole second `reset` (ms).
    let mut answer = |ms: u64, answer: Answer, remaining: u64, reset: u64| {
        let left = QuotaLeft {
            remaining,
            reset: Some(Duration::from_millis(reset - ms)),
            coarse: true,
        };
        let sent = control.send(at(ms));
        control.answered(sent, answer, Some(left), at(ms));
        control.release(sent);
        control.ready_at(at(ms)).map(|t| (t - t0).as_millis())
    };
    // A window opened at 0, spent, its reset 1.3 s: a probe at 800 ms, refused.
    answer(0, Answer::Served, 1, 1300);
    assert_eq!(answer(0, Answer::Served, 0, 1300), Some(800));
    assert_eq!(answer(800, Answer::Refused(None), 0, 1300), Some(1050));
    // The probe at 1050 ms opens the next window: windows last over 800 ms, at most 1050.
    answer(1050, Answer::Served, 1, 2300);
    assert_eq!(answer(1050, Answer::Served, 0, 2300), Some(1975));
    assert_eq!(answer(1975, Answer::Refused(None), 0, 2300), Some(2037));
    // Over 987 ms, at most 1050: the window ends by 2100 ms, which it waits for.
    assert_eq!(answer(2037, Answer::Refused(None), 0, 2300), Some(2100));
    // Refused then, the bounds cross and are forgotten: the reset's second is bisected.
    assert_eq!(answer(2100, Answer::Refused(None), 0, 2300), Some(2200));
}

/// Paced, a room whose reset is known only to the second is spread until its window's
/// latest end as learned, not until the reset: a window opened by a request may end up to
/// a second before it.
#[test]
fn a_paced_room_is_spread_until_its_windows_learned_end() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut control = Controller::new(0, config(), t0);
    let mut answer = |ms: u64, answer: Answer, remaining: Option<u64>, reset: u64| {
        let left = remaining.map(|remaining| QuotaLeft {
            remaining,
            reset: Some(Duration::from_millis(reset - ms)),
            coarse: true,
        });
        let sent = control.send(at(ms));
        control.answered(sent, answer, left, at(ms));
        control.release(sent);
    };
    // Windows opened at 0 and 1050 ms: they last over 800 ms and at most 1050 ms.
    answer(0, Answer::Served, Some(1), 1300);
    answer(0, Answer::Served, Some(0), 1300);
    answer(800, Answer::Refused(None), Some(0), 1300);
    answer(1050, Answer::Served, Some(10), 2300);
    // A refusal the room does not explain: paced. 9 left until 2100 ms, not 2300 ms.
    answer(1060, Answer::Refused(None), None, 2300);
    let pace = control.rate(at(1060)).unwrap();
    assert!((pace - 9.0 / 1.04).abs() < 0.01, "{pace}");
}

/// A refusal of the first send after a cut, at a limiter that served within the window
/// (one counting refusals): the probe waits the probing delay, or one spacing of the pace
/// where that is longer. Sooner, it would send faster than the pace.
#[test]
fn a_probe_keeps_the_paces_spacing() {
    use Event::*;
    let t0 = Instant::now();
    for pace in [1.4, 35.0] {
        let mut control = Controller::new(0, config(), t0);
        play(&mut control, t0, &[Ok(0), Ok(500), No(900, None)]);
        let curve = Curve::new(t0 + MS * 900, pace, pace / BETA, false);
        control.curve = Some(curve);
        play(&mut control, t0, &[No(950, None)]);
        let closed = control.closed_until(t0 + MS * 950).unwrap();
        let spacing = interval(curve.rate(t0 + MS * 950));
        assert_eq!(
            closed,
            t0 + MS * 950 + spacing.max(FIRST_PROBE),
            "{pace} r/s"
        );
    }
}
