//! tower-backoff against its peers on loopback servers and real rate limiters. The
//! servers, clients, loads and tables serve the `peers` binary (issue #30). The matrix is
//! the `matrix` binary's (issue #29).

pub mod attempts;
pub mod clients;
pub mod load;
pub mod matrix;
pub mod report;
pub mod servers;
