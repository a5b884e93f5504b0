//! A preview as people read it: text for a terminal (as `gitward diff` prints), markdown for a
//! pull request's comment. Both are made from the report's texts, masked when it was made, and
//! masked again on the way out.

use super::{EffectKind, MergeAction, MergeEntry, PreviewReport, UnitChanges, UnitOutcome};
use crate::source::short_revision;
use crate::telemetry::mask::mask;

/// The hidden line a pull-request comment of a preview starts with, so that a bot finds and
/// replaces its earlier comment.
pub const MARKER: &str = "<!-- gitward-preview -->";

impl PreviewReport {
    /// One line per unit a `[[sync_set]]` directory of the revision adds (`set <name>: adds
    /// unit <unit>`) or removes (`… removes unit <unit>: its objects pruned|kept`), and per set
    /// that could not be listed (`set <name>: error: …`).
    fn set_lines(&self) -> String {
        let mut out = String::new();
        for s in &self.sets {
            if let Some(error) = &s.error {
                out.push_str(&format!("set {}: error: {error}\n", s.set));
            }
            for unit in &s.added {
                out.push_str(&format!("set {}: adds unit {unit}\n", s.set));
            }
            let fate = if s.prune_removed { "its objects pruned (prune_removed)" } else { "its objects kept" };
            for unit in &s.removed {
                out.push_str(&format!("set {}: removes unit {unit}: {fate}\n", s.set));
            }
        }
        out
    }

    /// The text `gitward preview` prints: per changed unit a head `unit <name>: revision <base>
    /// → <revision>`, then what a merge would do (each object's action and diff), the change's
    /// effect, drift, the prune; the units whose render does not change on one line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut unchanged = Vec::new();
        for u in &self.units {
            match &u.outcome {
                UnitOutcome::Unchanged { .. } => unchanged.push(u.unit.as_str()),
                UnitOutcome::Error { message } => out.push_str(&format!("unit {}: error: {message}\n", u.unit)),
                UnitOutcome::Changed(c) => {
                    out.push_str(&format!("unit {}: revision {}\n", u.unit, revisions(c)));
                    out.push_str(&unit_text(c));
                }
            }
        }
        if !unchanged.is_empty() {
            out.push_str(&format!("unchanged: {}\n", unchanged.join(", ")));
        }
        out.push_str(&self.set_lines());
        if self.failing() {
            out.push_str("status: failure (a merge would fail objects or the prune guard would refuse)\n");
        }
        mask(&out).into_owned()
    }

    /// The markdown of a pull-request comment: the hidden [`MARKER`], a heading, the status, a
    /// table of the units with their counts, then per changed unit a `<details>` block holding
    /// ` ```diff ` fences.
    pub fn markdown(&self) -> String {
        let status = match (self.failing(), self.has_changes()) {
            (true, _) => "❌ **failure**: a merge would fail objects or the prune guard would refuse",
            (false, true) => "✅ changes, none failing",
            (false, false) => "✅ no changes",
        };
        let mut out = format!(
            "{MARKER}\n## gitward preview of `{}`\n\nStatus: {status}\n\n| unit | create | configure | would fail | \
             added | changed | removed | prune | drift |\n|---|---|---|---|---|---|---|---|---|\n",
            short_revision(&self.revision)
        );
        let mut details = String::new();
        for u in &self.units {
            match &u.outcome {
                UnitOutcome::Unchanged { .. } => {
                    out.push_str(&format!("| `{}` | unchanged | | | | | | | |\n", u.unit));
                }
                UnitOutcome::Error { message } => {
                    out.push_str(&format!("| `{}` | error | | | | | | | |\n", u.unit));
                    details.push_str(&format!(
                        "\n<details><summary>{} (error)</summary>\n\n```\n{}\n```\n\n</details>\n",
                        u.unit,
                        fenced(message)
                    ));
                }
                UnitOutcome::Changed(c) => {
                    out.push_str(&table_row(&u.unit, c));
                    details.push_str(&format!(
                        "\n<details><summary>{}: {}</summary>\n\n```diff\n{}```\n\n</details>\n",
                        u.unit,
                        revisions(c),
                        fenced(&unit_text(c))
                    ));
                }
            }
        }
        let sets = self.set_lines();
        if !sets.is_empty() {
            out.push_str(&format!("\n```\n{}```\n", fenced(&sets)));
        }
        out.push_str(&details);
        mask(&out).into_owned()
    }
}

