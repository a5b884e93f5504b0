//! libgit2's process-wide limits on what its open repositories keep mapped and cached.
//!
//! libgit2 reads pack files through memory-mapped windows (up to 1 GiB each) and keeps every
//! window and pack file of a repository open while the repository is open; by default the
//! total may reach 8 GiB of address space and any number of files (`GIT_OPT_SET_MWINDOW_*`).
//! The pages a read touched stay mapped, and they count in the process's resident set
//! (`RssFile`) once per mapping. A daemon holding one open mirror per unit therefore grew by
//! the pack pages each unit's tree walk touched (ARCHITECTURE.md, "Figures"). With a limit,
//! libgit2 closes the least recently used windows (and pack files) not in use before it maps
//! another; nothing in use is unmapped, so a limit only costs re-mapping (the page cache keeps
//! the data) when many mirrors are read in turn.
//!
//! libgit2 also hashes every object again each time it reads one from a mirror
//! (`GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION`, SHA-1 with collision detection). The ids were
//! computed from the objects' bytes when their pack was indexed at fetch, and git itself does
//! not hash again on read; a fleet of units in one repository reads the root tree once per
//! unit sync, and re-hashing each read repeats that work at every sync of every unit
//! (ARCHITECTURE.md, "Figures"). So reads are not re-hashed.
//!
//! libgit2 caches the objects it parsed, per open repository, but by default only commits and
//! trees of at most 4 KiB (`GIT_OPT_SET_CACHE_OBJECT_LIMIT`): the root tree of a repository
//! with one directory per unit (10,000 entries, ~360 KiB) is inflated and parsed again on
//! every read, and each unit's sync reads it several times. Trees up to [`CACHED_TREE_LIMIT`]
//! are cached, and the cache as a whole is bounded by [`CACHE_LIMIT`] instead of libgit2's
//! 256 MiB, past which it evicts entries at random (`cache.c`).

/// Total bytes of pack windows libgit2 may keep mapped across every open repository: 32 MiB,
/// a few repositories' worth, far below libgit2's 8 GiB default (64-bit).
pub const MAPPED_PACK_LIMIT: usize = 32 << 20;

/// Pack files libgit2 may keep open (mapped) at once across every open repository: 64.
/// libgit2's default, 0, is no limit: one descriptor per pack per open mirror.
pub const MAPPED_PACK_FILES: usize = 64;

/// Largest tree libgit2 keeps parsed in a repository's object cache: 4 MiB, a root tree of
/// about 100,000 entries (libgit2's default: 4 KiB, about 100 entries).
pub const CACHED_TREE_LIMIT: usize = 4 << 20;

/// Bytes of objects libgit2 keeps in its caches across every open repository before it evicts
/// some: 16 MiB (libgit2's default: 256 MiB). Counted as the objects' inflated size; a parsed
/// tree holds about 1.7 times that.
pub const CACHE_LIMIT: isize = 16 << 20;

/// Bounds libgit2's pack mappings ([`MAPPED_PACK_LIMIT`], [`MAPPED_PACK_FILES`]), so that the
/// resident memory of many open mirrors does not grow with how much of each was read, and
/// turns off the re-hashing of each object read, and caches large trees within a smaller
/// whole ([`CACHED_TREE_LIMIT`], [`CACHE_LIMIT`]; see the module doc).
///
/// # Safety
///
/// This writes libgit2 globals without synchronisation (`git_libgit2_opts`): call it once from
/// `main`, before any thread (and so before the tokio runtime) is started.
pub unsafe fn limit_mapped_packs() {
    // SAFETY: the caller guarantees no other thread runs libgit2 yet. Neither call can fail
    // for these options and values.
    unsafe {
        let _ = git2::opts::set_mwindow_mapped_limit(MAPPED_PACK_LIMIT);
        let _ = git2::opts::set_mwindow_file_limit(MAPPED_PACK_FILES);
        let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Tree, CACHED_TREE_LIMIT);
        let _ = git2::opts::set_cache_max_size(CACHE_LIMIT);
    }
    git2::opts::strict_hash_verification(false);
}
