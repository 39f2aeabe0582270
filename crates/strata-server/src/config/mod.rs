//! Configuration: redis.conf syntax and names.
//!
//! One [`DIRECTIVES`] table describes every option once — its name, whether
//! CONFIG SET may change it at run time, how to print it and how to parse
//! it. The config file, `--name value` command-line arguments, CONFIG GET
//! and CONFIG SET all go through that table, so they cannot disagree.
//!
//! The table and its parsers are in `directives.rs`; CONFIG REWRITE is in
//! `rewrite.rs`.
//!
//! Running connections read the configuration through [`SharedConfig`]: a
//! snapshot `Arc<Config>` plus a generation counter, so the hot path costs
//! one relaxed atomic load per batch and CONFIG SET never blocks a reader.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

mod directives;
mod meanings;
mod model;
mod rewrite;

pub use directives::{DIRECTIVES, directive, parse_memory};
pub use model::{
    ClientsLimit, ClusterSettings, Config, Gate, MaxmemoryPolicy, OutputLimit, ReplicationSettings,
    format_percentile,
};
pub use rewrite::rewrite_file;

impl Config {
    /// What all clients' buffers may hold together (0: no limit).
    pub fn clients_limit_bytes(&self) -> u64 {
        match self.maxmemory_clients {
            ClientsLimit::Bytes(bytes) => bytes,
            ClientsLimit::Percent(percent) => self.maxmemory.saturating_mul(percent) / 100,
        }
    }

    /// Applies one option, as read from a file or the command line.
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        if let Some(directive) = directive(name) {
            return (directive.set)(self, args);
        }
        if let Some(accepted) = crate::config_accepted::find(name) {
            return self.set_accepted(accepted, args);
        }
        if name.eq_ignore_ascii_case("rename-command") {
            let [old, new] = args else {
                return Err("wrong number of arguments".into());
            };
            self.rename_commands.push((old.clone(), new.clone()));
            return Ok(());
        }
        if name.eq_ignore_ascii_case("user") {
            if args.is_empty() {
                return Err("wrong number of arguments".into());
            }
            if self.users.iter().any(|line| line[0] == args[0]) {
                return Err(
                    "Duplicate user found. A user can only be defined once in config files".into(),
                );
            }
            self.users.push(args.to_vec());
            return Ok(());
        }
        Err(match name.to_ascii_lowercase().as_str() {
            "loadmodule" => "modules are not supported",
            _ => "Bad directive or wrong number of arguments",
        }
        .into())
    }

    /// Sets a directive Strata accepts without using it (see
    /// `crate::config_accepted`).
    fn set_accepted(
        &mut self,
        accepted: &'static crate::config_accepted::Accepted,
        args: &[String],
    ) -> Result<(), String> {
        let value = accepted.parse(args)?;
        if let Some(why) = crate::config_accepted::refused(accepted.name, &value) {
            return Err(why.into());
        }
        self.accepted.insert(accepted.name, value);
        self.replication = ReplicationSettings::of(self);
        self.cluster = ClusterSettings::of(self);
        Ok(())
    }

    /// Hands the engine the settings it reads on every command: hash and
    /// collection encodings, and how keys record access (LRU or LFU).
    pub fn apply_to_engine(&self, keyspace: &strata_engine::Keyspace) {
        keyspace.hash_limits().set(self.hash_limits());
        strata_engine::types::limits::set(self.collection_limits);
        strata_engine::keyspace::access::set_lfu(
            self.maxmemory_policy.is_lfu(),
            self.lfu_log_factor,
            self.lfu_decay_time,
        );
        strata_engine::latency::set_threshold_ms(self.latency_monitor_threshold);
        // At once, not at the checkpoint thread's next look: a write
        // acknowledged after CONFIG SET appendfsync always is synced.
        self.apply_to_log(keyspace);
    }

    /// `appendfsync` and `log-direct-io`, on the log once it is open (the
    /// checkpoint thread applies them again after loading).
    pub fn apply_to_log(&self, keyspace: &strata_engine::Keyspace) {
        if let Some(log) = keyspace.change_log()
            && log.fsync_policy() != self.appendfsync
        {
            log.set_fsync_policy(self.appendfsync);
        }
        if let Some(log) = keyspace.log() {
            // Takes effect from the next segment on.
            log.set_direct_io(self.log_direct_io);
        }
    }

    /// The value of the accepted directive `name` (as set, else Redis'
    /// default); empty for a name that is not one.
    pub fn setting(&self, name: &str) -> String {
        crate::config_accepted::find(name)
            .map(|accepted| self.accepted_value(accepted))
            .unwrap_or_default()
    }

    /// The value of an accepted directive: as set, else Redis' default.
    pub fn accepted_value(&self, accepted: &crate::config_accepted::Accepted) -> String {
        self.accepted
            .get(accepted.name)
            .cloned()
            .unwrap_or_else(|| accepted.default.to_owned())
    }

    /// Builds the configuration from `strata-server [file] [--name value ...]`,
    /// as redis-server takes it.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut config = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first().filter(|a| !a.starts_with("--")) {
            let path = PathBuf::from(first);
            config.load_file(&path, 0)?;
            config.config_file = Some(std::fs::canonicalize(&path).unwrap_or(path));
            rest = &rest[1..];
        }
        let mut i = 0;
        while i < rest.len() {
            let Some(name) = rest[i].strip_prefix("--") else {
                return Err(format!(
                    "Unexpected argument '{}': options are written --name value",
                    rest[i]
                ));
            };
            let mut values = Vec::new();
            i += 1;
            while i < rest.len() && !rest[i].starts_with("--") {
                values.push(rest[i].clone());
                i += 1;
            }
            config
                .apply(name, &values)
                .map_err(|e| format!("--{name}: {e}"))?;
        }
        Ok(config)
    }

    fn load_file(&mut self, path: &PathBuf, depth: usize) -> Result<(), String> {
        const INCLUDE_DEPTH_MAX: usize = 16;
        if depth > INCLUDE_DEPTH_MAX {
            return Err("include nesting too deep".into());
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "Fatal error, can't open config file '{}': {e}",
                path.display()
            )
        })?;
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fatal = |why: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line {}\n>>> '{trimmed}'\n{why}",
                    number + 1
                )
            };
            let parts = strata_resp::split_args(trimmed.as_bytes())
                .ok_or_else(|| fatal("Unbalanced quotes in configuration line"))?;
            let parts: Vec<String> = parts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            let (name, args) = parts.split_first().expect("non-empty line has a word");
            if name.eq_ignore_ascii_case("include") {
                let [file] = args else {
                    return Err(fatal("Bad directive or wrong number of arguments"));
                };
                self.load_file(&PathBuf::from(file), depth + 1)?;
                continue;
            }
            self.apply(name, args).map_err(|e| fatal(&e))?;
        }
        Ok(())
    }
}

