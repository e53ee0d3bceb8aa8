//! The borrowed view of a request that classifiers and routes look at.

use http::{Extensions, HeaderMap, Method, Uri};

/// A borrowed view of a request's head, given to classifiers and to
/// [`Routes::route_fn`](crate::Routes::route_fn) closures.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The view of `req`'s head.
    pub fn of<B>(req: &'a http::Request<B>) -> Self {
        Self {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }

    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The request headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request extensions.
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}
