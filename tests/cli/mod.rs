//! The `gitward` binary's front door: exit codes, output and help, what it generates (completions, man pages, version, the config's JSON Schema checked by another validator), `validate` and `render` offline, `import` of Flux's and Argo CD's objects, and the image (built, and run as its Pod).

pub(crate) mod binary;
pub(crate) mod generated;
pub(crate) mod image;
pub(crate) mod image_pod;
pub(crate) mod import;
pub(crate) mod render;
pub(crate) mod schema;
pub(crate) mod validate;
