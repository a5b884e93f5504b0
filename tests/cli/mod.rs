//! The `gitward` binary's front door: exit codes, output and help, `validate` and `render` offline, and the image (built, and run as its Pod).

pub(crate) mod binary;
pub(crate) mod image;
pub(crate) mod image_pod;
pub(crate) mod render;
pub(crate) mod validate;
