//! FUNCTION and FCALL: Lua function libraries (see `crate::functions` for
//! the registry and how libraries are stored, `crate::scripting` for the
//! VM). A function runs exactly as an EVAL script does
//! (`commands::scripting::run_script`): atomically, under one lock set,
//! committed as one log group.

use crate::commands::Node;
use bytes::Bytes;

use super::ctx::help_lines;
use super::scripting::{
    Target, kill, refuse_if_oom, refuse_without_replicas, run_script, split_keys,
};
use super::{CmdError, CmdResult, Ctx, is, lossy};
use crate::functions::{
    ENGINE, FLAG_ALLOW_OOM, FLAG_NAMES, FLAG_NO_WRITES, LIBRARY_META_PREFIX, Libraries, Library,
    META_NAME, Metadata, codes_of_payload, library_meta_name, parse_metadata, valid_name,
};
use crate::scripting::{LOAD_TIMEOUT, Vm, with_vm};

/// Text of a whole argument (library code, names), not cut short.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Loads `code` into `vm` to learn what it registers; errors as FUNCTION
/// LOAD words them.
pub fn compile(
    vm: &Vm,
    code: &str,
    timeout: Option<std::time::Duration>,
) -> Result<Library, String> {
    compile_parsed(vm, code, checked_metadata(code)?, timeout)
}

/// Parses and checks `code`'s shebang line.
fn checked_metadata(code: &str) -> Result<Metadata<'_>, String> {
    let meta = parse_metadata(code)?;
    check_header(&meta.engine, &meta.name)?;
    Ok(meta)
}

/// [`compile`] for code whose shebang line `meta` is already checked.
fn compile_parsed(
    vm: &Vm,
    code: &str,
    meta: Metadata,
    timeout: Option<std::time::Duration>,
) -> Result<Library, String> {
    let registered = vm.load_library(meta.body, timeout, false)?;
    if registered.is_empty() {
        return Err("ERR No functions registered".into());
    }
    Ok(Library {
        name: meta.name,
        code: code.into(),
        functions: registered.into_iter().map(|r| r.info).collect(),
    })
}

fn check_header(engine: &str, name: &str) -> Result<(), String> {
    if !valid_name(name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case(ENGINE) {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    Ok(())
}

/// What a change of the libraries touched.
enum Touched {
    /// These libraries (lower-case names): loaded, replaced or deleted.
    Some(Vec<String>),
    /// Every library: the set was replaced (FLUSH, RESTORE … FLUSH).
    All,
}

/// Changes the libraries through `f` (which changes nothing when it
/// fails) and commits the items of the libraries it touched (see
/// `crate::functions`) as one group. When every library changed, or the
/// set is still stored as one item, the group starts with that item
/// emptied (a replica's FUNCTION FLUSH) and holds every library.
fn update(ctx: &mut Ctx, f: impl FnOnce(&mut Libraries) -> Result<Touched, String>) -> CmdResult {
    let functions = ctx.server.functions.clone();
    let keyspace = ctx.keyspace();
    let (_, commit) = keyspace
        .update_metas_in(ctx.keys.all(), |metas| {
            let touched = functions.change(f)?;
            let current = functions.snapshot();
            let whole = metas.get(META_NAME).is_some() || matches!(touched, Touched::All);
            let mut images = Vec::new();
            let names: Vec<String> = match touched {
                Touched::Some(names) if !whole => names,
                _ => {
                    images.push((META_NAME.to_vec(), Vec::new()));
                    let stored = (metas.with_prefix(LIBRARY_META_PREFIX)).map(|(item, _)| {
                        String::from_utf8_lossy(&item[LIBRARY_META_PREFIX.len()..])
                    });
                    let mut names: Vec<String> = stored.map(|name| name.into_owned()).collect();
                    names.extend(current.libraries.keys().cloned());
                    names.sort();
                    names.dedup();
                    names
                }
            };
            for name in names {
                let code = current.libraries.get(&name).map(|l| l.code.as_bytes());
                images.push((library_meta_name(&name), code.unwrap_or_default().to_vec()));
            }
            Ok::<_, String>((images, ()))
        })
        .map_err(CmdError::from)?;
    ctx.committed(commit);
    Ok(())
}

pub fn function_load(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut at = 2;
    while at < args.len() - 1 {
        if !is(&args[at], "REPLACE") {
            return Err(format!("ERR Unknown option given: {}", lossy(&args[at], 128)).into());
        }
        replace = true;
        at += 1;
    }
    let code = text(&args[at]);
    let meta = checked_metadata(&code)?;
    let exists = ctx
        .server
        .functions
        .snapshot()
        .libraries
        .contains_key(&meta.name.to_ascii_lowercase());
    if exists && !replace {
        return Err(format!("ERR Library '{}' already exists", meta.name).into());
    }
    let scripts = ctx.server.scripts.clone();
    let library = with_vm(&scripts, |vm| {
        let compiled = compile_parsed(vm, &code, meta, Some(LOAD_TIMEOUT));
        vm.collect_garbage();
        compiled
    })?;
    let name = library.name.clone();
    let key = name.to_ascii_lowercase();
    update(ctx, |libraries| {
        libraries.add(library, replace, true)?;
        Ok(Touched::Some(vec![key]))
    })?;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

pub fn function_delete(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let name = text(&args[2]);
    update(ctx, |libraries| match libraries.remove(&name) {
        true => Ok(Touched::Some(vec![name.to_ascii_lowercase()])),
        false => Err("ERR Library not found".into()),
    })?;
    ctx.out.ok();
    Ok(())
}

pub fn function_flush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_error("flush"));
    }
    if let Some(mode) = args.get(2)
        && !is(mode, "SYNC")
        && !is(mode, "ASYNC")
    {
        return Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into());
    }
    update(ctx, |libraries| {
        *libraries = Libraries::default();
        Ok(Touched::All)
    })?;
    ctx.out.ok();
    Ok(())
}

