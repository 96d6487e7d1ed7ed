//! `--flagfile=path` expansion: a file of flags, one per line, as IREE's tools accept.

use halo_hal::{Error, Result, ResultExt};

/// Replaces each `--flagfile=path` (or `--flagfile path`) with the flags in that file, in place.
/// Blank lines and lines starting with `#` are skipped.
pub fn expand_args(args: Vec<String>) -> Result<Vec<String>> {
    let mut expanded = Vec::with_capacity(args.len());
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let path = if let Some(path) = arg.strip_prefix("--flagfile=") {
            path.to_string()
        } else if arg == "--flagfile" {
            iter.next()
                .ok_or_else(|| Error::invalid_argument("--flagfile needs a path"))?
        } else {
            expanded.push(arg);
            continue;
        };
        let text = halo_hal::file::read_regular_text(std::path::Path::new(&path))
            .with_context(|| format!("reading flagfile '{path}'"))?;
        expanded.extend(
            text.lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .map(str::to_string),
        );
    }
    Ok(expanded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_in_place() {
        let dir = std::env::temp_dir().join(format!("halo-flagfile-{}", std::process::id()));
        std::fs::write(&dir, "# comment\n--a=1\n\n  --b=2 3\n").unwrap();
        let args = vec!["halo".into(), format!("--flagfile={}", dir.display()), "--c".into()];
        assert_eq!(expand_args(args).unwrap(), ["halo", "--a=1", "--b=2 3", "--c"]);
        std::fs::remove_file(dir).unwrap();
        assert!(expand_args(vec!["--flagfile=/nonexistent/x".into()]).is_err());
    }
}