/// `strata-server --help`: usage, then every option of [`DIRECTIVES`] and
/// `crate::config_accepted` with its default, from the tables themselves.
pub fn help() -> String {
    let defaults = Config::default();
    let mut text = String::from(
        "Usage: strata-server [/path/to/strata.conf] [--option value ...]\n\
         Options take redis.conf's names and syntax, in the file or as --name value,\n\
         e.g.: strata-server --port 7777 --dir ./data\n\n\
         Options (default; 'runtime' if CONFIG SET may change it):\n",
    );
    for directive in DIRECTIVES {
        let value = (directive.get)(&defaults);
        let runtime = if directive.mutable { ", runtime" } else { "" };
        text.push_str(&format!("  --{:<34} {value:?}{runtime}\n", directive.name));
        text.push_str(&format!("      {}\n", meanings::meaning(directive.name)));
    }
    text.push_str(
        "  user <name> <rules...>               (none)\n      an ACL user, as in redis.conf (repeatable)\n",
    );
    text.push_str("\nAccepted from redis.conf without effect in Strata:\n");
    for accepted in crate::config_accepted::ACCEPTED {
        let runtime = if accepted.mutable { ", runtime" } else { "" };
        text.push_str(&format!(
            "  --{:<34} {:?}{runtime}\n      {}\n",
            accepted.name,
            accepted.default,
            crate::config_accepted::note(accepted.name)
                .unwrap_or("used by replication (docs/replication.md)")
        ));
    }
    text
}
/// The live configuration shared by all threads.
pub struct SharedConfig {
    current: RwLock<Arc<Config>>,
    generation: AtomicU64,
}

impl SharedConfig {
    pub fn new(config: Config) -> Self {
        SharedConfig {
            current: RwLock::new(Arc::new(config)),
            generation: AtomicU64::new(0),
        }
    }

