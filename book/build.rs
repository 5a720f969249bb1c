//! Turns every chapter listed in `src/SUMMARY.md` into a module whose documentation is the
//! chapter, so `cargo test` compiles and runs the book's Rust code blocks as doctests.

use std::env;
use std::fs;
use std::path::Path;

fn main() {
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let src = Path::new(&manifest_dir).join("src");
    let summary = fs::read_to_string(src.join("SUMMARY.md")).expect("book/src/SUMMARY.md");
    println!(
        "cargo:rerun-if-changed={}",
        src.join("SUMMARY.md").display()
    );
    let mut modules = String::new();
    for line in summary.lines() {
        // Chapter lines look like `- [Title](file.md)`.
        let Some(start) = line.find("](") else {
            continue;
        };
        let Some(end) = line[start..].find(')') else {
            continue;
        };
        let file = &line[start + 2..start + end];
        if !file.ends_with(".md") {
            continue;
        }
        let path = src.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let module: String = file
            .trim_end_matches(".md")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        modules.push_str(&format!(
            "#[doc = include_str!({:?})]\npub mod {module} {{}}\n",
            path.display().to_string()
        ));
    }
    let out = Path::new(&env::var("OUT_DIR").expect("set by cargo")).join("chapters.rs");
    fs::write(out, modules).expect("write chapters.rs");
}
