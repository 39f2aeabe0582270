//! Every command Strata serves, as data: one file per family here
//! (`table/strings.rs`, `table/hashes.rs`, …) next to its handlers'
//! module. Adding a command is one entry plus its handler; arity,
//! authentication, COMMAND's replies and commandstats follow from it.
//!
//! Each row is a [`Spec`] with named fields. Arity, flags, key specs, ACL
//! categories, groups, "since" versions and tips are Redis 7's (from its
//! documentation), so clients that introspect COMMAND see what they
//! expect; Strata's own `traits` say how dispatch, transactions, scripts
//! and tiering treat the command; `run` is how it runs (a handler, EXEC,
//! a script, or a container of subcommands). Nothing about a command is
//! kept outside its row.

mod acl;
mod bitmaps;
mod connection;
mod functions;
mod geo;
mod hashes;
mod hyperloglog;
mod keys;
mod lists;
mod prelude;
mod pubsub;
mod replication;
mod scripting;
mod server;
mod sets;
mod sort;
mod streams;
mod strings;
mod subcommands;
mod transactions;
mod zsets;

use super::Spec;

/// Every command, family by family.
pub static FAMILIES: &[&[Spec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    replication::COMMANDS,
    acl::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    streams::COMMANDS,
    hyperloglog::COMMANDS,
    geo::COMMANDS,
    sort::COMMANDS,
    keys::COMMANDS,
    strings::COMMANDS,
    bitmaps::COMMANDS,
    transactions::COMMANDS,
    pubsub::COMMANDS,
    scripting::COMMANDS,
    functions::COMMANDS,
];
