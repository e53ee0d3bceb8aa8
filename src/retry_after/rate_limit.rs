//! The `RateLimit` field: a Structured Field List (RFC 8941 §3.1) of quota policies, or
//! draft 7's Dictionary of one.
//!
//! Only what the reset rule needs is kept (each member's `r` and `t` parameters), but the whole
//! value is validated, because RFC 8941 makes a field that fails to parse void as a whole.

use http::HeaderValue;
use http::header::GetAll;
use std::time::Duration;

/// The quota with the fewest units left (`r`), and its reset (`t`; the longest among those
/// tied), over every line of the field: what bounds the next requests.
///
/// A line that is no List may be draft 7's Dictionary, one policy:
/// `limit=50, remaining=49, reset=1`. `None` when no member has an `r` (a `remaining`),
/// when the field is absent, or when any line is neither.
pub(super) fn tightest(lines: GetAll<'_, HeaderValue>) -> Option<(u64, Option<Duration>)> {
    let mut tightest: Tightest = None;
    for line in lines {
        let line = line.as_bytes();
        // A line that fails to parse gives no member: its own are kept apart until it has.
        let mut of_line = tightest;
        match Parser::new(line).list(|member| consider(&mut of_line, member)) {
            Some(()) => tightest = of_line,
            None => consider(&mut tightest, Parser::new(line).dictionary()?),
        }
    }
    tightest.map(|(left, reset)| (left, reset.map(Duration::from_secs)))
}

/// The fewest units left and their reset (seconds), so far.
type Tightest = Option<(u64, Option<u64>)>;

/// Keeps `member` in `tightest` if it has fewer units left (the longest reset on a tie).
fn consider(tightest: &mut Tightest, member: Member) {
    let Some(r) = member.remaining else { return };
    *tightest = match *tightest {
        Some((left, _)) if r > left => *tightest,
        Some((left, reset)) if r == left => Some((left, reset.max(member.reset))),
        _ => Some((r, member.reset)),
    };
}

/// The parameters of one list member that matter here; negative values are dropped.
#[derive(Default)]
struct Member {
    remaining: Option<u64>,
    reset: Option<u64>,
}

/// A bare item, reduced to what a parameter check needs.
enum Bare {
    Integer(i64),
    Other,
}

impl Bare {
    /// A count or a number of seconds: a non-negative integer.
    fn count(&self) -> Option<u64> {
        match *self {
            Bare::Integer(n) => u64::try_from(n).ok(),
            Bare::Other => None,
        }
    }
}

