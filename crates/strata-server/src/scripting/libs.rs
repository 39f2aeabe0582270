//! The libraries Redis gives Lua scripts besides its own API, written in
//! Rust from their documented behaviour: `cjson` (lua-cjson 2.1),
//! `cmsgpack` (lua-cmsgpack), `struct` (Roberto Ierusalimschy's struct
//! library) and `bit` (LuaBitOp).
//!
//! Tables are walked with `lua_next` (mlua's `pairs`), as the C libraries
//! walk them, so objects and maps come out in the same key order as from
//! Redis. Each VM has its own cjson settings (`cjson.encode_max_depth` …),
//! kept until SCRIPT FLUSH, as in Redis.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::stack::{format_g, format_lua_number};

fn runtime(text: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

/// A Lua number as f64 (mlua may hand integral numbers as integers).
fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|text| text.trim().parse().ok()),
        _ => None,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Thread(_) => "thread",
        _ => "value",
    }
}

/// lua-cjson's settings.
struct CjsonConfig {
    encode_max_depth: Cell<u32>,
    decode_max_depth: Cell<u32>,
    /// 0: refuse NaN and Inf; 1: write them; 2: write `null`.
    encode_invalid_numbers: Cell<u8>,
    decode_invalid_numbers: Cell<bool>,
    keep_buffer: Cell<bool>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<u32>,
    sparse_safe: Cell<u32>,
    precision: Cell<u32>,
}

impl Default for CjsonConfig {
    fn default() -> Self {
        CjsonConfig {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid_numbers: Cell::new(0),
            decode_invalid_numbers: Cell::new(true),
            keep_buffer: Cell::new(true),
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
            precision: Cell::new(14),
        }
    }
}

/// The `cjson` table.
pub fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let config = Rc::new(CjsonConfig::default());
    let module = lua.create_table()?;
    let encoding = config.clone();
    module.set(
        "encode",
        lua.create_function(move |lua, value: Value| {
            let mut out = Vec::new();
            json_encode(&encoding, &mut out, &value, 0)?;
            lua.create_string(out)
        })?,
    )?;
    let decoding = config.clone();
    module.set(
        "decode",
        lua.create_function(move |lua, text: mlua::LuaString| {
            let json: serde_json::Value = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| runtime(format!("Expected value but found invalid token: {e}")))?;
            let depth = json_depth(&json);
            if depth > decoding.decode_max_depth.get() as usize {
                return Err(runtime(format!(
                    "Found too many nested data structures ({depth})"
                )));
            }
            json_to_lua(lua, &json)
        })?,
    )?;
    let max_depth = |cell: fn(&CjsonConfig) -> &Cell<u32>| {
        let config = config.clone();
        lua.create_function(move |_, depth: Option<f64>| {
            if let Some(depth) = depth {
                if !(1.0..=2_147_483_647.0).contains(&depth) {
                    return Err(runtime(
                        "bad argument #1 (expected integer between 1 and 2147483647)",
                    ));
                }
                cell(&config).set(depth as u32);
            }
            Ok(cell(&config).get())
        })
    };
    module.set("encode_max_depth", max_depth(|c| &c.encode_max_depth)?)?;
    module.set("decode_max_depth", max_depth(|c| &c.decode_max_depth)?)?;
    cjson_settings(lua, &module, &config)?;
    module.set(
        "null",
        Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
    )?;
    module.set("_NAME", "cjson")?;
    module.set("_VERSION", "2.1.0")?;
    Ok(module)
}

