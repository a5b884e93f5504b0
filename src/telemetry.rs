//! Logging: `tracing` set-up (`text` or `json` on stderr) and [`error_chain`], an error and its
//! causes as one line. It knows no other module of gitward (it sits at the bottom of the
//! layering): the events that report a sync are written by `observe::log`.
//!
//! Files: `text` (the text format: no module targets, span fields not repeated), [`mask`] (the
//! process-wide set of decrypted values, masked in everything gitward writes), [`Masked`] (text
//! made through that mask, the only error text the places a person or a probe reads take),
//! [`url`] (the secrets of URLs — userinfo, credential query values — redacted wherever a URL
//! is shown).

pub mod mask;
mod masked;
mod text;
pub mod url;

pub use masked::Masked;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (default): `TIME LEVEL message key=value…`.
    #[default]
    Text,
    /// One JSON object per event, for log pipelines.
    Json,
}

/// Installs the global subscriber writing to stderr, every event masked ([`mask`]). The level comes from `RUST_LOG`
/// (default `info`). kube's client logs every failed request at error on its own
/// (`kube_client`), and kube's watcher each failed list or watch with the debug dump of its
/// `Status` (`kube_runtime::watcher`); gitward reports those failures itself, once, with the
/// server named, so both are silenced unless `RUST_LOG` names them. A panic's message goes through the
/// same mask (the default hook writes it to stderr unmasked). Calling it twice is harmless
/// (the second call does nothing).
pub fn init(format: LogFormat) {
    mask_panics();
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let mut filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    for target in ["kube_client", "kube_runtime::watcher"] {
        if !directives.contains(target) {
            filter = filter.add_directive(format!("{target}=off").parse().expect("a valid directive"));
        }
    }
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Text => registry
            .with(text::SpanFieldsLayer)
            .with(
                tracing_subscriber::fmt::layer()
                    .event_format(text::TextFormat { ansi })
                    .with_writer(mask::MaskedStderr),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().flatten_event(true).with_writer(mask::MaskedStderr))
            .try_init(),
    };
}

/// Replaces the panic hook with one that prints the same line as the default hook
/// (`thread '<name>' panicked at <file>:<line>:<col>:` and the message) with every decrypted
/// value masked ([`mask::mask`]), and the backtrace when `RUST_BACKTRACE` asks for one.
/// Installed once.
fn mask_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("<unnamed>");
            let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("Box<dyn Any>");
            let mut line = format!("thread '{name}' panicked{at}:\n{message}\n");
            let trace = std::backtrace::Backtrace::capture();
            if trace.status() == std::backtrace::BacktraceStatus::Captured {
                line.push_str(&format!("stack backtrace:\n{trace}\n"));
            }
            let _ = std::io::Write::write_all(&mut std::io::stderr(), mask::mask(&line).as_bytes());
        }));
    });
}

/// The error and its sources, `: `-separated: the chain printed once, at the top (STYLE.md,
/// Errors). A source whose text its error already printed is left out (kube's, hyper's and
/// kube-runtime's errors print their source and return it too), and a kube API error reads
/// `<message> (<reason>, <code>)` — wherever it appears in the chain, also inside an error
/// that printed it — rather than kube's debug dump of the whole `Status`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = describe(e);
    let mut source = if is_whole(e) { None } else { e.source() };
    while let Some(s) = source {
        let (raw, part) = (s.to_string(), describe(s));
        if !raw.is_empty() && text.contains(&raw) {
            text = text.replace(&raw, &part);
        } else if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = if is_whole(s) { None } else { s.source() };
    }
    text
}

/// Whether [`describe`] prints `e` with everything its sources would add.
fn is_whole(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(_) | kube::Error::Service(_)))
}

/// [`error_chain`] of an error about `unit`, without the `<unit>: ` or `unit <unit>: ` that
/// source errors start with, for an event or a line that names the unit already.
pub fn unit_error(unit: &str, e: &(dyn std::error::Error + 'static)) -> String {
    let text = error_chain(e);
    let rest = text.strip_prefix("unit ").unwrap_or(&text);
    match rest.strip_prefix(unit).and_then(|rest| rest.strip_prefix(": ")) {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

/// One error of a chain as text: a kube API error as `<message> (<reason>, <code>)`, a kube
/// transport error as its cause (the client's layer names the API server there), any other as
/// its `Display`.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => {
            let reason = if status.reason.is_empty() { String::new() } else { format!("{}, ", status.reason) };
            format!("{} ({reason}{})", status.message, status.code)
        }
        Some(kube::Error::Service(inner)) => error_chain(inner.as_ref()),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("discovery of v1")]
    struct Outer {
        source: kube::Error,
    }

    /// A transport error as the client's layer gives it: its own sentence, no source.
    #[derive(Debug, Clone, thiserror::Error)]
    #[error("no answer from https://127.0.0.1:1: connection refused")]
    struct NoAnswer;

    /// An error about a unit, as the engine's start with the unit's name.
    #[derive(Debug, thiserror::Error)]
    #[error("app: reference \"main\" not found")]
    struct RefNotFound;

    #[test]
    fn the_chain_prints_each_cause_once_and_api_errors_without_the_debug_dump() {
        let status = kube::core::Status::failure("namespaces \"shop\" not found", "NotFound").with_code(404);
        let e = Outer { source: kube::Error::Api(Box::new(status)) };
        assert_eq!(error_chain(&e), "discovery of v1: namespaces \"shop\" not found (NotFound, 404)");
        let failed = NoAnswer;
        let e = Outer { source: kube::Error::Service(Box::new(failed.clone())) };
        assert_eq!(error_chain(&e), format!("discovery of v1: {failed}"));
        assert_eq!(error_chain(&e).matches("connection refused").count(), 1, "{}", error_chain(&e));
        // An error that prints its kube source inline gets the readable form there.
        let status = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        let e = kube::runtime::watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        assert_eq!(error_chain(&e), "failed to perform initial object list: forbidden (Forbidden, 403)");
    }

    #[test]
    fn a_unit_error_does_not_repeat_the_unit() {
        let e = RefNotFound;
        assert!(unit_error("app", &e).starts_with("reference \"main\" not found"), "{}", unit_error("app", &e));
        assert!(unit_error("other", &e).starts_with("app: "));
    }
}
