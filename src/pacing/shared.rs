//! What every clone of a pacing layer shares.

use super::destination::{Destination, Limits};
use super::destinations::Destinations;
use super::key::Key;
use super::settings::Settings;
use crate::metrics::PacingSeries;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Shared by a layer, its clones, and every service and response future they make.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    destinations: Destinations,
    /// The rates the user said destinations allow (req/s).
    known: HashMap<Key, f64>,
    /// The labels of the destinations' gauges, bounded as the table is.
    series: PacingSeries,
}

impl Shared {
    pub(crate) fn new(settings: Settings, known: HashMap<Key, f64>) -> Self {
        Self {
            destinations: Destinations::new(settings.max_destinations, settings.idle_timeout),
            series: PacingSeries::new(settings.max_destinations),
            settings,
            known,
        }
    }

    /// The state of `key`, added if new; `None` if too many destinations are busy.
    pub(crate) fn destination(&self, key: &Key, now: Instant) -> Option<Arc<Destination>> {
        let known = self.known.get(key).copied();
        self.destinations
            .get_or_insert(key, known.is_some(), now, || {
                let gauges = self.series.gauges(key, known.is_some());
                Destination::new(key.clone(), self.settings, known, gauges, now)
            })
    }

    /// How long a request arriving now may wait.
    pub(crate) fn limits(&self, deadline: Option<Instant>, now: Instant) -> Limits {
        Limits::new(now, self.settings.max_wait, deadline)
    }

    pub(crate) fn find(&self, key: &Key) -> Option<Arc<Destination>> {
        self.destinations.get(key)
    }

    /// The longest spacing of any destination.
    pub(crate) fn slowest_delay(&self) -> Duration {
        let all = self.destinations.all();
        all.iter().map(|d| d.delay()).max().unwrap_or_default()
    }

    /// The lowest rate of any paced destination.
    pub(crate) fn slowest_rate(&self) -> Option<f64> {
        let all = self.destinations.all();
        all.iter().filter_map(|d| d.rate()).reduce(f64::min)
    }

    pub(crate) fn destinations(&self) -> usize {
        self.destinations.len()
    }
}
