//! tower-backoff against its peers on loopback servers and real rate limiters: the
//! servers, clients, loads and tables of the `peers` binary (issue #30), and the matrix of
//! the `matrix` binary (issue #29).

pub mod attempts;
pub mod clients;
pub mod load;
pub mod matrix;
pub mod report;
pub mod servers;
