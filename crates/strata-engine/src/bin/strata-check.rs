//! `strata-check [--fix] [--yes] DIR`: verifies a Strata data directory
//! (`strata_engine::storage::check` is the tool; `docs/storage.md` its exit
//! statuses). Built with the engine: it needs nothing of the server.

fn main() -> std::process::ExitCode {
    strata_engine::storage::check::run(std::env::args().skip(1))
}
