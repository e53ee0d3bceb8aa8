//! Choosing retry settings per request.

use super::settings::RetrySettings;
use crate::classify::RequestHead;
use crate::error::ConfigError;
use http::Method;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

type RouteFn = dyn Fn(&RequestHead<'_>) -> Option<RetrySettings> + Send + Sync;

#[derive(Clone)]
enum Route {
    Prefix {
        method: Option<Method>,
        prefix: Box<str>,
        settings: RetrySettings,
    },
    Fn(Arc<RouteFn>),
}

/// A route table: the first matching route gives a request its [`RetrySettings`];
/// requests matching none use the layer's default settings.
///
/// A prefix matches whole path segments: `/api` matches `/api` and `/api/users` but not
/// `/apiary` (a prefix ending in `/` matches any path starting with it). A
/// [`RetrySettings`] value in a request's extensions overrides the table for that request.
///
/// Paths are matched as servers route them, so that no spelling escapes its route:
/// escaped unreserved characters are decoded (`%63` is `c`), empty and dot segments
/// resolved, and path parameters dropped (`/a;jsessionid=1/b` is `/a/b`, as servlet
/// containers route it). Escaped delimiters such as `%2F` and `%3B` stay as they are.
/// Matching is case-sensitive: `/Payments` is not `/payments`, as for most servers.
///
/// ```
/// use http::Method;
/// use tower_backoff::{RetrySettings, Routes};
///
/// let routes = Routes::new()
///     // Payments: never retried, even GETs.
///     .route_any("/payments", RetrySettings::disabled())?
///     // Uploads: the server deduplicates by body hash, so POSTs may be retried.
///     .route(Method::POST, "/uploads", RetrySettings::new().with_retry_non_idempotent(true))?
///     // Anything carrying a trace header gets more attempts.
///     .route_fn(|head| {
///         head.headers()
///             .contains_key("x-debug")
///             .then(|| RetrySettings::new().with_max_attempts(5).unwrap())
///     });
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone, Default)]
pub struct Routes(Arc<Vec<Route>>);

impl Routes {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(mut self, route: Route) -> Self {
        // Copy-on-write: a clone of this table keeps its own routes.
        Arc::make_mut(&mut self.0).push(route);
        self
    }

    fn prefix(
        self,
        method: Option<Method>,
        prefix: &str,
        settings: RetrySettings,
    ) -> Result<Self, ConfigError> {
        if !prefix.starts_with('/') {
            return Err(ConfigError::new(
                "route",
                prefix,
                "a path prefix must start with '/'",
            ));
        }
        if prefix.contains(';') {
            // Paths are matched without their parameters: such a prefix would never match.
            return Err(ConfigError::new(
                "route",
                prefix,
                "a path prefix cannot hold ';' path parameters",
            ));
        }
        Ok(self.push(Route::Prefix {
            method,
            prefix: prefix.into(),
            settings,
        }))
    }

    /// Requests with `method` whose path starts with `prefix` use `settings`.
    ///
    /// A `prefix` not starting with `/`, or holding a `;`, is a [`ConfigError`].
    pub fn route(
        self,
        method: Method,
        prefix: &str,
        settings: RetrySettings,
    ) -> Result<Self, ConfigError> {
        self.prefix(Some(method), prefix, settings)
    }

    /// Requests of any method whose path starts with `prefix` use `settings`.
    ///
    /// A `prefix` not starting with `/`, or holding a `;`, is a [`ConfigError`].
    pub fn route_any(self, prefix: &str, settings: RetrySettings) -> Result<Self, ConfigError> {
        self.prefix(None, prefix, settings)
    }

