//! The validated settings of a pacing layer.

use crate::classify::StatusSet;
use std::time::Duration;

/// What [`PacingBuilder`](super::PacingBuilder) validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) max_wait: Duration,
    pub(crate) max_cooldown: Duration,
    pub(crate) initial_window: u32,
    pub(crate) slow_down: StatusSet,
    pub(crate) max_queue: usize,
    pub(crate) max_destinations: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) first_probe: Duration,
    pub(crate) max_probe: Duration,
}
