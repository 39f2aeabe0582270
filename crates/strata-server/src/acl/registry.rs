//! The users and the check of a command against them ([`Acl`]): what
//! [`crate::acl`] describes, without its submodules' parts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::Bytes;
use parking_lot::RwLock;

use super::categories::Categories;
use super::log::Reason;
use super::selector::{ChannelUse, KeyNeed, RuleError};
use super::user::{Rules, User};
use crate::commands::catalog::{CommandTable, Gates, RunKind, Spec};
use crate::commands::keyspec;

/// A denied command: why, and the argument at fault (a key or channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    pub reason: Reason,
    pub at: usize,
}

impl Denied {
    /// The error a client gets, as Redis words it.
    pub fn error(&self, full_name: &str) -> String {
        match self.reason {
            Reason::Command => {
                format!("NOPERM this user has no permissions to run the '{full_name}' command")
            }
            Reason::Key => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            _ => "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into(),
        }
    }

    /// EXEC's answer for a queued command the rules no longer allow.
    pub fn exec_error(&self) -> String {
        let why = match self.reason {
            Reason::Command => "no permission to execute the command or subcommand",
            Reason::Key => "no permission to touch the specified keys",
            Reason::Channel => "no permission to access one of the channels used as arguments",
            Reason::Auth => "no permission",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}"
        )
    }

    /// The words scripts (`The user executing the script …`) and Redis'
    /// `getAclErrorMessage` use.
    pub fn short_reason(&self) -> &'static str {
        match self.reason {
            Reason::Command => "can't run this command or subcommand",
            Reason::Key => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Reason::Channel => "can't publish to the channel mentioned in the command",
            Reason::Auth => "lacking the permissions for the command",
        }
    }
}

pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    generation: AtomicU64,
    pub categories: Categories,
    pub log: super::log::AclLog,
    /// Ids in the command table (each selector's bitmap covers them).
    commands: usize,
    /// Per command id, what it needs of its one key when its only key is
    /// argument 1 (GET, SET, INCR …): found once here rather than from
    /// the key specs on every check.
    single_key_need: Vec<Option<SingleKey>>,
}