    /// Requests for which `f` returns settings use them.
    pub fn route_fn<F>(self, f: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Option<RetrySettings> + Send + Sync + 'static,
    {
        self.push(Route::Fn(Arc::new(f)))
    }

    /// The number of routes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the table has no route.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The settings of the first route matching `head`, if any.
    pub fn find(&self, head: &RequestHead<'_>) -> Option<RetrySettings> {
        // Normalised once, and only if a prefix route needs it.
        let mut path = None;
        self.0.iter().find_map(|route| match route {
            Route::Prefix {
                method,
                prefix,
                settings,
            } => (method.as_ref().is_none_or(|m| m == head.method)
                && path_has_prefix(
                    path.get_or_insert_with(|| normalize_path(head.uri.path())),
                    prefix,
                ))
            .then(|| settings.clone()),
            Route::Fn(f) => f(head),
        })
    }
}

/// `path` as the server will route it: percent-encoded unreserved characters decoded
/// (`%63` is `c`), path parameters dropped (`/a;x=1/b;y` is `/a/b`), empty segments
/// dropped (`//a` is `/a`) and dot segments resolved (`/a/./b/../c` is `/a/c`), so that
/// no spelling of a path escapes its route's settings. Borrows when there is nothing to do.
fn normalize_path(path: &str) -> Cow<'_, str> {
    if !(path.contains("//") || path.contains("/.") || path.contains('%') || path.contains(';')) {
        return Cow::Borrowed(path);
    }
    let decoded = decode_unreserved(path);
    let mut segments: Vec<&str> = Vec::new();
    // A path ending in an empty or dot segment ends with '/' once resolved (RFC 3986 §5.2.4).
    let mut ends_with_slash = false;
    for raw in decoded.split('/') {
        // Parameters are dropped before dot segments: `..;x` is `..` to a servlet container.
        let segment = raw.split_once(';').map_or(raw, |(segment, _)| segment);
        ends_with_slash = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() || (ends_with_slash && !segments.is_empty()) {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Decodes `%XX` escapes of unreserved characters (RFC 3986 §2.3); others stay encoded.
fn decode_unreserved(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = path.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
            && (byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~'))
        {
            out.push(char::from(byte));
            i += 3;
            continue;
        }
        // Not an escape of an unreserved character: copy the character as it is.
        let ch = path[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}

fn path_has_prefix(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for route in self.0.iter() {
            match route {
                Route::Prefix { method, prefix, .. } => list.entry(&format_args!(
                    "{} {prefix}",
                    method.as_ref().map_or("*", |m| m.as_str())
                )),
                Route::Fn(_) => list.entry(&format_args!("<fn>")),
            };
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_segments() {
        assert!(path_has_prefix("/api", "/api"));
        assert!(path_has_prefix("/api/users", "/api"));
        assert!(!path_has_prefix("/apiary", "/api"));
        assert!(path_has_prefix("/api/x", "/api/"));
        assert!(!path_has_prefix("/ap", "/api"));
        assert!(path_has_prefix("/anything", "/"));
    }

    #[test]
    fn other_spellings_of_a_path_get_its_route() {
        for (path, normal) in [
            ("/checkout", "/checkout"),
            ("//checkout", "/checkout"),
            ("/./checkout", "/checkout"),
            ("/%63heckout", "/checkout"),
            ("/api/../checkout/", "/checkout/"),
            ("/a%2Fb", "/a%2Fb"),
            ("/%", "/%"),
            ("/caf\u{e9}/%7e", "/caf\u{e9}/~"),
            ("/..", "/"),
            ("", ""),
            ("/a/.", "/a/"),
            ("/payments;jsessionid=abc", "/payments"),
            ("/payments/;x/123", "/payments/123"),
            ("/a;x=1/b;y", "/a/b"),
            ("/a/b;y/", "/a/b/"),
            ("/payments/;x", "/payments/"),
            ("/public/..;/payments", "/payments"),
            ("/a/.;x/b", "/a/b"),
            ("/a%3Bx/b", "/a%3Bx/b"),
            (";x", "/"),
        ] {
            assert_eq!(normalize_path(path), normal, "{path}");
        }
        let routes = Routes::new()
            .route_any("/checkout", RetrySettings::disabled())
            .unwrap();
        for path in [
            "//checkout",
            "/./checkout",
            "/%63heckout",
            "/x/../checkout/1",
        ] {
            let req = http::Request::post(path).body(()).unwrap();
            assert_eq!(
                routes.find(&RequestHead::of(&req)),
                Some(RetrySettings::disabled()),
                "{path}"
            );
        }
    }

    #[test]
    fn first_match_wins_and_method_must_match() {
        let a = RetrySettings::new().with_max_attempts(2).unwrap();
        let b = RetrySettings::new().with_max_attempts(7).unwrap();
        let routes = Routes::new()
            .route(Method::GET, "/a", a.clone())
            .unwrap()
            .route_any("/", b.clone())
            .unwrap();
        let get = http::Request::get("/a/1").body(()).unwrap();
        let post = http::Request::post("/a/1").body(()).unwrap();
        assert_eq!(routes.find(&RequestHead::of(&get)), Some(a));
        assert_eq!(routes.find(&RequestHead::of(&post)), Some(b));
    }

    #[test]
    fn adding_to_a_clone_leaves_the_original_alone() {
        let one = Routes::new().route_fn(|_| None);
        let two = one.clone().route_fn(|_| None);
        assert_eq!((one.len(), two.len()), (1, 2));
    }

    #[test]
    fn a_prefix_without_slash_is_a_config_error() {
        let err = Routes::new()
            .route_any("api", RetrySettings::new())
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("route", "\"api\""));
    }

    #[test]
    fn a_prefix_with_path_parameters_is_a_config_error() {
        let err = Routes::new()
            .route_any("/api;v=1", RetrySettings::new())
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("route", "\"/api;v=1\""));
    }
}
