#![allow(dead_code)]

pub mod echo;
pub mod pacing;
pub mod upstream;
