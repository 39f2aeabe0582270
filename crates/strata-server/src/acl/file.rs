//! Where users come from and go to: `user` lines of the configuration,
//! the ACL file (`aclfile`, ACL LOAD / ACL SAVE), and the `user` lines
//! CONFIG REWRITE writes.
//!
//! The file holds one `user <name> rules…` line per user, as ACL LIST
//! shows them. Loading is all or nothing: any bad line leaves the users
//! as they were and reports every problem in one message (Redis' rule,
//! so a typo never half-applies a security policy). Saving writes a
//! temporary file and renames it over the old one, so a crash leaves
//! one or the other.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::registry::{Acl, user_from_line};
use super::selector::{RuleError, has_spaces};
use super::user::User;
use crate::commands::catalog::{CommandTable, RunKind};
use crate::config::Config;

/// Applies `requirepass`, then the `user` lines or the ACL file (not
/// both, as Redis refuses), at start-up. An error stops the server.
pub fn load_at_startup<R: RunKind>(
    acl: &Acl,
    table: &CommandTable<R>,
    config: &Config,
) -> Result<(), String> {
    let rules = acl.rules(table, config.acl_pubsub_allchannels);
    acl.set_default_password(&rules, &config.requirepass);
    if !config.aclfile.is_empty() && !config.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let mut configured: BTreeMap<String, Arc<User>> = BTreeMap::new();
    for line in &config.users {
        let name = &line[0];
        if has_spaces(name.as_bytes()) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let mut ops: Vec<Bytes> = line[1..].iter().map(|op| Bytes::from(op.clone())).collect();
        if name == "default" {
            // Redis resets the default user before applying its line.
            ops.insert(0, Bytes::from_static(b"reset"));
        }
        let user = user_from_line(&rules, name, &ops).map_err(|(op, error)| {
            format!(
                "Error loading ACL rule '{}' for the user named '{name}': {}",
                String::from_utf8_lossy(&op),
                error.text()
            )
        })?;
        if !user.enabled {
            crate::log_notice!(
                "The user '{name}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error."
            );
        }
        configured.insert(name.clone(), Arc::new(user));
    }
    if !configured.is_empty() {
        configured
            .entry("default".into())
            .or_insert_with(|| acl.default_user());
        acl.replace_all(&rules, configured);
    }
    if !config.aclfile.is_empty() {
        load_file(acl, table, config)
            .map_err(|errors| format!("Aborting Redis startup because of ACL errors: {errors}"))?;
    }
    Ok(())
}

/// ACL LOAD: replaces every user by the file's, or changes nothing and
/// returns every problem found.
pub fn load_file<R: RunKind>(
    acl: &Acl,
    table: &CommandTable<R>,
    config: &Config,
) -> Result<(), String> {
    let path = &config.aclfile;
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            crate::util::strerror(&e.to_string())
        )
    })?;
    let rules = acl.rules(table, config.acl_pubsub_allchannels);
    let mut users: BTreeMap<String, Arc<User>> = BTreeMap::new();
    let mut errors = String::new();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!(
                "{path}:{number} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = String::from_utf8_lossy(words[1]).into_owned();
        if users.contains_key(&name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {number}. "
            ));
            continue;
        }
        let ops: Vec<Bytes> = words[2..]
            .iter()
            .map(|op| Bytes::copy_from_slice(op.trim_ascii()))
            .collect();
        match user_from_line(&rules, &name, &ops) {
            Ok(user) => {
                users.insert(name, Arc::new(user));
            }
            Err((op, RuleError::UnknownCommand)) => errors.push_str(&format!(
                "{path}:{number}: Error in applying operation '{}': {}. ",
                String::from_utf8_lossy(&op),
                RuleError::UnknownCommand.text()
            )),
            Err((_, error)) => {
                errors.push_str(&format!("{path}:{number}: {}. ", error.text()));
            }
        }
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    acl.replace_all(&rules, users);
    Ok(())
}

/// Every user as a `user <name> rules…` line, by name.
pub fn user_lines<R: RunKind>(acl: &Acl, table: &CommandTable<R>) -> Vec<String> {
    acl.users()
        .iter()
        .map(|user| {
            format!(
                "user {} {}",
                user.name,
                user.describe(table, &acl.categories)
            )
        })
        .collect()
}

/// The `user` lines CONFIG REWRITE writes: every user, except a default
/// user that `requirepass` alone describes (the file has no need of it).
pub fn rewrite_lines<R: RunKind>(
    acl: &Acl,
    table: &CommandTable<R>,
    config: &Config,
) -> Vec<String> {
    let stock = Acl::new(table);
    stock.set_default_password(&stock.rules(table, false), &config.requirepass);
    let stock_default = user_lines(&stock, table).remove(0);
    user_lines(acl, table)
        .into_iter()
        .filter(|line| *line != stock_default)
        .collect()
}

/// ACL SAVE: the users into the ACL file, atomically.
pub fn save_file<R: RunKind>(
    acl: &Acl,
    table: &CommandTable<R>,
    path: &str,
) -> std::io::Result<()> {
    let mut text = user_lines(acl, table).join("\n");
    text.push('\n');
    let temp = format!(
        "{path}.tmp-{}-{}",
        std::process::id(),
        crate::util::now_ms()
    );
    let written = std::fs::write(&temp, text.as_bytes())
        .and_then(|()| std::fs::File::open(&temp)?.sync_all())
        .and_then(|()| std::fs::rename(&temp, path))
        .and_then(|()| {
            // The rename itself survives a crash once the directory is synced.
            let dir = std::path::Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty());
            std::fs::File::open(dir.unwrap_or(std::path::Path::new(".")))?.sync_all()
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}
