//! Build-time facts `gitward version` prints: the commit (vergen, from `git`) and the versions
//! of the render tools `scripts/tools` pins (`GITWARD_PINNED_TOOLS`, `name version` pairs joined
//! by `, `): kustomize, Helm and sops, the tools gitward runs; the others it pins are the tests'.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let git = vergen_gitcl::GitclBuilder::default().sha(true).build()?;
    vergen_gitcl::Emitter::default().add_instructions(&git)?.emit()?;
    println!("cargo:rerun-if-changed=scripts/tools");
    let tools = std::fs::read_to_string("scripts/tools").unwrap_or_default();
    println!("cargo:rustc-env=GITWARD_PINNED_TOOLS={}", pinned(&tools).join(", "));
    Ok(())
}

/// The render tools' `[name]=module@version` lines of `scripts/tools`' table of Go tools, as
/// `name version`.
fn pinned(script: &str) -> Vec<String> {
    script
        .lines()
        .filter_map(|line| {
            let (name, module) = line.trim().strip_prefix('[')?.split_once("]=")?;
            let (_, version) = module.split_once('@')?;
            ["kustomize", "helm", "sops"].contains(&name).then(|| format!("{name} {version}"))
        })
        .collect()
}
