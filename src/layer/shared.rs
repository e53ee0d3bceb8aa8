//! What every request of a layer shares: one `Arc`, so cloning the policy per request
//! copies a pointer.

use super::hook::{OnGiveUp, OnRetry};
use super::routes::Routes;
use super::settings::RetrySettings;
use crate::backoff::jitter::Jitter;
use crate::budget::{RetryBudget, RetryThrottle};
use crate::classify::ClockFn;
use crate::classify::{Classify, HttpClassifier};
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) settings: RetrySettings,
    pub(crate) routes: Routes,
    pub(crate) classifier: Arc<dyn Classify>,
    pub(crate) on_retry: Arc<dyn OnRetry + Send + Sync>,
    pub(crate) on_give_up: Arc<dyn OnGiveUp + Send + Sync>,
    pub(crate) wall_clock: Option<Arc<ClockFn>>,
    pub(crate) retry_budget: Option<RetryBudget>,
    pub(crate) retry_throttle: Option<RetryThrottle>,
    pub(crate) jitter: Jitter,
    pub(crate) stats: bool,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            settings: RetrySettings::default(),
            routes: Routes::default(),
            classifier: Arc::new(HttpClassifier::new()),
            on_retry: Arc::new(()),
            on_give_up: Arc::new(()),
            wall_clock: None,
            retry_budget: Some(RetryBudget::default()),
            retry_throttle: None,
            jitter: Jitter::from_entropy(),
            stats: true,
        }
    }
}
