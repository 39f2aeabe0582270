//! The vocabulary of the command table's rows: Redis' command flags and
//! ACL categories as bit sets, in Redis' order (COMMAND INFO and ACL CAT
//! list them so), and Strata's own per-command traits, which tell
//! dispatch, transactions, scripts and tiering how to treat a command.
//! A leaf: the table, dispatch and the ACL read it; it names nothing.
//!
//! Rows write them with the macros (`#[macro_use]` on this module makes
//! them reach the table): `flags![WRITE, DENYOOM, FAST]`,
//! `categories![WRITE, STRING, FAST]`, `traits![DATABASE_WIDE]`.

/// A set of bits over a list of names, in the list's order.
macro_rules! bit_set {
    ($(#[$doc:meta])* $set:ident, $module:ident, [$($(#[$bit_doc:meta])* $name:ident = $text:literal),* $(,)?]) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $set(u32);

        impl $set {
            /// Each bit's name, in order.
            pub const NAMES: &[(&str, $set)] = &[$(($text, $module::$name)),*];

            /// The union of `bits`.
            pub const fn of(bits: &[$set]) -> $set {
                let mut union = 0;
                let mut i = 0;
                while i < bits.len() {
                    union |= bits[i].0;
                    i += 1;
                }
                $set(union)
            }

            /// Whether every bit of `other` is set here.
            pub const fn has(self, other: $set) -> bool {
                self.0 & other.0 == other.0 && other.0 != 0
            }

            /// The names of the bits set, in order.
            pub fn names(self) -> impl Iterator<Item = &'static str> {
                Self::NAMES
                    .iter()
                    .filter(move |(_, bit)| self.has(*bit))
                    .map(|(name, _)| *name)
            }

            /// The bit named `name`.
            pub fn named(name: &str) -> Option<$set> {
                Self::NAMES.iter().find(|(n, _)| *n == name).map(|(_, bit)| *bit)
            }

            /// The bits as a number (bit i: `NAMES[i]`).
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// How many bits are set.
            pub const fn count(self) -> usize {
                self.0.count_ones() as usize
            }
        }

        /// The single bits, by name.
        pub mod $module {
            use super::$set;
            bit_set!(@consts $set, 0, $($(#[$bit_doc])* $name,)*);
        }
    };
    (@consts $set:ident, $n:expr, $(#[$bit_doc:meta])* $name:ident, $($rest:tt)*) => {
        $(#[$bit_doc])*
        pub const $name: $set = $set(1 << $n);
        bit_set!(@consts $set, $n + 1, $($rest)*);
    };
    (@consts $set:ident, $n:expr,) => {};
}

bit_set!(
    /// Redis' command flags, in the order COMMAND INFO lists them (with
    /// the ones Redis hides from it after them).
    Flags,
    flag,
    [
        WRITE = "write",
        READONLY = "readonly",
        DENYOOM = "denyoom",
        ADMIN = "admin",
        PUBSUB = "pubsub",
        NOSCRIPT = "noscript",
        BLOCKING = "blocking",
        LOADING = "loading",
        STALE = "stale",
        SKIP_MONITOR = "skip_monitor",
        SKIP_SLOWLOG = "skip_slowlog",
        ASKING = "asking",
        FAST = "fast",
        NO_AUTH = "no_auth",
        NO_MANDATORY_KEYS = "no_mandatory_keys",
        NO_ASYNC_LOADING = "no_async_loading",
        NO_MULTI = "no_multi",
        ALLOW_BUSY = "allow_busy",
        /// Hidden from COMMAND INFO, as in Redis.
        MAY_REPLICATE = "may_replicate",
        /// Hidden from COMMAND INFO, as in Redis.
        SENTINEL = "sentinel",
        /// Hidden from COMMAND INFO, as in Redis.
        ONLY_SENTINEL = "only_sentinel",
    ]
);

impl Flags {
    /// The flags COMMAND INFO shows (Redis hides the last three).
    pub fn shown(self) -> impl Iterator<Item = &'static str> {
        let hidden = Flags::of(&[flag::MAY_REPLICATE, flag::SENTINEL, flag::ONLY_SENTINEL]);
        Flags(self.0 & !hidden.0).names()
    }
}

bit_set!(
    /// Redis 7's ACL categories, in its order (ACL CAT lists them so).
    Categories,
    category,
    [
        KEYSPACE = "keyspace",
        READ = "read",
        WRITE = "write",
        SET = "set",
        SORTEDSET = "sortedset",
        LIST = "list",
        HASH = "hash",
        STRING = "string",
        BITMAP = "bitmap",
        HYPERLOGLOG = "hyperloglog",
        GEO = "geo",
        STREAM = "stream",
        PUBSUB = "pubsub",
        ADMIN = "admin",
        FAST = "fast",
        SLOW = "slow",
        BLOCKING = "blocking",
        DANGEROUS = "dangerous",
        CONNECTION = "connection",
        TRANSACTION = "transaction",
        SCRIPTING = "scripting",
    ]
);

bit_set!(
    /// Strata's own properties of a command, beyond Redis' flags: how
    /// dispatch, transactions, scripts and tiering treat it.
    Traits,
    traits,
    [
        /// Reads no value of its keys (only looks at or replaces them):
        /// a cold value is not read from disk before it runs.
        READS_NO_VALUE = "reads_no_value",
        /// Reads or changes a whole database: a transaction or script
        /// running it holds every shard, and it runs on those.
        DATABASE_WIDE = "database_wide",
        /// Locks shards on its own (introspection): a transaction runs
        /// it after its commit, a script refuses it.
        RUNS_UNLOCKED = "runs_unlocked",
        /// Runs under a script's locks even so (reads no key, or reads
        /// every shard once the script holds them all).
        UNDER_SCRIPT_LOCKS = "under_script_locks",
        /// Runs at once inside MULTI rather than queue.
        RUNS_AT_ONCE = "runs_at_once",
        /// Allowed to a RESP2 client in subscribed mode.
        WHEN_SUBSCRIBED = "when_subscribed",
        /// Never called from a script, even with deny-scripts disabled:
        /// it would re-enter the script's VM or change its session's mode.
        NEVER_FROM_SCRIPTS = "never_from_scripts",
        /// Counts as one change to the dataset (`rdb_changes_since_last_save`)
        /// whatever it logs, as Redis counts it: LMOVE's pop and push,
        /// RENAME's delete and set.
        ONE_CHANGE = "one_change",
    ]
);

/// `flags![WRITE, FAST]`: Redis command flags.
macro_rules! flags {
    ($($name:ident),* $(,)?) => {
        $crate::commands::spec::Flags::of(&[$($crate::commands::spec::flag::$name),*])
    };
}

/// `categories![READ, STRING, FAST]`: ACL categories.
macro_rules! categories {
    ($($name:ident),* $(,)?) => {
        $crate::commands::spec::Categories::of(&[$($crate::commands::spec::category::$name),*])
    };
}

/// `traits![DATABASE_WIDE]`: Strata's per-command traits.
macro_rules! traits {
    ($($name:ident),* $(,)?) => {
        $crate::commands::spec::Traits::of(&[$($crate::commands::spec::traits::$name),*])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_in_order_and_hidden_flags_are_not_shown() {
        let f = flags![FAST, WRITE, MAY_REPLICATE];
        assert_eq!(
            f.names().collect::<Vec<_>>(),
            ["write", "fast", "may_replicate"]
        );
        assert_eq!(f.shown().collect::<Vec<_>>(), ["write", "fast"]);
        assert!(f.has(flag::WRITE) && !f.has(flag::READONLY));
        assert!(!f.has(Flags::default()), "the empty set is in nothing");
        assert_eq!(Categories::named("geo"), Some(category::GEO));
        assert_eq!(Categories::NAMES.len(), 21);
        assert_eq!(categories![READ, SLOW].count(), 2);
        assert_eq!(
            traits![DATABASE_WIDE].names().collect::<Vec<_>>(),
            ["database_wide"]
        );
    }
}
