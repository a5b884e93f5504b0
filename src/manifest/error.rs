//! The manifest module's error type.

use std::fmt;

/// Why the manifests of a revision could not be read.
///
/// Every variant except [`Error::ReadBlob`] describes the content of the repository (bad input):
/// reading the same revision again gives the same error, so callers should not retry; report it
/// and wait for a new revision. [`Error::ReadBlob`] comes from the object database and may be
/// transient.
///
/// Each message starts with its subject, the file path and the place in the file:
/// `deploy/app.yaml: document 2: …`, or `deploy/app.yaml: document 2, item 1: …` for an item of
/// a `List`. In messages documents and items are numbered from 1, as a person counts the
/// `---`-separated documents of a file; the `index` and `item` fields hold the same positions
/// numbered from 0, like [`super::Manifest::index`]. How documents are counted is described on
/// [`super::parse_file`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The file's blob could not be read from the object database; `message` is the reader's.
    #[error("{file}: reading blob: {message}")]
    ReadBlob {
        /// Path of the file, relative to the repository root.
        file: String,
        /// What the blob reader reported.
        message: String,
    },
    /// The file is not UTF-8 text (kubectl reads UTF-8 too; a leading byte order mark is fine).
    #[error("{file}: not UTF-8 text: {message}")]
    Encoding {
        /// Path of the file.
        file: String,
        /// Where the first invalid byte is.
        message: String,
    },
    /// A document is not well-formed YAML or JSON, or holds a value that has no JSON form as
    /// kubectl reads it (a null or non-scalar mapping key, a duplicate key, NaN or infinity),
    /// or a `---` separator line holds more than a comment.
    #[error("{file}: {}: {message}", Place::new(*.index, None))]
    ParseDocument {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// The parser's message, with the line and column in the file.
        message: String,
    },
    /// A document exceeded the parser's limits: nesting depth, size, or alias expansion (a
    /// "billion laughs" alias bomb). The limits are documented on [`super::parse_file`].
    #[error("{file}: {}: {message}", Place::new(*.index, None))]
    LimitExceeded {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// Which limit was exceeded, and where.
        message: String,
    },
    /// A document (or a `List` item) is not a mapping, so it cannot be a Kubernetes object.
    #[error("{file}: {}: expected a Kubernetes object (a mapping), found {found}", Place::new(*.index, *.item))]
    NotAnObject {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// 0-based item index when the value is an item of a `List`.
        item: Option<usize>,
        /// What was found instead: `a string`, `a sequence`, …
        found: String,
    },
    /// A required field (`apiVersion`, `kind`, `metadata.name`) is absent, null or empty.
    #[error("{file}: {}: missing {field} (a non-empty string is required)", Place::new(*.index, *.item))]
    MissingField {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// 0-based item index when the object is an item of a `List`.
        item: Option<usize>,
        /// Dotted path of the field, e.g. `metadata.name`.
        field: &'static str,
    },
    /// A field has the wrong type, e.g. `metadata.name: 2024` (YAML reads a number: quote it).
    #[error("{file}: {}: {field} {message}", Place::new(*.index, *.item))]
    InvalidField {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// 0-based item index when the object is an item of a `List`.
        item: Option<usize>,
        /// Dotted path of the field.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The object has `metadata.generateName` and no `metadata.name`. Server-side apply
    /// identifies an object by its name, and a generated name would create a new object on
    /// every sync: the object needs a fixed name.
    #[error(
        "{file}: {}: metadata.generateName without metadata.name: gitward applies objects with \
         server-side apply, which needs a fixed name; give the object a metadata.name",
        Place::new(*.index, *.item)
    )]
    GenerateName {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// 0-based item index when the object is an item of a `List`.
        item: Option<usize>,
    },
    /// A `${name}` reference of `[sync.substitute]` names a variable that is not defined and
    /// has no default (`${name:=default}`), strict as Flux since 2.9
    /// ([`super::substitute`]).
    #[error(
        "{file}: {}: variable `{variable}` is not defined and has no default (`${{{variable}:=default}}`); \
         define it in [sync.substitute] or escape it as `$${{{variable}}}`",
        Place::new(*.index, None)
    )]
    UndefinedVariable {
        /// Path of the file.
        file: String,
        /// 0-based document index.
        index: usize,
        /// The variable's name.
        variable: String,
    },
}

/// Result of the manifest module's operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether the error describes the content of the repository (every variant but
    /// [`Error::ReadBlob`]): the same revision gives it again, and only a new one fixes it.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, Self::ReadBlob { .. })
    }
}

/// A place in a file as messages print it: `document 3` or `document 3, item 2` (1-based).
struct Place {
    index: usize,
    item: Option<usize>,
}

impl Place {
    fn new(index: usize, item: Option<usize>) -> Self {
        Self { index, item }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.index + 1)?;
        match self.item {
            Some(item) => write!(f, ", item {}", item + 1),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_number_documents_and_items_from_one() {
        let err =
            Error::MissingField { file: "deploy/app.yaml".into(), index: 1, item: Some(0), field: "metadata.name" };
        assert_eq!(
            err.to_string(),
            "deploy/app.yaml: document 2, item 1: missing metadata.name (a non-empty string is required)"
        );
    }
}
