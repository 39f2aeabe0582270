//! The command table as data: each command's row ([`Spec`]) and the
//! flattened [`CommandTable`] with its name maps, `rename-command` and the
//! gates dispatch checks. Generic over how a command runs, so the ACL and
//! the other layers below dispatch read the table without naming a
//! handler (whose context names the server); `crate::commands` fixes the
//! run type to its `Run`. A leaf beside `spec` and `keyspec`.

use std::collections::HashMap;

use bytes::Bytes;

use super::keyspec;
use super::spec::{Categories, Flags, Traits, flag, traits as trait_};

/// What the table needs to know of how a command runs.
pub trait RunKind {
    /// EXEC: dispatch runs the queued transaction.
    fn is_exec(&self) -> bool;
    /// A script or function: its locks are held for the whole run.
    fn is_script(&self) -> bool;
}

/// One command (or subcommand) as data: a row of the table
/// (`commands/table/`), generic over how it runs (`R`: a handler, EXEC, …;
/// [`crate::commands::Run`]), so the layers below dispatch read the table
/// without naming handlers.
pub struct Spec<R: 'static> {
    /// Lower-case name (for a subcommand, the part after `|`).
    pub name: &'static str,
    /// Redis arity: exact argument count including the name, or -N for at
    /// least N.
    pub arity: i32,
    /// Redis' command flags.
    pub flags: Flags,
    /// Where the command's keys are and what it does with them.
    pub keys: &'static [keyspec::KeySpec],
    /// What its key specs cannot say about its keys (Redis' getkeys
    /// procedures: SORT's STORE, MIGRATE's KEYS, flags that depend on
    /// the arguments).
    pub keys_hook: Option<keyspec::KeysHook>,
    /// ACL categories.
    pub acl: Categories,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// Redis' command tips (COMMAND INFO's eighth element).
    pub tips: &'static [&'static str],
    /// Strata's own properties (see [`Traits`]).
    pub traits: Traits,
    /// How it runs.
    pub run: R,
    pub subcommands: &'static [Spec<R>],
}

impl<R> Spec<R> {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let arity = self.arity;
        (arity >= 0 && argc == arity as usize) || (arity < 0 && argc >= (-arity) as usize)
    }

    /// Whether it has every one of Redis' `flags`.
    pub fn has(&self, flags: Flags) -> bool {
        self.flags.has(flags)
    }

    /// Whether it has Strata's trait `trait_`.
    pub fn is(&self, trait_: Traits) -> bool {
        self.traits.has(trait_)
    }

    /// Positions of the key arguments in `args`, from the key specs
    /// (empty when the arguments do not hold the keys the specs promise).
    pub fn key_positions(&self, args: &[Bytes]) -> Vec<usize> {
        keyspec::keys_with_specs(self.keys, args)
            .map(|keys| keys.into_iter().map(|(at, _)| at).collect())
            .unwrap_or_default()
    }
}

/// The flattened table: commands and subcommands with their stats index
/// and full names (`get`, `client|list`).
pub struct CommandTable<R: 'static> {
    pub specs: Vec<&'static Spec<R>>,
    pub full_names: Vec<String>,
    top_level: NameMap,
    /// Per command index: its subcommands by name (empty for most).
    subcommands: Vec<NameMap>,
    /// Every command and subcommand by its full name as the table names
    /// it (`config|get`), untouched by `rename-command`: what ACL rules
    /// name, as in Redis.
    by_full_name: NameMap,
    /// PING is refused like a write while the log cannot be written, as
    /// in Redis, so health checks notice.
    pub ping_id: usize,
    /// DEBUG's argument errors follow its own format (see `dispatch`).
    pub debug_id: usize,
    /// ASKING's flag lasts until the next command that is not ASKING;
    /// MIGRATE is served wherever a slot is being moved (cluster mode).
    pub asking_id: usize,
    pub migrate_id: usize,
    /// EXEC's index (its counters; dispatch knows EXEC by its `Run`).
    pub exec_id: usize,
    /// Per command index: the flags dispatch checks on every command, as
    /// bits ([`Gates`]), so it compares no flag names.
    gates: Vec<Gates>,
}

/// The flags dispatch, transactions and scripts check on every command.
#[derive(Clone, Copy, Default)]
pub struct Gates(u16);

