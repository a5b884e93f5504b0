//! A chart version constraint in Helm's syntax (Masterminds/semver v3, `constraints.go`), as
//! `helm install --version` and `helm dependency build` read it: `>=1.19.0 <1.20.0`,
//! `~1.2`, `^0.4`, `1.2.x`, `1.2 - 1.4.5`, `>=1 <2 || >=3`, `!=1.2.3`.
//!
//! The Rust `semver` crate's `VersionReq` reads another dialect (a bare `1.2.3` is `^1.2.3`
//! there, exact here; it wants commas, knows no `||`, `-` ranges or `!=`) and another
//! pre-release rule, so the operators are implemented here over [`semver::Version`].

use std::cmp::Ordering;
use std::fmt;

use semver::{Prerelease, Version};

/// A parsed constraint: groups joined by `||`, each a list of comparisons that must all hold.
///
/// Pre-releases (`1.5.0-rc.1`) satisfy a group only when one of its comparisons names a
/// pre-release itself (`>=1.5.0-0`), Masterminds' rule: a plain range never picks an
/// unreleased version. The empty text and `*` match every release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionConstraint {
    text: String,
    groups: Vec<Vec<Cmp>>,
}

/// One primitive comparison with a full version.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cmp {
    Eq(Version),
    Ne(Version),
    Gt(Version),
    Ge(Version),
    Lt(Version),
    Le(Version),
    /// Outside `[low, high)`: `!=` of a wildcard version.
    Outside(Version, Version),
}

/// A version as written in a constraint: missing or `x`/`X`/`*` parts are wildcards.
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

impl Partial {
    fn dirty(&self) -> bool {
        self.minor.is_none() || self.patch.is_none()
    }

    /// The lowest version this names (wildcards as 0).
    fn low(&self) -> Version {
        let mut v = Version::new(self.major.unwrap_or(0), self.minor.unwrap_or(0), self.patch.unwrap_or(0));
        v.pre = self.pre.clone();
        v
    }

    /// The first version past the wildcard range (`1.2.x` → `1.3.0`, `1.x` → `2.0.0`); for a
    /// full version, the next patch.
    fn high(&self) -> Version {
        match (self.major, self.minor, self.patch) {
            (None, ..) => Version::new(u64::MAX, 0, 0),
            (Some(major), None, _) => Version::new(major + 1, 0, 0),
            (Some(major), Some(minor), None) => Version::new(major, minor + 1, 0),
            (Some(major), Some(minor), Some(patch)) => Version::new(major, minor, patch + 1),
        }
    }
}

impl VersionConstraint {
    /// Parses `text` (see the type). Errors: a message naming the part that is not a
    /// comparison (`unknown operator`, `not a version`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut groups = Vec::new();
        for group in text.split("||") {
            groups.push(parse_group(group)?);
        }
        Ok(Self { text: text.trim().to_owned(), groups })
    }

    /// The constraint as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.groups.iter().any(|group| {
            let pre_allowed = group.iter().any(|c| !c.version().pre.is_empty());
            (version.pre.is_empty() || pre_allowed) && group.iter().all(|c| c.holds(version))
        })
    }

    /// The newest of `versions` (their text as published) that the constraint selects, as
    /// Helm's `IndexFile.Get` selects it: a version spelt exactly as the constraint wins;
    /// else the highest that matches. Texts that are not versions are passed over.
    pub fn select<'a>(&self, versions: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        let mut best: Option<(Version, &'a str)> = None;
        for text in versions {
            if text == self.text {
                return Some(text);
            }
            let Some(version) = lenient_version(text) else { continue };
            if self.matches(&version) && best.as_ref().is_none_or(|(b, _)| cmp(&version, b) == Ordering::Greater) {
                best = Some((version, text));
            }
        }
        best.map(|(_, text)| text)
    }
}

impl fmt::Display for VersionConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.text.is_empty() { "*" } else { &self.text })
    }
}

