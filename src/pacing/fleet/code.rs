//! The shared controller's code, `controller.lua`, and how a Redis runs it.
//!
//! From Redis 7 on, it is loaded once as a library of functions (`FUNCTION LOAD`) and
//! called with `FCALL`: its ~40 functions are made at load, not at every call as a script
//! would make them. Before Redis 7, or where loading is not allowed, it runs as a script.

use super::store::Args;
use redis::aio::ConnectionLike;
use redis::{RedisError, RedisResult, Script};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

const SOURCE: &str = include_str!("controller.lua");

/// The code as a script, and the names it takes as a library. Both names carry the code's
/// hash: processes running different versions share a Redis without replacing each other's.
struct Code {
    script: Script,
    library: String,
    function: String,
}

static CODE: LazyLock<Code> = LazyLock::new(|| {
    let script = Script::new(SOURCE);
    let hash = &script.get_hash()[..16];
    Code {
        library: format!("tower_backoff_{hash}"),
        function: format!("tower_backoff_pace_{hash}"),
        script,
    }
});

/// Runs the controller on one Redis: as a function while that works, else as a script.
#[derive(Debug, Default)]
pub(crate) struct Runner {
    scripts_only: AtomicBool,
    /// Held while the library loads: calls that found it missing meanwhile wait, then call
    /// again, rather than each loading it (a load costs Redis about 1 ms).
    loading: tokio::sync::Mutex<()>,
}

impl Runner {
    /// A runner that never loads a library: Redis before 7, as the tests see it.
    #[cfg(test)]
    pub(crate) fn scripts_only() -> Self {
        Self {
            scripts_only: AtomicBool::new(true),
            ..Self::default()
        }
    }

    /// Runs operation `op` on the destination whose keys are `keys`, with its settings
    /// `args` (one argument: the controller parses each distinct one once), then `values`.
    pub(crate) async fn run<C: ConnectionLike>(
        &self,
        connection: &mut C,
        keys: &[String],
        op: &str,
        args: &Args,
        values: &[f64],
    ) -> RedisResult<Vec<i64>> {
        let settings = args.text();
        if !self.scripts_only.load(Ordering::Relaxed) {
            let call = || {
                let mut call = redis::cmd("FCALL");
                call.arg(&CODE.function).arg(keys.len()).arg(keys);
                call.arg(op).arg(&settings).arg(values);
                call
            };
            match self.call_function(connection, call).await {
                Err(error) if is_unknown_command(&error) || is_missing(&error) => {
                    if !self.scripts_only.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            %error,
                            "pacing: Redis cannot run functions here; the shared controller \
                             runs as a script, which costs Redis more per call"
                        );
                    }
                }
                done => return done,
            }
        }
        let mut invocation = CODE.script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        invocation.arg(op).arg(&settings).arg(values);
        invocation.invoke_async(connection).await
    }

    /// Calls the function, loading the library first if Redis lacks it. Still missing after:
    /// it cannot load here.
    async fn call_function<C: ConnectionLike>(
        &self,
        connection: &mut C,
        call: impl Fn() -> redis::Cmd,
    ) -> RedisResult<Vec<i64>> {
        let done = call().query_async(connection).await;
        if !done.as_ref().is_err_and(is_missing) {
            return done;
        }
        // Another call may have loaded it meanwhile.
        let _loading = self.loading.lock().await;
        let done = call().query_async(connection).await;
        if !done.as_ref().is_err_and(is_missing) {
            return done;
        }
        match load(connection).await {
            Ok(()) => call().query_async(connection).await,
            Err(error) if is_refused(&error) => done,
            Err(error) => Err(error),
        }
    }
}

/// Loads the library. Another process may have loaded it since: its name is its code's.
async fn load<C: ConnectionLike>(connection: &mut C) -> RedisResult<()> {
    let library = format!(
        "#!lua name={}\nlocal FUNCTION_NAME = '{}'\n{SOURCE}",
        CODE.library, CODE.function
    );
    let loaded: RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query_async(connection)
        .await;
    match loaded {
        Err(error)
            if !error
                .detail()
                .is_some_and(|d| d.ends_with("already exists")) =>
        {
            Err(error)
        }
        _ => Ok(()),
    }
}

/// Redis does not hold the function: new, restarted empty, or flushed.
fn is_missing(error: &RedisError) -> bool {
    error
        .detail()
        .is_some_and(|detail| detail.starts_with("Function not found"))
}

/// A Redis before 7 (`FCALL` unknown).
fn is_unknown_command(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error.detail().is_some_and(|detail| {
            detail.starts_with("unknown command") || detail.starts_with("unknown subcommand")
        })
}

/// Redis will not load the library for this user, ever: not allowed, or no such command.
/// Other failures (Redis busy, loading, out of memory, unreachable) pass.
fn is_refused(error: &RedisError) -> bool {
    error.code() == Some("NOPERM") || is_unknown_command(error)
}
