//! Every file gpol reads or writes goes through here. Inputs are regular files read up to
//! a documented size (a FIFO or `/dev/zero` is refused, never waited on or read without
//! end). Outputs are checked before any work starts and written as careful tools write
//! them: through a symbolic link to the file it names, never over a device, an input or
//! a read-only file (unless forced), keeping the file's mode and its other hard links,
//! and never over an edit made since the file was read. Every message names the path the
//! user gave.

use std::collections::HashSet;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a file could not be read or written. Each names the path as the user gave it.
#[derive(Debug)]
pub enum FileError {
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Not a regular file: what it is (`a FIFO`, `a directory`…).
    NotRegular {
        path: PathBuf,
        kind: &'static str,
    },
    TooLarge {
        path: PathBuf,
        max: u64,
    },
    /// The output is one of the command's inputs.
    IsInput {
        path: PathBuf,
    },
    ReadOnly {
        path: PathBuf,
    },
    /// The file changed after it was read; it was left as it is.
    Changed {
        path: PathBuf,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            FileError::NotRegular { path, kind } => {
                write!(f, "{}: is {kind}, not a regular file", path.display())
            }
            FileError::TooLarge { path, max } => {
                write!(f, "{}: too large, at most {} bytes", path.display(), max)
            }
            FileError::IsInput { path } => {
                write!(f, "{}: is also an input of this command; refusing to overwrite it", path.display())
            }
            FileError::ReadOnly { path } => {
                write!(f, "{}: is read-only; `--force` replaces it anyway", path.display())
            }
            FileError::Changed { path } => {
                write!(
                    f,
                    "{}: changed since it was read; left as it is (run again to use the new text)",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for FileError {}

fn io(path: &Path) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |error| FileError::Io { path: path.to_path_buf(), error: plain(error) }
}

/// An I/O error without the temporary file's path that `tempfile` appends to its
/// messages (" at path …"): messages name the user's path only.
fn plain(error: std::io::Error) -> std::io::Error {
    let Some(inner) = error.get_ref() else { return error };
    let text = inner.to_string();
    match text.rfind(" at path ") {
        Some(at) => std::io::Error::new(error.kind(), text[..at].to_string()),
        None => error,
    }
}

/// `O_NONBLOCK`, for opening without waiting on a FIFO.
fn nonblocking() -> i32 {
    rustix::fs::OFlags::NONBLOCK.bits() as i32
}

/// What a file system object is, for messages.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// A file's identity: the same (device, inode) is the same file by any path.
fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Reads a regular file of at most `max` bytes. The file is opened without blocking, so a
/// FIFO is refused rather than waited on, and read no further than the limit, whatever
/// its size claims.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    read_with_identity(path, max).map(|(bytes, _)| bytes)
}

/// What tells one version of a file from another: device, inode, size and modification
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp(u64, u64, u64, i64, i64);

/// Opens a regular file of at most `max` bytes to read as a stream (a trace longer than
/// memory), checked as [`read`] checks; its stamp lets a reader that opens it again tell
/// whether it changed in between.
pub fn open(path: &Path, max: u64) -> Result<(File, Stamp), FileError> {
    let (file, meta) = open_regular(path, max)?;
    let stamp = Stamp(meta.dev(), meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec());
    Ok((file, stamp))
}

fn open_regular(path: &Path, max: u64) -> Result<(File, Metadata), FileError> {
    // Look before opening (opening some devices does something), and again after (the
    // path may have changed in between).
    let before = std::fs::metadata(path).map_err(io(path))?;
    if !before.is_file() {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind: kind(&before) });
    }
    let file = OpenOptions::new().read(true).custom_flags(nonblocking()).open(path).map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind: kind(&meta) });
    }
    if meta.len() > max {
        return Err(FileError::TooLarge { path: path.to_path_buf(), max });
    }
    Ok((file, meta))
}

fn read_with_identity(path: &Path, max: u64) -> Result<(Vec<u8>, (u64, u64)), FileError> {
    let (file, meta) = open_regular(path, max)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(io(path))?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge { path: path.to_path_buf(), max });
    }
    Ok((bytes, identity(&meta)))
}

/// Opens a log to append to (`--decision-log`): a regular file, created if missing
/// (readable by its owner and group only), written through a symbolic link to the file it
/// names; never a FIFO or a device (a reader that stops would stall every decision) and
/// none of `inputs`. Every write of a whole line with `O_APPEND` lands at the end, after
/// any other writer's.
pub fn append(path: &Path, inputs: &[&Path]) -> Result<File, FileError> {
    // Look before opening (opening some devices does something), and again after.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind: kind(&meta) });
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(nonblocking())
        .open(path)
        .map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind: kind(&meta) });
    }
    if inputs.iter().any(|i| std::fs::metadata(i).is_ok_and(|m| identity(&m) == identity(&meta))) {
        return Err(FileError::IsInput { path: path.to_path_buf() });
    }
    Ok(file)
}