/// A published version read as Masterminds' `NewVersion` reads it: an optional `v`, missing
/// minor or patch as 0. `None` when it is not a version.
pub fn lenient_version(text: &str) -> Option<Version> {
    let text = text.trim().trim_start_matches(['v', 'V']);
    if let Ok(v) = Version::parse(text) {
        return Some(v);
    }
    let split = text.find(['-', '+']).unwrap_or(text.len());
    let (core, rest) = text.split_at(split);
    let padded = match core.split('.').count() {
        1 => format!("{core}.0.0{rest}"),
        2 => format!("{core}.0{rest}"),
        _ => return None,
    };
    Version::parse(&padded).ok()
}

/// Version order without build metadata (SemVer 2.0.0 §10).
fn cmp(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
}

impl Cmp {
    fn version(&self) -> &Version {
        match self {
            Self::Eq(v) | Self::Ne(v) | Self::Gt(v) | Self::Ge(v) | Self::Lt(v) | Self::Le(v) => v,
            Self::Outside(low, _) => low,
        }
    }

    fn holds(&self, v: &Version) -> bool {
        match self {
            Self::Eq(c) => cmp(v, c) == Ordering::Equal,
            Self::Ne(c) => cmp(v, c) != Ordering::Equal,
            Self::Gt(c) => cmp(v, c) == Ordering::Greater,
            Self::Ge(c) => cmp(v, c) != Ordering::Less,
            Self::Lt(c) => cmp(v, c) == Ordering::Less,
            Self::Le(c) => cmp(v, c) != Ordering::Greater,
            Self::Outside(low, high) => cmp(v, low) == Ordering::Less || cmp(v, high) != Ordering::Less,
        }
    }
}

const OPERATORS: [&str; 11] = ["!=", ">=", "=>", "<=", "=<", "~>", ">", "<", "=", "~", "^"];

/// One AND group: comparisons separated by spaces or commas; an operator may stand apart from
/// its version (`>= 1.2`); `a - b` is a hyphen range.
fn parse_group(group: &str) -> Result<Vec<Cmp>, String> {
    let tokens: Vec<&str> = group.split([' ', ',', '\t']).filter(|t| !t.is_empty()).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let mut term = tokens[i].to_owned();
        if OPERATORS.contains(&tokens[i]) {
            let Some(next) = tokens.get(i + 1) else { return Err(format!("`{}` names no version", tokens[i])) };
            term.push_str(next);
            i += 1;
        }
        if tokens.get(i + 1) == Some(&"-") {
            let Some(high) = tokens.get(i + 2) else { return Err(format!("range `{term} -` has no upper end")) };
            out.push(Cmp::Ge(partial(&term)?.low()));
            out.extend(term_cmps("<=", &partial(high)?));
            i += 3;
            continue;
        }
        let op = OPERATORS.iter().find(|op| term.starts_with(**op)).copied().unwrap_or("");
        out.extend(term_cmps(op, &partial(&term[op.len()..])?));
        i += 1;
    }
    if out.is_empty() {
        out.push(Cmp::Ge(Version::new(0, 0, 0)));
    }
    Ok(out)
}

/// The comparisons one operator and partial version stand for (Masterminds' `constraint*`
/// functions: a wildcard widens `=`, `<=` and `>` to the whole range it names).
fn term_cmps(op: &str, p: &Partial) -> Vec<Cmp> {
    let (low, high) = (p.low(), p.high());
    match op {
        "" | "=" if p.dirty() => vec![Cmp::Ge(low), Cmp::Lt(high)],
        "" | "=" => vec![Cmp::Eq(low)],
        "!=" if p.dirty() => vec![Cmp::Outside(low, high)],
        "!=" => vec![Cmp::Ne(low)],
        ">" if p.dirty() => vec![Cmp::Ge(high)],
        ">" => vec![Cmp::Gt(low)],
        ">=" | "=>" => vec![Cmp::Ge(low)],
        "<" => vec![Cmp::Lt(low)],
        "<=" | "=<" if p.dirty() => vec![Cmp::Lt(high)],
        "<=" | "=<" => vec![Cmp::Le(low)],
        "~" | "~>" => {
            let upper = match (p.major, p.minor) {
                (Some(major), Some(minor)) => Version::new(major, minor + 1, 0),
                (Some(major), None) => Version::new(major + 1, 0, 0),
                _ => Version::new(u64::MAX, 0, 0),
            };
            vec![Cmp::Ge(low), Cmp::Lt(upper)]
        }
        _ => {
            // `^`: the leftmost non-zero part stays.
            let upper = match (p.major, p.minor, p.patch) {
                (None, ..) => Version::new(u64::MAX, 0, 0),
                (Some(major), _, _) if major > 0 => Version::new(major + 1, 0, 0),
                (Some(_), None, _) => Version::new(1, 0, 0),
                (Some(_), Some(minor), _) if minor > 0 => Version::new(0, minor + 1, 0),
                (Some(_), Some(_), None) => Version::new(0, 1, 0),
                (Some(_), Some(_), Some(patch)) => Version::new(0, 0, patch + 1),
            };
            vec![Cmp::Ge(low), Cmp::Lt(upper)]
        }
    }
}

