//! Checks that keep the documentation true and self-contained: every source module is named
//! in ARCHITECTURE.md's code map, and no file in the repository cites documents that live
//! outside it.

use crate::tidy::{rust_files, tracked_texts};
use anyhow::{Context, Result};
use std::path::Path;

/// Documents that are not in the repository, so no file may point a reader at them. Built
/// from parts so that this file does not cite them itself.
fn outside_documents() -> [String; 3] {
    [
        ["DESIGN", ".md"].concat(),
        ["RELIABILITY", ".md"].concat(),
        ["../", "shared"].concat(),
    ]
}

/// Every problem the documentation checks find.
pub fn problems(root: &Path) -> Result<Vec<String>> {
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md"))
        .context("reading docs/ARCHITECTURE.md")?;
    let mut problems = unmapped_modules(root, code_map(&architecture))?;
    problems.extend(outside_citations(root)?);
    Ok(problems)
}

/// The `## Code map` section of ARCHITECTURE.md.
fn code_map(architecture: &str) -> &str {
    let start = architecture
        .find("## Code map")
        .unwrap_or(architecture.len());
    let rest = &architecture[start..];
    let end = rest[2..].find("\n## ").map_or(rest.len(), |e| e + 2);
    &rest[..end]
}

/// How the code map names a module file: `name.rs`, or `folder/` for a `mod.rs`; `None` for
/// a crate root, which the crate's row stands for.
fn module_name(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    match name {
        "lib.rs" | "main.rs" => None,
        "mod.rs" => Some(format!("{}/", file.parent()?.file_name()?.to_str()?)),
        _ => Some(name.to_owned()),
    }
}

/// The code map's row of a crate (the line of its table that starts with its name).
fn row<'m>(map: &'m str, krate: &str) -> &'m str {
    let start = format!("| `{krate}` |");
    map.lines().find(|l| l.starts_with(&start)).unwrap_or("")
}

/// Whether a row names a module: `` `name` `` alone or at the end of a path
/// (`` `driver/settle.rs` ``).
fn names(row: &str, name: &str) -> bool {
    row.contains(&format!("`{name}`")) || row.contains(&format!("/{name}`"))
}

/// Modules of each crate (and xtask) that the crate's row of the code map does not name.
fn unmapped_modules(root: &Path, map: &str) -> Result<Vec<String>> {
    let mut crates = vec![root.join("xtask")];
    for entry in std::fs::read_dir(root.join("crates"))? {
        crates.push(entry?.path());
    }
    let mut problems = Vec::new();
    for dir in crates.iter().filter(|c| c.join("src").is_dir()) {
        let krate = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let row = row(map, krate);
        for file in rust_files(&dir.join("src"))? {
            let Some(name) = module_name(&file) else {
                continue;
            };
            if !names(row, &name) {
                let file = file.strip_prefix(root).unwrap_or(&file).display();
                problems.push(format!(
                    "{file}: module `{name}` is not named in the row of `{krate}` in the code map of docs/ARCHITECTURE.md"
                ));
            }
        }
    }
    Ok(problems)
}

/// Tracked text files that cite a document outside the repository.
fn outside_citations(root: &Path) -> Result<Vec<String>> {
    Ok(tracked_texts(root)?
        .iter()
        .flat_map(|(file, text)| citations(file, text))
        .collect())
}

fn citations(file: &str, text: &str) -> Vec<String> {
    let outside = outside_documents();
    let mut problems = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        for document in outside.iter().filter(|d| line.contains(d.as_str())) {
            problems.push(format!(
                "{file}:{}: cites `{document}`, which is not in the repository (bring what it says into docs/)",
                line_no + 1
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_is_named_by_its_file_or_its_folder() {
        assert_eq!(
            module_name(Path::new("crates/x/src/log.rs")).as_deref(),
            Some("log.rs")
        );
        assert_eq!(
            module_name(Path::new("crates/x/src/verify/mod.rs")).as_deref(),
            Some("verify/")
        );
        assert_eq!(module_name(Path::new("crates/x/src/lib.rs")), None);
    }

    #[test]
    fn a_module_is_named_alone_or_at_the_end_of_a_path() {
        assert!(names("| `x` | `settle.rs` |", "settle.rs"));
        assert!(names("| `x` | `driver/settle.rs` |", "settle.rs"));
        assert!(!names("| `x` | `unsettle.rs` |", "settle.rs"));
        assert!(!names("| `x` | `settle.rs.bak` |", "settle.rs"));
    }

    #[test]
    fn a_crate_row_is_found_in_the_code_map_only() {
        let doc =
            "# A\n## Code map\n| `x` | `a.rs` |\n| `xy` | `c.rs` |\n## Next\n| `x` | `b.rs` |\n";
        let map = code_map(doc);
        assert_eq!(row(map, "x"), "| `x` | `a.rs` |");
        assert_eq!(row(map, "z"), "");
    }

    #[test]
    fn a_citation_of_an_outside_document_is_named_with_its_line() {
        let text = format!("fine\nsee {} §2\n", outside_documents()[0]);
        let found = citations("a.rs", &text);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("a.rs:2: cites"), "{found:?}");
        assert!(citations("a.rs", "docs/reliability.md").is_empty());
    }
}
