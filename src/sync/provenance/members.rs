//! The members record of an attestation: one line per member as applied, kept beside the
//! envelopes in the unit's ConfigMap (key [`super::kept::MEMBERS`]) and bound to the signed
//! Statement by its sha256 ([`super::statement::MembersRecord`]). The envelope stays small — a
//! unit's last twenty cost a few KiB, not twenty copies of every member — and `gitward attest
//! verify --config` still names the one object that drifted.
//!
//! A line is tab-separated: `group version plural Kind namespace name digest applied`, the
//! namespace empty for a cluster-scoped object, `digest` its sealed digest
//! ([`crate::sync::sealed::object_digest`]) and `applied` the fingerprint of gitward's
//! server-side apply entry after the sync (`-` when the cache did not know it). Lines are
//! sorted, each ended by `\n`.

use sha2::{Digest as _, Sha256};

use crate::object::{GroupKind, ObjectRef};

/// One member as applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its API group (empty for the core group).
    pub group: String,
    /// The version it was sent as.
    pub version: String,
    /// The resource's plural name.
    pub plural: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its sealed digest ([`crate::sync::sealed::object_digest`]): what the subject covers.
    pub digest: String,
    /// The fingerprint of gitward's server-side apply entry of its `managedFields` after the
    /// sync ([`crate::cluster::live::own_apply`], hex): a hand edit of a field gitward set
    /// moves it. `None` when the cache did not know it.
    pub applied: Option<String>,
}

impl Member {
    /// Its identity.
    pub fn object(&self) -> ObjectRef {
        ObjectRef::new(
            GroupKind::new(self.group.as_str(), self.kind.as_str()),
            self.namespace.clone(),
            self.name.as_str(),
        )
    }

    /// Its line, without the `\n`.
    fn line(&self) -> String {
        let namespace = self.namespace.as_deref().unwrap_or("");
        let applied = self.applied.as_deref().unwrap_or("-");
        let Self { group, version, plural, kind, name, digest, .. } = self;
        format!("{group}\t{version}\t{plural}\t{kind}\t{namespace}\t{name}\t{digest}\t{applied}")
    }

    /// The member of `line`; `None` when it does not have the eight fields.
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split('\t').collect();
        let [group, version, plural, kind, namespace, name, digest, applied] = fields.as_slice() else { return None };
        Some(Self {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
            plural: (*plural).to_owned(),
            kind: (*kind).to_owned(),
            namespace: (!namespace.is_empty()).then(|| (*namespace).to_owned()),
            name: (*name).to_owned(),
            digest: (*digest).to_owned(),
            applied: (*applied != "-").then(|| (*applied).to_owned()),
        })
    }
}

/// The record of `members`: their lines sorted, each ended by `\n`.
pub fn text(members: &[Member]) -> String {
    let mut lines: Vec<String> = members.iter().map(Member::line).collect();
    lines.sort_unstable();
    lines.into_iter().map(|l| l + "\n").collect()
}

/// The members of a record.
///
/// Errors: the number (from 1) of the first line that is not a member's.
pub fn parse(text: &str) -> Result<Vec<Member>, usize> {
    text.lines().enumerate().map(|(n, line)| Member::parse(line).ok_or(n + 1)).collect()
}

/// sha256 hex of a record's text, as the Statement binds it.
pub fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The subject digest of `members`: the digest of the render they are
/// ([`crate::sync::sealed::render_digest`]), what `gitward preview` and `gitward diff` print
/// for the revision.
pub fn render_digest(members: &[Member]) -> String {
    let objects: Vec<(ObjectRef, &str)> = members.iter().map(|m| (m.object(), m.digest.as_str())).collect();
    crate::sync::sealed::render_digest(objects.iter().map(|(o, d)| (o, *d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(kind: &str, namespace: Option<&str>, name: &str, applied: Option<&str>) -> Member {
        Member {
            group: if kind == "Widget" { "example.com".into() } else { String::new() },
            version: "v1".into(),
            plural: format!("{}s", kind.to_lowercase()),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: name.into(),
            digest: "ab".repeat(32),
            applied: applied.map(Into::into),
        }
    }

    #[test]
    fn a_record_reads_back_sorted_and_its_digest_binds_every_byte() {
        let members = [
            member("Widget", Some("ns"), "w", Some("00ff")),
            member("Namespace", None, "ns", None),
            member("ConfigMap", Some("ns"), "a", Some("1234")),
        ];
        let text = text(&members);
        assert!(text.starts_with("\tv1\tconfigmaps\tConfigMap\tns\ta\t"), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(back.len(), 3);
        assert!(members.iter().all(|m| back.contains(m)), "{back:?}");
        assert_eq!(super::text(&back), text, "the text is canonical");
        assert_ne!(digest(&text), digest(&text.replace("1234", "1235")));
        assert_eq!(parse("a\tb\n"), Err(1));
        // The subject is the render's digest, whatever the applied fingerprints say.
        let later: Vec<Member> = members.iter().map(|m| Member { applied: Some("ee".into()), ..m.clone() }).collect();
        assert_eq!(render_digest(&members), render_digest(&later));
    }
}
