//! SOPS: files encrypted with `sops` (github.com/getsops/sops v3) and an age key are decrypted
//! by the real `sops` binary before rendering (so kustomize generators can read them) and, in
//! plain units, before parsing.
//!
//! A YAML or JSON file is taken as encrypted when it carries a top-level `sops` block, a
//! dotenv file (`*.env`, rendered units only) when it has a `sops_mac=` line, and either
//! holds at least one `ENC[AES256_GCM,…]` value, as `sops encrypt` writes them. Such a file stops the
//! revision when the unit has no `[sync.decryption]`, or when `sops` cannot decrypt it (wrong
//! key, tampered file): nothing applied, nothing pruned, the error names the file (Flux's
//! kustomize-controller refuses the same way).
//!
//! Plaintext stays in memory and in the render's scratch directory (mode 0700, removed after
//! the render); it is never logged: the values that were encrypted are registered in the
//! process-wide mask set ([`crate::telemetry::mask`]) and masked (`***`) in every message this
//! module and the renderers return, and in every line gitward writes. The desired hash of objects rendered from
//! decrypted files is keyed (HMAC-SHA256 with a key derived from the age identity), so the
//! hash on a live object does not let someone who can read metadata test guesses of a secret.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::process::{self, Limits, RunError};
use super::{Error, Result, Tool};
use crate::config::Decryption;
use crate::manifest::HashKey;

/// Whether `bytes` look like a file `sops encrypt` wrote: a `sops` block (YAML, JSON) or
/// `sops_mac=` line (dotenv), and an encrypted value.
pub fn is_encrypted(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let has_block =
        text.lines().any(|l| l.starts_with("sops:") || l.starts_with("sops_mac=ENC[")) || text.contains("\"sops\":");
    has_block && text.contains("ENC[AES256_GCM,")
}

/// The sops format of a file, by its name: `json`, `dotenv` (`*.env`, as kustomize's
/// `secretGenerator` `envs` read them) or `yaml`.
pub fn format_of(path: &str) -> &'static str {
    if path.ends_with(".json") {
        "json"
    } else if path.ends_with(".env") {
        "dotenv"
    } else {
        "yaml"
    }
}

/// Decrypts files for one unit with its age identity.
pub(super) struct Decryptor {
    tool: Tool,
    key_file: PathBuf,
    /// The hash key derived from the identity.
    pub hash_key: HashKey,
    /// The plaintext values seen so far, to mask in messages.
    pub masker: Masker,
}

impl Decryptor {
    /// Reads the identity file (to derive the hash key) and keeps the `sops` binary.
    ///
    /// Errors: [`Error::KeyFile`] when the identity file cannot be read.
    pub fn new(unit: &str, tool: Tool, decryption: &Decryption) -> Result<Self> {
        let identity = std::fs::read(&decryption.age_key_file).map_err(|e| Error::KeyFile {
            unit: unit.to_owned(),
            path: decryption.age_key_file.clone(),
            message: e.to_string(),
        })?;
        Ok(Self {
            tool,
            key_file: decryption.age_key_file.clone(),
            hash_key: HashKey::derive(&identity),
            masker: Masker,
        })
    }

    /// Decrypts the encrypted file `rel` (its repository path) written at `on_disk` inside
    /// the scratch directory `scratch`; returns the plaintext and remembers its secret values
    /// for masking.
    ///
    /// Errors: [`Error::DecryptFailed`] with sops's message, masked.
    pub fn decrypt(
        &mut self,
        unit: &str,
        rel: &str,
        on_disk: &Path,
        scratch: &Path,
        limits: Limits,
    ) -> Result<Vec<u8>> {
        let format = format_of(rel);
        let failed = |message: String| Error::DecryptFailed { unit: unit.to_owned(), file: rel.to_owned(), message };
        let encrypted = std::fs::read(on_disk).map_err(|e| failed(e.to_string()))?;
        let foreign = foreign_key_sources(format, &encrypted).map_err(|reason| {
            failed(format!(
                "its sops metadata cannot be read in full ({reason}); refused rather than taken as age only, so \
                 that sops contacts no key service a committer chose"
            ))
        })?;
        if !foreign.is_empty() {
            return Err(failed(format!(
                "its key groups name {} besides age, and only an age key is configured; refused so that \
                 sops contacts no key service a committer chose",
                foreign.join(", ")
            )));
        }
        let home = scratch.join("home");
        let env: Vec<(&str, &Path)> = vec![("HOME", &home), ("SOPS_AGE_KEY_FILE", &self.key_file)];
        let mut cmd = process::command(&self.tool.path, scratch, &env);
        cmd.args(["decrypt", "--input-type", format, "--output-type", format]).arg(on_disk);
        let grants = process::Grants::scratch(scratch, &self.tool.path);
        let grants = process::Grants { read: [grants.read, vec![self.key_file.clone()]].concat(), ..grants };
        let plaintext = match process::run(cmd, limits, &grants) {
            Ok(bytes) => bytes,
            Err(RunError::Failed(_, message)) => return Err(failed(process::trim_message(&message))),
            Err(RunError::Spawn(e)) => return Err(failed(format!("sops could not be started: {e}"))),
            Err(RunError::Timeout) => return Err(failed(format!("sops did not finish within {:?}", limits.timeout))),
            Err(RunError::TooLarge) => return Err(failed("sops's output is over the render output cap".into())),
            Err(RunError::Sandbox(message)) => return Err(failed(format!("sops cannot run confined: {message}"))),
        };
        self.masker.learn(format, &encrypted, &plaintext);
        Ok(plaintext)
    }
}

