//! [`Masked`]: text that has been through the process's mask set ([`super::mask`]), the only
//! kind of text the places a person or a probe reads take for an error — `/readyz?verbose`,
//! the dashboard, Events, notifications, the error recorded on an ApplySet parent. Its one
//! constructor masks, so an unmasked error cannot be handed to them.

use std::fmt;
use std::ops::Deref;

/// Text masked with the process's mask set when it was made ([`super::mask::mask`]): every
/// decrypted or `from` Secret value registered by then is `***`. Made only by
/// [`Masked::new`]; cutting it ([`Masked::clipped`], [`Masked::truncated`]) keeps it masked.
/// Serialises as the string it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Masked(String);

impl Masked {
    /// `text` masked ([`super::mask::mask`]).
    pub fn new(text: impl AsRef<str>) -> Self {
        Self(super::mask::mask(text.as_ref()).into_owned())
    }

    /// The masked text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The masked text, owned.
    pub fn into_string(self) -> String {
        self.0
    }

    /// At most `chars` characters of it, `…` marking a cut.
    pub fn clipped(&self, chars: usize) -> Masked {
        match self.0.char_indices().nth(chars) {
            Some((cut, _)) => Masked(format!("{}…", &self.0[..cut])),
            None => self.clone(),
        }
    }

    /// At most `bytes` bytes of it (a character boundary), `...` marking a cut and counted in
    /// the bound. `bytes` under 3 gives `...` alone for a text that is cut.
    pub fn truncated(&self, bytes: usize) -> Masked {
        if self.0.len() <= bytes {
            return self.clone();
        }
        let mut end = bytes.saturating_sub(3);
        while !self.0.is_char_boundary(end) {
            end -= 1;
        }
        Masked(format!("{}...", &self.0[..end]))
    }
}

impl Deref for Masked {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Masked {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Masked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_text_is_masked_and_a_cut_keeps_it_masked() {
        super::super::mask::register(["hunter2-masked-canary"]);
        let m = Masked::new("ConfigMap/x/leak-hunter2-masked-canary: defined twice");
        assert_eq!(m.as_str(), "ConfigMap/x/leak-***: defined twice");
        assert_eq!(m.clipped(10).as_str(), "ConfigMap/…");
        assert_eq!(m.truncated(12).as_str(), "ConfigMap...");
        assert_eq!(m.truncated(100), m);
    }
}