impl Gates {
    pub const NO_AUTH: u16 = 1;
    pub const LOADING: u16 = 2;
    /// `write`, or PING (refused like a write while the log cannot be
    /// written, as in Redis, so health checks notice).
    pub const REFUSED_ON_DISK_ERROR: u16 = 4;
    pub const DENYOOM: u16 = 8;
    pub const NO_MULTI: u16 = 16;
    /// Runs while a script is busy (SCRIPT KILL, …).
    pub const ALLOW_BUSY: u16 = 32;
    /// Holds its locks for a whole script (EVAL and its kin).
    pub const PINNED: u16 = 64;
    /// Reads or changes a whole database: a transaction or script running
    /// it holds every shard (the table's `DATABASE_WIDE`).
    pub const DATABASE_WIDE: u16 = 128;
    /// Locks shards on its own: a transaction runs it after its commit
    /// (the table's `RUNS_UNLOCKED`).
    pub const RUNS_UNLOCKED: u16 = 256;
    /// Runs at once inside MULTI rather than queue
    /// (the table's `RUNS_AT_ONCE`).
    pub const RUNS_AT_ONCE: u16 = 512;
    /// `write`: refused on a read-only replica.
    pub const WRITE: u16 = 1024;
    /// `stale`: runs on a replica whose link is down even with
    /// `replica-serve-stale-data no`.
    pub const STALE: u16 = 2048;
    /// Counts as one change (the table's `ONE_CHANGE`).
    pub const ONE_CHANGE: u16 = 4096;

    fn of<R: RunKind>(spec: &Spec<R>, is_ping: bool) -> Gates {
        let mut bits = 0;
        for (redis_flag, bit) in [
            (flag::NO_AUTH, Self::NO_AUTH),
            (flag::LOADING, Self::LOADING),
            (flag::WRITE, Self::REFUSED_ON_DISK_ERROR),
            (flag::DENYOOM, Self::DENYOOM),
            (flag::NO_MULTI, Self::NO_MULTI),
            (flag::ALLOW_BUSY, Self::ALLOW_BUSY),
            (flag::WRITE, Self::WRITE),
            (flag::STALE, Self::STALE),
        ] {
            if spec.has(redis_flag) {
                bits |= bit;
            }
        }
        if is_ping {
            bits |= Self::REFUSED_ON_DISK_ERROR;
        }
        if spec.run.is_script() {
            bits |= Self::PINNED;
        }
        for (applies, bit) in [
            (trait_::DATABASE_WIDE, Self::DATABASE_WIDE),
            (trait_::RUNS_UNLOCKED, Self::RUNS_UNLOCKED),
            (trait_::RUNS_AT_ONCE, Self::RUNS_AT_ONCE),
            (trait_::ONE_CHANGE, Self::ONE_CHANGE),
        ] {
            if spec.is(applies) {
                bits |= bit;
            }
        }
        Gates(bits)
    }

    pub fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
}

type NameMap = HashMap<Vec<u8>, usize, foldhash::fast::RandomState>;

/// Longest command or subcommand name looked up without allocating.
const NAME_LEN_BYTES_MAX: usize = 32;

