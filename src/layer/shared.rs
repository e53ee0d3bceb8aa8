//! What every request of a layer shares: one `Arc`, so cloning the policy per request
//! copies a pointer.

use super::hook::{OnGiveUp, OnRetry};
use super::routes::Routes;
use super::settings::RetrySettings;
use crate::backoff::jitter::Jitter;
use crate::budget::{LayerBudget, RetryQuota, RetryThrottle};
use crate::classify::{Attempt, Classify, HttpClassifier, Outcome, ResponseHead, StatusSet};
use crate::redact::RedactedParams;
use crate::time::ClockFn;
use http::StatusCode;
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) settings: RetrySettings,
    pub(crate) routes: Routes,
    pub(crate) classifier: Classifier,
    pub(crate) on_retry: Arc<dyn OnRetry + Send + Sync>,
    pub(crate) on_give_up: Arc<dyn OnGiveUp + Send + Sync>,
    pub(crate) wall_clock: Option<Arc<ClockFn>>,
    pub(crate) retry_budget: Option<LayerBudget>,
    pub(crate) retry_throttle: Option<RetryThrottle>,
    pub(crate) jitter: Jitter,
    pub(crate) stats: bool,
    /// The query parameters whose values hooks, `Debug` and `tracing` do not show.
    pub(crate) redacted: RedactedParams,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            settings: RetrySettings::default(),
            routes: Routes::default(),
            classifier: Classifier::Default(HttpClassifier::new()),
            on_retry: Arc::new(()),
            on_give_up: Arc::new(()),
            wall_clock: None,
            retry_budget: Some(LayerBudget::Quota(RetryQuota::default())),
            retry_throttle: None,
            jitter: Jitter::from_entropy(),
            stats: true,
            redacted: RedactedParams::default(),
        }
    }
}

/// The layer's classifier. The default one is held as itself, so that the response every
/// request gets is judged without a virtual call (most are judged by one status lookup).
#[derive(Clone)]
pub(crate) enum Classifier {
    Default(HttpClassifier),
    Custom(Arc<dyn Classify>),
}

impl Classifier {
    /// What a response means. `attempt` is only built when needed: by the default
    /// classifier, only for a retried status.
    #[inline]
    pub(crate) fn classify_response<'a>(
        &self,
        statuses: &StatusSet,
        attempt: impl FnOnce() -> Attempt<'a>,
        res: &ResponseHead<'_>,
    ) -> Outcome {
        match self {
            Self::Default(http) => http.response_outcome(statuses, attempt, res),
            Self::Custom(custom) => custom.classify_response(&attempt(), res),
        }
    }

    /// Whether a response with `status` is, without a doubt, not to be retried: the
    /// default classifier retries only the statuses in `statuses`. (`false` for a custom
    /// classifier, which must be asked.) Lets most responses end their request without
    /// an [`Outcome`] built.
    #[inline]
    pub(crate) fn never_retries(&self, statuses: &StatusSet, status: StatusCode) -> bool {
        matches!(self, Self::Default(_)) && !statuses.contains(status)
    }

    /// The classifier, for what is not on every request's path.
    pub(crate) fn as_dyn(&self) -> &dyn Classify {
        match self {
            Self::Default(http) => http,
            Self::Custom(custom) => &**custom,
        }
    }
}
