//! Randomized Lua scripts against the real server, drawn from a small
//! grammar of what has broken Lua sandboxes and servers before:
//! coroutines, `pcall`/`xpcall` with handlers, the pattern functions with
//! hostile patterns, metatables (the string one too), `unpack` ranges,
//! deep tables returned as replies, `string.rep`, the cjson / cmsgpack /
//! struct / bit libraries, and `redis.call` with odd arguments. Every
//! script must get a reply (a panic drops the connection) and the server
//! must answer PING on a new connection after each batch.
//!
//! The scripts run under a user limited to keys `f:*`, and the test ends
//! by checking that an admin's script still sees the sandbox as it was
//! (nothing a fuzzed script changed leaked into later runs).
//!
//! `STRATA_FUZZ_SCRIPTS=<n>` runs `n` scripts per seed instead of the
//! CI-sized default (the longer run before a release).

mod common;

use common::{Raw, Reply, TestServer};

/// SplitMix64, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "100",
    "2^31",
    "-2^31",
    "2^31-1",
    "2^53",
    "-2^63",
    "1e308",
    "-1e308",
    "math.huge",
    "-math.huge",
    "0/0",
    "0.5",
    "1e10",
];

/// Subjects stay short: a pattern of many quantifiers that can match
/// takes time exponential in them. Such a script is stopped by SCRIPT
/// KILL like any loop (`script_safety.rs`), unless it wrote first: then,
/// being atomic, it runs to its end, as in Redis.
const STRINGS: &[&str] = &[
    "''",
    "'abc'",
    "'aaaaaaaaaaaa'",
    "'(a(b)c)'",
    "'x=1, y=2'",
    "'\\0\\255'",
    "string.rep('a', 12)",
    "string.rep('ab', 6)",
    "'%'",
    "'k'",
];

const PATTERNS: &[&str] = &[
    "'a'",
    "'a*'",
    "'a-b'",
    "'(a+)'",
    "'%b()'",
    "'%f[%w]%w+'",
    "'[%a-'",
    "'(()'",
    "'%'",
    "'[^]'",
    "'(.-)'",
    "'%1'",
    // Deep and long patterns (many `?` items that can match would
    // backtrack for minutes, stoppable only by SCRIPT KILL: covered in
    // `script_safety.rs`).
    "string.rep('x?', 300)",
    "string.rep('(', 300)",
    "string.rep('(a)', 40)",
    "string.rep('%f[a]', 300)",
    "'^(%w+)=(%w+)$'",
    "'[]'",
    "'%z'",
];

const COMMANDS: &[&str] = &[
    "'SET', 'f:k', 'v'",
    "'GET', 'f:k'",
    "'INCR', 'f:n'",
    "'LPUSH', 'f:l', 'a', 'b'",
    "'HSET', 'f:h', 'a', '1'",
    "'ZADD', 'f:z', '1', 'm'",
    "'SADD', 'f:s', 'x'",
    "'DEL', 'f:k'",
    "'SET', 'secret', 'x'",
    "'GET'",
    "'NOSUCHCOMMAND'",
    "'SET', 'f:k', {}",
    "'SET', 'f:k', 1.5",
    "'SET', 'f:k', nil",
    "'PING'",
    "'TYPE', 'f:l'",
    "'LRANGE', 'f:l', '0', '-1'",
    "'HGETALL', 'f:h'",
    "'EVAL', 'return 1', '0'",
    "'PUBLISH', 'ch', 'm'",
];

