//! Function libraries (FUNCTION LOAD, FCALL): what the server knows of
//! them, and how they are stored.
//!
//! A library is Lua code that starts with `#!lua name=<library>` and
//! calls `redis.register_function` while it loads. The server keeps each
//! library's code and what it registered ([`Libraries`], one immutable
//! snapshot replaced on every change, numbered by a generation). Worker
//! threads load every library into their own Lua VM the first time they
//! run a function of a generation (`crate::scripting::Vm`), so FCALL on
//! different threads runs in parallel, as EVAL does.
//!
//! **Durability.** Each library is a metadata item of the keyspace,
//! `function:<lower-case name>` holding its code (`Keyspace::update_metas_in`,
//! record kind META in `docs/storage.md`): FUNCTION LOAD and DELETE commit
//! the one library they change as one log record, FLUSH and RESTORE the
//! libraries they change in one group, with every shard locked, before
//! they reply; checkpoints copy the items and recovery restores them, and
//! start-up loads them back. (The whole set used to be one item,
//! `functions`, FUNCTION DUMP's payload, logged again at every change: a
//! thousand libraries loaded one by one logged half a million. A data
//! directory that has it is read as before, and the next change moves it
//! to items per library.) FLUSHALL does not touch libraries, as in Redis.
//!
//! A change runs in place on the current snapshot (copied first only if
//! a reader holds it), so FUNCTION LOAD does not copy the other libraries.
//!
//! Names of libraries and functions are matched without regard to case,
//! as Redis matches them; their spelling is kept for FUNCTION LIST.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::RwLock;

use crate::rdb;

/// The metadata item every library was stored under as one image (data
/// directories written before items per library; see the module doc).
pub const META_NAME: &[u8] = b"functions";
/// What the metadata item of one library is called: this, then its name
/// in lower case.
pub const LIBRARY_META_PREFIX: &[u8] = b"function:";

/// The metadata item of the library called `name` (lower case).
pub fn library_meta_name(name: &str) -> Vec<u8> {
    let mut item = LIBRARY_META_PREFIX.to_vec();
    item.extend_from_slice(name.as_bytes());
    item
}

/// FUNCTION DUMP's payload without its footer for these library codes,
/// as an RDB file's function records hold them.
pub fn dump_body<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(rdb::OPCODE_FUNCTION2);
        rdb::write_string(&mut out, code);
    }
    out
}
/// The only engine.
pub const ENGINE: &str = "LUA";

/// The flags a function may declare, in Redis' order (FUNCTION LIST
/// prints them in it).
pub const FLAG_NAMES: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];
pub const FLAG_NO_WRITES: u8 = 1;
pub const FLAG_ALLOW_OOM: u8 = 2;

/// One registered function.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<String>,
    /// Bit `n` set: [`FLAG_NAMES`]`[n]`.
    pub flags: u8,
}

/// One library.
#[derive(Clone, Debug)]
pub struct Library {
    pub name: String,
    /// The code as loaded, shebang line included.
    pub code: Arc<str>,
    pub functions: Vec<FunctionInfo>,
}

/// A snapshot of every library.
#[derive(Clone, Debug, Default)]
pub struct Libraries {
    pub generation: u64,
    /// By lower-case name.
    pub libraries: BTreeMap<String, Library>,
    /// Lower-case function name → lower-case library name.
    functions: BTreeMap<String, String>,
}

/// A library's shebang line, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct Metadata<'a> {
    pub engine: String,
    pub name: String,
    /// The code after the shebang line, from its newline on (so line
    /// numbers stay those of the whole text).
    pub body: &'a str,
}

