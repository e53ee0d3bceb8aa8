//! Which destination a request goes to.

use http::Request;
use http::uri::Authority;
use std::fmt;

/// A destination: the request URI's authority, else its `Host` header, without any
/// userinfo (`user:password@`), so credentials never become a key, a log line or a
/// tracing field. `None` is one destination for every request that names none (e.g. a
/// service bound to one server).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key(Option<Authority>);

impl Key {
    /// The destination of `request`.
    pub(crate) fn of<B>(request: &Request<B>) -> Self {
        if let Some(authority) = request.uri().authority() {
            return Self::from_authority(authority);
        }
        let host = request
            .headers()
            .get(http::header::HOST)
            .and_then(|host| Authority::try_from(host.as_bytes()).ok());
        Self(host.as_ref().and_then(host_and_port))
    }

    /// The destination named by `authority`.
    pub(crate) fn from_authority(authority: &Authority) -> Self {
        Self(host_and_port(authority))
    }
}

/// `authority` without its userinfo.
fn host_and_port(authority: &Authority) -> Option<Authority> {
    match authority.as_str().rsplit_once('@') {
        None => Some(authority.clone()),
        Some((_, host)) => Authority::try_from(host).ok(),
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(authority) => f.write_str(authority.as_str()),
            None => f.write_str("(no authority)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_authority_else_the_host_header_without_userinfo() {
        let key = |request: Request<()>| Key::of(&request).to_string();
        let absolute = Request::get("http://a.example:8080/x").body(()).unwrap();
        assert_eq!(key(absolute), "a.example:8080");
        let relative = Request::get("/x")
            .header("host", "b.example")
            .body(())
            .unwrap();
        assert_eq!(key(relative), "b.example");
        let bare = Request::get("/x").body(()).unwrap();
        assert_eq!(Key::of(&bare), Key(None));

        let secret = Request::get("http://user:s3cret@c.example/x")
            .body(())
            .unwrap();
        let plain = Request::get("http://c.example/y").body(()).unwrap();
        assert_eq!(Key::of(&secret), Key::of(&plain));
        assert_eq!(key(secret.clone()), "c.example");
        assert!(!format!("{:?}", Key::of(&secret)).contains("s3cret"));
        let host_secret = Request::get("/x")
            .header("host", "u:s3cret@d.example")
            .body(())
            .unwrap();
        assert_eq!(key(host_secret), "d.example");
    }
}
