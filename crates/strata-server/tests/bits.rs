//! Bitmap commands against the real server.

mod common;

use common::{Reply, TestServer, e, i};

fn ints(values: &[i64]) -> Reply {
    Reply::Array(values.iter().map(|&v| Reply::Int(v)).collect())
}

#[test]
fn setbit_getbit_bitcount() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["SETBIT", "b", "7", "1"], i(0));
    assert_reply!(r, ["SETBIT", "b", "7", "0"], i(1));
    assert_reply!(r, ["SETBIT", "b", "7", "1"], i(0));
    assert_reply!(r, ["GET", "b"], Reply::bulk("\u{1}"));
    assert_reply!(r, ["GETBIT", "b", "7"], i(1));
    assert_reply!(r, ["GETBIT", "b", "1000"], i(0));
    assert_reply!(r, ["GETBIT", "missing", "3"], i(0));
    assert_reply!(
        r,
        ["SETBIT", "b", "-1", "1"],
        e("ERR bit offset is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["SETBIT", "b", "4294967296", "1"],
        e("ERR bit offset is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["SETBIT", "b", "1", "2"],
        e("ERR bit is not an integer or out of range")
    );
    assert_reply!(r, ["SET", "s", "foobar"], Reply::simple("OK"));
    assert_reply!(r, ["BITCOUNT", "s"], i(26));
    assert_reply!(r, ["BITCOUNT", "s", "0", "0"], i(4));
    assert_reply!(r, ["BITCOUNT", "s", "1", "1"], i(6));
    assert_reply!(r, ["BITCOUNT", "s", "1", "1", "BYTE"], i(6));
    assert_reply!(r, ["BITCOUNT", "s", "5", "30", "BIT"], i(17));
    assert_reply!(r, ["BITCOUNT", "s", "-2", "-1"], i(7));
    assert_reply!(r, ["BITCOUNT", "s", "0"], e("ERR syntax error"));
    assert_reply!(
        r,
        ["BITCOUNT", "s", "0", "1", "WORD"],
        e("ERR syntax error")
    );
    assert_reply!(r, ["BITCOUNT", "missing"], i(0));
}

#[test]
fn bitpos() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd_bytes(&[b"SET", b"k", b"\xff\xf0\x00"]);
    assert_reply!(r, ["BITPOS", "k", "0"], i(12));
    r.cmd_bytes(&[b"SET", b"k", b"\x00\xff\xf0"]);
    assert_reply!(r, ["BITPOS", "k", "1", "0"], i(8));
    assert_reply!(r, ["BITPOS", "k", "1", "2"], i(16));
    assert_reply!(r, ["BITPOS", "k", "1", "2", "-1", "BYTE"], i(16));
    assert_reply!(r, ["BITPOS", "k", "1", "7", "15", "BIT"], i(8));
    r.cmd_bytes(&[b"SET", b"k", b"\x00\x00\x00"]);
    assert_reply!(r, ["BITPOS", "k", "1"], i(-1));
    r.cmd_bytes(&[b"SET", b"k", b"\xff\xff\xff"]);
    assert_reply!(r, ["BITPOS", "k", "0"], i(24));
    assert_reply!(r, ["BITPOS", "k", "0", "0", "-1"], i(-1));
    assert_reply!(r, ["BITPOS", "missing", "0"], i(0));
    assert_reply!(r, ["BITPOS", "missing", "1"], i(-1));
    assert_reply!(
        r,
        ["BITPOS", "k", "2"],
        e("ERR The bit argument must be 1 or 0.")
    );
}

#[test]
fn bitop() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "a", "foobar"]);
    r.cmd(&["SET", "b", "abcdef"]);
    assert_reply!(r, ["BITOP", "AND", "dest", "a", "b"], i(6));
    assert_reply!(r, ["GET", "dest"], Reply::bulk("`bc`ab"));
    assert_reply!(r, ["BITOP", "OR", "dest", "a", "b"], i(6));
    assert_reply!(r, ["GET", "dest"], Reply::bulk("goofev"));
    r.cmd_bytes(&[b"SET", b"x", b"\x0f"]);
    assert_reply!(r, ["BITOP", "NOT", "dest", "x"], i(1));
    assert_reply!(r, ["GET", "dest"], Reply::Bulk(vec![0xf0]));
    assert_reply!(r, ["BITOP", "XOR", "dest", "x", "missing"], i(1));
    assert_reply!(r, ["GET", "dest"], Reply::Bulk(vec![0x0f]));
    assert_reply!(r, ["BITOP", "AND", "dest", "missing1", "missing2"], i(0));
    assert_reply!(r, ["EXISTS", "dest"], i(0));
    assert_reply!(
        r,
        ["BITOP", "NOT", "dest", "a", "b"],
        e("ERR BITOP NOT must be called with a single source key.")
    );
    assert_reply!(r, ["BITOP", "NAND", "dest", "a"], e("ERR syntax error"));
}

