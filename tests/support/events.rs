//! The `tracing` events a piece of code emits on this thread, as `LEVEL message` text.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records the events of this thread until dropped (a current-thread runtime's tasks
/// included).
pub struct Recording {
    events: Events,
    _default: tracing::subscriber::DefaultGuard,
}

impl Recording {
    pub fn start() -> Self {
        let events = Events::default();
        let _default = tracing::subscriber::set_default(events.clone());
        Self { events, _default }
    }

    /// The events so far, in order.
    pub fn seen(&self) -> Vec<String> {
        self.events.0.lock().unwrap().clone()
    }

    /// How many events so far begin with `start` (`"WARN pacing: ..."`).
    pub fn count(&self, start: &str) -> usize {
        let events = self.events.0.lock().unwrap();
        events
            .iter()
            .filter(|event| event.starts_with(start))
            .count()
    }
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

/// An event's message.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Events {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let line = format!("{} {}", event.metadata().level(), message.0);
        self.0.lock().unwrap().push(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
