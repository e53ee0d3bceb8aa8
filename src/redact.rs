//! URIs as hooks, `Debug` output and `tracing` show them: redacted as OpenTelemetry's HTTP
//! conventions ask for `url.full`.
//!
//! Credentials (`user:password@`) become `REDACTED:REDACTED@`, so a reader still sees that
//! some were sent. The values of sensitive query parameters become `REDACTED`; their names
//! stay, so `?sig=abc&page=2` reads `?sig=REDACTED&page=2`.

use crate::error::ConfigError;
use http::Uri;
use http::uri::{Authority, PathAndQuery};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// The query parameters whose values are redacted by default, as in OpenTelemetry's HTTP
/// semantic conventions: signed-URL keys and signatures of AWS, Azure and Google Cloud.
///
/// Matching is case-sensitive. [`RetryLayer::with_redacted_query_params`] replaces the
/// list; chain this one to extend it instead.
///
/// [`RetryLayer::with_redacted_query_params`]: crate::RetryLayer::with_redacted_query_params
///
/// ```
/// use tower_backoff::{ExponentialBackOff, RetryLayer};
/// use tower_backoff::layer::DEFAULT_REDACTED_QUERY_PARAMS;
///
/// let names = DEFAULT_REDACTED_QUERY_PARAMS.iter().copied().chain(["api_key"]);
/// let layer = RetryLayer::new(ExponentialBackOff::default()).with_redacted_query_params(names)?;
/// # drop(layer);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
pub const DEFAULT_REDACTED_QUERY_PARAMS: &[&str] =
    &["AWSAccessKeyId", "Signature", "sig", "X-Goog-Signature"];

/// What replaces a redacted value.
const REDACTED: &str = "REDACTED";

/// The names of the query parameters whose values are redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum RedactedParams {
    /// [`DEFAULT_REDACTED_QUERY_PARAMS`]: the default needs no allocation.
    #[default]
    Default,
    /// The user's list, replacing the default.
    Custom(Arc<[Box<str>]>),
}

impl RedactedParams {
    /// The list `names`. A name that no query parameter can have (empty, or holding `&`,
    /// `=` or `#`) is an error: it would silently redact nothing.
    pub(crate) fn new<I>(names: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let names = names
            .into_iter()
            .map(|name| {
                let name: String = name.into();
                if name.is_empty() || name.contains(['&', '=', '#']) {
                    Err(ConfigError::new(
                        "redacted_query_params",
                        name,
                        "a query parameter name is not empty and holds no `&`, `=` or `#`",
                    ))
                } else {
                    Ok(name.into_boxed_str())
                }
            })
            .collect::<Result<Arc<[Box<str>]>, _>>()?;
        Ok(Self::Custom(names))
    }

    /// Whether the value of the parameter `name` is redacted (case-sensitive).
    fn contains(&self, name: &str) -> bool {
        match self {
            Self::Default => DEFAULT_REDACTED_QUERY_PARAMS.contains(&name),
            Self::Custom(names) => names.iter().any(|n| **n == *name),
        }
    }

    /// `uri` as it may be shown.
    pub(crate) fn uri<'a>(&'a self, uri: &'a Uri) -> RedactedUri<'a> {
        RedactedUri { uri, params: self }
    }
}

/// A URI as it may be shown: written without allocating, for `Debug` and `tracing`.
#[derive(Clone, Copy)]
pub(crate) struct RedactedUri<'a> {
    uri: &'a Uri,
    params: &'a RedactedParams,
}