/// cjson's setting functions other than the depth limits: number
/// precision, invalid numbers, the buffer and sparse arrays.
fn cjson_settings(lua: &Lua, module: &Table, config: &Rc<CjsonConfig>) -> mlua::Result<()> {
    let precision = config.clone();
    module.set(
        "encode_number_precision",
        lua.create_function(move |_, digits: Option<f64>| {
            if let Some(digits) = digits {
                if !(1.0..=14.0).contains(&digits) {
                    return Err(runtime(
                        "bad argument #1 (expected integer between 1 and 14)",
                    ));
                }
                precision.precision.set(digits as u32);
            }
            Ok(precision.precision.get())
        })?,
    )?;
    let invalid = config.clone();
    module.set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, setting: Value| {
            match &setting {
                Value::Nil => {}
                Value::Boolean(on) => invalid.encode_invalid_numbers.set(*on as u8),
                Value::String(s) if &*s.as_bytes() == b"null" => {
                    invalid.encode_invalid_numbers.set(2)
                }
                Value::String(s) if &*s.as_bytes() == b"on" => {
                    invalid.encode_invalid_numbers.set(1)
                }
                Value::String(s) if &*s.as_bytes() == b"off" => {
                    invalid.encode_invalid_numbers.set(0)
                }
                _ => return Err(runtime("bad argument #1 (invalid option)")),
            }
            Ok(match invalid.encode_invalid_numbers.get() {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let toggles = |cell: fn(&CjsonConfig) -> &Cell<bool>| {
        let config = config.clone();
        lua.create_function(move |_, setting: Option<bool>| {
            if let Some(on) = setting {
                cell(&config).set(on);
            }
            Ok(cell(&config).get())
        })
    };
    module.set(
        "decode_invalid_numbers",
        toggles(|c| &c.decode_invalid_numbers)?,
    )?;
    module.set("encode_keep_buffer", toggles(|c| &c.keep_buffer)?)?;
    let sparse = config.clone();
    module.set(
        "encode_sparse_array",
        lua.create_function(
            move |_, (convert, ratio, safe): (Option<bool>, Option<f64>, Option<f64>)| {
                if let Some(convert) = convert {
                    sparse.sparse_convert.set(convert);
                }
                if let Some(ratio) = ratio {
                    sparse.sparse_ratio.set(ratio.max(0.0) as u32);
                }
                if let Some(safe) = safe {
                    sparse.sparse_safe.set(safe.max(0.0) as u32);
                }
                Ok((
                    sparse.sparse_convert.get(),
                    sparse.sparse_ratio.get(),
                    sparse.sparse_safe.get(),
                ))
            },
        )?,
    )
}

/// How deep JSON arrays and objects nest.
fn json_depth(json: &serde_json::Value) -> usize {
    match json {
        serde_json::Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..0x20 | 0x7f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

/// A number as `%.<precision>g`.
fn json_number(config: &CjsonConfig, n: f64) -> String {
    if config.precision.get() == 14 {
        return format_lua_number(n);
    }
    format_g(n, config.precision.get() as usize)
}

fn json_encode(
    config: &CjsonConfig,
    out: &mut Vec<u8>,
    value: &Value,
    depth: u32,
) -> mlua::Result<()> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(pointer) if pointer.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => out.extend_from_slice(json_number(config, *n as f64).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                match config.encode_invalid_numbers.get() {
                    0 => {
                        return Err(runtime("Cannot serialise number: must not be NaN or Inf"));
                    }
                    1 if n.is_nan() => out.extend_from_slice(b"nan"),
                    1 => out.extend_from_slice(format_lua_number(*n).as_bytes()),
                    _ => out.extend_from_slice(b"null"),
                }
                return Ok(());
            }
            out.extend_from_slice(json_number(config, *n).as_bytes());
        }
        Value::String(s) => json_string(out, &s.as_bytes()),
        Value::Table(table) => {
            let depth = depth + 1;
            if depth > config.encode_max_depth.get() {
                return Err(runtime(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            match json_array_length(config, table)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for n in 1..=len {
                        if n > 1 {
                            out.push(b',');
                        }
                        json_encode(config, out, &table.raw_get::<Value>(n)?, depth)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in table.pairs::<Value, Value>() {
                        let (key, item) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &key {
                            Value::String(s) => json_string(out, &s.as_bytes()),
                            Value::Integer(_) | Value::Number(_) => {
                                let n = number_of(&key).expect("a number");
                                out.push(b'"');
                                out.extend_from_slice(json_number(config, n).as_bytes());
                                out.push(b'"');
                            }
                            _ => {
                                return Err(runtime(
                                    "Cannot serialise table: table key must be a number or string",
                                ));
                            }
                        }
                        out.push(b':');
                        json_encode(config, out, &item, depth)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(runtime(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            )));
        }
    }
    Ok(())
}

/// lua-cjson's array test: `Some(max index)` when every key is a positive
/// integer and the array is not excessively sparse; `None` for an object.
fn json_array_length(config: &CjsonConfig, table: &Table) -> mlua::Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(n) if n >= 1 => n as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(index);
        items += 1;
    }
    let ratio = config.sparse_ratio.get() as usize;
    if ratio > 0 && max > items * ratio && max > config.sparse_safe.get() as usize {
        if !config.sparse_convert.get() {
            return Err(runtime("Cannot serialise table: excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn json_to_lua(lua: &Lua, json: &serde_json::Value) -> mlua::Result<Value> {
    Ok(match json {
        serde_json::Value::Null => Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (n, item) in items.iter().enumerate() {
                table.raw_set(n + 1, json_to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
        serde_json::Value::Object(map) => {
            let table = lua.create_table()?;
            for (key, value) in map {
                table.raw_set(key.as_str(), json_to_lua(lua, value)?)?;
            }
            Value::Table(table)
        }
    })
}

/// Tables nested deeper than this are packed as nil (so circular
/// references end), as lua-cmsgpack does.
const MSGPACK_NESTING_MAX: u32 = 16;
/// Deepest nesting unpacked before the data is called bad.
const MSGPACK_UNPACK_DEPTH_MAX: u32 = 1000;

/// The `cmsgpack` table.
pub fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let module = lua.create_table()?;
    module.set(
        "pack",
        lua.create_function(|lua, values: Variadic<Value>| {
            if values.is_empty() {
                return Err(runtime("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for value in values.iter() {
                msgpack_encode(&mut out, value, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    module.set(
        "unpack",
        lua.create_function(|lua, data: mlua::LuaString| {
            msgpack_unpack(lua, &data.as_bytes(), None, 0)
        })?,
    )?;
    module.set(
        "unpack_one",
        lua.create_function(|lua, (data, offset): (mlua::LuaString, Option<f64>)| {
            let offset = offset.unwrap_or(0.0) as i64;
            msgpack_unpack(lua, &data.as_bytes(), Some(1), offset)
        })?,
    )?;
    module.set(
        "unpack_limit",
        lua.create_function(
            |lua, (data, limit, offset): (mlua::LuaString, f64, Option<f64>)| {
                let offset = offset.unwrap_or(0.0) as i64;
                // A limit and offset of 0 unpack everything, as `unpack`.
                let limit = (limit != 0.0 || offset != 0).then_some(limit as i64);
                msgpack_unpack(lua, &data.as_bytes(), limit, offset)
            },
        )?,
    )?;
    module.set("_NAME", "cmsgpack")?;
    module.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(module)
}

fn msgpack_int(out: &mut Vec<u8>, n: i64) {
    match n {
        0..=127 => out.push(n as u8),
        128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        0x1_0000_0000.. => {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        -32..=-1 => out.push(n as i8 as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as i8 as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn msgpack_number(out: &mut Vec<u8>, n: f64) {
    // An integral value that fits 64 bits is packed as an integer.
    let fits = (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n);
    if fits && n.fract() == 0.0 {
        return msgpack_int(out, n as i64);
    }
    let single = n as f32;
    if single as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&single.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn msgpack_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, codes: [u8; 3]) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if codes[0] != 0 && len <= 0xff {
        out.extend_from_slice(&[codes[0], len as u8]);
    } else if len <= 0xffff {
        out.push(codes[1]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(codes[2]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn msgpack_encode(out: &mut Vec<u8>, value: &Value, level: u32) -> mlua::Result<()> {
    match value {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => msgpack_int(out, *n),
        Value::Number(n) => msgpack_number(out, *n),
        Value::String(s) => {
            let bytes = s.as_bytes();
            msgpack_len(out, bytes.len(), 0xa0, 31, [0xd9, 0xda, 0xdb]);
            out.extend_from_slice(&bytes);
        }
        Value::Table(table) if level < MSGPACK_NESTING_MAX => {
            // lua-cmsgpack's array test: keys 1..count, nothing else.
            let (mut count, mut max) = (0usize, 0f64);
            let mut array = true;
            for pair in table.pairs::<Value, Value>() {
                let (key, _) = pair?;
                match number_of(&key) {
                    Some(n) if n > 0.0 && n.fract() == 0.0 => {
                        max = max.max(n);
                        count += 1;
                    }
                    _ => {
                        array = false;
                        break;
                    }
                }
            }
            if array && max == count as f64 {
                let len = table.raw_len();
                msgpack_len(out, len, 0x90, 15, [0, 0xdc, 0xdd]);
                for n in 1..=len {
                    msgpack_encode(out, &table.raw_get::<Value>(n)?, level + 1)?;
                }
            } else {
                let pairs: Vec<(Value, Value)> =
                    table.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
                msgpack_len(out, pairs.len(), 0x80, 15, [0, 0xde, 0xdf]);
                for (key, item) in &pairs {
                    msgpack_encode(out, key, level + 1)?;
                    msgpack_encode(out, item, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Why unpacking stopped.
enum Unpack {
    Missing,
    Bad,
    Lua(mlua::Error),
}

impl From<mlua::Error> for Unpack {
    fn from(error: mlua::Error) -> Self {
        Unpack::Lua(error)
    }
}

struct MsgpackReader<'d> {
    data: &'d [u8],
    at: usize,
}

impl<'d> MsgpackReader<'d> {
    fn take(&mut self, len: usize) -> Result<&'d [u8], Unpack> {
        let end = self.at.checked_add(len).ok_or(Unpack::Missing)?;
        let bytes = self.data.get(self.at..end).ok_or(Unpack::Missing)?;
        self.at = end;
        Ok(bytes)
    }

    fn uint(&mut self, len: usize) -> Result<u64, Unpack> {
        Ok(self
            .take(len)?
            .iter()
            .fold(0u64, |n, &byte| (n << 8) | byte as u64))
    }

    fn value(&mut self, lua: &Lua, depth: u32) -> Result<Value, Unpack> {
        if depth > MSGPACK_UNPACK_DEPTH_MAX {
            return Err(Unpack::Bad);
        }
        let tag = self.take(1)?[0];
        let string = |reader: &mut Self, len: usize| -> Result<Value, Unpack> {
            Ok(Value::String(lua.create_string(reader.take(len)?)?))
        };
        Ok(match tag {
            0x00..=0x7f => Value::Number(tag as f64),
            0xe0..=0xff => Value::Number(tag as i8 as f64),
            0x80..=0x8f => self.map(lua, (tag & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array(lua, (tag & 0x0f) as usize, depth)?,
            0xa0..=0xbf => string(self, (tag & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let len = self.uint(1)? as usize;
                string(self, len)?
            }
            0xc5 | 0xda => {
                let len = self.uint(2)? as usize;
                string(self, len)?
            }
            0xc6 | 0xdb => {
                let len = self.uint(4)? as usize;
                string(self, len)?
            }
            0xca => Value::Number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(self.uint(1)? as u8 as i8 as f64),
            0xd1 => Value::Number(self.uint(2)? as u16 as i16 as f64),
            0xd2 => Value::Number(self.uint(4)? as u32 as i32 as f64),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xdc => {
                let len = self.uint(2)? as usize;
                self.array(lua, len, depth)?
            }
            0xdd => {
                let len = self.uint(4)? as usize;
                self.array(lua, len, depth)?
            }
            0xde => {
                let len = self.uint(2)? as usize;
                self.map(lua, len, depth)?
            }
            0xdf => {
                let len = self.uint(4)? as usize;
                self.map(lua, len, depth)?
            }
            _ => return Err(Unpack::Bad),
        })
    }

    fn array(&mut self, lua: &Lua, len: usize, depth: u32) -> Result<Value, Unpack> {
        // Each element takes a byte at least: a length past the data is
        // missing bytes, found before allocating for it.
        if len > self.data.len() - self.at {
            return Err(Unpack::Missing);
        }
        let table = lua.create_table_with_capacity(len, 0)?;
        for n in 1..=len {
            table.raw_set(n, self.value(lua, depth + 1)?)?;
        }
        Ok(Value::Table(table))
    }

    fn map(&mut self, lua: &Lua, len: usize, depth: u32) -> Result<Value, Unpack> {
        if len > (self.data.len() - self.at) / 2 {
            return Err(Unpack::Missing);
        }
        let table = lua.create_table_with_capacity(0, len)?;
        for _ in 0..len {
            let key = self.value(lua, depth + 1)?;
            let value = self.value(lua, depth + 1)?;
            if key == Value::Nil {
                return Err(Unpack::Bad);
            }
            table.raw_set(key, value)?;
        }
        Ok(Value::Table(table))
    }
}

/// `cmsgpack.unpack` (`limit` None: every object, no offset returned),
/// `unpack_one` and `unpack_limit` (the next offset first, -1 at the end).
fn msgpack_unpack(
    lua: &Lua,
    data: &[u8],
    limit: Option<i64>,
    offset: i64,
) -> mlua::Result<MultiValue> {
    if offset < 0 || limit.is_some_and(|l| l < 0) {
        return Err(runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            limit.unwrap_or(0)
        )));
    }
    if offset as usize > data.len() {
        return Err(runtime(format!(
            "Start offset {offset} greater than input length {}.",
            data.len()
        )));
    }
    let mut reader = MsgpackReader {
        data,
        at: offset as usize,
    };
    let mut values = Vec::new();
    let limit = limit.map_or(usize::MAX, |l| l as usize);
    while reader.at < data.len() && values.len() < limit {
        match reader.value(lua, 0) {
            Ok(value) => values.push(value),
            Err(Unpack::Missing) => return Err(runtime("Missing bytes in input.")),
            Err(Unpack::Bad) => return Err(runtime("Bad data format in input.")),
            Err(Unpack::Lua(error)) => return Err(error),
        }
    }
    if limit != usize::MAX {
        let next = if reader.at == data.len() {
            -1
        } else {
            reader.at as i64
        };
        values.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_iter(values))
}

/// The `struct` table: `pack`, `unpack` and `size`.
pub fn structs(lua: &Lua) -> mlua::Result<Table> {
    let module = lua.create_table()?;
    module.set(
        "pack",
        lua.create_function(|lua, (format, args): (mlua::LuaString, Variadic<Value>)| {
            let out = struct_pack(&format.as_bytes(), &args)?;
            lua.create_string(out)
        })?,
    )?;
    module.set(
        "unpack",
        lua.create_function(
            |lua, (format, data, position): (mlua::LuaString, mlua::LuaString, Option<f64>)| {
                struct_unpack(lua, &format.as_bytes(), &data.as_bytes(), position)
            },
        )?,
    )?;
    module.set(
        "size",
        lua.create_function(|_, format: mlua::LuaString| struct_size(&format.as_bytes()))?,
    )?;
    Ok(module)
}

/// Byte order and alignment while walking a struct format.
struct Layout {
    little: bool,
    align: usize,
}

/// The largest integer a format may name.
const STRUCT_INT_MAX: usize = 32;
/// The default and largest alignment (x86-64's, as the C library's).
const STRUCT_ALIGN_MAX: usize = 8;

/// Reads a count after an option (`i4`, `c10`, `!8`).
fn struct_number(format: &[u8], at: &mut usize, default: usize) -> mlua::Result<usize> {
    if !format.get(*at).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut n: usize = 0;
    while let Some(digit) = format.get(*at).filter(|b| b.is_ascii_digit()) {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add((digit - b'0') as usize))
            .filter(|n| *n <= i32::MAX as usize)
            .ok_or_else(|| runtime("integral size overflow"))?;
        *at += 1;
    }
    Ok(n)
}

/// The size of option `option` (reading its count).
fn struct_option_size(option: u8, format: &[u8], at: &mut usize) -> mlua::Result<usize> {
    Ok(match option {
        b'b' | b'B' | b'x' => 1,
        b'h' | b'H' => 2,
        b'l' | b'L' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => struct_number(format, at, 1)?,
        b'i' | b'I' => {
            let size = struct_number(format, at, 4)?;
            if size > STRUCT_INT_MAX {
                return Err(runtime(format!(
                    "integral size {size} is larger than limit of {STRUCT_INT_MAX}"
                )));
            }
            size
        }
        _ => 0,
    })
}

fn struct_padding(layout: &Layout, len: usize, option: u8, size: usize) -> usize {
    if size == 0 || option == b'c' {
        return 0;
    }
    let size = size.min(layout.align);
    (size - (len & (size - 1))) & (size - 1)
}

/// The options that only change the layout.
fn struct_control(
    layout: &mut Layout,
    option: u8,
    format: &[u8],
    at: &mut usize,
) -> mlua::Result<()> {
    match option {
        b' ' => {}
        b'>' => layout.little = false,
        b'<' | b'=' => layout.little = true,
        b'!' => {
            let align = struct_number(format, at, STRUCT_ALIGN_MAX)?;
            if !align.is_power_of_two() {
                return Err(runtime(format!("alignment {align} is not a power of 2")));
            }
            layout.align = align;
        }
        other => {
            return Err(runtime(format!(
                "bad argument #1 to 'struct' (invalid format option '{}')",
                other as char
            )));
        }
    }
    Ok(())
}

fn struct_pack(format: &[u8], args: &[Value]) -> mlua::Result<Vec<u8>> {
    let mut layout = Layout {
        little: true,
        align: 1,
    };
    let mut out = Vec::new();
    let mut next = args.iter().enumerate();
    let mut arg = |what: &str| -> mlua::Result<&Value> {
        next.next().map(|(_, v)| v).ok_or_else(|| {
            runtime(format!(
                "bad argument to 'pack' ({what} expected, got no value)"
            ))
        })
    };
    let number = |value: &Value| {
        number_of(value).ok_or_else(|| {
            runtime(format!(
                "bad argument to 'pack' (number expected, got {})",
                type_name(value)
            ))
        })
    };
    let mut at = 0;
    while at < format.len() {
        let option = format[at];
        at += 1;
        let mut size = struct_option_size(option, format, &mut at)?;
        let padding = struct_padding(&layout, out.len(), option, size);
        out.resize(out.len() + padding, 0);
        match option {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(arg("number")?)?;
                let mut value = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut bytes = vec![0u8; size];
                for byte in bytes.iter_mut() {
                    *byte = value as u8;
                    value = value.checked_shr(8).unwrap_or(0);
                }
                if !layout.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let bytes = (number(arg("number")?)? as f32).to_le_bytes();
                match layout.little {
                    true => out.extend_from_slice(&bytes),
                    false => out.extend(bytes.iter().rev()),
                }
            }
            b'd' => {
                let bytes = number(arg("number")?)?.to_le_bytes();
                match layout.little {
                    true => out.extend_from_slice(&bytes),
                    false => out.extend(bytes.iter().rev()),
                }
            }
            b'c' | b's' => {
                let bytes = match arg("string")? {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(n) => n.to_string().into_bytes(),
                    Value::Number(n) => format_lua_number(*n).into_bytes(),
                    other => {
                        return Err(runtime(format!(
                            "bad argument to 'pack' (string expected, got {})",
                            type_name(other)
                        )));
                    }
                };
                if size == 0 || option == b's' {
                    size = bytes.len();
                }
                if bytes.len() < size {
                    return Err(runtime("bad argument to 'pack' (string too short)"));
                }
                out.extend_from_slice(&bytes[..size]);
                if option == b's' {
                    out.push(0);
                }
            }
            _ => struct_control(&mut layout, option, format, &mut at)?,
        }
    }
    Ok(out)
}

fn struct_unpack(
    lua: &Lua,
    format: &[u8],
    data: &[u8],
    position: Option<f64>,
) -> mlua::Result<MultiValue> {
    let position = position.unwrap_or(1.0);
    if position < 1.0 {
        return Err(runtime(
            "bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ));
    }
    let mut pos = position as usize - 1;
    let mut layout = Layout {
        little: true,
        align: 1,
    };
    let mut values: Vec<Value> = Vec::new();
    let short = || runtime("bad argument #2 to 'unpack' (data string too short)");
    let mut at = 0;
    while at < format.len() {
        let option = format[at];
        at += 1;
        let mut size = struct_option_size(option, format, &mut at)?;
        pos += struct_padding(&layout, pos, option, size);
        if size > data.len() || pos > data.len() - size {
            return Err(short());
        }
        match option {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let bytes = &data[pos..pos + size];
                let fold = |n: u64, byte: &u8| n.checked_shl(8).unwrap_or(0) | *byte as u64;
                let raw = match layout.little {
                    true => bytes.iter().rev().fold(0, fold),
                    false => bytes.iter().fold(0, fold),
                };
                let value = if option.is_ascii_lowercase() {
                    let mask = (!0u64).checked_shl((size * 8 - 1) as u32).unwrap_or(0);
                    let extended = if raw & mask != 0 { raw | mask } else { raw };
                    extended as i64 as f64
                } else {
                    raw as f64
                };
                values.push(Value::Number(value));
            }
            b'x' => {}
            b'f' | b'd' => {
                let mut bytes = data[pos..pos + size].to_vec();
                if !layout.little {
                    bytes.reverse();
                }
                let value = match option {
                    b'f' => f32::from_le_bytes(bytes.try_into().expect("4 bytes")) as f64,
                    _ => f64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                };
                values.push(Value::Number(value));
            }
            b'c' => {
                if size == 0 {
                    let previous = values
                        .pop()
                        .as_ref()
                        .and_then(number_of)
                        .ok_or_else(|| runtime("format 'c0' needs a previous size"))?;
                    size = previous as usize;
                    if size > data.len() || pos > data.len() - size {
                        return Err(short());
                    }
                }
                values.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let end = data[pos..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| runtime("unfinished string in data"))?;
                values.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => struct_control(&mut layout, option, format, &mut at)?,
        }
        pos += size;
    }
    values.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(values))
}

fn struct_size(format: &[u8]) -> mlua::Result<usize> {
    let mut layout = Layout {
        little: true,
        align: 1,
    };
    let mut pos = 0;
    let mut at = 0;
    while at < format.len() {
        let option = format[at];
        at += 1;
        let size = struct_option_size(option, format, &mut at)?;
        pos += struct_padding(&layout, pos, option, size);
        match option {
            b's' => {
                return Err(runtime(
                    "bad argument #1 to 'size' (option 's' has no fixed size)",
                ));
            }
            b'c' if size == 0 => {
                return Err(runtime(
                    "bad argument #1 to 'size' (option 'c0' has no fixed size)",
                ));
            }
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' | b'x' | b'f' | b'd'
            | b'c' => {}
            _ => struct_control(&mut layout, option, format, &mut at)?,
        }
        pos += size;
    }
    Ok(pos)
}

/// LuaBitOp's `bit` library: 32-bit operations on numbers.
pub fn bit(lua: &Lua) -> mlua::Result<Table> {
    fn to32(n: f64) -> i32 {
        (n as i64) as i32
    }
    let module = lua.create_table()?;
    module.set("tobit", lua.create_function(|_, n: f64| Ok(to32(n)))?)?;
    module.set("bnot", lua.create_function(|_, n: f64| Ok(!to32(n)))?)?;
    let fold = |lua: &Lua, op: fn(i32, i32) -> i32| {
        lua.create_function(move |_, args: Variadic<f64>| {
            Ok(args.iter().map(|n| to32(*n)).reduce(op).unwrap_or(0))
        })
    };
    module.set("band", fold(lua, |a, b| a & b)?)?;
    module.set("bor", fold(lua, |a, b| a | b)?)?;
    module.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    module.set(
        "lshift",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok(((to32(n) as u32) << (to32(s) & 31)) as i32)
        })?,
    )?;
    module.set(
        "rshift",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok(((to32(n) as u32) >> (to32(s) & 31)) as i32)
        })?,
    )?;
    module.set(
        "arshift",
        lua.create_function(|_, (n, s): (f64, f64)| Ok(to32(n) >> (to32(s) & 31)))?,
    )?;
    module.set(
        "rol",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok((to32(n) as u32).rotate_left((to32(s) & 31) as u32) as i32)
        })?,
    )?;
    module.set(
        "ror",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok((to32(n) as u32).rotate_right((to32(s) & 31) as u32) as i32)
        })?,
    )?;
    module.set(
        "bswap",
        lua.create_function(|_, n: f64| Ok((to32(n) as u32).swap_bytes() as i32))?,
    )?;
    module.set(
        "tohex",
        lua.create_function(|_, (n, width): (f64, Option<f64>)| {
            let width = width.map_or(8, to32);
            let digits = width.unsigned_abs().min(8) as usize;
            let value = to32(n) as u32;
            let text = format!("{value:08x}");
            let text = &text[8 - digits..];
            Ok(if width < 0 {
                text.to_ascii_uppercase()
            } else {
                text.to_owned()
            })
        })?,
    )?;
    Ok(module)
}