/// Parses `#!<engine> name=<name>` as Redis does (words split like
/// redis-cli arguments, so `name="foo"` is `foo`).
pub fn parse_metadata(code: &str) -> Result<Metadata<'_>, String> {
    let Some(rest) = code.strip_prefix("#!") else {
        return Err("ERR Missing library metadata".into());
    };
    let Some(line_end) = rest.find('\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    // Split with the `#!`, which the first word then loses (so `#! x`
    // names the engine "").
    let parts = split_args(&code[..line_end + 2]).ok_or("ERR Invalid library metadata")?;
    let mut parts = parts.into_iter();
    let engine = parts
        .next()
        .map(|first| first[2..].to_owned())
        .unwrap_or_default();
    let mut name = None;
    for part in parts {
        match part.get(..5) {
            Some(prefix) if prefix.eq_ignore_ascii_case("name=") => {
                if name.is_some() {
                    return Err(
                        "ERR Invalid metadata value, name argument was given multiple times".into(),
                    );
                }
                name = Some(part[5..].to_owned());
            }
            _ => return Err(format!("ERR Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    Ok(Metadata {
        engine,
        name,
        body: &rest[line_end..],
    })
}

/// Splits a line into words, honouring double and single quotes (the
/// subset of `sdssplitargs` a shebang line needs). `None` when a quote is
/// left open.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(words);
        }
        let mut word = String::new();
        let mut quote = None;
        loop {
            match (chars.next(), quote) {
                (None, None) => break,
                (None, Some(_)) => return None,
                (Some(c), Some(q)) if c == q => quote = None,
                (Some('\\'), Some('"')) => word.push(chars.next()?),
                (Some(c), Some(_)) => word.push(c),
                (Some(c), None) if c.is_ascii_whitespace() => break,
                (Some(c @ ('"' | '\'')), None) => quote = Some(c),
                (Some(c), None) => word.push(c),
            }
        }
        words.push(word);
    }
}

/// Redis' rule for library and function names.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Generations are unique across every snapshot the process makes.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

impl Libraries {
    pub fn function(&self, name: &str) -> Option<(&Library, &FunctionInfo)> {
        let library = self.functions.get(&name.to_ascii_lowercase())?;
        let library = &self.libraries[library];
        let info = library
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?;
        Some((library, info))
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Adds `library`, replacing one of the same name when `replace`.
    /// Errors as Redis' FUNCTION LOAD (`quoted`: the library name in
    /// quotes, as LOAD words it; RESTORE's join does not).
    pub fn add(&mut self, library: Library, replace: bool, quoted: bool) -> Result<(), String> {
        let key = library.name.to_ascii_lowercase();
        if self.libraries.contains_key(&key) && !replace {
            return Err(match quoted {
                true => format!("ERR Library '{}' already exists", library.name),
                false => format!("ERR Library {} already exists", library.name),
            });
        }
        for function in &library.functions {
            let name = function.name.to_ascii_lowercase();
            if self.functions.get(&name).is_some_and(|owner| *owner != key) {
                return Err(format!("ERR Function {} already exists", function.name));
            }
        }
        self.remove(&library.name);
        for function in &library.functions {
            self.functions
                .insert(function.name.to_ascii_lowercase(), key.clone());
        }
        self.libraries.insert(key, library);
        Ok(())
    }

    /// Removes the library called `name`; false if there is none.
    pub fn remove(&mut self, name: &str) -> bool {
        let key = name.to_ascii_lowercase();
        let Some(library) = self.libraries.remove(&key) else {
            return false;
        };
        for function in &library.functions {
            self.functions.remove(&function.name.to_ascii_lowercase());
        }
        true
    }

    /// FUNCTION DUMP's payload: each library's code after its opcode,
    /// then the RDB version and CRC64.
    pub fn dump(&self) -> Vec<u8> {
        let mut out = dump_body(self.libraries.values().map(|l| l.code.as_bytes()));
        rdb::seal(&mut out);
        out
    }

    /// The same snapshot under a new generation number.
    pub fn renumbered(mut self) -> Libraries {
        self.generation = NEXT_GENERATION.fetch_add(1, Relaxed);
        self
    }
}

/// The library codes in a FUNCTION DUMP payload, in order; errors as
/// FUNCTION RESTORE words them.
pub fn codes_of_payload(payload: &[u8]) -> Result<Vec<String>, String> {
    let body = rdb::verify(payload).ok_or("ERR DUMP payload version or checksum are wrong")?;
    let mut reader = rdb::Reader::new(body);
    let mut codes = Vec::new();
    while !reader.is_empty() {
        let opcode = reader
            .byte()
            .map_err(|_| "ERR can not read data type".to_owned())?;
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        let failed = |_| "ERR failed loading the given functions payload".to_owned();
        let code = match opcode {
            rdb::OPCODE_FUNCTION2 => text(reader.string().map_err(failed)?),
            rdb::OPCODE_FUNCTION => {
                // 7.0 RC: name, engine, description (behind a flag), code.
                let name = text(reader.string().map_err(failed)?);
                let engine = text(reader.string().map_err(failed)?);
                if reader.len().map_err(failed)? != 0 {
                    reader.string().map_err(failed)?;
                }
                let blob = text(reader.string().map_err(failed)?);
                format!("#!{engine} name={name}\n{blob}")
            }
            _ => return Err("ERR given type is not a function".into()),
        };
        codes.push(code);
    }
    Ok(codes)
}

/// The server's libraries: the current snapshot.
pub struct Functions {
    current: RwLock<Arc<Libraries>>,
}

impl Default for Functions {
    fn default() -> Self {
        Functions {
            current: RwLock::new(Arc::new(Libraries::default().renumbered())),
        }
    }
}

impl Functions {
    pub fn snapshot(&self) -> Arc<Libraries> {
        self.current.read().clone()
    }