impl<R: RunKind> CommandTable<R> {
    /// The table of `families` (each a list of rows), before any
    /// `rename-command`.
    pub fn of_families(families: &[&'static [Spec<R>]]) -> Self {
        let mut table = CommandTable {
            specs: Vec::new(),
            full_names: Vec::new(),
            top_level: NameMap::default(),
            subcommands: Vec::new(),
            by_full_name: NameMap::default(),
            ping_id: usize::MAX,
            debug_id: usize::MAX,
            asking_id: usize::MAX,
            migrate_id: usize::MAX,
            exec_id: usize::MAX,
            gates: Vec::new(),
        };
        for spec in families.iter().flat_map(|family| family.iter()) {
            let parent = table.specs.len();
            table.specs.push(spec);
            table.full_names.push(spec.name.to_owned());
            table
                .top_level
                .insert(spec.name.as_bytes().to_vec(), parent);
            let mut subs = NameMap::default();
            for sub in spec.subcommands {
                let id = table.specs.len();
                table.specs.push(sub);
                table.full_names.push(format!("{}|{}", spec.name, sub.name));
                subs.insert(sub.name.as_bytes().to_vec(), id);
            }
            table
                .subcommands
                .resize_with(table.specs.len(), NameMap::default);
            table.subcommands[parent] = subs;
        }
        table.by_full_name = (table.full_names.iter().enumerate())
            .map(|(id, name)| (name.as_bytes().to_vec(), id))
            .collect();
        table.ping_id = table.lookup(b"ping").expect("PING is in the table");
        table.debug_id = table.lookup(b"debug").expect("DEBUG is in the table");
        table.asking_id = table.lookup(b"asking").expect("ASKING is in the table");
        table.migrate_id = table.lookup(b"migrate").expect("MIGRATE is in the table");
        table.exec_id = table.lookup(b"exec").expect("EXEC is in the table");
        table.gates = (0..table.specs.len())
            .map(|id| Gates::of(table.specs[id], id == table.ping_id))
            .collect();
        table
    }

    /// Whether `name` (a request's first argument) names EXEC.
    pub fn is_exec(&self, name: &[u8]) -> bool {
        self.lookup(name)
            .is_some_and(|id| self.specs[id].run.is_exec())
    }

    /// A command or subcommand by its original full name (`get`,
    /// `config|get`), whatever `rename-command` did.
    pub fn original_id(&self, full_name: &[u8]) -> Option<usize> {
        let lower = full_name.to_ascii_lowercase();
        self.by_full_name.get(&lower).copied()
    }

    /// The ids of command `id`'s subcommands (they follow it).
    pub fn subcommand_ids(&self, id: usize) -> std::ops::Range<usize> {
        if self.is_subcommand(id) {
            return id..id;
        }
        id + 1..id + 1 + self.specs[id].subcommands.len()
    }

    /// The top-level command of `id` (itself when it is one).
    pub fn top_level_of(&self, id: usize) -> usize {
        (0..=id)
            .rev()
            .find(|&at| !self.is_subcommand(at))
            .expect("the first id is a command")
    }

    pub fn is_subcommand(&self, id: usize) -> bool {
        self.full_names[id].contains('|')
    }

    pub fn has_subcommands(&self, id: usize) -> bool {
        !self.is_subcommand(id) && !self.specs[id].subcommands.is_empty()
    }

    /// The flags dispatch checks, of command `id`.
    pub fn gates(&self, id: usize) -> Gates {
        self.gates[id]
    }

    /// How many commands the table holds (COMMAND COUNT).
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Never true for the built table; here because `len` is.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The key arguments of `args` whose values the command reads, so that
    /// cold values can be read in before it runs (tiering). Commands that
    /// only look at or replace a key (DEL, EXISTS, TTL, EXPIRE, TYPE, SET,
    /// MSET, MEMORY USAGE, …: `READS_NO_VALUE` in the table) need no value,
    /// except SET with GET, which returns the old one.
    pub fn value_keys<'a>(&self, args: &'a [Bytes]) -> Vec<&'a [u8]> {
        let Some(mut id) = self.lookup(&args[0]) else {
            return Vec::new();
        };
        if !self.specs[id].subcommands.is_empty() {
            match args.get(1).and_then(|sub| self.lookup_subcommand(id, sub)) {
                Some(sub) => id = sub,
                None => return Vec::new(),
            }
        }
        let spec = self.specs[id];
        // A command whose key flags depend on its arguments (SET with GET
        // or IFEQ) reads the value when its key gets "access".
        let reads_old_value = spec.keys_hook.is_some()
            && keyspec::keys_and_flags(spec.keys, spec.keys_hook, args)
                .is_ok_and(|keys| keys.iter().any(|(_, flags)| flags.contains(&"access")));
        if (spec.is(trait_::READS_NO_VALUE) && !reads_old_value) || !spec.arity_ok(args.len()) {
            return Vec::new();
        }
        spec.key_positions(args)
            .into_iter()
            .map(|at| &args[at][..])
            .collect()
    }

    /// `rename-command old new`: the command answers to `new` only (to
    /// nothing when `new` is empty), for clients and scripts alike.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), String> {
        let old_key = old.to_ascii_lowercase().into_bytes();
        let Some(id) = self.top_level.remove(&old_key) else {
            return Err(format!("No such command '{old}' in rename-command"));
        };
        if new.is_empty() {
            return Ok(());
        }
        let new_key = new.to_ascii_lowercase().into_bytes();
        if self.top_level.contains_key(&new_key) {
            self.top_level.insert(old_key, id);
            return Err(format!(
                "Target command name '{new}' already exists in rename-command"
            ));
        }
        self.top_level.insert(new_key, id);
        Ok(())
    }

    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        with_lowercase(name, |lower| self.top_level.get(lower).copied())
    }

    /// The command `args` names: its subcommand's id for a container
    /// given a known subcommand, else the command's; `None` for an
    /// unknown command or subcommand.
    pub fn resolve(&self, args: &[Bytes]) -> Option<usize> {
        let id = self.lookup(args.first()?)?;
        match args.get(1) {
            Some(sub) if !self.specs[id].subcommands.is_empty() => self.lookup_subcommand(id, sub),
            _ => Some(id),
        }
    }

    pub fn lookup_subcommand(&self, parent: usize, name: &[u8]) -> Option<usize> {
        with_lowercase(name, |lower| self.subcommands[parent].get(lower).copied())
    }

    /// Top-level commands, in table order.
    pub fn top_level(&self) -> impl Iterator<Item = (usize, &'static Spec<R>)> + '_ {
        self.specs
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.full_names[*i].contains('|'))
            .map(|(i, s)| (i, *s))
    }
}

fn with_lowercase<R>(name: &[u8], f: impl FnOnce(&[u8]) -> Option<R>) -> Option<R> {
    if name.len() > NAME_LEN_BYTES_MAX {
        return None;
    }
    let mut buf = [0u8; NAME_LEN_BYTES_MAX];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    f(lower)
}