impl<'a> RedactedUri<'a> {
    /// The host (and port) of the authority, if it carries credentials.
    fn host_after_userinfo(&self) -> Option<&'a str> {
        let authority = self.uri.authority()?;
        authority.as_str().rsplit_once('@').map(|(_, host)| host)
    }

    /// Whether the query has a value to redact.
    fn query_has_secret(&self) -> bool {
        self.uri.query().is_some_and(|query| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .any(|(name, _)| self.params.contains(name))
        })
    }

    /// The query, its sensitive values replaced.
    fn write_query(&self, query: &str, out: &mut impl fmt::Write) -> fmt::Result {
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.write_char('&')?;
            }
            match pair.split_once('=') {
                Some((name, _)) if self.params.contains(name) => {
                    out.write_str(name)?;
                    out.write_char('=')?;
                    out.write_str(REDACTED)?;
                }
                _ => out.write_str(pair)?,
            }
        }
        Ok(())
    }

    /// The redacted URI as a [`Uri`]: borrowed when there is nothing to redact.
    pub(crate) fn to_uri(self) -> Cow<'a, Uri> {
        let host = self.host_after_userinfo();
        let query = self.query_has_secret();
        if host.is_none() && !query {
            return Cow::Borrowed(self.uri);
        }
        let mut parts = self.uri.clone().into_parts();
        if let Some(host) = host {
            let authority = format!("{REDACTED}:{REDACTED}@{host}");
            parts.authority = Authority::try_from(authority).ok();
        }
        if let (true, Some(q)) = (query, self.uri.query()) {
            let mut path_and_query = format!("{}?", self.uri.path());
            // Writing to a `String` does not fail.
            let _ = self.write_query(q, &mut path_and_query);
            parts.path_and_query = PathAndQuery::try_from(path_and_query).ok();
        }
        // The parts stay valid: only letters, `:` and `=` are written into them.
        Cow::Owned(Uri::from_parts(parts).unwrap_or_default())
    }
}

impl fmt::Display for RedactedUri<'_> {
    // The layout of `Uri`'s own `Display`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(scheme) = self.uri.scheme() {
            f.write_str(scheme.as_str())?;
            f.write_str("://")?;
        }
        match (self.host_after_userinfo(), self.uri.authority()) {
            (Some(host), _) => write!(f, "{REDACTED}:{REDACTED}@{host}")?,
            (None, Some(authority)) => f.write_str(authority.as_str())?,
            (None, None) => {}
        }
        f.write_str(self.uri.path())?;
        if let Some(query) = self.uri.query() {
            f.write_str("?")?;
            self.write_query(query, f)?;
        }
        Ok(())
    }
}

impl fmt::Debug for RedactedUri<'_> {
    // As `Uri`'s `Debug`: its `Display`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(params: &RedactedParams, uri: &str) -> (String, String) {
        let uri: Uri = uri.parse().unwrap();
        let redacted = params.uri(&uri);
        (redacted.to_string(), redacted.to_uri().to_string())
    }

    #[test]
    fn credentials_and_signed_values_are_redacted_names_kept() {
        let default = RedactedParams::default();
        let (text, uri) = shown(
            &default,
            "http://user:pw@host:8080/p?AWSAccessKeyId=x&sig=y&ok=1&Sig=z&sig&=v",
        );
        let want = "http://REDACTED:REDACTED@host:8080/p?AWSAccessKeyId=REDACTED&sig=REDACTED&ok=1&Sig=z&sig&=v";
        assert_eq!(text, want);
        assert_eq!(uri, want);
        let (text, uri) = shown(&default, "/relative?X-Goog-Signature=abc");
        assert_eq!(text, "/relative?X-Goog-Signature=REDACTED");
        assert_eq!(uri, text);
    }

    #[test]
    fn nothing_to_redact_borrows() {
        let default = RedactedParams::default();
        let uri: Uri = "https://host/p?q=1".parse().unwrap();
        assert!(matches!(default.uri(&uri).to_uri(), Cow::Borrowed(_)));
        assert_eq!(default.uri(&uri).to_string(), uri.to_string());
        let connect: Uri = "host:443".parse().unwrap();
        assert_eq!(default.uri(&connect).to_string(), "host:443");
    }

    #[test]
    fn a_custom_list_replaces_the_default() {
        let custom = RedactedParams::new(["api_key"]).unwrap();
        let (text, _) = shown(&custom, "http://h/?api_key=k&sig=s");
        assert_eq!(text, "http://h/?api_key=REDACTED&sig=s");
        let none = RedactedParams::new(Vec::<String>::new()).unwrap();
        assert_eq!(shown(&none, "http://h/?sig=s").0, "http://h/?sig=s");
    }

    #[test]
    fn a_name_no_parameter_can_have_is_a_config_error() {
        for bad in ["", "api_key=", "a&b", "x#"] {
            let err = RedactedParams::new(["sig", bad]).unwrap_err();
            assert_eq!(err.field(), "redacted_query_params");
            assert_eq!(err.value(), format!("{bad:?}"));
        }
    }
}
