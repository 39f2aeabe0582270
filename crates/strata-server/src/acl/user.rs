//! One ACL user: on or off, its passwords (SHA-256 hashes, never the
//! text), and its selectors (the root one first).
//!
//! Users are values: ACL SETUSER applies its rules to a copy and swaps
//! the copy in only when every rule was accepted, so a refused rule
//! changes nothing (Redis' behaviour).

use crate::acl::categories::Categories;
use crate::acl::selector::{RuleError, Selector};
use crate::commands::catalog::{CommandTable, RunKind};

/// A password hash as hex: 64 lower-case characters.
pub const HASH_HEX_LEN: usize = 64;

#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `skip-sanitize-payload` (`Some(false)`) / `sanitize-payload`
    /// (`Some(true)`): RESTORE's payload checks; shown as given.
    pub sanitize_payload: Option<bool>,
    /// SHA-256 of each password, as lower-case hex.
    pub passwords: Vec<String>,
    /// The root selector first, then the `(...)` ones in order.
    pub selectors: Vec<Selector>,
}

/// The context rules are applied in: the command table, its categories,
/// and `acl-pubsub-default` (what a new selector gets for channels).
pub struct Rules<'a, R: 'static> {
    pub table: &'a CommandTable<R>,
    pub categories: &'a Categories,
    pub all_channels_by_default: bool,
}

impl User {
    /// A new user: off, no password, no permissions.
    pub fn new<R: RunKind>(name: &str, rules: &Rules<R>) -> User {
        User {
            name: name.to_owned(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::empty(
                rules.table.len(),
                rules.all_channels_by_default,
            )],
        }
    }

    /// The default user as Redis creates it: `on nopass ~* &* +@all`.
    pub fn default_user<R: RunKind>(rules: &Rules<R>) -> User {
        let mut user = User::new("default", rules);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            user.apply(op.as_bytes(), rules)
                .expect("the default user's rules are valid");
        }
        user
    }

    /// Whether every command, key and channel is allowed (checks can be
    /// skipped).
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::allows_everything)
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one ACL SETUSER rule.
    pub fn apply<R: RunKind>(&mut self, op: &[u8], rules: &Rules<R>) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let word = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if word("on") {
            self.enabled = true;
        } else if word("off") {
            self.enabled = false;
        } else if word("skip-sanitize-payload") {
            self.sanitize_payload = Some(false);
        } else if word("sanitize-payload") {
            self.sanitize_payload = Some(true);
        } else if word("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if word("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                checked_hash(&op[1..])?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                checked_hash(&op[1..])?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::empty(rules.table.len(), rules.all_channels_by_default);
            let inner = String::from_utf8_lossy(&op[1..op.len() - 1]).into_owned();
            for rule in inner.split_ascii_whitespace() {
                selector.apply(rules.table, rules.categories, rule.as_bytes())?;
            }
            self.selectors.push(selector);
        } else if word("clearselectors") {
            self.selectors.truncate(1);
        } else if word("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.enabled = false;
            self.sanitize_payload = Some(true);
            self.selectors = vec![Selector::empty(
                rules.table.len(),
                rules.all_channels_by_default,
            )];
        } else {
            self.selectors[0].apply(rules.table, rules.categories, op)?;
        }
        Ok(())
    }

    /// Whether `password` opens this user (an enabled one).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Every hash is compared in full, so timing tells nothing.
        self.passwords.iter().fold(false, |found, p| {
            found | constant_time_eq(p.as_bytes(), hash.as_bytes())
        })
    }

    /// The flags as ACL GETUSER and ACL LIST show them, in Redis' order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The user as ACL LIST and ACL SAVE write it (without `user <name>`).
    pub fn describe<R: RunKind>(&self, table: &CommandTable<R>, categories: &Categories) -> String {
        let mut parts: Vec<String> = self.flags().into_iter().map(str::to_owned).collect();
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        let mut text = parts.join(" ");
        text.push(' ');
        text.push_str(&self.selectors[0].describe(table, categories));
        for selector in &self.selectors[1..] {
            text.push_str(&format!(" ({})", selector.describe(table, categories)));
        }
        text
    }
}

/// SHA-256 of a password, as lower-case hex (what Redis stores).
pub fn hash_password(password: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, password);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A `#<hash>` rule's hash, checked as Redis checks it.
fn checked_hash(hash: &[u8]) -> Result<String, RuleError> {
    if hash.len() != HASH_HEX_LEN || !hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(hash).into_owned())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_stored_as_sha256_hex() {
        // The hash Redis' own test uses for "passwd4".
        assert_eq!(
            hash_password(b"passwd4"),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
    }

    #[test]
    fn hashes_must_be_64_lower_case_hex_characters() {
        assert_eq!(checked_hash(&[b'a'; 63]), Err(RuleError::BadHash));
        assert_eq!(checked_hash(&[b'A'; 64]), Err(RuleError::BadHash));
        assert!(checked_hash(&[b'f'; 64]).is_ok());
    }
}