/// `1`, `1.2`, `v1.2.3-rc.1`, `1.2.x`, `*`.
fn partial(text: &str) -> Result<Partial, String> {
    let bad = || format!("`{text}` is not a version");
    let body = text.trim_start_matches(['v', 'V']);
    let (core, pre) = match body.split_once('-') {
        Some((core, pre)) => (core, Prerelease::new(pre.split('+').next().unwrap_or(pre)).map_err(|_| bad())?),
        None => (body.split('+').next().unwrap_or(body), Prerelease::EMPTY),
    };
    let mut parts = core.split('.');
    let mut next = || -> Result<Option<u64>, String> {
        match parts.next() {
            None | Some("x" | "X" | "*") => Ok(None),
            Some(n) => n.parse().map(Some).map_err(|_| bad()),
        }
    };
    let (major, minor, patch) = (next()?, next()?, next()?);
    if parts.next().is_some() || core.is_empty() {
        return Err(bad());
    }
    // A wildcard leaves what follows it wild (`1.x.3` is `1.x`).
    let minor = major.and(minor);
    let patch = minor.and(patch);
    Ok(Partial { major, minor, patch, pre })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(constraint: &str, versions: &[&'static str]) -> Option<&'static str> {
        VersionConstraint::parse(constraint).unwrap().select(versions.iter().copied())
    }

    const PUBLISHED: &[&str] = &["1.18.2", "1.19.0", "1.19.4", "1.20.0-rc.1", "1.20.0", "1.21.0-alpha.0", "0.4.2"];

    #[test]
    fn ranges_pick_the_newest_match_and_pass_over_pre_releases() {
        assert_eq!(pick(">=1.19.0 <1.20.0", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick(">=1.19.0, <1.20.0", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick("", PUBLISHED), Some("1.20.0"));
        assert_eq!(pick("*", PUBLISHED), Some("1.20.0"));
        assert_eq!(pick("~1.19", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick("~> 1.18.0", PUBLISHED), Some("1.18.2"));
        assert_eq!(pick("^1.18", PUBLISHED), Some("1.20.0"));
        assert_eq!(pick("^0.4", PUBLISHED), Some("0.4.2"));
        assert_eq!(pick("1.19.x", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick("1.19", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick("1.18 - 1.19", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick("<1.19.0 || >=1.20.0", PUBLISHED), Some("1.20.0"));
        assert_eq!(pick(">1.19.x", PUBLISHED), Some("1.20.0"));
        assert_eq!(pick(">=1.19 !=1.20.0 <2", PUBLISHED), Some("1.19.4"));
        assert_eq!(pick(">= 2.0.0", PUBLISHED), None);
    }

    #[test]
    fn a_bare_version_is_exact_and_pre_releases_need_asking() {
        assert_eq!(pick("1.19.0", PUBLISHED), Some("1.19.0"));
        assert_eq!(pick("v1.19.0", PUBLISHED), Some("1.19.0"));
        assert_eq!(pick(">=1.20.0-0", PUBLISHED), Some("1.21.0-alpha.0"));
        assert_eq!(pick("1.20.0-rc.1", PUBLISHED), Some("1.20.0-rc.1"));
        assert_eq!(pick(">1.20.0", PUBLISHED), None);
    }

    #[test]
    fn nonsense_is_refused_with_the_part_named() {
        assert_eq!(VersionConstraint::parse(">=banana").unwrap_err(), "`banana` is not a version");
        assert!(VersionConstraint::parse("1.2.3.4").is_err());
        assert!(VersionConstraint::parse(">=").is_err());
    }
}
