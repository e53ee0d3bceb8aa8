//! tower-backoff against its peers on loopback servers: the servers, clients, loads and
//! tables of the `peers` binary (issue #30).

pub mod attempts;
pub mod clients;
pub mod load;
pub mod report;
pub mod servers;