    /// Installs `libraries` (renumbered) as the current snapshot.
    pub fn install(&self, libraries: Libraries) {
        *self.current.write() = Arc::new(libraries.renumbered());
    }

    /// Changes the current snapshot through `f`, in place unless a reader
    /// holds it, under a new generation. `f` must change nothing when it
    /// fails (check, then change).
    pub fn change<T>(
        &self,
        f: impl FnOnce(&mut Libraries) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut current = self.current.write();
        let libraries = Arc::make_mut(&mut current);
        let result = f(libraries)?;
        libraries.generation = NEXT_GENERATION.fetch_add(1, Relaxed);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_parses_as_redis_words_it() {
        let meta = parse_metadata("#!lua name=lib\nreturn 1").unwrap();
        assert_eq!(
            (meta.engine.as_str(), meta.name.as_str(), meta.body),
            ("lua", "lib", "\nreturn 1")
        );
        let quoted = parse_metadata("#!lua name=\"foo\"\n").unwrap();
        assert_eq!(quoted.name, "foo");
        let no_engine = parse_metadata("#! name=x\n").unwrap();
        assert_eq!(
            (no_engine.engine.as_str(), no_engine.name.as_str()),
            ("", "x")
        );
        for (code, error) in [
            ("return 1", "ERR Missing library metadata"),
            ("#!lua name=x", "ERR Invalid library metadata"),
            ("#!lua\n", "ERR Library name was not given"),
            (
                "#!lua name=a name=b\n",
                "ERR Invalid metadata value, name argument was given multiple times",
            ),
            (
                "#!lua name=a foo=bar\n",
                "ERR Invalid metadata value given: foo=bar",
            ),
        ] {
            assert_eq!(parse_metadata(code).unwrap_err(), error, "{code}");
        }
    }

    fn library(name: &str, functions: &[&str]) -> Library {
        Library {
            name: name.into(),
            code: Arc::from(format!("#!lua name={name}\n")),
            functions: functions
                .iter()
                .map(|f| FunctionInfo {
                    name: (*f).into(),
                    description: None,
                    flags: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn names_collide_without_regard_to_case() {
        let mut libraries = Libraries::default();
        libraries
            .add(library("lib1", &["f1", "F2"]), false, true)
            .unwrap();
        assert_eq!(
            libraries
                .add(library("LIB1", &["g"]), false, true)
                .unwrap_err(),
            "ERR Library 'LIB1' already exists"
        );
        assert_eq!(
            libraries
                .add(library("lib2", &["f2"]), false, false)
                .unwrap_err(),
            "ERR Function f2 already exists"
        );
        libraries.add(library("lib1", &["f3"]), true, true).unwrap();
        assert!(libraries.function("F1").is_none(), "replaced away");
        assert_eq!(libraries.function("f3").unwrap().0.name, "lib1");
        libraries
            .add(library("lib2", &["f2"]), false, true)
            .unwrap();
        assert_eq!(libraries.function_count(), 2);
        assert!(libraries.remove("LIB2"));
        assert!(!libraries.remove("lib2"));
    }

    #[test]
    fn dump_payloads_hold_every_library() {
        let mut libraries = Libraries::default();
        libraries.add(library("a", &["f"]), false, true).unwrap();
        libraries.add(library("b", &["g"]), false, true).unwrap();
        let codes = codes_of_payload(&libraries.dump()).unwrap();
        assert_eq!(codes, ["#!lua name=a\n", "#!lua name=b\n"]);
        assert_eq!(
            codes_of_payload(b"bad_payload").unwrap_err(),
            "ERR DUMP payload version or checksum are wrong"
        );
        let mut wrong_type = vec![0u8, 1, 2];
        rdb::seal(&mut wrong_type);
        assert_eq!(
            codes_of_payload(&wrong_type).unwrap_err(),
            "ERR given type is not a function"
        );
    }
}