fn syntax_error(subcommand: &str) -> CmdError {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{subcommand}'. Try FUNCTION HELP."
    )
    .into()
}

pub fn function_dump(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let payload = ctx.server.functions.snapshot().dump();
    ctx.out.bulk(&payload);
    Ok(())
}

pub fn function_restore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 4 {
        return Err(syntax_error("restore"));
    }
    #[derive(PartialEq)]
    enum Policy {
        Append,
        Replace,
        Flush,
    }
    let policy = match args.get(3) {
        None => Policy::Append,
        Some(word) if is(word, "APPEND") => Policy::Append,
        Some(word) if is(word, "REPLACE") => Policy::Replace,
        Some(word) if is(word, "FLUSH") => Policy::Flush,
        Some(_) => {
            return Err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                    .into(),
            );
        }
    };
    let codes = codes_of_payload(&args[2])?;
    let restored = compile_all(ctx, &codes)?;
    update(ctx, |libraries| {
        if policy == Policy::Flush {
            *libraries = restored;
            return Ok(Touched::All);
        }
        // All of them or none: added to a copy, which then replaces the set.
        let mut next = libraries.clone();
        let names: Vec<String> = restored.libraries.keys().cloned().collect();
        for library in restored.libraries.into_values() {
            next.add(library, policy == Policy::Replace, false)?;
        }
        *libraries = next;
        Ok(Touched::Some(names))
    })?;
    ctx.out.ok();
    Ok(())
}

/// The libraries of `codes`, compiled into a set of their own (an error:
/// the first that does not load).
fn compile_all(ctx: &Ctx, codes: &[String]) -> Result<Libraries, CmdError> {
    let scripts = ctx.server.scripts.clone();
    with_vm(&scripts, |vm| {
        let mut compiled = Libraries::default();
        let added = codes
            .iter()
            .try_for_each(|code| compiled.add(compile(vm, code, None)?, false, true));
        // Compiling to check leaves garbage: collected once per command.
        vm.collect_garbage();
        added?;
        Ok(compiled)
    })
}

/// Replaces every library with those of `codes`, all or none, as one
/// logged change (DEBUG RELOAD of an RDB file).
pub fn replace_all(ctx: &mut Ctx, codes: &[String]) -> CmdResult {
    let compiled = compile_all(ctx, codes)?;
    update(ctx, |libraries| {
        *libraries = compiled;
        Ok(Touched::All)
    })
}