/// A file as it was read, to rewrite it in place only if nobody changed it since.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub bytes: Vec<u8>,
    identity: (u64, u64),
}

/// Reads a regular file that may be rewritten (`gpolc fmt`).
pub fn read_for_rewrite(path: &Path, max: u64) -> Result<Snapshot, FileError> {
    let (bytes, identity) = read_with_identity(path, max)?;
    Ok(Snapshot { bytes, identity })
}

/// The `.gpol` files named by `paths`: files as given, directories searched recursively
/// in sorted order. Each file is listed once, however many paths or links lead to it, and
/// a symbolic link back up the tree is not followed round.
pub fn gpol_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FileError> {
    let mut out = Vec::new();
    let mut seen_dirs = HashSet::new();
    let mut seen_files = HashSet::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(io(p))?;
        if meta.is_dir() {
            walk(p, &meta, &mut seen_dirs, &mut seen_files, &mut out)?;
        } else if seen_files.insert(identity(&meta)) {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    meta: &Metadata,
    seen_dirs: &mut HashSet<(u64, u64)>,
    seen_files: &mut HashSet<(u64, u64)>,
    out: &mut Vec<PathBuf>,
) -> Result<(), FileError> {
    if !seen_dirs.insert(identity(meta)) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort();
    for e in entries {
        let m = match std::fs::metadata(&e) {
            Ok(m) => m,
            // A policy that cannot be read (a dangling link, say) is an error, as it
            // would be if named directly; other entries are not ours to judge.
            Err(error) if e.extension().is_some_and(|x| x == "gpol") => {
                return Err(FileError::Io { path: e, error });
            }
            Err(_) => continue,
        };
        if m.is_dir() {
            walk(&e, &m, seen_dirs, seen_files, out)?;
        } else if e.extension().is_some_and(|x| x == "gpol") && seen_files.insert(identity(&m)) {
            out.push(e);
        }
    }
    Ok(())
}

/// Where an output goes, checked before the work that produces it.
#[derive(Debug)]
pub struct Output {
    /// The path as the user gave it, for messages.
    path: PathBuf,
    target: Target,
}

#[derive(Debug)]
enum Target {
    /// A regular file, existing or not, at this path (symbolic links resolved).
    File { real: PathBuf, existing: Option<Metadata> },
    /// A FIFO or character device (`/dev/stdout`), opened already: written to directly.
    Stream(File),
}

impl Output {
    /// Checks that `path` can take the output: its directory exists; through symbolic
    /// links, it is a regular file or new, or a FIFO or character device to stream to; it
    /// is none of `inputs`; it is writable unless `force`.
    pub fn new(path: &Path, inputs: &[&Path], force: bool) -> Result<Output, FileError> {
        let given = path.to_path_buf();
        let target = match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                let real = std::fs::canonicalize(path).map_err(io(path))?;
                // Read-only by its mode, or not writable by whoever runs gpolc.
                let writable = OpenOptions::new().write(true).custom_flags(nonblocking()).open(&real).is_ok();
                if (meta.permissions().mode() & 0o222 == 0 || !writable) && !force {
                    return Err(FileError::ReadOnly { path: given });
                }
                for input in inputs {
                    if std::fs::metadata(input).is_ok_and(|m| identity(&m) == identity(&meta)) {
                        return Err(FileError::IsInput { path: given });
                    }
                }
                Target::File { real, existing: Some(meta) }
            }
            Ok(meta) if meta.file_type().is_fifo() || meta.file_type().is_char_device() => {
                // Opened now, without waiting: a FIFO nobody reads is an error before
                // any work, not a hang after it. Writes then block as usual.
                let file = OpenOptions::new().write(true).custom_flags(nonblocking()).open(path).map_err(|e| {
                    let e = if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
                        std::io::Error::other("a FIFO that nothing reads")
                    } else {
                        e
                    };
                    FileError::Io { path: given.clone(), error: e }
                })?;
                let flags = rustix::fs::fcntl_getfl(&file)
                    .map_err(|e| FileError::Io { path: given.clone(), error: e.into() })?;
                rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
                    .map_err(|e| FileError::Io { path: given.clone(), error: e.into() })?;
                Target::Stream(file)
            }
            Ok(meta) => return Err(FileError::NotRegular { path: given, kind: kind(&meta) }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    // A link to a missing file: write the file it names.
                    let link = std::fs::read_link(path).map_err(io(path))?;
                    let real = path.parent().unwrap_or(Path::new("")).join(link);
                    return Output::new(&real, inputs, force).map(|o| Output { path: given, ..o });
                }
                let dir = parent(path);
                let meta = std::fs::metadata(&dir).map_err(|e| FileError::Io {
                    path: given.clone(),
                    error: std::io::Error::new(e.kind(), format!("its folder {} cannot be used: {e}", dir.display())),
                })?;
                if !meta.is_dir() {
                    return Err(FileError::NotRegular { path: dir, kind: kind(&meta) });
                }
                Target::File { real: path.to_path_buf(), existing: None }
            }
            Err(e) => return Err(FileError::Io { path: given, error: e }),
        };
        if let Target::File { real, .. } = &target {
            // The folder must take a new file (the temporary one the write renames).
            tempfile::Builder::new().prefix(".gpolc-").tempfile_in(parent(real)).map_err(io(&given))?;
        }
        Ok(Output { path: given, target })
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes`: a regular file through a temporary file renamed into place (an
    /// interrupted run leaves the old file whole), keeping its mode; a file with other
    /// hard links is rewritten in place so they all see the new text; a stream is
    /// written to directly. With `unchanged`, the file is left alone, and the write
    /// refused, if its content or identity differs from that snapshot.
    pub fn write(&self, bytes: &[u8], unchanged: Option<&Snapshot>) -> Result<(), FileError> {
        let given = &self.path;
        let (real, existing) = match &self.target {
            Target::Stream(file) => {
                let mut f = file;
                return f.write_all(bytes).and_then(|()| f.flush()).map_err(io(given));
            }
            Target::File { real, existing } => (real, existing),
        };
        if let Some(snap) = unchanged {
            let now = read_with_identity(real, snap.bytes.len() as u64 + 1);
            if !matches!(&now, Ok((b, id)) if *b == snap.bytes && *id == snap.identity) {
                return Err(FileError::Changed { path: given.clone() });
            }
        }
        if let Some(meta) = existing
            && (meta.nlink() > 1 || !owned_by_us(meta))
        {
            return rewrite_in_place(real, bytes).map_err(io(given));
        }
        let mode = existing.as_ref().map_or(0o666, |m| m.permissions().mode() & 0o7777);
        let mut tmp = tempfile::Builder::new()
            .prefix(".gpolc-")
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempfile_in(parent(real))
            .map_err(io(given))?;
        tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(io(given))?;
        if existing.is_some() {
            // The creation mode went through the umask; an existing file keeps its own.
            tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode)).map_err(io(given))?;
        }
        tmp.persist(real).map_err(|e| FileError::Io { path: given.clone(), error: e.error })?;
        Ok(())
    }
}

/// Whether a new file made by this process would have the existing file's owner, so
/// that replacing it by a rename keeps who owns it.
fn owned_by_us(meta: &Metadata) -> bool {
    let probe = tempfile::tempfile().and_then(|f| f.metadata());
    probe.is_ok_and(|p| p.uid() == meta.uid() && p.gid() == meta.gid())
}

/// Rewrites a file in place, keeping its inode (its other hard links, its owner): the
/// space is reserved first, so that a full disk fails before the old text is touched;
/// the file is cut to its new length only once the new text is written.
fn rewrite_in_place(real: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(real)?;
    let len = bytes.len() as u64;
    match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, len.max(1)) {
        // A file system that cannot reserve space: write anyway.
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {}
        Err(e) => return Err(e.into()),
        Ok(()) => {}
    }
    f.write_all(bytes)?;
    f.set_len(len)?;
    f.sync_all()
}

/// The folder a path is in (`.` for a bare name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary folder")
    }

    #[test]
    fn a_symlink_is_written_through() {
        let d = dir();
        let real = d.path().join("real.gpol");
        std::fs::write(&real, "old").expect("write");
        let link = d.path().join("link.gpol");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        Output::new(&link, &[], false).expect("usable").write(b"new", None).expect("written");
        assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
        assert_eq!(std::fs::read(&real).expect("read"), b"new");
    }

    #[test]
    fn a_log_is_appended_through_a_symlink_and_never_to_a_fifo_or_an_input() {
        let d = dir();
        let real = d.path().join("decisions.jsonl");
        std::fs::write(&real, "one\n").expect("write");
        let link = d.path().join("link.jsonl");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        append(&link, &[]).expect("appendable").write_all(b"two\n").expect("written");
        assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
        assert_eq!(std::fs::read(&real).expect("read"), b"one\ntwo\n");
        let fifo = fifo_in(&d, "p.jsonl");
        let e = append(&fifo, &[]).expect_err("a FIFO");
        assert_eq!(e.to_string(), format!("{}: is a FIFO, not a regular file", fifo.display()));
        let e = append(&link, &[&real]).expect_err("an input");
        assert!(matches!(e, FileError::IsInput { .. }), "{e}");
        let new = d.path().join("new.jsonl");
        append(&new, &[]).expect("created");
        // Others may not read what pods and jobs were decided.
        assert_eq!(std::fs::metadata(&new).expect("made").permissions().mode() & 0o007, 0);
    }

    /// A FIFO named `name` in `d`.
    fn fifo_in(d: &tempfile::TempDir, name: &str) -> PathBuf {
        let fifo = d.path().join(name);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success());
        fifo
    }

    #[test]
    fn a_fifo_is_refused_as_input_without_blocking() {
        let d = dir();
        let fifo = fifo_in(&d, "p.gpol");
        let e = read(&fifo, 1 << 20).expect_err("a FIFO");
        assert_eq!(e.to_string(), format!("{}: is a FIFO, not a regular file", fifo.display()));
    }

    #[test]
    fn dev_zero_is_refused_and_never_read_to_the_end() {
        let e = read(Path::new("/dev/zero"), 1 << 20).expect_err("not regular");
        assert!(matches!(e, FileError::NotRegular { kind: "a character device", .. }), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let d = dir();
        let p = d.path().join("big.csv");
        std::fs::write(&p, vec![b'x'; 101]).expect("write");
        assert!(matches!(read(&p, 100), Err(FileError::TooLarge { max: 100, .. })));
        assert_eq!(read(&p, 101).expect("at the limit").len(), 101);
    }

    #[test]
    fn devices_directories_inputs_and_read_only_files_are_refused_as_outputs() {
        let d = dir();
        assert!(matches!(Output::new(d.path(), &[], false), Err(FileError::NotRegular { kind: "a directory", .. })));
        let input = d.path().join("p.gpol");
        std::fs::write(&input, "policy p\n").expect("write");
        let e = Output::new(&input, &[&input], false).expect_err("an input");
        assert!(matches!(e, FileError::IsInput { .. }));
        let ro = d.path().join("ro.o");
        std::fs::write(&ro, "x").expect("write");
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        assert!(matches!(Output::new(&ro, &[], false), Err(FileError::ReadOnly { .. })));
        Output::new(&ro, &[], true).expect("forced").write(b"y", None).expect("written");
        assert_eq!(std::fs::metadata(&ro).expect("meta").permissions().mode() & 0o777, 0o444);
        assert!(matches!(Output::new(&d.path().join("missing/x.html"), &[], false), Err(FileError::Io { .. })));
    }

    #[test]
    fn dev_full_is_streamed_to_and_the_error_reported() {
        let out = Output::new(Path::new("/dev/full"), &[], false).expect("a character device");
        let e = out.write(b"bytes", None).expect_err("no space");
        assert!(e.to_string().starts_with("/dev/full: "), "{e}");
        assert!(std::fs::metadata("/dev/full").expect("still there").file_type().is_char_device());
    }

    #[test]
    fn hard_links_and_modes_are_kept() {
        let d = dir();
        let a = d.path().join("a.gpol");
        let b = d.path().join("b.gpol");
        std::fs::write(&a, "old").expect("write");
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        std::fs::hard_link(&a, &b).expect("link");
        Output::new(&a, &[], false).expect("usable").write(b"new", None).expect("written");
        assert_eq!(std::fs::read(&b).expect("read"), b"new");
        assert_eq!(std::fs::metadata(&a).expect("meta").permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn an_edit_made_after_reading_is_not_lost() {
        let d = dir();
        let p = d.path().join("p.gpol");
        std::fs::write(&p, "policy p\n").expect("write");
        let snap = read_for_rewrite(&p, 1 << 20).expect("read");
        std::fs::write(&p, "policy p\n// an edit\n").expect("edit");
        let e = Output::new(&p, &[], false).expect("usable").write(b"formatted", Some(&snap)).expect_err("changed");
        assert!(matches!(e, FileError::Changed { .. }));
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "policy p\n// an edit\n");
    }

    #[test]
    fn a_directory_loop_visits_each_file_once() {
        let d = dir();
        std::fs::write(d.path().join("p.gpol"), "policy p\n").expect("write");
        std::fs::create_dir(d.path().join("sub")).expect("mkdir");
        std::os::unix::fs::symlink(d.path(), d.path().join("sub/up")).expect("symlink");
        std::os::unix::fs::symlink(d.path(), d.path().join("self")).expect("symlink");
        let files = gpol_files(&[d.path().to_path_buf()]).expect("walks");
        assert_eq!(files, vec![d.path().join("p.gpol")]);
    }
}
