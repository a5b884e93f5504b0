//! The `gitward` binary's front door: exit codes, output and help, `validate` and `render` offline, and the image.

pub(crate) mod binary;
pub(crate) mod image;
pub(crate) mod render;
pub(crate) mod validate;
