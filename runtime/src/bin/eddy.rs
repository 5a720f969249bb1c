//! The `eddy` command-line tool: `eddy broker`, `bench`, `groups`, `topics`, `transactions`,
//! `produce` and `consume` (see `eddy --help`); its code is the library's `cli` module.

fn main() -> std::process::ExitCode {
    eddy::cli::main()
}
