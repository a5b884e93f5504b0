//! The `text` log format: one line per event for a person at a terminal or in `journalctl`.
//!
//! ```text
//! 2026-11-25T16:11:00.123456Z  WARN object failed unit=app object=ConfigMap/shop/Bad_Name action=failed reason="…"
//! ```
//!
//! Time (UTC, RFC 3339), level, the event's message, then its fields as `key=value` (logfmt:
//! a value with spaces, quotes or `=` is quoted), then the fields of the spans it is in that the
//! event does not carry itself — so a unit's span (`unit`, `cluster`) adds the cluster to an
//! event that names the unit, and never the unit twice. No module targets (`gitward::telemetry:`)
//! and no span names: the message says what happened. An `Option` field prints its value
//! (`listen=127.0.0.1:9090`, not `Some(127.0.0.1:9090)`), and a `None` is left out.
//!
//! Span fields are kept by [`SpanFieldsLayer`], which must be installed with [`TextFormat`].

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The fields of one event or span, in the order they were recorded, as text.
#[derive(Debug, Default)]
struct Fields {
    /// The event's message (the field `message`).
    message: String,
    /// Every other field.
    pairs: Vec<(&'static str, String)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            name => match self.pairs.iter_mut().find(|(n, _)| *n == name) {
                Some(pair) => pair.1 = value,
                None => self.pairs.push((name, value)),
            },
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if text == "None" {
            return;
        }
        let text = match text.strip_prefix("Some(").and_then(|t| t.strip_suffix(')')) {
            Some(inner) => inner.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(inner).to_owned(),
            None => text,
        };
        self.push(field, text);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, super::error_chain(value));
    }
}

/// A span's fields, kept in its extensions for [`TextFormat`].
#[derive(Debug, Default)]
struct SpanFields(Fields);

/// Records each span's fields (at creation and on `Span::record`) for [`TextFormat`].
#[derive(Debug, Default)]
pub(super) struct SpanFieldsLayer;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanFieldsLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(&mut fields.0);
        }
    }
}

/// Formats events as the module doc shows.
#[derive(Debug, Clone, Copy)]
pub(super) struct TextFormat {
    /// Colour the level with ANSI escapes (stderr is a terminal).
    pub ansi: bool,
}

impl<S, N> FormatEvent<S, N> for TextFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        SystemTime.format_time(&mut writer)?;
        let level = *event.metadata().level();
        match (self.ansi, colour(level)) {
            (true, code) => write!(writer, " \x1b[{code}m{level:>5}\x1b[0m ")?,
            (false, _) => write!(writer, " {level:>5} ")?,
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        writer.write_str(&fields.message)?;
        let mut written: Vec<&str> = Vec::with_capacity(fields.pairs.len() + 2);
        for (name, value) in &fields.pairs {
            write_pair(&mut writer, name, value)?;
            written.push(name);
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(SpanFields(span_fields)) = extensions.get::<SpanFields>() else { continue };
                for (name, value) in &span_fields.pairs {
                    if !written.contains(name) {
                        write_pair(&mut writer, name, value)?;
                        written.push(name);
                    }
                }
            }
        }
        writeln!(writer)
    }
}

/// ` name=value`, the value quoted when it holds a space, a quote, `=` or nothing.
fn write_pair(writer: &mut Writer<'_>, name: &str, value: &str) -> fmt::Result {
    if value.is_empty() || value.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
        write!(writer, " {name}={value:?}")
    } else {
        write!(writer, " {name}={value}")
    }
}

/// The SGR colour code of a level: red, yellow, green, blue, magenta.
fn colour(level: Level) -> u8 {
    match level {
        Level::ERROR => 31,
        Level::WARN => 33,
        Level::INFO => 32,
        Level::DEBUG => 34,
        Level::TRACE => 35,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(f: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(SpanFieldsLayer).with(
            tracing_subscriber::fmt::layer()
                .event_format(TextFormat { ansi: false })
                .with_writer(move || writer.clone()),
        );
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_line_has_no_target_no_some_and_the_unit_once() {
        let line = logged(|| {
            let span = tracing::info_span!("unit", unit = "app", cluster = "prod");
            let _entered = span.enter();
            let listen: Option<&str> = Some("127.0.0.1:9090");
            let none: Option<u32> = None;
            tracing::warn!(unit = "app", reason = "two words", ?listen, ?none, count = 3, "object failed");
        });
        let line = line.trim_end();
        let (_, rest) = line.split_once(' ').unwrap();
        assert_eq!(
            rest, " WARN object failed unit=app reason=\"two words\" listen=127.0.0.1:9090 count=3 cluster=prod",
            "{line}"
        );
        assert!(!line.contains("gitward::") && !line.contains("Some("), "{line}");
    }
}
