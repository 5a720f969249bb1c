//! The eddy book. Each chapter of `book/src` is a module here whose documentation is the
//! chapter's text, so that `cargo test` compiles and runs every Rust example in the book:
//! an example that stops compiling fails the build. Read the book with `mdbook serve book`.

include!(concat!(env!("OUT_DIR"), "/chapters.rs"));

/// The README, whose Rust code is compiled and run like the chapters'.
#[doc = include_str!("../../README.md")]
pub mod readme {}