impl Acl {
    /// Only the default user, as Redis starts.
    pub fn new<R: RunKind>(table: &CommandTable<R>) -> Acl {
        let categories = Categories::new(table);
        let rules = Rules {
            table,
            categories: &categories,
            all_channels_by_default: false,
        };
        let default = User::default_user(&rules);
        let users = BTreeMap::from([(default.name.clone(), Arc::new(default))]);
        Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            categories,
            log: Default::default(),
            commands: table.len(),
            single_key_need: (0..table.len())
                .map(|id| single_key_need(table.specs[id].keys))
                .collect(),
        }
    }

    /// What a connection whose user was deleted runs as until it closes:
    /// nothing is allowed.
    pub fn deleted(&self, name: &str) -> Arc<User> {
        Arc::new(User {
            name: name.to_owned(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![super::selector::Selector::empty(self.commands, false)],
        })
    }

    pub fn rules<'a, R: RunKind>(
        &'a self,
        table: &'a CommandTable<R>,
        all_channels: bool,
    ) -> Rules<'a, R> {
        Rules {
            table,
            categories: &self.categories,
            all_channels_by_default: all_channels,
        }
    }

    /// Moves on every change of any user.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get("default").expect("the default user always exists")
    }

    /// Whether connections must authenticate before running commands:
    /// the default user has a password or is off (Redis' `authRequired`).
    pub fn auth_required(&self) -> bool {
        let default = self.default_user();
        !default.nopass || !default.enabled
    }

    /// All users, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// The user `name` if `password` opens it.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let user = self.get(std::str::from_utf8(name).ok()?)?;
        user.password_ok(password).then_some(user)
    }

    /// ACL SETUSER: applies `ops` to user `name` (created if new), all or
    /// nothing. Returns the user before and after.
    pub fn set_user<R: RunKind>(
        &self,
        rules: &Rules<R>,
        name: &str,
        ops: &[Bytes],
    ) -> Result<(Option<Arc<User>>, Arc<User>), String> {
        let ops = merge_selectors(ops)?;
        let mut users = self.users.write();
        let old = users.get(name).cloned();
        let mut user = match &old {
            Some(user) => User::clone(user),
            None => User::new(name, rules),
        };
        for op in &ops {
            user.apply(op, rules).map_err(|e| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        let user = Arc::new(user);
        users.insert(name.to_owned(), user.clone());
        self.generation.fetch_add(1, Relaxed);
        Ok((old, user))
    }

    /// `requirepass`: the default user's only password (none: `nopass`).
    pub fn set_default_password<R: RunKind>(&self, rules: &Rules<R>, password: &str) {
        let mut ops = vec![Bytes::from_static(b"resetpass")];
        if password.is_empty() {
            ops.push(Bytes::from_static(b"nopass"));
        } else {
            ops.push(Bytes::from(format!(">{password}")));
        }
        self.set_user(rules, "default", &ops)
            .expect("password rules are valid");
    }

    /// ACL DELUSER: the users deleted.
    pub fn delete(&self, names: &[Bytes]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        let deleted: Vec<Arc<User>> = names
            .iter()
            .filter_map(|name| users.remove(String::from_utf8_lossy(name).as_ref()))
            .collect();
        self.generation.fetch_add(1, Relaxed);
        deleted
    }

    /// Replaces every user (ACL LOAD, start-up); the default user is
    /// added as Redis creates it when `users` lacks one.
    pub fn replace_all<R: RunKind>(
        &self,
        rules: &Rules<R>,
        mut users: BTreeMap<String, Arc<User>>,
    ) {
        users
            .entry("default".into())
            .or_insert_with(|| Arc::new(User::default_user(rules)));
        *self.users.write() = users;
        self.generation.fetch_add(1, Relaxed);
    }

    /// Whether `user` may run command `id` with `args`: some selector
    /// allows the command, each of its keys and each of its channels.
    /// When none does, the most telling denial, as Redis picks it: a
    /// channel over a key over the command, then the later argument.
    pub fn check<R: RunKind>(
        &self,
        user: &User,
        table: &CommandTable<R>,
        id: usize,
        args: &[Bytes],
    ) -> Result<(), Denied> {
        if user.unrestricted() {
            return Ok(());
        }
        let mut request = Request {
            table,
            id,
            args,
            keys: None,
            channels: channels_of(&table.full_names[id], args),
        };
        let mut worst = Denied {
            reason: Reason::Command,
            at: 0,
        };
        for selector in &user.selectors {
            let Some(denied) = self.denial(selector, &mut request) else {
                return Ok(());
            };
            if (denied.reason.rank(), denied.at) > (worst.reason.rank(), worst.at) {
                worst = denied;
            }
        }
        Err(worst)
    }

    /// What `selector` refuses of the request (its command, then a key,
    /// then a channel), if anything.
    fn denial<R: RunKind>(
        &self,
        selector: &super::selector::Selector,
        request: &mut Request<R>,
    ) -> Option<Denied> {
        let Request {
            table, id, args, ..
        } = *request;
        let no_auth = table.gates(id).has(Gates::NO_AUTH);
        if !no_auth && !selector.allows_command(table, id, args) {
            return Some(Denied {
                reason: Reason::Command,
                at: 0,
            });
        }
        let spec = table.specs[id];
        if !selector.all_keys && !spec.keys.is_empty() {
            // Found once for all the selectors.
            let keys = request
                .keys
                .get_or_insert_with(|| match self.single_key_need[id] {
                    Some(SingleKey::Fixed(need)) if args.len() > 1 => {
                        smallvec::smallvec![(1, need)]
                    }
                    // SET and BITFIELD: the flags depend on the options.
                    Some(SingleKey::Variable(flags)) if args.len() > 1 => {
                        let mut keys = vec![(1, flags)];
                        if let Some(hook) = spec.keys_hook {
                            hook(args, &mut keys);
                        }
                        smallvec::smallvec![(1, need_of(keys[0].1))]
                    }
                    _ => key_needs(spec, args),
                });
            if let Some((at, _)) = keys
                .iter()
                .find(|(at, need)| !selector.allows_key(&args[*at], *need))
            {
                return Some(Denied {
                    reason: Reason::Key,
                    at: *at,
                });
            }
        }
        if !selector.all_channels
            && let Some((at, _)) = request
                .channels
                .iter()
                .find(|(at, used)| !selector.allows_channel(&args[*at], *used))
        {
            return Some(Denied {
                reason: Reason::Channel,
                at: *at,
            });
        }
        None
    }

    /// Whether some selector of `user` lets command `id` run and reads
    /// every key: SORT's BY and GET read keys that no argument names.
    pub fn reads_every_key<R: RunKind>(
        &self,
        user: &User,
        table: &CommandTable<R>,
        id: usize,
        args: &[Bytes],
    ) -> bool {
        let need = KeyNeed {
            read: true,
            write: false,
        };
        user.selectors
            .iter()
            .any(|s| s.allows_every_key(need) && s.allows_command(table, id, args))
    }
}

/// One command being checked, with what its selectors share: its keys
/// (found at the first selector that needs them) and channels.
struct Request<'a, R: 'static> {
    table: &'a CommandTable<R>,
    id: usize,
    args: &'a [Bytes],
    keys: Option<KeyNeeds>,
    channels: Vec<(usize, ChannelUse)>,
}

/// The keys of a command with what each needs (most have one).
type KeyNeeds = smallvec::SmallVec<[(usize, KeyNeed); 4]>;

/// What a key needs, from its key flags: `access` reads; `update`,
/// `insert` and `delete` write.
fn need_of(flags: &[&str]) -> KeyNeed {
    let has = |f: &str| flags.contains(&f);
    KeyNeed {
        read: has("access"),
        write: has("update") || has("insert") || has("delete"),
    }
}

/// A command whose only key is argument 1: what it needs of it, or its
/// spec's flags when the arguments decide (`variable_flags`).
#[derive(Clone, Copy)]
enum SingleKey {
    Fixed(KeyNeed),
    Variable(keyspec::KeyFlags),
}

/// [`SingleKey`] of a command whose only key is argument 1; `None` for
/// any other shape.
fn single_key_need(specs: &'static [keyspec::KeySpec]) -> Option<SingleKey> {
    let flags = keyspec::single_key_at_1(specs).filter(|flags| !flags.contains(&"not_key"))?;
    Some(match flags.contains(&"variable_flags") {
        true => SingleKey::Variable(flags),
        false => SingleKey::Fixed(need_of(flags)),
    })
}

/// What each key of a command needs, from its key flags: `access` reads;
/// `update`, `insert` and `delete` write; a key with none of them (an
/// existence test) needs any pattern that matches.
fn key_needs<R>(spec: &Spec<R>, args: &[Bytes]) -> KeyNeeds {
    // Arguments the specs cannot read (a bad numkeys) are the command's
    // own error to give, not a denial: no keys then.
    keyspec::keys_and_flags(spec.keys, spec.keys_hook, args)
        .unwrap_or_default()
        .into_iter()
        // Shard channels are declared as `not_key` specs: not keys.
        .filter(|(_, flags)| !flags.contains(&"not_key"))
        .map(|(at, flags)| (at, need_of(flags)))
        .collect()
}

/// The channels a command publishes or subscribes to (unsubscribing
/// needs no permission).
fn channels_of(full_name: &str, args: &[Bytes]) -> Vec<(usize, ChannelUse)> {
    match full_name {
        "publish" | "spublish" if args.len() > 1 => vec![(1, ChannelUse::Name)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|at| (at, ChannelUse::Name)).collect(),
        "psubscribe" => (1..args.len())
            .map(|at| (at, ChannelUse::Pattern))
            .collect(),
        _ => Vec::new(),
    }
}

/// Joins a selector given over several arguments (`(+get` `~k)`) into
/// one, as Redis accepts it.
fn merge_selectors(ops: &[Bytes]) -> Result<Vec<Vec<u8>>, String> {
    let mut merged = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in ops.iter().enumerate() {
        if let Some((_, selector)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                merged.push(std::mem::take(selector));
                open = None;
            }
        } else if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
        } else {
            merged.push(op.to_vec());
        }
    }
    if let Some((i, _)) = open {
        return Err(format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(&ops[i])
        ));
    }
    Ok(merged)
}

/// Parses the rules of one user line (`user <name> rules…`) into a user,
/// as start-up, ACL LOAD and the config check do.
pub fn user_from_line<R: RunKind>(
    rules: &Rules<R>,
    name: &str,
    ops: &[Bytes],
) -> Result<User, (Vec<u8>, RuleError)> {
    let ops = merge_selectors(ops).map_err(|_| (b"(".to_vec(), RuleError::Syntax))?;
    let mut user = User::new(name, rules);
    for op in ops {
        user.apply(&op, rules).map_err(|e| (op.clone(), e))?;
    }
    Ok(user)
}
