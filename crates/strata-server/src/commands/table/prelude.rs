//! What every row file of the table names: the key spec helpers, the run
//! kinds, the families' handler modules (by their short aliases) and the
//! key spec flag lists. A leaf of the table: the rows take it with
//! `use super::prelude::*`, so no row names the table's own module.

pub(super) use crate::commands::keyspec::{
    self, BeginSearch, FindKeys, KeySpec, keynum, keyword_range, noted, range, unknown,
};
pub(super) use crate::commands::{
    Run, Spec, acl as ac, bits, cluster as cl, connection as conn, debug as dbg, dump,
    functions as fc, geo as gs, hashes as hs, hyperloglog as hll, introspection as intro,
    keys as ks, latency as lat, lists as ls, memory as mem, pubsub as ps, replication as repl,
    scripting as sc, server as srv, sets as se, sort as so, streams as xs, strings as st,
    transactions as tx, zsets as zs,
};

// Key spec flags (see `keyspec`), in Redis' order.
pub(super) const K_RO: &[&str] = &["RO"];
pub(super) const K_RO_ACCESS: &[&str] = &["RO", "access"];
pub(super) const K_RW_UPDATE: &[&str] = &["RW", "update"];
pub(super) const K_RW_INSERT: &[&str] = &["RW", "insert"];
pub(super) const K_RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
pub(super) const K_RW_ACCESS_UPDATE_VARIABLE: &[&str] =
    &["RW", "access", "update", "variable_flags"];
pub(super) const K_RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];
pub(super) const K_OW_UPDATE: &[&str] = &["OW", "update"];
pub(super) const K_OW_INSERT: &[&str] = &["OW", "insert"];
pub(super) const K_RM_DELETE: &[&str] = &["RM", "delete"];
pub(super) const K_RW_DELETE: &[&str] = &["RW", "delete"];
