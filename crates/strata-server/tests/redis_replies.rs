//! The same commands sent to redis-server 7 and to strata-server: every
//! reply must be identical, byte for byte as parsed from the wire. The
//! expected replies therefore come from Redis itself, never from our own
//! output. Each script starts on an empty database, on both servers.
//!
//! Left out: replies that differ between any two servers (INFO, TIME,
//! CLIENT ID/LIST, run ids), the types Strata does not have yet, and the
//! documented differences (the default `maxmemory-policy` is `tiered`;
//! CLIENT SETINFO answers as in Redis 7.2, which clients send it to).
//! redis-server runs with `enable-debug-command yes`, as Strata has DEBUG.

mod common;

use common::{Raw, RedisServer, Reply, TestServer};

/// Scripts of commands; each runs from an empty database on both servers.
const SCRIPTS: &[&[&[&str]]] = &[
    // Strings.
    &[
        &["SET", "k", "v", "NX", "XX"],
        &["SET", "k", "v", "EX", "0"],
        &["SET", "k", "v", "EX", "-1"],
        &["SET", "k", "v", "PX", "abc"],
        &["SET", "k", "v", "EX", "10", "PX", "10"],
        &["SET", "k", "v", "KEEPTTL", "EX", "10"],
        &["SET", "k", "v", "GET"],
        &["SET", "k", "w", "GET"],
        &["SET", "k", "v", "EX", "9999999999999999"],
        &["SET"],
        &["GET", "k", "extra"],
        &["SETEX", "k", "0", "v"],
        &["PSETEX", "k", "-5", "v"],
        &["SETNX", "k", "x"],
        &["GETSET", "k", "y"],
        &["GETDEL", "missing"],
        &["GETEX", "k", "PERSIST", "EX", "1"],
        &["GETEX", "k", "EX", "0"],
        &["MSET", "a"],
        &["MSET", "a", "1", "b"],
        &["MSETNX", "a", "1", "k", "2"],
        &["MGET", "a", "missing", "k"],
        &["APPEND", "k", "zz"],
        &["STRLEN", "k"],
        &["STRLEN", "missing"],
    ],
    // Counters.
    &[
        &["INCR", "n"],
        &["INCRBY", "n", "abc"],
        &["INCRBY", "n", "9223372036854775807"],
        &["DECRBY", "n", "-9223372036854775808"],
        &["SET", "big", "9223372036854775807"],
        &["INCR", "big"],
        &["SET", "s", "hello"],
        &["INCR", "s"],
        &["INCRBYFLOAT", "s", "1"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["INCRBYFLOAT", "f", "abc"],
        &["INCRBYFLOAT", "f", "inf"],
        &["INCRBYFLOAT", "f", "1e400"],
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "g", "0.1"],
        &["INCRBYFLOAT", "g", "0.2"],
        &["INCRBYFLOAT", "g", "-0.3"],
        &["INCRBYFLOAT", "h", "3.0e3"],
        &["OBJECT", "ENCODING", "h"],
        &["INCR", "h"],
        &["OBJECT", "ENCODING", "h"],
        &["INCRBYFLOAT", "h", "1.7976931348623157e308"],
        &["INCRBYFLOAT", "h", "1.7976931348623157e308"],
        &["SET", "sp", " 1"],
        &["INCR", "sp"],
        &["SET", "e", "1e3"],
        &["INCRBYFLOAT", "e", "0"],
        &["DECR", "missing"],
        &["OBJECT", "ENCODING", "n"],
        &["OBJECT", "ENCODING", "s"],
        &["OBJECT", "ENCODING", "f"],
    ],
    // Ranges.
    &[
        &["SET", "r", "Hello World"],
        &["GETRANGE", "r", "0", "-1"],
        &["GETRANGE", "r", "-3", "-1"],
        &["GETRANGE", "r", "5", "2"],
        &["GETRANGE", "r", "0", "abc"],
        &["GETRANGE", "missing", "0", "5"],
        &["SETRANGE", "r", "6", "Redis"],
        &["SETRANGE", "r", "-1", "x"],
        &["SETRANGE", "r", "536870912", "x"],
        &["SETRANGE", "new", "3", "abc"],
        &["GET", "new"],
        &["SETRANGE", "empty", "10", ""],
        &["EXISTS", "empty"],
        &["SUBSTR", "r", "0", "4"],
        &["LCS", "r", "new"],
        &["MSET", "l1", "ohmytext", "l2", "mynewtext"],
        &["LCS", "l1", "l2"],
        &["LCS", "l1", "l2", "LEN"],
        &["LCS", "l1", "l2", "IDX", "MINMATCHLEN", "2", "WITHMATCHLEN"],
        &["LCS", "l1", "l2", "LEN", "IDX"],
        &["LCS", "l1", "l2", "BOGUS"],
    ],
    // Keys.
    &[
        &["MSET", "a", "1", "b", "2", "c", "3"],
        &["DEL", "a", "missing", "b"],
        &["EXISTS", "c", "c", "missing"],
        &["TYPE", "c"],
        &["TYPE", "missing"],
        &["RENAME", "missing", "x"],
        &["RENAME", "c", "c"],
        &["RENAMENX", "c", "c"],
        &["RENAME", "c", "d"],
        &["SET", "e", "5"],
        &["RENAMENX", "d", "e"],
        &["COPY", "d", "e"],
        &["COPY", "d", "e", "REPLACE"],
        &["COPY", "d", "f", "DB", "99"],
        &["COPY", "d", "d"],
        &["MOVE", "d", "0"],
        &["MOVE", "d", "99"],
        &["MOVE", "d", "abc"],
        &["TOUCH", "d", "e", "missing"],
        &["UNLINK", "d"],
        &["KEYS", "[e"],
        &["KEYS", "*"],
        &["SCAN", "0", "COUNT", "0"],
        &["SCAN", "abc"],
        &["SCAN", "0", "TYPE"],
        &["SCAN", "0", "BOGUS", "1"],
        &["SCAN", "0", "TYPE", "list", "COUNT", "1000"],
        &["SCAN", "0", "MATCH", "e", "COUNT", "1000"],
        &["SCAN", "0", "COUNT", "-1"],
        &["SCAN", "18446744073709551616"],
        &["RENAMENX", "missing", "x"],
        &["OBJECT", "IDLETIME", "missing"],
        &["OBJECT", "REFCOUNT", "e"],
        &["OBJECT", "ENCODING", "missing"],
        &["OBJECT", "BOGUS", "e"],
        &["OBJECT", "FREQ", "e"],
        &["RANDOMKEY", "extra"],
        &["DBSIZE"],
    ],
    // Expiry.
    &[
        &["SET", "k", "v"],
        &["EXPIRE", "k", "100", "NX"],
        &["EXPIRE", "k", "200", "NX"],
        &["EXPIRE", "k", "50", "GT"],
        &["EXPIRE", "k", "50", "LT"],
        &["EXPIRE", "k", "10", "NX", "XX"],
        &["EXPIRE", "k", "10", "GT", "LT"],
        &["EXPIRE", "k", "10", "BOGUS"],
        &["EXPIRE", "k", "10", "YY"],
        &["PEXPIREAT", "k", "abc"],
        &["GETEX", "k", "PXAT", "0"],
        &["GETEX", "k", "EXAT", "-1"],
        &["SET", "k2", "v", "PXAT", "0"],
        &["EXPIRE", "k", "abc"],
        &["EXPIRE", "k", "9223372036854775807"],
        &["PEXPIRE", "k", "9223372036854775807"],
        &["EXPIREAT", "k", "-9223372036854775808"],
        &["TTL", "k"],
        &["PERSIST", "k"],
        &["TTL", "k"],
        &["PTTL", "missing"],
        &["EXPIRETIME", "k"],
        &["EXPIRETIME", "missing"],
        &["PERSIST", "k"],
        &["EXPIRE", "k", "-1"],
        &["EXISTS", "k"],
        &["SET", "k", "v", "EXAT", "1"],
        &["EXISTS", "k"],
    ],
    // Bitmaps.
    &[
        &["SETBIT", "b", "7", "1"],
        &["SETBIT", "b", "7", "2"],
        &["SETBIT", "b", "-1", "1"],
        &["SETBIT", "b", "4294967296", "1"],
        &["GETBIT", "b", "7"],
        &["GETBIT", "b", "100"],
        &["BITCOUNT", "b"],
        &["BITCOUNT", "b", "0"],
        &["BITCOUNT", "b", "0", "-1", "BIT"],
        &["BITCOUNT", "b", "0", "-1", "BOGUS"],
        &["BITPOS", "b", "1"],
        &["BITPOS", "b", "2"],
        &["BITPOS", "b", "0", "0", "-1", "BIT"],
        &["BITOP", "NOT", "d", "b", "b"],
        &["BITOP", "BOGUS", "d", "b"],
        &["BITOP", "AND", "d", "b", "missing"],
        &["GET", "d"],
        &["BITFIELD", "bf", "SET", "u8", "0", "255", "GET", "u8", "0"],
        &["BITFIELD", "bf", "INCRBY", "u8", "0", "10"],
        &[
            "BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
        ],
        &["BITFIELD", "bf", "GET", "u64", "0"],
        &["BITFIELD", "bf", "GET", "i64", "0"],
        &["BITFIELD", "bf", "GET", "u8", "-1"],
        &["BITFIELD", "bf", "OVERFLOW", "BOGUS"],
        &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"],
        &["BITFIELD_RO", "bf", "GET", "u8", "#0"],
    ],
    // Hashes, and types meeting each other.
    &[
        &["HSET", "h", "f1", "v1", "f2", "v2"],
        &["HSET", "h", "f1", "x"],
        &["HSET", "h", "odd"],
        &["HGET", "h", "f1"],
        &["HGET", "h", "nope"],
        &["HGET", "missing", "f"],
        &["HMGET", "h", "f1", "nope", "f2"],
        &["HLEN", "h"],
        &["HLEN", "missing"],
        &["HEXISTS", "h", "f1"],
        &["HEXISTS", "h", "nope"],
        &["HSTRLEN", "h", "f2"],
        &["HSETNX", "h", "f1", "y"],
        &["HSETNX", "h", "f3", "z"],
        &["HINCRBY", "h", "n", "5"],
        &["HINCRBY", "h", "n", "abc"],
        &["HINCRBY", "h", "f1", "1"],
        &["HINCRBY", "h", "n", "9223372036854775807"],
        &["HINCRBYFLOAT", "h", "fl", "0.1"],
        &["HINCRBYFLOAT", "h", "fl", "0.2"],
        &["HINCRBYFLOAT", "h", "f1", "1"],
        &["HINCRBYFLOAT", "h", "fl", "abc"],
        &["HGETALL", "h"],
        &["HKEYS", "h"],
        &["HVALS", "h"],
        &["TYPE", "h"],
        &["OBJECT", "ENCODING", "h"],
        &["HDEL", "h", "f1", "nope"],
        &["HDEL", "h", "f2", "f3", "n", "fl"],
        &["EXISTS", "h"],
        &["HGETALL", "missing"],
        &["HMSET", "h2", "a", "1", "b", "2"],
        &["HMSET", "h2", "a"],
        &["GET", "h2"],
        &["APPEND", "h2", "x"],
        &["STRLEN", "h2"],
        &["INCR", "h2"],
        &["SETRANGE", "h2", "0", "x"],
        &["GETBIT", "h2", "0"],
        &["BITCOUNT", "h2"],
        &["SET", "h2", "v", "GET"],
        &["GETDEL", "h2"],
        &["SET", "s", "v"],
        &["HSET", "s", "f", "v"],
        &["HGET", "s", "f"],
        &["HGETALL", "s"],
        &["MGET", "h2", "s"],
        &["COPY", "h2", "h3"],
        &["HGETALL", "h3"],
        &["RENAME", "h3", "h4"],
        &["TYPE", "h4"],
        &["SCAN", "0", "TYPE", "hash", "MATCH", "h4", "COUNT", "1000"],
        &[
            "SCAN", "0", "TYPE", "string", "MATCH", "h*", "COUNT", "1000",
        ],
        &["EXPIRE", "h4", "100"],
        &["HSET", "h4", "c", "3"],
        &["TTL", "h4"],
        &["SET", "h2", "v"],
        &["TYPE", "h2"],
        &["HLEN", "h4"],
    ],
    // Hash encodings, HRANDFIELD and HSCAN where Redis' reply is
    // deterministic (a listpack's order; counts past the size).
    &[
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HRANDFIELD", "h", "100"],
        &["HRANDFIELD", "h", "3", "WITHVALUES"],
        &["HRANDFIELD", "h", "0"],
        &["HRANDFIELD", "h", "1", "x"],
        &["HRANDFIELD", "h", "1", "WITHVALUES", "x"],
        &["HRANDFIELD", "h", "-9223372036854775808"],
        &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"],
        &["HRANDFIELD", "h", "abc"],
        &["HRANDFIELD", "missing"],
        &["HRANDFIELD", "missing", "5"],
        &["HSCAN", "h", "0"],
        &["HSCAN", "h", "0", "MATCH", "b*", "COUNT", "1"],
        &["HSCAN", "h", "0", "COUNT", "0"],
        &["HSCAN", "h", "x"],
        &["HSCAN", "h", "0", "MATCH"],
        &["HSCAN", "missing", "0"],
        &["OBJECT", "ENCODING", "h"],
        &["CONFIG", "SET", "hash-max-listpack-entries", "3"],
        &["CONFIG", "GET", "hash-max-ziplist-entries"],
        &["HSET", "h", "c", "again"],
        &["OBJECT", "ENCODING", "h"],
        &["HSET", "h", "d", "4"],
        &["OBJECT", "ENCODING", "h"],
        &["HDEL", "h", "a", "b", "c"],
        &["OBJECT", "ENCODING", "h"],
        &["CONFIG", "SET", "hash-max-ziplist-value", "4"],
        &["CONFIG", "GET", "hash-max-listpack-value"],
        &["HSET", "h2", "f", "1234"],
        &["OBJECT", "ENCODING", "h2"],
        &["HSET", "h2", "g", "12345"],
        &["OBJECT", "ENCODING", "h2"],
        &["CONFIG", "SET", "hash-max-listpack-entries", "-1"],
        &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
        &["CONFIG", "SET", "hash-max-listpack-value", "64"],
    ],
    // Lists: every command, its options and errors, reply types in RESP3
    // (null bulk vs null array vs empty array), WRONGTYPE.
    &[
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["LPUSH", "l", "z", "y"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "-100", "100"],
        &["LRANGE", "l", "5", "2"],
        &["LINDEX", "l", "-1"],
        &["LINDEX", "l", "10"],
        &["LLEN", "l"],
        &["LPOP", "l"],
        &["LPOP", "l", "2"],
        &["LPOP", "l", "0"],
        &["RPOP", "l"],
        &["LSET", "l", "0", "X"],
        &["LSET", "l", "5", "X"],
        &["LSET", "nokey", "0", "X"],
        &["LINSERT", "l", "BEFORE", "X", "W"],
        &["LINSERT", "l", "AFTER", "nope", "W"],
        &["LINSERT", "l", "MIDDLE", "X", "W"],
        &["LINSERT", "nokey", "BEFORE", "a", "b"],
        &["LREM", "l", "0", "W"],
        &["LPOS", "l", "c"],
        &["LPOS", "l", "c", "RANK", "0"],
        &["LPOS", "l", "c", "COUNT", "-1"],
        &["LPOS", "l", "c", "COUNT", "0"],
        &["LPOS", "nokey", "c"],
        &["LPOS", "nokey", "c", "COUNT", "1"],
        &["LMOVE", "l", "dst", "LEFT", "RIGHT"],
        &["LMOVE", "nokey", "dst", "LEFT", "RIGHT"],
        &["LMOVE", "l", "dst", "UP", "RIGHT"],
        &["RPOPLPUSH", "l", "l"],
        &["LMPOP", "2", "nokey", "l", "RIGHT", "COUNT", "10"],
        &["LMPOP", "0", "l", "LEFT"],
        &["LMPOP", "1", "nokey", "LEFT"],
        &["LMPOP", "3", "l", "LEFT"],
        &["LMPOP", "1", "l", "LEFT", "COUNT", "0"],
        &["LMPOP", "abc", "l", "LEFT"],
        &["LMPOP", "1", "l", "LEFT", "COUNT"],
        &["EXISTS", "l"],
        &["SET", "s", "x"],
        &["LPUSH", "s", "a"],
        &["LPOP", "s"],
        &["LPOP", "l", "-1"],
        &["LPOP", "l", "1", "2"],
        &["LPUSHX", "nokey", "a"],
        &["RPUSH", "t", "a", "b", "c", "d", "e"],
        &["LTRIM", "t", "1", "-2"],
        &["LRANGE", "t", "0", "-1"],
        &["LTRIM", "t", "5", "10"],
        &["EXISTS", "t"],
        &["TYPE", "dst"],
        &["OBJECT", "ENCODING", "dst"],
        &["LPOS", "t", "x", "RANK", "-9223372036854775808"],
        &["RPUSH", "u", "a", "b", "a", "b", "a"],
        &["LREM", "u", "-2", "a"],
        &["LRANGE", "u", "0", "-1"],
        &["LPOS", "u", "b", "RANK", "-1", "COUNT", "0", "MAXLEN", "2"],
        &["RPUSH", "big", "1", "2", "3"],
        &["LRANGE", "big", "-1", "-2"],
        &["LRANGE", "big", "abc", "1"],
        &["LINDEX", "big", "abc"],
        &["LREM", "big", "abc", "1"],
        &["LPOS", "big", "1", "BOGUS", "1"],
        &["LPOS", "big", "1", "RANK"],
        &["LPOS", "big", "1", "MAXLEN", "-1"],
        &["LPOS", "big", "1", "RANK", "-1", "COUNT", "2"],
        &["LMOVE", "big", "s", "LEFT", "LEFT"],
        &["LMOVE", "big", "big", "LEFT", "RIGHT"],
        &["LRANGE", "big", "0", "-1"],
        &["RPOPLPUSH", "nokey", "big"],
        &["LMPOP", "1", "big", "RIGHT", "COUNT", "2", "extra"],
        &["LPUSH", "big"],
        &["LLEN", "s"],
        &["LLEN", "nokey"],
        &["DEL", "big"],
        &["LLEN", "big"],
    ],
    // Blocking list commands that need not wait, and their errors.
    &[
        &["RPUSH", "bl", "a", "b", "c"],
        &["BLPOP", "nokey", "bl", "0"],
        &["BRPOP", "bl", "0.5"],
        &["BLPOP", "bl", "-1"],
        &["BLPOP", "bl", "abc"],
        &["BLPOP", "bl", "0x7FFFFFFFFFFFFF"],
        &["BLPOP", "bl"],
        &["SET", "s", "v"],
        &["BLPOP", "s", "0"],
        &["BLMOVE", "bl", "s", "LEFT", "RIGHT", "0"],
        &["BLMOVE", "bl", "d", "LEFT", "UP", "0"],
        &["BLMOVE", "bl", "d", "LEFT", "RIGHT", "0"],
        &["BRPOPLPUSH", "d", "e", "0"],
        &["RPUSH", "bl", "x", "y", "z"],
        &["BLMPOP", "0", "2", "nokey", "bl", "RIGHT", "COUNT", "2"],
        &["BLMPOP", "0", "0", "bl", "LEFT"],
        &["BLMPOP", "-1", "1", "bl", "LEFT"],
        &["BLMPOP", "0", "1", "bl", "LEFT", "COUNT", "0"],
        &["BLMPOP", "0", "1", "bl", "MIDDLE"],
        &["LRANGE", "bl", "0", "-1"],
        &["LRANGE", "e", "0", "-1"],
    ],
    // Sets (integer members, or one member, where Redis 7.0's order of a
    // small string set is a hash table's).
    &[
        &["SADD", "s", "3", "1", "2", "2"],
        &["SADD", "s", "1"],
        &["SADD", "s"],
        &["SMEMBERS", "s"],
        &["SMEMBERS", "nokey"],
        &["SISMEMBER", "s", "2"],
        &["SISMEMBER", "s", "02"],
        &["SISMEMBER", "nokey", "2"],
        &["SMISMEMBER", "s", "1", "9", "3"],
        &["SMISMEMBER", "nokey", "1"],
        &["SMISMEMBER", "s"],
        &["SCARD", "s"],
        &["SCARD", "nokey"],
        &["SREM", "s", "2", "9"],
        &["SREM", "nokey", "1"],
        &["SET", "str", "v"],
        &["SADD", "str", "1"],
        &["SCARD", "str"],
        &["SMEMBERS", "str"],
        &["SADD", "t", "1", "5", "7"],
        &["SINTER", "s", "t"],
        &["SINTER", "s", "nokey"],
        &["SINTER", "s", "str"],
        &["SINTER", "nokey", "str"],
        &["SUNION", "s", "t", "nokey"],
        &["SUNION", "s", "str"],
        &["SDIFF", "t", "s"],
        &["SDIFF", "nokey", "s"],
        &["SDIFF", "t", "str"],
        &["SINTERSTORE", "d", "s", "t"],
        &["SMEMBERS", "d"],
        &["SINTERSTORE", "str", "s", "nokey"],
        &["EXISTS", "str"],
        &["SUNIONSTORE", "d", "s", "t"],
        &["SMEMBERS", "d"],
        &["SDIFFSTORE", "d", "t", "s"],
        &["SMEMBERS", "d"],
        &["SINTERCARD", "2", "s", "t"],
        &["SINTERCARD", "2", "d", "t", "LIMIT", "1"],
        &["SINTERCARD", "0", "s"],
        &["SINTERCARD", "3", "s", "t"],
        &["SINTERCARD", "1", "s", "LIMIT", "-1"],
        &["SINTERCARD", "1", "s", "LIMIT"],
        &["SINTERCARD", "1", "s", "BOGUS", "1"],
        &["SINTERCARD", "x", "s"],
        &["SMOVE", "t", "s", "5"],
        &["SMOVE", "t", "s", "99"],
        &["SMOVE", "nokey", "str", "1"],
        &["SMOVE", "t", "str", "1"],
        &["SMOVE", "t", "t", "1"],
        &["SMOVE", "t", "new", "1"],
        &["SMEMBERS", "new"],
        &["SMEMBERS", "s"],
        &["SPOP", "new"],
        &["EXISTS", "new"],
        &["SPOP", "nokey"],
        &["SPOP", "nokey", "2"],
        &["SPOP", "s", "-1"],
        &["SPOP", "s", "0"],
        &["SPOP", "s", "1", "2"],
        &["SPOP", "str"],
        &["SRANDMEMBER", "nokey"],
        &["SRANDMEMBER", "nokey", "3"],
        &["SRANDMEMBER", "nokey", "-3"],
        &["SRANDMEMBER", "s", "0"],
        &["SRANDMEMBER", "s", "100"],
        &["SRANDMEMBER", "s", "abc"],
        &["SRANDMEMBER", "s", "-9223372036854775808"],
        &["SRANDMEMBER", "str", "1"],
        &["SADD", "one", "only"],
        &["SRANDMEMBER", "one", "-3"],
        &["SRANDMEMBER", "one"],
        &["SPOP", "one", "5"],
        &["EXISTS", "one"],
        &["SSCAN", "s", "0"],
        &["SSCAN", "s", "0", "MATCH", "1*", "COUNT", "5"],
        &["SSCAN", "nokey", "0"],
        &["SSCAN", "s", "abc"],
        &["SSCAN", "s", "0", "COUNT", "0"],
        &["SSCAN", "str", "0"],
        &["TYPE", "s"],
        &["OBJECT", "ENCODING", "s"],
    ],
    // Connection, server and protocol-level errors.
    &[
        &["PING", "a", "b"],
        &["PING", "hello"],
        &["ECHO"],
        &["SELECT", "16"],
        &["SELECT", "-1"],
        &["SELECT", "abc"],
        &["AUTH", "nopass"],
        &["AUTH", "user", "pass"],
        &["HELLO", "4"],
        &["HELLO", "abc"],
        &["CLIENT", "SETNAME", "has space"],
        &["CLIENT", "BOGUS"],
        &["CLIENT", "KILL", "ID", "abc"],
        &["CLIENT", "KILL", "127.0.0.1:1"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "GETNAME", "x"],
        &["HELLO", "2", "SETNAME", "n", "BOGUS"],
        &["ECHO", "a", "b"],
        &["CONFIG", "GET"],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "appendfsync", "bogus"],
        &["CONFIG", "SET", "hz", "1", "hz", "2"],
        &["CONFIG", "SET", "maxclients", "-1"],
        &["CONFIG", "SET", "client-query-buffer-limit", "10"],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "auto-aof-rewrite-min-size", "-1"],
        &["CONFIG", "BOGUS"],
        &["NOSUCH", "a", "b"],
        &["GET"],
        &["FLUSHALL", "BOGUS"],
        &["FLUSHDB", "ASYNC", "SYNC"],
        &["SWAPDB", "0", "99"],
        &["SWAPDB", "abc", "0"],
        &["SHUTDOWN", "NOSAVE", "SAVE"],
        &["SHUTDOWN", "BOGUS"],
        &["BGSAVE", "NOW"],
        &["DEBUG", "SLEEP"],
        &["DEBUG", "Sleep", "0", "1"],
        &["DEBUG", "bogus"],
        &["DEBUG", "SLEEP", "abc"],
        &["DEBUG", "SLEEP", "0"],
        &["MEMORY", "USAGE", "missing"],
        &["MEMORY", "BOGUS"],
        &["COMMAND", "GETKEYS"],
        &["COMMAND", "GETKEYS", "GET"],
        &["COMMAND", "GETKEYS", "SET", "a"],
        &["COMMAND", "GETKEYS", "PING", "x"],
        &["COMMAND", "GETKEYS", "NOSUCH", "a"],
        &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        &["COMMAND", "COUNT", "extra"],
        &["CLUSTER", "INFO"],
        &["CLUSTER", "Nodes"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "BOGUS"],
        &["CLUSTER", "KEYSLOT"],
        &["COMMAND", "INFO", "nosuch"],
    ],
];