/// A cursor over one field line. Every method returns `None` on a syntax error.
struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Self {
        Self { input, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    fn skip_ows(&mut self) {
        while self.eat(b' ') || self.eat(b'\t') {}
    }

    /// HTTP strips OWS around a field value; be as lenient when the caller did not.
    fn trim(&mut self) {
        self.skip_ows();
        let mut end = self.input.len();
        while end > self.pos && matches!(self.input[end - 1], b' ' | b'\t') {
            end -= 1;
        }
        self.input = &self.input[..end];
    }

    /// sf-dictionary, keeping its `remaining` and `reset` members when they are
    /// non-negative integers (draft 7's one policy).
    fn dictionary(&mut self) -> Option<Member> {
        self.trim();
        let mut member = Member::default();
        while self.peek().is_some() {
            let key = self.key()?;
            let value = match self.eat(b'=') {
                true if self.peek() == Some(b'(') => self.inner_list().map(|()| Bare::Other)?,
                true => {
                    let value = self.bare_item()?;
                    self.parameters()?;
                    value
                }
                false => self.parameters().map(|_| Bare::Other)?, // boolean true
            };
            match key {
                b"remaining" => member.remaining = value.count(),
                b"reset" => member.reset = value.count(),
                _ => {}
            }
            self.skip_ows();
            if self.peek().is_none() {
                break;
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip_ows();
            self.peek()?; // a trailing comma is an error
        }
        Some(member)
    }

    /// sf-list, calling `on_member` for each member that is an Item (inner lists are checked
    /// but carry no quota policy).
    fn list(&mut self, mut on_member: impl FnMut(Member)) -> Option<()> {
        self.trim();
        while self.peek().is_some() {
            if self.peek() == Some(b'(') {
                self.inner_list()?;
            } else {
                self.bare_item()?;
                on_member(self.parameters()?);
            }
            self.skip_ows();
            if self.peek().is_none() {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip_ows();
            self.peek()?; // a trailing comma is an error
        }
        Some(())
    }

    fn inner_list(&mut self) -> Option<()> {
        if !self.eat(b'(') {
            return None;
        }
        loop {
            self.skip_sp();
            if self.eat(b')') {
                self.parameters()?;
                return Some(());
            }
            self.bare_item()?;
            self.parameters()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    /// Parameters, keeping `r` and `t` when they are non-negative integers (last one wins).
    fn parameters(&mut self) -> Option<Member> {
        let mut member = Member::default();
        while self.eat(b';') {
            self.skip_sp();
            let key = self.key()?;
            let value = if self.eat(b'=') {
                self.bare_item()?
            } else {
                Bare::Other // boolean true
            };
            match key {
                b"r" => member.remaining = value.count(),
                b"t" => member.reset = value.count(),
                _ => {}
            }
        }
        Some(member)
    }

    fn key(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        match self.bump()? {
            b'a'..=b'z' | b'*' => {}
            _ => return None,
        }
        while matches!(
            self.peek(),
            Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')
        ) {
            self.pos += 1;
        }
        Some(&self.input[start..self.pos])
    }

    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(|()| Bare::Other),
            b'*' | b'A'..=b'Z' | b'a'..=b'z' => self.token().map(|()| Bare::Other),
            b':' => self.byte_sequence().map(|()| Bare::Other),
            b'?' => self.boolean().map(|()| Bare::Other),
            // RFC 9651 Date: an integer number of seconds after '@'.
            b'@' => {
                self.pos += 1;
                match self.number()? {
                    Bare::Integer(_) => Some(Bare::Other),
                    Bare::Other => None,
                }
            }
            b'%' => self.display_string().map(|()| Bare::Other),
            _ => None,
        }
    }

    /// RFC 9651 Display String: `%"` then printable ASCII, with `%xx` (lowercase hex) escapes.
    fn display_string(&mut self) -> Option<()> {
        if !(self.eat(b'%') && self.eat(b'"')) {
            return None;
        }
        let is_hex = |b: u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
        loop {
            match self.bump()? {
                b'"' => return Some(()),
                b'%' => {
                    if !(is_hex(self.bump()?) && is_hex(self.bump()?)) {
                        return None;
                    }
                }
                0x20..=0x7e => {}
                _ => return None,
            }
        }
    }

    /// sf-integer (at most 15 digits) or sf-decimal (12 + 3 digits).
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let mut value: i64 = 0;
        let mut digits = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            self.pos += 1;
            digits += 1;
            if digits > 15 {
                return None;
            }
            value = value * 10 + i64::from(d - b'0');
        }
        if digits == 0 {
            return None;
        }
        if !self.eat(b'.') {
            return Some(Bare::Integer(if negative { -value } else { value }));
        }
        if digits > 12 {
            return None;
        }
        let mut fraction = 0;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
            fraction += 1;
        }
        if fraction == 0 || fraction > 3 {
            return None;
        }
        Some(Bare::Other)
    }

    fn string(&mut self) -> Option<()> {
        if !self.eat(b'"') {
            return None;
        }
        loop {
            match self.bump()? {
                b'"' => return Some(()),
                b'\\' => {
                    if !matches!(self.bump()?, b'"' | b'\\') {
                        return None;
                    }
                }
                0x20..=0x7e => {}
                _ => return None,
            }
        }
    }

    fn token(&mut self) -> Option<()> {
        match self.bump()? {
            b'*' | b'A'..=b'Z' | b'a'..=b'z' => {}
            _ => return None,
        }
        while self.peek().is_some_and(is_token_char) {
            self.pos += 1;
        }
        Some(())
    }

    fn byte_sequence(&mut self) -> Option<()> {
        if !self.eat(b':') {
            return None;
        }
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        {
            self.pos += 1;
        }
        self.eat(b':').then_some(())
    }

    fn boolean(&mut self) -> Option<()> {
        if !self.eat(b'?') {
            return None;
        }
        matches!(self.bump()?, b'0' | b'1').then_some(())
    }
}