/// `<base> → <revision>`, short; `none` for a unit that never applied.
fn revisions(c: &UnitChanges) -> String {
    let base = c.base.as_deref().map_or_else(|| "none".to_owned(), short_revision);
    format!("{base} → {}", short_revision(&c.revision))
}

/// The table row of a changed unit: its counts.
fn table_row(unit: &str, c: &UnitChanges) -> String {
    let merge = |a: MergeAction| c.merge.iter().filter(|m| m.action == a).count();
    let effect = |k: EffectKind| c.effect.iter().filter(|e| e.kind == k).count();
    let prune = match &c.prune.refused {
        Some(_) => "refused".to_owned(),
        None => c.prune.prunes.len().to_string(),
    };
    format!(
        "| `{unit}` | {} | {} | {} | {} | {} | {} | {prune} | {} |\n",
        merge(MergeAction::Create),
        merge(MergeAction::Configure),
        merge(MergeAction::WouldFail),
        effect(EffectKind::Added),
        effect(EffectKind::Changed),
        effect(EffectKind::Removed),
        c.drift.len()
    )
}

/// One changed unit's sections, as text: merge, effect, drift, prune.
fn unit_text(c: &UnitChanges) -> String {
    let mut out = String::from("merge would do:\n");
    for m in c.merge.iter().filter(|m| m.action != MergeAction::WouldFail) {
        out.push_str(&merge_line(m));
    }
    out.push_str(&format!("  unchanged: {} objects\n", c.unchanged));
    let failed: Vec<&MergeEntry> = c.merge.iter().filter(|m| m.action == MergeAction::WouldFail).collect();
    if !failed.is_empty() {
        out.push_str("would fail:\n");
        failed.iter().for_each(|m| out.push_str(&format!("  {}: {}\n", m.object, m.diff)));
    }
    out.push_str("effect of the change (base → revision):\n");
    for e in &c.effect {
        let kind = match e.kind {
            EffectKind::Added => "added",
            EffectKind::Changed => "changed",
            EffectKind::Removed => "removed",
        };
        out.push_str(&format!("  {kind} {}\n", e.object));
    }
    if !c.drift.is_empty() {
        out.push_str("drift (the live cluster differs where the change does not touch; not the change's doing):\n");
        c.drift.iter().for_each(|m| out.push_str(&merge_line(m)));
    }
    out.push_str(&prune_text(c));
    for w in &c.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// `  <action> <object>` and its diff.
fn merge_line(m: &MergeEntry) -> String {
    let action = match m.action {
        MergeAction::Create => "create",
        MergeAction::Configure => "configure",
        MergeAction::WouldFail => "would fail",
    };
    format!("  {action} {}\n{}", m.object, m.diff)
}

/// The prune lines: each prune, each member kept with its refusal, the release, the guard's
/// refusal.
fn prune_text(c: &UnitChanges) -> String {
    let p = &c.prune;
    let mut out = String::new();
    if p.disabled {
        out.push_str("prune: disabled for this unit (prune = false)\n");
    }
    p.prunes.iter().for_each(|o| out.push_str(&format!("prune {o}\n")));
    p.not_pruned.iter().for_each(|(o, r)| out.push_str(&format!("not pruned {o}: {r}\n")));
    if let Some(o) = &p.released {
        out.push_str(&format!("release {o}: create_namespace keeps it, never deleted\n"));
    }
    if let Some(reason) = &p.refused {
        out.push_str(&format!("prune refused: {reason}\n"));
    }
    out
}

/// `text` safe inside a ``` fence: a line of backticks cannot close it early.
fn fenced(text: &str) -> String {
    text.replace("```", "ʼʼʼ")
}
