//! A tar+gzip archive (an OCI artifact's layer, a Helm chart archive) read whole into a
//! [`Door`], or refused. The stream is inflated completely before any entry is taken, so a
//! truncated or corrupt gzip (a missing trailer, a bad CRC: RFC 1952, section 2.3.1) is an
//! error, never a shorter tree; concatenated gzip members are read as one stream (RFC 1952,
//! section 2.2, as `gzip -d` reads them). The tar stream must end with its end-of-archive
//! block (POSIX `ustar`: two 512-byte blocks of zeros; one is taken) after the last entry, so
//! an archive cut at an entry boundary is refused too. A stream that inflates past its cap is
//! an error, never cut at the cap.

use std::io::Read as _;

use super::{Bounds, Deadline, Door, Kind, Refusal, shown};

/// One tar block: headers and data are padded to it.
const BLOCK: u64 = 512;

/// Why an archive was refused: its stream is unreadable or over the cap (no entry to name),
/// or one entry breaks a rule of the door.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// The gzip or tar stream is truncated or corrupt.
    #[error("{0}")]
    Corrupt(String),
    /// The inflated tar stream is larger than the cap, in bytes.
    #[error("the archive inflates to more than {0} bytes")]
    TooLarge(u64),
    /// The files of the archive total more than `max_files_bytes`, reached at `path`.
    #[error("{path}: the archive's files total more than {limit} bytes")]
    FilesTooLarge {
        /// The entry that crossed the limit.
        path: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// An entry the door refuses, named by its path in the archive.
    #[error("entry {0}")]
    Entry(#[from] Refusal),
}

/// Reads the tar+gzip `bytes` into a door of its entries (each file's payload its bytes, each
/// link's its target), links checked ([`Door::check_links`]). The tar stream may inflate to at
/// most `max_stream` bytes and its files may total at most `max_files` bytes; the door holds at
/// most `max_files` bytes of paths and targets too ([`Bounds::max_bytes`]) and stops at
/// `deadline`. Directory entries and the tar extension headers (PAX, GNU long names) make no
/// entry of their own. Every entry's path and every link's target must be UTF-8, as a git
/// tree's names must be ([`super::name`]): none is decoded lossily.
///
/// Errors: [`ArchiveError::Corrupt`] for a stream that is not a complete tar+gzip;
/// [`ArchiveError::TooLarge`] and [`ArchiveError::FilesTooLarge`] past the caps;
/// [`ArchiveError::Entry`] for an entry the door refuses — a refused name or path, a path or
/// target that is not UTF-8, a hard link, a device, a FIFO, any type but file, directory and symbolic link — and for a link
/// that leaves the archive's root.
pub fn read_tar_gz(
    bytes: &[u8],
    max_stream: u64,
    max_files: u64,
    deadline: Option<Deadline>,
) -> Result<Door<Vec<u8>>, ArchiveError> {
    let mut stream = Vec::new();
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes).take(max_stream.saturating_add(1));
    decoder.read_to_end(&mut stream).map_err(|e| ArchiveError::Corrupt(format!("not a complete gzip stream: {e}")))?;
    if stream.len() as u64 > max_stream {
        return Err(ArchiveError::TooLarge(max_stream));
    }
    read_tar(&stream, max_files, deadline)
}

/// Reads the (inflated) tar `stream` as [`read_tar_gz`] does.
///
/// Errors: as [`read_tar_gz`].
pub fn read_tar(stream: &[u8], max_files: u64, deadline: Option<Deadline>) -> Result<Door<Vec<u8>>, ArchiveError> {
    let corrupt = |e: std::io::Error| ArchiveError::Corrupt(format!("not a complete tar stream: {e}"));
    let mut archive = tar::Archive::new(stream);
    let mut door = Door::bounded(Bounds { max_bytes: max_files, deadline });
    let mut end = 0u64;
    let mut total = 0u64;
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let raw = utf8(&entry.path_bytes(), "path", None)?;
        let size = entry.header().entry_size().map_err(corrupt)?;
        end = end.max(entry.raw_file_position() + size.div_ceil(BLOCK) * BLOCK);
        let refused = |reason: String| ArchiveError::Entry(Refusal { path: shown(&raw), reason });
        use tar::EntryType as T;
        match entry.header().entry_type() {
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => {}
            T::Directory => {
                door.add_path(&raw, Kind::Dir, Vec::new())?;
            }
            T::Regular | T::Continuous | T::GNUSparse => {
                total = total.saturating_add(entry.size());
                if total > max_files {
                    return Err(ArchiveError::FilesTooLarge { path: shown(&raw), limit: max_files });
                }
                let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
                entry.read_to_end(&mut bytes).map_err(corrupt)?;
                let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                door.add_path(&raw, Kind::File { executable }, bytes)?;
            }
            T::Symlink => {
                let Some(target) = entry.link_name_bytes() else {
                    return Err(refused("a symbolic link with no target".into()));
                };
                let target = utf8(&target, "symbolic link's target", Some(&raw))?;
                door.add_path(&raw, Kind::Symlink { target: target.clone() }, target.into_bytes())?;
            }
            T::Link => return Err(refused("a hard link: only files, directories and symbolic links are taken".into())),
            other => {
                return Err(refused(format!(
                    "of tar type {other:?}: only files, directories and symbolic links are taken"
                )));
            }
        }
    }
    let marker = usize::try_from(end).ok().and_then(|end| stream.get(end..end + BLOCK as usize));
    if !marker.is_some_and(|block| block.iter().all(|b| *b == 0)) {
        return Err(ArchiveError::Corrupt(format!(
            "the tar stream ends at byte {} without its end-of-archive block: truncated",
            stream.len()
        )));
    }
    door.check_links()?;
    Ok(door)
}

/// `bytes` (an entry's `what`: its path, or the target of the link at `path`) as text.
///
/// Errors: [`ArchiveError::Entry`] naming the entry (lossily printed) when `bytes` are not
/// UTF-8.
fn utf8(bytes: &[u8], what: &str, path: Option<&str>) -> Result<String, ArchiveError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => {
            let path = path.map_or_else(|| String::from_utf8_lossy(bytes).into_owned(), str::to_owned);
            Err(ArchiveError::Entry(Refusal::new(&path, format!("the {what} is not UTF-8"))))
        }
    }
}