#[test]
fn bitfield() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(
        r,
        ["BITFIELD", "bf", "SET", "i8", "0", "100", "GET", "i8", "0"],
        ints(&[0, 100])
    );
    assert_reply!(
        r,
        ["BITFIELD", "bf", "INCRBY", "i8", "0", "100"],
        ints(&[-56])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-200"
        ],
        ints(&[-128])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "-1"
        ],
        Reply::Array(vec![Reply::NullBulk])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "mykey", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
            "102", "1"
        ],
        ints(&[1, 1])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "mykey", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
            "102", "1"
        ],
        ints(&[2, 2])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "mykey", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
            "102", "1"
        ],
        ints(&[3, 3])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "mykey", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
            "102", "1"
        ],
        ints(&[0, 3])
    );
    assert_reply!(
        r,
        [
            "BITFIELD", "h", "SET", "u8", "#1", "255", "GET", "u8", "8", "GET", "u4", "#3"
        ],
        ints(&[0, 255, 15])
    );
    assert_reply!(r, ["STRLEN", "h"], i(2));
    assert_reply!(r, ["BITFIELD", "ro", "GET", "u8", "0"], ints(&[0]));
    assert_reply!(r, ["EXISTS", "ro"], i(0));
    assert_reply!(r, ["BITFIELD_RO", "h", "GET", "u8", "8"], ints(&[255]));
    assert_reply!(
        r,
        ["BITFIELD_RO", "h", "SET", "u8", "8", "1"],
        e("ERR BITFIELD_RO only supports the GET subcommand")
    );
    let bad_type = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
    assert_reply!(r, ["BITFIELD", "h", "GET", "u64", "0"], e(bad_type));
    assert_reply!(r, ["BITFIELD", "h", "GET", "x8", "0"], e(bad_type));
    assert_reply!(
        r,
        ["BITFIELD", "h", "GET", "i8", "-1"],
        e("ERR bit offset is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["BITFIELD", "h", "OVERFLOW", "MAYBE"],
        e("ERR Invalid OVERFLOW type specified")
    );
    assert_reply!(
        r,
        ["BITFIELD", "h", "SET", "i8", "0", "x"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(r, ["BITFIELD", "h", "FOO"], e("ERR syntax error"));
}

/// Redis 8.2's BITOP DIFF, DIFF1, ANDOR and ONE, checked bit by bit
/// against their definitions (counting the sources that have each bit),
/// on sources of different lengths (a shorter one reads as zeros).
#[test]
fn bitop_diff_diff1_andor_one() {
    let server = TestServer::start();
    let mut r = server.raw();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..20 {
        let count = 2 + (round % 3);
        let sources: Vec<Vec<u8>> = (0..count)
            .map(|n| (0..(4 + n * 3 + round % 5)).map(|_| next() as u8).collect())
            .collect();
        let names: Vec<String> = (0..count).map(|n| format!("src{n}")).collect();
        for (name, bytes) in names.iter().zip(&sources) {
            r.cmd_bytes(&[b"SET", name.as_bytes(), bytes]);
        }
        let length = sources.iter().map(Vec::len).max().unwrap();
        let bit = |source: &Vec<u8>, at: usize| {
            source
                .get(at / 8)
                .is_some_and(|b| b & (0x80 >> (at % 8)) != 0)
        };
        for op in ["DIFF", "DIFF1", "ANDOR", "ONE"] {
            let mut expected = vec![0u8; length];
            for at in 0..length * 8 {
                let first = bit(&sources[0], at);
                let others = sources[1..].iter().filter(|s| bit(s, at)).count();
                let all = others + first as usize;
                let set = match op {
                    "DIFF" => first && others == 0,
                    "DIFF1" => !first && others > 0,
                    "ANDOR" => first && others > 0,
                    _ => all == 1,
                };
                if set {
                    expected[at / 8] |= 0x80 >> (at % 8);
                }
            }
            let mut args = vec!["BITOP", op, "dest"];
            args.extend(names.iter().map(String::as_str));
            assert_eq!(r.cmd(&args), i(length as i64), "{op}");
            assert_eq!(
                r.cmd(&["GET", "dest"]),
                Reply::Bulk(expected),
                "{op} round {round}"
            );
        }
    }
    for op in ["DIFF", "DIFF1", "ANDOR"] {
        let error = format!("ERR BITOP {op} must be called with at least two source keys.");
        assert_eq!(
            r.cmd(&["BITOP", &op.to_lowercase(), "dest", "src0"]),
            e(&error)
        );
    }
    // ONE of one source is that source.
    r.cmd_bytes(&[b"SET", b"src0", b"\x0f\xf0\x00\x01"]);
    assert_eq!(r.cmd(&["BITOP", "ONE", "dest", "src0"]), i(4));
    assert_eq!(
        r.cmd(&["GET", "dest"]),
        Reply::Bulk(b"\x0f\xf0\x00\x01".to_vec())
    );
}

/// BITPOS checks its arguments in Redis 7.4's order, before it looks at
/// the key: a bit that is not an integer, too many arguments, a start
/// that is not an integer, a unit that is neither BYTE nor BIT — whether
/// the key is missing, a string or another type (Redis 7.4.1's
/// unit/bitops "BITPOS will illegal arguments" and "against non-integer
/// value").
#[test]
fn bitpos_checks_its_arguments_before_the_key_as_redis_7_4() {
    let server = TestServer::start();
    let mut r = server.raw();
    let not_integer = e("ERR value is not an integer or out of range");
    let syntax = e("ERR syntax error");
    for setup in [None, Some(["SET", "s", "1"]), Some(["LPUSH", "s", "a"])] {
        r.cmd(&["DEL", "s"]);
        if let Some(command) = setup {
            r.cmd(&command);
        }
        assert_reply!(r, ["BITPOS", "s", "a"], not_integer.clone());
        assert_reply!(r, ["BITPOS", "s", "0", "a", "b"], not_integer.clone());
        assert_reply!(r, ["BITPOS", "s", "1", "a", "b"], not_integer.clone());
        assert_reply!(
            r,
            ["BITPOS", "s", "0", "1", "hello", "hello2"],
            syntax.clone()
        );
        assert_reply!(r, ["BITPOS", "s", "0", "0", "1", "hello"], syntax.clone());
        assert_reply!(r, ["BITPOS", "s", "0", "0", "x", "hello"], syntax.clone());
        assert_reply!(
            r,
            ["BITPOS", "s", "2"],
            e("ERR The bit argument must be 1 or 0.")
        );
    }
}

/// SETBIT, SETRANGE and BITFIELD on a new key count one change each, as
/// Redis counts them (its unit/bitops checks `rdb_changes_since_last_save`),
/// and the keys they create survive kill -9: one SETRANGE record creates
/// the key on replay (it was an empty SET and a SETRANGE, two changes).
/// A key that expired while expiry was paused is replaced, not revived.
#[test]
fn bit_writes_to_new_keys_count_once_and_survive_kill9() {
    let server = TestServer::start();
    let mut r = server.raw();
    let changes = |r: &mut common::Raw| -> i64 {
        let info = r.cmd(&["INFO", "persistence"]).as_text();
        common::info_field(&info, "rdb_changes_since_last_save")
            .parse()
            .unwrap()
    };
    let before = changes(&mut r);
    assert_eq!(r.cmd(&["SETBIT", "bits", "100", "1"]), i(0));
    assert_eq!(r.cmd(&["SETRANGE", "range", "5", "abc"]), i(8));
    assert_eq!(
        r.cmd(&["BITFIELD", "field", "SET", "i5", "0", "7"]),
        ints(&[0])
    );
    assert_eq!(changes(&mut r), before + 3);
    // Unchanged bits are no change.
    assert_eq!(r.cmd(&["SETBIT", "bits", "100", "1"]), i(1));
    assert_eq!(changes(&mut r), before + 3);
    // An expired key met while expiry is paused (inside a script).
    assert_eq!(
        r.cmd(&["SET", "old", "xxxxxxxxxx", "PX", "1"]),
        common::ok()
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        r.cmd(&[
            "EVAL",
            "return redis.call('SETRANGE', KEYS[1], 2, 'z')",
            "1",
            "old"
        ]),
        i(3)
    );
    let expected: [(&str, &[u8]); 4] = [
        ("bits", &{
            let mut v = vec![0u8; 13];
            v[12] = 0x08;
            v
        }),
        ("range", b"\0\0\0\0\0abc"),
        ("field", &[0x38]),
        ("old", b"\0\0z"),
    ];
    for (key, value) in expected {
        assert_eq!(r.cmd(&["GET", key]), Reply::Bulk(value.to_vec()), "{key}");
    }
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, common::READY);
    let mut r = server.raw();
    for (key, value) in expected {
        assert_eq!(r.cmd(&["GET", key]), Reply::Bulk(value.to_vec()), "{key}");
        assert_eq!(r.cmd(&["TTL", key]), i(-1), "{key}");
    }
}
