#![allow(dead_code)]

pub mod echo;
pub mod upstream;