/// The sops master key types other than age (sops v3 metadata: `stores.Metadata`), each a
/// service sops would contact to decrypt the data key: AWS KMS, GCP KMS, Azure Key Vault,
/// HashiCorp Vault transit, and PGP (a keyserver or gpg-agent).
const FOREIGN_KEY_TYPES: [&str; 5] = ["kms", "gcp_kms", "azure_kv", "hc_vault", "pgp"];

/// The non-age master keys an encrypted file's metadata names, as `type (identifier)`; empty
/// when it names age keys only. sops tries a key group's keys in the order KMS, GCP KMS, Azure,
/// Vault, age, PGP, so a file that names a Vault address next to an age recipient would make
/// `sops decrypt` contact that address first. Read from the top-level `sops` block (and its
/// `key_groups`) of every document, or the `sops_<type>__list_…` lines of a dotenv file.
///
/// Errors: why a YAML or JSON file does not parse (not UTF-8, nested past the parser's depth
/// limit — serde_json stops at 128 levels, serde-saphyr at its own — or malformed). sops's own
/// parser may read what this one cannot, and the metadata then unread could name any key
/// service: such a file is refused, never taken as age-only.
pub fn foreign_key_sources(format: &str, bytes: &[u8]) -> std::result::Result<Vec<String>, String> {
    let mut found = Vec::new();
    if format == "dotenv" {
        for line in String::from_utf8_lossy(bytes).lines() {
            let Some((key, value)) = line.split_once('=') else { continue };
            let Some(rest) = key.strip_prefix("sops_") else { continue };
            let on_list = rest.contains("__list_") || rest.contains("key_groups");
            if let Some(kind) =
                FOREIGN_KEY_TYPES.iter().find(|k| rest.starts_with(*k) || rest.contains(&format!("__{k}__")))
                && on_list
            {
                found.push(format!("{kind} ({value})"));
            }
        }
    } else {
        let mut push_group = |group: &Value| {
            for kind in FOREIGN_KEY_TYPES {
                for key in group.get(kind).and_then(Value::as_array).into_iter().flatten() {
                    let id = ["vault_address", "arn", "resource_id", "vault_url", "fp"]
                        .iter()
                        .find_map(|f| key.get(*f).and_then(Value::as_str))
                        .unwrap_or("?");
                    found.push(format!("{kind} ({id})"));
                }
            }
        };
        for doc in parse_documents(format, bytes)? {
            let Some(meta) = doc.get("sops") else { continue };
            push_group(meta);
            for group in meta.get("key_groups").and_then(Value::as_array).into_iter().flatten() {
                push_group(group);
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// The YAML or JSON documents of `bytes`, or why they do not parse.
fn parse_documents(format: &str, bytes: &[u8]) -> std::result::Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    match format {
        "json" => serde_json::from_str::<Value>(text).map(|v| vec![v]).map_err(|e| e.to_string()),
        _ => serde_saphyr::from_multiple::<Value>(text).map_err(|e| e.to_string()),
    }
}

/// The values a render decrypted: each is registered in the process-wide mask set
/// ([`crate::telemetry::mask`]), so every later line gitward writes masks it, with its base64,
/// escaped and per-line forms; [`Masker::mask`] masks with that whole set.
#[derive(Default)]
pub(super) struct Masker;

impl Masker {
    /// Learns the plaintext of every value that is `ENC[…]` in `encrypted` (one document or
    /// a YAML stream) and a string in `plaintext` at the same place.
    pub fn learn(&mut self, format: &str, encrypted: &[u8], plaintext: &[u8]) {
        let (Some(enc), Some(plain)) = (documents(format, encrypted), documents(format, plaintext)) else { return };
        let mut secrets = Vec::new();
        for (e, p) in enc.iter().zip(&plain) {
            collect(e, p, &mut secrets);
        }
        crate::telemetry::mask::register(secrets);
    }

    /// `message` with every decrypted value replaced by `***`.
    pub fn mask(&self, message: &str) -> String {
        crate::telemetry::mask::mask(message).into_owned()
    }
}

/// The documents of a file in sops `format` (see [`format_of`]), as JSON values; a dotenv
/// file is one object of its `KEY=value` lines.
fn documents(format: &str, bytes: &[u8]) -> Option<Vec<Value>> {
    let text = std::str::from_utf8(bytes).ok()?;
    match format {
        "json" => serde_json::from_str::<Value>(text).ok().map(|v| vec![v]),
        "dotenv" => {
            let pairs = text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('='));
            Some(vec![Value::Object(pairs.map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect())])
        }
        _ => serde_saphyr::from_multiple::<Value>(text).ok(),
    }
}

/// Walks `enc` and `plain` together, collecting plaintext strings where `enc` holds `ENC[`.
fn collect(enc: &Value, plain: &Value, out: &mut Vec<String>) {
    match (enc, plain) {
        (Value::String(e), p) if e.starts_with("ENC[") => {
            let text = match p {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push(text);
        }
        (Value::Object(e), Value::Object(p)) => {
            for (k, ev) in e {
                if let Some(pv) = p.get(k) {
                    collect(ev, pv, out);
                }
            }
        }
        (Value::Array(e), Value::Array(p)) => {
            for (ev, pv) in e.iter().zip(p) {
                collect(ev, pv, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    const ENCRYPTED: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n    name: db\nstringData:\n    password: ENC[AES256_GCM,data:abc,iv:x,tag:y,type:str]\nsops:\n    mac: ENC[AES256_GCM,data:m,iv:i,tag:t,type:str]\n";
    const PLAIN: &str =
        "apiVersion: v1\nkind: Secret\nmetadata:\n    name: db\nstringData:\n    password: hunter2-secret\n";

    #[test]
    fn encrypted_files_are_recognised_by_their_sops_block() {
        assert!(is_encrypted(ENCRYPTED.as_bytes()));
        assert!(!is_encrypted(PLAIN.as_bytes()));
        assert!(!is_encrypted(b"sops:\n  note: a key named sops is not enough\n"));
        assert!(is_encrypted(
            b"PASSWORD=ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]\nsops_mac=ENC[AES256_GCM,data:m]\n"
        ));
        assert_eq!((format_of("a/b.env"), format_of("x.json"), format_of("s.enc.yaml")), ("dotenv", "json", "yaml"));
    }

    #[test]
    fn key_groups_naming_anything_but_age_are_found_in_every_format() {
        let f = |format: &str, bytes: &[u8]| foreign_key_sources(format, bytes).unwrap();
        let yaml = format!(
            "{ENCRYPTED}    age:\n        - recipient: age1abc\n    hc_vault:\n        - vault_address: http://10.0.0.1:8200\n          engine_path: transit\n    kms: []\n"
        );
        assert_eq!(f("yaml", yaml.as_bytes()), ["hc_vault (http://10.0.0.1:8200)"]);
        assert!(f("yaml", format!("{ENCRYPTED}    kms: []\n    pgp: []\n").as_bytes()).is_empty());
        let grouped = r#"{"data": "ENC[AES256_GCM,x]", "sops": {"key_groups": [{"age": [{"recipient": "age1"}]}, {"kms": [{"arn": "arn:aws:kms:eu:1:key/k"}]}]}}"#;
        assert_eq!(f("json", grouped.as_bytes()), ["kms (arn:aws:kms:eu:1:key/k)"]);
        let dotenv = "A=ENC[AES256_GCM,x]\nsops_age__list_0__map_recipient=age1\nsops_gcp_kms__list_0__map_resource_id=projects/p\nsops_mac=ENC[x]\n";
        assert_eq!(f("dotenv", dotenv.as_bytes()), ["gcp_kms (projects/p)"]);
        assert!(f("dotenv", b"A=ENC[x]\nsops_age__list_0__map_recipient=age1\n").is_empty());
    }

    #[test]
    fn metadata_nested_past_the_parser_is_an_error_not_age_only() {
        // 200 levels of JSON arrays before the sops block: serde_json stops at 128.
        let json = format!(
            r#"{{"data": {}"ENC[AES256_GCM,x]"{}, "sops": {{"hc_vault": [{{"vault_address": "http://127.0.0.1:1"}}]}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let err = foreign_key_sources("json", json.as_bytes()).unwrap_err();
        assert!(err.contains("recursion"), "{err}");
        let mut yaml = String::from("data:\n");
        for depth in 1..=300 {
            yaml.push_str(&format!("{}k:\n", "  ".repeat(depth)));
        }
        yaml.push_str(&format!(
            "{}v: ENC[AES256_GCM,x]\nsops:\n  hc_vault:\n  - vault_address: http://127.0.0.1:1\n",
            "  ".repeat(301)
        ));
        assert!(foreign_key_sources("yaml", yaml.as_bytes()).is_err(), "300 levels of YAML");
        assert!(foreign_key_sources("yaml", b"a: [unclosed\nsops: {}\n").is_err());
    }

    #[test]
    fn encrypted_values_are_masked_in_messages_with_their_base64() {
        let mut masker = Masker;
        masker.learn("yaml", ENCRYPTED.as_bytes(), PLAIN.as_bytes());
        let encoded = base64::engine::general_purpose::STANDARD.encode("hunter2-secret");
        let message = format!("bad value hunter2-secret or {encoded} in Secret db");
        assert_eq!(masker.mask(&message), "bad value *** or *** in Secret db");
        let mut dotenv = Masker;
        dotenv.learn("dotenv", b"A=ENC[AES256_GCM,data:x]\nB=plain\n", b"A=topsecret\nB=plain\n");
        assert_eq!(dotenv.mask("A=topsecret B=plain"), "A=*** B=plain");
    }
}
