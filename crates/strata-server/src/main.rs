//! `strata-server [/path/to/strata.conf] [--option value ...]`: a
//! Redis-compatible key-value server (the crate's library holds all of it;
//! see `lib.rs` for the map).

fn main() {
    strata_server::main();
}
