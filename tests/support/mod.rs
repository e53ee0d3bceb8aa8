#![allow(dead_code)]

pub mod backoffs;
pub mod echo;
pub mod events;
pub mod fairness;
pub mod limiters;
pub mod pacing;
pub mod quick_start;
#[cfg(feature = "redis")]
pub mod redis;
pub mod scripted;
pub mod sliding_count;
pub mod time;
pub mod upstream;