    pub fn get(&self) -> Arc<Config> {
        self.current.read().clone()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// CONFIG SET without a check (tests).
    #[cfg(test)]
    pub fn set_many(&self, pairs: &[(String, String)]) -> Result<(), String> {
        self.set_many_checked(pairs, |_, _| Ok(()))
    }

    /// CONFIG SET: applies every (name, value) pair or none of them, with
    /// `check(old, new)` run on the result before it replaces the running
    /// configuration: its error leaves everything as it was (TLS files
    /// that do not load, say).
    pub fn set_many_checked(
        &self,
        pairs: &[(String, String)],
        check: impl FnOnce(&Config, &Config) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut current = self.current.write();
        let mut updated = (**current).clone();
        for (name, value) in pairs {
            let failed = |e: String| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {e}")
            };
            let Some(directive) = directive(name) else {
                let Some(accepted) = crate::config_accepted::find(name) else {
                    return Err(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ));
                };
                if !accepted.mutable {
                    return Err(failed("can't set immutable config".into()));
                }
                updated
                    .set_accepted(accepted, std::slice::from_ref(value))
                    .map_err(failed)?;
                continue;
            };
            // An immutable setting "set" to the value it has changes
            // nothing (test suites set `appendonly yes` on a server that
            // has it).
            if !directive.mutable && (directive.get)(&updated) == *value {
                continue;
            }
            if !directive.mutable {
                return Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
                ));
            }
            (directive.set)(&mut updated, std::slice::from_ref(value)).map_err(|e| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {e}")
            })?;
        }
        check(&current, &updated)?;
        crate::log::set_level(updated.loglevel);
        *current = Arc::new(updated);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// REPLICAOF changed the primary followed (`None`: none): the
    /// `replicaof` setting says so, for CONFIG GET and CONFIG REWRITE (as
    /// Redis rewrites it, so a restarted replica follows the same primary).
    pub fn record_replicaof(&self, primary: Option<(&str, u16)>) {
        let mut current = self.current.write();
        let mut updated = (**current).clone();
        match primary {
            Some((host, port)) => {
                updated
                    .accepted
                    .insert("replicaof", format!("{host} {port}"));
            }
            None => {
                updated.accepted.remove("replicaof");
            }
        }
        *current = Arc::new(updated);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::storage::log::FsyncPolicy;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn memory_units_follow_redis_conf() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2mb"), Some(2 << 20));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn command_line_like_redis_server() {
        let c = Config::from_args(&strings(&[
            "--port",
            "7000",
            "--bind",
            "0.0.0.0",
            "::",
            "--client-output-buffer-limit",
            "normal 1mb 512kb 10",
        ]))
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.bind, vec!["0.0.0.0", "::"]);
        assert_eq!(
            c.output_limit_normal,
            OutputLimit {
                hard_bytes: 1 << 20,
                soft_bytes: 512 << 10,
                soft_seconds: 10
            }
        );
        assert!(Config::from_args(&strings(&["--nosuch", "1"])).is_err());
        assert!(Config::from_args(&strings(&["--port", "70000"])).is_err());
    }

    #[test]
    fn config_file_with_quotes_and_include() {
        let dir = std::env::temp_dir().join(format!("strata-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let included = dir.join("inc.conf");
        std::fs::write(&included, "maxclients 77\n").unwrap();
        let main = dir.join("main.conf");
        std::fs::write(
            &main,
            format!(
                "# comment\nrequirepass \"p a ss\"\ninclude {}\nprotected-mode no\n",
                included.display()
            ),
        )
        .unwrap();
        let c = Config::from_args(&strings(&[main.to_str().unwrap(), "--port", "1234"])).unwrap();
        assert_eq!(
            (
                c.requirepass.as_str(),
                c.maxclients,
                c.protected_mode,
                c.port
            ),
            ("p a ss", 77, false, 1234)
        );
        std::fs::write(&main, "port abc\n").unwrap();
        let err = Config::from_args(&strings(&[main.to_str().unwrap()])).unwrap_err();
        assert!(
            err.contains("at line 1") && err.contains("parsed into an integer"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn persistence_settings() {
        let c = Config::default();
        assert!(c.appendonly);
        assert_eq!(c.appendfsync, FsyncPolicy::EverySec);
        assert_eq!(
            (directive("save").unwrap().get)(&c),
            "3600 1 300 100 60 10000"
        );
        let c = Config::from_args(&strings(&[
            "--appendonly",
            "no",
            "--save",
            "",
            "--appendfsync",
            "always",
        ]))
        .unwrap();
        assert_eq!(
            (
                (directive("appendonly").unwrap().get)(&c),
                (directive("save").unwrap().get)(&c),
                c.appendfsync
            ),
            ("no".into(), String::new(), FsyncPolicy::Always)
        );
        let c = Config::from_args(&strings(&["--save", "900 1 60 5"])).unwrap();
        assert_eq!(c.save_points, vec![(900, 1), (60, 5)]);
        assert!(Config::from_args(&strings(&["--save", "900"])).is_err());
        assert!(Config::from_args(&strings(&["--appendfsync", "sometimes"])).is_err());
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let shared = SharedConfig::new(Config::default());
        let err = shared
            .set_many(&[
                ("maxclients".into(), "5".into()),
                ("databases".into(), "1".into()),
            ])
            .unwrap_err();
        assert!(err.contains("immutable"), "{err}");
        assert_eq!(shared.get().maxclients, 10_000);
        shared
            .set_many(&[("maxclients".into(), "5".into())])
            .unwrap();
        assert_eq!((shared.get().maxclients, shared.generation()), (5, 1));
    }
}
