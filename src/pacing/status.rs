//! The set of statuses that slow a destination down.

use http::StatusCode;

/// The statuses 400 to 599, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StatusSet([u64; 4]);

impl StatusSet {
    pub(crate) const FIRST: u16 = 400;
    pub(crate) const LAST: u16 = 599;

    /// Adds `status`, which the caller has checked is within `FIRST..=LAST`.
    pub(crate) fn insert(&mut self, status: StatusCode) {
        let i = usize::from(status.as_u16() - Self::FIRST);
        self.0[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn contains(&self, status: StatusCode) -> bool {
        match status.as_u16().checked_sub(Self::FIRST) {
            Some(i) if status.as_u16() <= Self::LAST => {
                let i = usize::from(i);
                self.0[i / 64] & (1 << (i % 64)) != 0
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_set_holds_exactly_what_was_inserted() {
        let mut set = StatusSet::default();
        for code in [400, 429, 463, 464, 503, 599] {
            set.insert(StatusCode::from_u16(code).unwrap());
        }
        for code in 100..=999 {
            let status = StatusCode::from_u16(code).unwrap();
            let expected = [400, 429, 463, 464, 503, 599].contains(&code);
            assert_eq!(set.contains(status), expected, "{code}");
        }
    }
}