/// tchar (RFC 9110 §5.6.2), plus ':' and '/' as sf-token allows.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
                | b':'
                | b'/'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(input: &str) -> Option<Vec<(Option<u64>, Option<u64>)>> {
        let mut members = Vec::new();
        Parser::new(input.as_bytes()).list(|m| members.push((m.remaining, m.reset)))?;
        Some(members)
    }

    #[test]
    fn parses_members_and_their_parameters() {
        assert_eq!(
            list(r#""burst";r=0;t=5, "day";r=100;t=3600"#),
            Some(vec![(Some(0), Some(5)), (Some(100), Some(3600))])
        );
        assert_eq!(
            list(r#"default;pk=:YWJj:;r=1;t=2;x="a,b;c""#),
            Some(vec![(Some(1), Some(2))])
        );
        assert_eq!(list("a;r=-1;t=2.5"), Some(vec![(None, None)]));
        assert_eq!(list("a;r;t=?1"), Some(vec![(None, None)]));
        assert_eq!(list(r#"(a "b");r=0, c"#), Some(vec![(None, None)]));
        assert_eq!(list(""), Some(vec![]));
        assert_eq!(
            list(r#"a;n=%"caf%c3%a9";d=@1700000000;r=0;t=9"#),
            Some(vec![(Some(0), Some(9))])
        );
    }

    fn tightest_of(lines: &[&str]) -> Option<(u64, Option<Duration>)> {
        let mut headers = http::HeaderMap::new();
        for line in lines {
            headers.append("ratelimit", HeaderValue::from_str(line).unwrap());
        }
        tightest(headers.get_all("ratelimit"))
    }

    #[test]
    fn the_tightest_quota_bounds_the_next_requests() {
        let secs = Duration::from_secs;
        assert_eq!(
            tightest_of(&[r#""burst";r=3;t=1, "day";r=100;t=3600"#]),
            Some((3, Some(secs(1))))
        );
        // Ties keep the longest reset; lines are one list.
        assert_eq!(
            tightest_of(&[r#""burst";r=0;t=1"#, r#""day";r=0;t=60, "x";t=5"#]),
            Some((0, Some(secs(60))))
        );
        assert_eq!(tightest_of(&["a;r=7"]), Some((7, None)));
        assert_eq!(tightest_of(&["a;t=7"]), None);
        assert_eq!(
            tightest_of(&["a;r=0", "b;r=1;t=1,"]),
            None,
            "one bad line voids all"
        );
        assert_eq!(tightest_of(&[]), None);
    }

    /// Draft 7 of the IETF draft sends one policy as a Dictionary, as express-rate-limit's
    /// `standardHeaders: 'draft-7'` does.
    #[test]
    fn a_draft_7_dictionary_is_one_policy() {
        let secs = Duration::from_secs;
        let draft_7 = "limit=50, remaining=49, reset=1";
        assert_eq!(tightest_of(&[draft_7]), Some((49, Some(secs(1)))));
        assert_eq!(
            tightest_of(&["remaining=0;x=1, reset=30, policy=(a b), open"]),
            Some((0, Some(secs(30))))
        );
        assert_eq!(tightest_of(&["limit=50, reset=1"]), None, "no remaining");
        for bad in [
            "remaining=1,",
            "remaining=-1, reset=1",
            "Remaining=1",
            "remaining=1 reset=1",
        ] {
            assert_eq!(tightest_of(&[bad]), None, "{bad:?}");
        }
    }

    #[test]
    fn rejects_invalid_lists() {
        for bad in [
            "a,",
            "a;r=0;t=1234567890123456",
            "a;R=0",
            "a;r=0 b",
            "\"open",
            "a;t=1.2345",
            "(a",
            ",a",
            "a;r=",
            "a;r=\"\\x\"",
            "a;r=@x",
            "é",
            "a;n=%\"bad%C3\"",
            "a;n=%\"open",
            "a;d=@1.5",
        ] {
            assert_eq!(list(bad), None, "{bad:?}");
        }
    }
}
