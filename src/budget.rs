//! Placeholder: filled in by its owner.
mod shared;
pub use shared::RetryBudget;