/// A Lua expression of depth at most `depth`.
fn expr(rng: &mut Rng, depth: u32) -> String {
    if depth == 0 {
        return match rng.below(3) {
            0 => rng.pick(NUMBERS).to_owned(),
            1 => rng.pick(STRINGS).to_owned(),
            _ => "{}".to_owned(),
        };
    }
    let d = depth - 1;
    match rng.below(24) {
        0 => format!("string.find({}, {})", rng.pick(STRINGS), rng.pick(PATTERNS)),
        1 => format!(
            "string.match({}, {})",
            rng.pick(STRINGS),
            rng.pick(PATTERNS)
        ),
        2 => format!(
            "string.gsub({}, {}, {})",
            rng.pick(STRINGS),
            rng.pick(PATTERNS),
            rng.pick(&[
                "'%1'",
                "'x'",
                "function(c) return c end",
                "{a='b'}",
                "'%0%0'"
            ])
        ),
        3 => format!(
            "(function() local n = 0 for w in string.gmatch({}, {}) do n = n + 1 if n > 50 then break end end return n end)()",
            rng.pick(STRINGS),
            rng.pick(PATTERNS)
        ),
        4 => format!(
            "unpack({{1, 2, 3}}, {}, {})",
            rng.pick(NUMBERS),
            rng.pick(NUMBERS)
        ),
        5 => format!("string.rep({}, {})", rng.pick(STRINGS), rng.pick(NUMBERS)),
        6 => format!("redis.call({})", rng.pick(COMMANDS)),
        7 => format!("redis.pcall({})", rng.pick(COMMANDS)),
        8 => format!("pcall(function() return {} end)", expr(rng, d)),
        9 => format!(
            "xpcall(function() return {} end, function(e) return {} end)",
            expr(rng, d),
            expr(rng, d)
        ),
        10 => format!("coroutine.wrap(function() return {} end)()", expr(rng, d)),
        11 => format!(
            "coroutine.resume(coroutine.create(function() coroutine.yield({}) return {} end))",
            expr(rng, d),
            expr(rng, d)
        ),
        12 => format!(
            "(function() local t = {{}} for i = 1, {} do t = {{t}} end return t end)()",
            rng.pick(&["10", "63", "64", "65", "100", "300"])
        ),
        13 => format!("cjson.encode({})", expr(rng, d)),
        14 => format!(
            "cjson.decode({})",
            rng.pick(&[
                "'[1,2,{\"a\":null}]'",
                "'['",
                "string.rep('[', 2000)",
                "'1e999'",
                "'\"\\\\ud800\"'"
            ])
        ),
        15 => format!("cmsgpack.unpack(cmsgpack.pack({}))", expr(rng, d)),
        16 => format!(
            "cmsgpack.unpack({})",
            rng.pick(&[
                "'\\220\\255\\255'",
                "'\\221'",
                "string.rep('\\145', 2000)",
                "''"
            ])
        ),
        17 => format!(
            "struct.pack({}, {})",
            rng.pick(&["'>i4'", "'i99'", "'c0'", "'s'", "'!17'", "'bB'"]),
            rng.pick(NUMBERS)
        ),
        18 => format!(
            "bit.{}({}, {})",
            rng.pick(&["band", "bor", "lshift", "rshift", "tohex", "bswap"]),
            rng.pick(NUMBERS),
            rng.pick(NUMBERS)
        ),
        19 => format!(
            "setmetatable({{}}, {{__index = function(t, k) return {} end}}).x",
            expr(rng, d)
        ),
        20 => "getmetatable('')".to_owned(),
        21 => format!("tostring({})", expr(rng, d)),
        22 => format!("table.concat({{{}, {}}}, ',')", expr(rng, d), expr(rng, d)),
        _ => format!("#{}", rng.pick(STRINGS)),
    }
}

/// A statement: an expression's value discarded, an assignment an
/// attacker would try, an error raised, or a small bounded loop.
fn statement(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => "getmetatable('').__index = function() return 'evil' end".to_owned(),
        1 => "rawset(string, 'upper', function() return 'evil' end)".to_owned(),
        2 => "coroutine.wrap = nil".to_owned(),
        3 => format!("error({})", expr(rng, 1)),
        4 => "collectgarbage('stop')".to_owned(),
        5 => format!("for i = 1, 20 do local _ = {} end", expr(rng, 1)),
        6 => "redis.setresp(3)".to_owned(),
        7 => format!("redis.setresp({})", rng.pick(NUMBERS)),
        _ => format!("local _ = {}", expr(rng, 2)),
    }
}

fn script(rng: &mut Rng) -> String {
    let mut body = String::new();
    for _ in 0..1 + rng.below(3) {
        body.push_str(&statement(rng));
        body.push('\n');
    }
    body.push_str(&format!("return {}", expr(rng, 2)));
    body
}

#[test]
fn random_scripts_never_break_the_server_or_the_sandbox() {
    let scripts: u64 = std::env::var("STRATA_FUZZ_SCRIPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1500);
    let server = TestServer::start_with(&["--threads", "1"]);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "f", "on", ">pw", "~f:*", "&*", "+@all"]),
        Reply::simple("OK")
    );
    assert_eq!(admin.cmd(&["SET", "secret", "s3"]), Reply::simple("OK"));
    let mut fuzzer = server.raw();
    assert_eq!(fuzzer.cmd(&["AUTH", "f", "pw"]), Reply::simple("OK"));
    for seed in 1..=4u64 {
        let mut rng = Rng(seed);
        let sent: Vec<String> = (0..scripts).map(|_| script(&mut rng)).collect();
        for chunk in sent.chunks(100) {
            let mut batch = Vec::new();
            for body in chunk {
                batch.extend(Raw::encode(&[b"EVAL", body.as_bytes(), b"0"]));
            }
            fuzzer.send_raw(&batch);
            for (n, body) in chunk.iter().enumerate() {
                // Any reply is fine; a missing one means a panic or a crash.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fuzzer.read()))
                    .unwrap_or_else(|_| {
                        let before = n.checked_sub(1).map(|p| &chunk[p]);
                        panic!("seed {seed}: no reply to {body:?} (the one before: {before:?})")
                    });
            }
            let mut probe = server.raw();
            assert_eq!(probe.cmd(&["PING"]), Reply::simple("PONG"), "seed {seed}");
        }
    }
    // What the fuzzed scripts tried to change is not seen by later runs.
    let check = "return {('abc'):upper(), type(coroutine.wrap), tostring(getmetatable('').__index == string)}";
    assert_eq!(
        admin.cmd(&["EVAL", check, "0"]),
        Reply::Array(vec![
            Reply::bulk("ABC"),
            Reply::bulk("function"),
            Reply::bulk("true")
        ])
    );
    assert_eq!(admin.cmd(&["GET", "secret"]), Reply::bulk("s3"));
}
