//! Who signed the revisions a unit's fetches verified (`[sync.verify]`), kept beside the
//! revisions so that a sync's report names the signers of the revision it applied, not of
//! one fetched since.

use std::collections::VecDeque;

use crate::source::{Revision, Signer};

/// How many verified revisions are remembered: the one applying, the one fetched while it
/// applied, and a few more for a self-heal of an older one.
const KEPT: usize = 8;

/// The signers of the revisions verified last, oldest first.
#[derive(Debug, Default)]
pub(super) struct Signed {
    recent: VecDeque<(Revision, Vec<Signer>)>,
}

impl Signed {
    /// Notes that `revision` was verified as signed by `signers` (nothing when there are
    /// none: the unit verifies nothing); the oldest past [`KEPT`] is forgotten.
    pub(super) fn note(&mut self, revision: &Revision, signers: Vec<Signer>) {
        if signers.is_empty() {
            return;
        }
        self.recent.retain(|(known, _)| known != revision);
        self.recent.push_back((revision.clone(), signers));
        while self.recent.len() > KEPT {
            self.recent.pop_front();
        }
    }

    /// The signers `revision` was last verified with; empty when it was not.
    pub(super) fn of(&self, revision: &Revision) -> Vec<Signer> {
        self.recent.iter().rev().find(|(known, _)| known == revision).map(|(_, s)| s.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SignerKind;

    fn signer(fingerprint: &str) -> Signer {
        Signer { kind: SignerKind::Ssh, identity: Some("release@example.com".into()), fingerprint: fingerprint.into() }
    }

    #[test]
    fn each_revision_keeps_its_last_signers_and_the_oldest_are_forgotten() {
        let mut signed = Signed::default();
        let (a, b) = (Revision("a".into()), Revision("b".into()));
        signed.note(&a, vec![signer("SHA256:one")]);
        signed.note(&b, vec![signer("SHA256:two")]);
        assert_eq!(signed.of(&a), [signer("SHA256:one")], "a later fetch leaves an earlier revision's signer");
        signed.note(&a, vec![signer("SHA256:three")]);
        assert_eq!(signed.of(&a), [signer("SHA256:three")], "verified again, by another key");
        signed.note(&b, Vec::new());
        assert_eq!(signed.of(&b), [signer("SHA256:two")], "no signers is no verification");
        for n in 0..KEPT {
            signed.note(&Revision(format!("r{n}")), vec![signer("SHA256:n")]);
        }
        assert!(signed.of(&a).is_empty() && signed.of(&b).is_empty(), "forgotten past {KEPT}");
        assert_eq!(signed.of(&Revision("r0".into())).len(), 1);
    }
}