fn replies(port: u16, resp3: bool) -> Vec<Vec<Reply>> {
    let mut r = Raw::connect(port);
    if resp3 {
        assert!(matches!(r.cmd(&["HELLO", "3"]), Reply::Map(_)));
    }
    SCRIPTS
        .iter()
        .map(|script| {
            assert_eq!(r.cmd(&["FLUSHALL"]), Reply::simple("OK"));
            script.iter().map(|args| r.cmd(args)).collect()
        })
        .collect()
}

#[test]
fn replies_are_those_of_redis_7() {
    compare_replies(false);
}

/// The same scripts over RESP3 (HELLO 3): maps, nulls, doubles, sets.
#[test]
fn resp3_replies_are_those_of_redis_7() {
    compare_replies(true);
}

fn compare_replies(resp3: bool) {
    let Some(redis) = RedisServer::start_unless_missing("the reply comparison") else {
        return;
    };
    let server = TestServer::start();
    let expected = replies(redis.port, resp3);
    let got = replies(server.port, resp3);
    let mut differences = Vec::new();
    for (script, (expected, got)) in SCRIPTS.iter().zip(expected.iter().zip(&got)) {
        for (args, (expected, got)) in script.iter().zip(expected.iter().zip(got)) {
            if expected != got {
                differences.push(format!(
                    "{}\n    redis:  {expected:?}\n    strata: {got:?}",
                    args.join(" ")
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} replies differ from redis-server's:\n{}",
        differences.len(),
        SCRIPTS.iter().map(|s| s.len()).sum::<usize>(),
        differences.join("\n")
    );
}

/// Commands Strata has and redis-server 7.0.15 does not: Strata's own
/// (`OBJECT RESIDENCY`), later Redis versions' (`CLIENT SETINFO`,
/// `CLIENT NO-TOUCH`, the hash field expiry of 7.4 and 8.0), and DEBUG's
/// subcommands (one command in Redis).
const NOT_IN_REDIS_7_0: &[&str] = &[
    "object|residency",
    "client|setinfo",
    "client|no-touch",
    "hexpire",
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hpersist",
    "hgetdel",
    "hgetex",
    "hsetex",
    "debug|sleep",
    "debug|help",
];

#[test]
fn command_info_is_that_of_redis_7() {
    let Some(redis) = RedisServer::start_unless_missing("the COMMAND INFO comparison") else {
        return;
    };
    let server = TestServer::start();
    let (mut ours, mut theirs) = (server.raw(), Raw::connect(redis.port));
    let names: Vec<String> = ours
        .cmd(&["COMMAND", "LIST"])
        .as_array()
        .iter()
        .map(Reply::as_text)
        .filter(|name| !NOT_IN_REDIS_7_0.contains(&name.as_str()))
        .collect();
    assert!(names.len() > 90, "{names:?}");
    let mut differences = Vec::new();
    for name in &names {
        let mut expected = theirs.cmd(&["COMMAND", "INFO", name]).as_array()[0].clone();
        let mut got = ours.cmd(&["COMMAND", "INFO", name]).as_array()[0].clone();
        // A container's subcommands are compared one by one above.
        for info in [&mut expected, &mut got] {
            if let Reply::Array(fields) = info {
                fields.truncate(9);
            }
        }
        if expected != got {
            differences.push(format!(
                "{name}\n    redis:  {expected:?}\n    strata: {got:?}"
            ));
        }
    }
    let getkeys: &[&[&str]] = &[
        &["SET", "a", "b"],
        &["SET", "a", "b", "GET"],
        &["BITFIELD", "a", "GET", "u8", "0"],
        &["BITFIELD", "a", "INCRBY", "u8", "0", "1"],
        &["BITOP", "AND", "d", "a", "b"],
        &["MSET", "a", "1", "b", "2"],
        &["RENAME", "a", "b"],
        &["COPY", "a", "b", "DB", "1"],
        &["OBJECT", "ENCODING", "a"],
        &["MEMORY", "USAGE", "a"],
        &["LCS", "a", "b"],
        &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        &["LMPOP", "2", "a", "b", "LEFT"],
        &["RPOPLPUSH", "a", "b"],
        &["PING"],
        &["MGET"],
    ];
    for args in getkeys {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut full = vec!["COMMAND", sub];
            full.extend_from_slice(args);
            let (expected, got) = (theirs.cmd(&full), ours.cmd(&full));
            if expected != got {
                differences.push(format!(
                    "{}\n    redis:  {expected:?}\n    strata: {got:?}",
                    full.join(" ")
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences from redis-server:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
