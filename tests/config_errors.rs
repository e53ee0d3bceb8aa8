//! Invalid configuration of the retry layer is a typed error naming the field and the value.

mod support;

use http::StatusCode;
use std::time::Duration;
use support::scripted::{exact, layer};
use support::time::SEC;
use tower_backoff::Routes;
use tower_backoff::limits::Limits;

// ---- invalid configuration ----

#[test]
fn invalid_configuration_is_a_typed_error() {
    let cases = [
        exact().with_max_attempts(0).unwrap_err(),
        exact().with_max_elapsed(Duration::ZERO).unwrap_err(),
        exact().with_max_retry_after(Duration::ZERO).unwrap_err(),
        exact().with_status(StatusCode::OK).unwrap_err(),
        Limits::new(0, SEC).unwrap_err(),
        Routes::new().route_any("no-slash", exact()).unwrap_err(),
        layer()
            .with_redacted_query_params(["sig", "api_key="])
            .unwrap_err(),
    ];
    let fields: Vec<_> = cases
        .iter()
        .map(|e| (e.field(), e.value().to_owned()))
        .collect();
    assert_eq!(
        fields,
        [
            ("max_attempts", "0".to_owned()),
            ("max_elapsed", "0ns".to_owned()),
            ("max_retry_after", "0ns".to_owned()),
            ("retry_status", "200".to_owned()),
            ("max_attempts", "0".to_owned()),
            ("route", "\"no-slash\"".to_owned()),
            ("redacted_query_params", "\"api_key=\"".to_owned()),
        ]
    );
}