pub fn function_list(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut at = 2;
    while at < args.len() {
        let arg = &args[at];
        if !with_code && is(arg, "WITHCODE") {
            with_code = true;
        } else if pattern.is_none() && is(arg, "LIBRARYNAME") {
            at += 1;
            pattern = Some(
                args.get(at)
                    .ok_or(CmdError::from("ERR library name argument was not given"))?,
            );
        } else {
            return Err(format!("ERR Unknown argument {}", lossy(arg, 128)).into());
        }
        at += 1;
    }
    let snapshot = ctx.server.functions.snapshot();
    let listed: Vec<&Library> = snapshot
        .libraries
        .values()
        .filter(|library| {
            pattern.is_none_or(|p| strata_engine::glob::matches(p, library.name.as_bytes(), true))
        })
        .collect();
    let out = &mut ctx.out;
    out.array(listed.len());
    for library in listed {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(library.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(ENGINE.as_bytes());
        out.bulk(b"functions");
        out.array(library.functions.len());
        for function in &library.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(function.name.as_bytes());
            out.bulk(b"description");
            match &function.description {
                Some(text) => out.bulk(text.as_bytes()),
                None => out.null_bulk(),
            }
            out.bulk(b"flags");
            let flags: Vec<&str> = FLAG_NAMES
                .iter()
                .enumerate()
                .filter(|(n, _)| function.flags & (1 << n) != 0)
                .map(|(_, name)| *name)
                .collect();
            out.set(flags.len());
            for flag in flags {
                out.simple(flag);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(library.code.as_bytes());
        }
    }
    Ok(())
}

pub fn function_stats(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    write_function_stats(ctx.server, &mut ctx.out)
}

/// FUNCTION STATS' reply; also how `crate::net::busy` answers it for a client
/// on a busy script's own thread.
pub fn write_function_stats(server: &Node, out: &mut strata_resp::ReplyWriter) -> CmdResult {
    let running = server
        .scripts
        .running_function()
        .map_err(|crate::scripting::ScriptIsBusy| CmdError::from(crate::scripting::BUSY_SCRIPT))?;
    let snapshot = server.functions.snapshot();
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null_bulk(),
        Some((name, command, ms)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(command.len());
            for arg in &command {
                out.bulk(arg);
            }
            out.bulk(b"duration_ms");
            out.int(ms as i64);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(ENGINE.as_bytes());
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(snapshot.libraries.len() as i64);
    out.bulk(b"functions_count");
    out.int(snapshot.function_count() as i64);
    Ok(())
}

pub fn function_kill(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    kill(ctx, true)
}

pub fn function_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}

fn fcall_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    super::introspection::feed_script_call(ctx, args);
    let libraries = ctx.server.functions.snapshot();
    let name = text(&args[1]);
    let (_, info) = libraries
        .function(&name)
        .ok_or(CmdError::from("ERR Function not found"))?;
    let (keys, argv) = split_keys(args, "ERR Bad number of keys provided")?;
    let no_writes = info.flags & FLAG_NO_WRITES != 0;
    if read_only && !no_writes {
        return Err("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    let allow_oom = info.flags & FLAG_ALLOW_OOM != 0;
    refuse_if_oom(ctx, no_writes || allow_oom)?;
    if !no_writes {
        refuse_without_replicas(ctx)?;
    }
    let modes = (read_only || no_writes, allow_oom);
    let target = Target::Function {
        libraries: &libraries,
        name: &info.name,
    };
    let running = Some((info.name.clone(), args.to_vec()));
    run_script(ctx, target, keys, argv, modes, running)
}

/// Whether FCALL's function `name` declares `no-writes` (CLIENT PAUSE
/// WRITE lets it run).
pub fn declares_no_writes(server: &Node, name: &[u8]) -> bool {
    let libraries = server.functions.snapshot();
    libraries
        .function(&text(name))
        .is_some_and(|(_, info)| info.flags & FLAG_NO_WRITES != 0)
}

pub fn fcall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, false)
}

pub fn fcall_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, true)
}

/// Loads the libraries recovery restored (the keyspace's metadata item)
/// into the registry; a library that no longer loads stops start-up.
pub fn load_at_start(
    functions: &crate::functions::Functions,
    keyspace: &strata_engine::Keyspace,
) -> Result<(), String> {
    // The set stored whole (older data directories), then each library's
    // own item.
    let mut codes = match keyspace.meta(META_NAME) {
        Some(image) => {
            codes_of_payload(&image).map_err(|e| format!("Stored function libraries: {e}"))?
        }
        None => Vec::new(),
    };
    for (_, code) in keyspace.metas_with_prefix(LIBRARY_META_PREFIX) {
        codes.push(String::from_utf8_lossy(&code).into_owned());
    }
    if codes.is_empty() {
        return Ok(());
    }
    let vm = Vm::scratch().map_err(|e| e.to_string())?;
    let mut libraries = Libraries::default();
    for code in &codes {
        let library = compile(&vm, code, None)
            .and_then(|library| libraries.add(library, false, true))
            .map_err(|e| format!("Stored function library failed to load: {e}"));
        library?;
    }
    crate::log_notice!("Loaded {} function libraries", libraries.libraries.len());
    functions.install(libraries);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::Functions;

    fn keyspace_with(image: &[u8]) -> strata_engine::Keyspace {
        let keyspace = strata_engine::Keyspace::new(16);
        keyspace
            .update_meta_in(None, META_NAME, |_| Ok::<_, ()>((image.to_vec(), ())))
            .unwrap();
        keyspace
    }

    #[test]
    fn stored_libraries_load_at_start_and_damage_stops_it() {
        let mut good = Libraries::default();
        let vm = Vm::scratch().unwrap();
        let code = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";
        good.add(compile(&vm, code, None).unwrap(), false, true)
            .unwrap();
        let functions = Functions::default();
        load_at_start(&functions, &keyspace_with(&good.dump())).unwrap();
        assert!(functions.snapshot().function("F").is_some());

        let error = load_at_start(&functions, &keyspace_with(b"junk")).unwrap_err();
        assert!(error.contains("checksum"), "{error}");
        let mut silent = Libraries::default();
        silent
            .add(
                Library {
                    name: "quiet".into(),
                    code: "#!lua name=quiet\nreturn 1".into(),
                    functions: Vec::new(),
                },
                false,
                true,
            )
            .unwrap();
        let error = load_at_start(&functions, &keyspace_with(&silent.dump())).unwrap_err();
        assert!(error.contains("No functions registered"), "{error}");
        assert!(
            functions.snapshot().function("f").is_some(),
            "a failed load keeps what was installed"
        );
    }
}
