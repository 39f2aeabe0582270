//! ACL users against the real server: passwords, command, key and channel
//! rules, selectors, ACL LOG, DRYRUN, transactions and scripts, the ACL
//! file, `user` lines and CONFIG REWRITE, and a real client logging in
//! with a username.

mod common;

use std::time::Duration;

use common::{Reply, TestServer, b, e, i, ok};

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const NOPERM_KEYS: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
const NOPERM_CHANNELS: &str =
    "NOPERM this user has no permissions to access one of the channels used as arguments";

fn noperm(command: &str) -> Reply {
    e(&format!(
        "NOPERM this user has no permissions to run the '{command}' command"
    ))
}

/// A field of a map-shaped reply (RESP2: a flat array).
fn field(reply: &Reply, name: &str) -> Reply {
    let items = reply.as_array();
    let at = items
        .chunks(2)
        .position(|pair| pair[0] == b(name))
        .unwrap_or_else(|| panic!("no field {name} in {reply:?}"));
    items[at * 2 + 1].clone()
}

#[test]
fn users_log_in_with_their_passwords() {
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut r = server.raw();
    assert_reply!(r, ["ACL", "WHOAMI"], b("default"));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "a b"],
        e("ERR Usernames can't contain spaces or null characters")
    );
    // New users are off: the right password does not open them yet.
    assert_reply!(admin, ["ACL", "SETUSER", "alice", ">pw1"], ok());
    assert_reply!(r, ["AUTH", "alice", "pw1"], e(WRONGPASS));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "alice", "on", ">pw2", "+acl"],
        ok()
    );
    assert_reply!(r, ["AUTH", "alice", "pw1"], ok());
    assert_reply!(r, ["AUTH", "alice", "pw2"], ok());
    assert_reply!(r, ["AUTH", "alice", "nope"], e(WRONGPASS));
    assert_reply!(r, ["ACL", "WHOAMI"], b("alice"));
    assert_reply!(admin, ["ACL", "SETUSER", "alice", "<pw1"], ok());
    assert_reply!(r, ["AUTH", "alice", "pw1"], e(WRONGPASS));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "alice", "<never-set"],
        e(
            "ERR Error in ACL SETUSER modifier '<never-set': The password you are trying to remove from the user does not exist"
        )
    );
    // Passwords are kept as SHA-256 hashes; a hash can be given directly.
    let hash = "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6";
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "alice", &format!("#{hash}")],
        ok()
    );
    assert_reply!(r, ["AUTH", "alice", "passwd4"], ok());
    let user = admin.cmd(&["ACL", "GETUSER", "alice"]);
    let passwords = field(&user, "passwords");
    assert!(passwords.as_array().contains(&b(hash)), "{user:?}");
    assert!(!format!("{user:?}").contains("pw2"));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "alice", "#abc"],
        e(
            "ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
        )
    );
    // A refused rule changes nothing of the others given with it.
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "alice", "off", "+nosuchcommand"],
        e(
            "ERR Error in ACL SETUSER modifier '+nosuchcommand': Unknown command or category name in ACL"
        )
    );
    assert_reply!(r, ["AUTH", "alice", "passwd4"], ok());
    // HELLO AUTH logs in too; nopass takes any password.
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "bob", "on", "nopass", "+@all"],
        ok()
    );
    let mut h = server.raw();
    let hello = h.cmd(&["HELLO", "2", "AUTH", "bob", "anything"]);
    assert!(matches!(hello, Reply::Array(_)), "{hello:?}");
    assert_reply!(h, ["ACL", "WHOAMI"], b("bob"));
    assert_reply!(h, ["HELLO", "2", "AUTH", "bob2", "x"], e(WRONGPASS));
    // CLIENT LIST shows the user; CLIENT KILL USER closes its clients.
    let list = admin.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(list.contains("user=bob"), "{list}");
    assert_reply!(
        admin,
        ["CLIENT", "KILL", "USER", "nosuchuser"],
        e("ERR No such user 'nosuchuser'")
    );
    assert_reply!(admin, ["CLIENT", "KILL", "USER", "bob"], i(1));
    assert!(h.closed_within(Duration::from_secs(5)));
    assert_reply!(
        admin,
        ["ACL", "USERS"],
        Reply::Array(vec![b("alice"), b("bob"), b("default")])
    );
}

#[test]
fn a_real_client_logs_in_with_a_username() {
    let server = TestServer::start();
    let mut admin = server.client();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">s3cret", "~app:*", "+@all"])
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://app:s3cret@127.0.0.1:{}/", server.port);
    let mut app = redis::Client::open(url).unwrap().get_connection().unwrap();
    let whoami: String = redis::cmd("ACL").arg("WHOAMI").query(&mut app).unwrap();
    assert_eq!(whoami, "app");
    let _: () = redis::cmd("SET")
        .arg(&["app:1", "v"])
        .query(&mut app)
        .unwrap();
    let denied: redis::RedisResult<()> = redis::cmd("SET").arg(&["other", "v"]).query(&mut app);
    let error = denied.unwrap_err();
    assert_eq!(error.code(), Some("NOPERM"), "{error:?}");
    let wrong = format!("redis://app:wrong@127.0.0.1:{}/", server.port);
    assert!(
        redis::Client::open(wrong)
            .unwrap()
            .get_connection()
            .is_err()
    );
}

#[test]
fn command_rules_and_their_description() {
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut r = server.raw();
    admin.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "allkeys"]);
    assert_reply!(r, ["AUTH", "u", "x"], ok());
    assert_reply!(r, ["SET", "k", "v"], noperm("set"));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "u", "+@all", "-client|kill"],
        ok()
    );
    assert_reply!(r, ["SET", "k", "v"], ok());
    assert!(matches!(r.cmd(&["CLIENT", "ID"]), Reply::Int(_)));
    assert_reply!(r, ["CLIENT", "KILL", "ID", "999"], noperm("client|kill"));
    assert_reply!(
        admin,
        [
            "ACL",
            "SETUSER",
            "u",
            "-@all",
            "+select|0",
            "+debug|object",
            "+set"
        ],
        ok()
    );
    assert_reply!(r, ["SELECT", "0"], ok());
    assert_reply!(r, ["SELECT", "1"], noperm("select"));
    let object = r.cmd(&["DEBUG", "OBJECT", "k"]);
    assert!(object.as_text().starts_with("Value at:"), "{object:?}");
    assert_reply!(r, ["DEBUG", "SEGFAULT"], noperm("debug"));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "u", "+config|get|appendonly"],
        e(
            "ERR Error in ACL SETUSER modifier '+config|get|appendonly': Allowing first-arg of a subcommand is not supported"
        )
    );
    // GETUSER and LIST describe the rules so that they rebuild the same
    // permissions: categories first, then single commands.
    let commands = |admin: &mut common::Raw, name: &str| {
        field(&admin.cmd(&["ACL", "GETUSER", name]), "commands").as_text()
    };
    admin.cmd(&["ACL", "SETUSER", "m", "+memory|doctor"]);
    assert_eq!(commands(&mut admin, "m"), "-@all +memory|doctor");
    admin.cmd(&["ACL", "SETUSER", "m", "+memory"]);
    assert_eq!(commands(&mut admin, "m"), "-@all +memory");
    admin.cmd(&["ACL", "SETUSER", "m", "+@all", "+client|id"]);
    assert_eq!(commands(&mut admin, "m"), "+@all");
    admin.cmd(&["ACL", "SETUSER", "m", "+@all", "-memory|doctor"]);
    assert_eq!(commands(&mut admin, "m"), "+@all -memory|doctor");
    // Every category Strata has commands in comes back as itself.
    let categories = admin.cmd(&["ACL", "CAT"]);
    assert_eq!(categories.as_array().len(), 21);
    for category in categories.as_array() {
        let category = category.as_text();
        if admin.cmd(&["ACL", "CAT", &category]).as_array().is_empty() {
            continue; // @stream: Strata has no streams yet.
        }
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "c",
            "reset",
            "+@all",
            &format!("-@{category}"),
        ]);
        assert_eq!(commands(&mut admin, "c"), format!("+@all -@{category}"));
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "c",
            "reset",
            "-@all",
            &format!("+@{category}"),
        ]);
        assert_eq!(commands(&mut admin, "c"), format!("-@all +@{category}"));
    }
    assert_reply!(
        admin,
        ["ACL", "CAT", "nosuch"],
        e("ERR Unknown category 'nosuch'")
    );
    let transaction = admin.cmd(&["ACL", "CAT", "transaction"]);
    assert!(transaction.as_array().contains(&b("multi")));
    let keyspace = admin.cmd(&["ACL", "CAT", "keyspace"]);
    assert!(!keyspace.as_array().contains(&b("set")));
    assert_reply!(
        admin,
        ["ACL", "DELUSER", "default"],
        e("ERR The 'default' user cannot be removed")
    );
}

#[test]
fn key_patterns_and_selectors() {
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut r = server.raw();
    admin.cmd(&["ACL", "SETUSER", "k", "on", "nopass", "+@all", "~app:*"]);
    assert_reply!(r, ["AUTH", "k", "x"], ok());
    assert_reply!(r, ["SET", "app:1", "v"], ok());
    assert_reply!(r, ["SET", "other", "v"], e(NOPERM_KEYS));
    assert_reply!(r, ["MSET", "app:2", "v", "other", "v"], e(NOPERM_KEYS));
    assert_reply!(r, ["GET", "other"], e(NOPERM_KEYS));
    // Read-only and write-only patterns.
    admin.cmd(&["SET", "read:1", "r"]);
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "k",
        "resetkeys",
        "%R~read:*",
        "%W~write:*",
    ]);
    assert_reply!(r, ["GET", "read:1"], b("r"));
    assert_reply!(r, ["SET", "read:1", "x"], e(NOPERM_KEYS));
    assert_reply!(r, ["LPUSH", "write:l", "1"], i(1));
    assert_reply!(r, ["LRANGE", "write:l", "0", "-1"], e(NOPERM_KEYS));
    assert_reply!(r, ["COPY", "read:1", "write:c"], i(1));
    assert_reply!(r, ["COPY", "write:c", "read:2"], e(NOPERM_KEYS));
    // SET ... GET reads the key; `SET k get` only sets "get".
    assert_reply!(r, ["SET", "write:s", "get"], ok());
    assert_reply!(r, ["SET", "write:s", "v", "GET"], e(NOPERM_KEYS));
    // Existence tests need any pattern.
    assert_reply!(r, ["EXISTS", "write:s"], i(1));
    assert_reply!(r, ["EXISTS", "else"], e(NOPERM_KEYS));
    // Selectors: each one is a complete permission; they do not combine.
    assert_reply!(
        admin,
        [
            "ACL",
            "SETUSER",
            "s",
            "on",
            "nopass",
            "-@all",
            "(+@write",
            "~w:*)",
            "(+@read ~r:*)"
        ],
        ok()
    );
    let mut s = server.raw();
    assert_reply!(s, ["AUTH", "s", "x"], ok());
    assert_reply!(s, ["PING"], noperm("ping"));
    assert_reply!(s, ["SET", "w:1", "v"], ok());
    assert_reply!(s, ["GET", "r:1"], Reply::NullBulk);
    assert_reply!(s, ["GET", "w:1"], e(NOPERM_KEYS));
    assert_reply!(s, ["SET", "r:1", "v"], e(NOPERM_KEYS));
    let user = admin.cmd(&["ACL", "GETUSER", "s"]);
    let selectors = field(&user, "selectors");
    assert_eq!(selectors.as_array().len(), 2);
    assert_eq!(field(&selectors.as_array()[0], "keys"), b("~w:*"));
    let line = admin
        .cmd(&["ACL", "LIST"])
        .as_array()
        .iter()
        .map(Reply::as_text)
        .find(|l| l.starts_with("user s "))
        .unwrap();
    assert_eq!(
        line,
        "user s on nopass resetchannels -@all (~w:* resetchannels -@all +@write) (~r:* resetchannels -@all +@read)"
    );
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "bad", "(+get"],
        e("ERR Unmatched parenthesis in acl selector starting at '(+get'.")
    );
    assert_reply!(admin, ["ACL", "GETUSER", "bad"], Reply::NullBulk);
    assert_reply!(admin, ["ACL", "SETUSER", "s", "clearselectors"], ok());
    assert_reply!(s, ["SET", "w:1", "v"], noperm("set"));
    // SORT's BY and GET read keys no argument names: refused without
    // read access to every key.
    admin.cmd(&["RPUSH", "w:list", "1"]);
    admin.cmd(&["ACL", "SETUSER", "s", "+sort", "~w:*"]);
    assert_reply!(
        s,
        ["SORT", "w:list", "BY", "w:*"],
        e("ERR BY option of SORT denied due to insufficient ACL permissions.")
    );
    assert_reply!(
        s,
        ["SORT", "w:list", "GET", "#"],
        e("ERR GET option of SORT denied due to insufficient ACL permissions.")
    );
    admin.cmd(&["ACL", "SETUSER", "s", "%R~*"]);
    assert_reply!(
        s,
        ["SORT", "w:list", "BY", "nosuch:*"],
        Reply::Array(vec![b("1")])
    );
}

#[test]
fn channel_rules_and_revoked_subscribers() {
    let server = TestServer::start();
    let mut admin = server.raw();
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "p",
        "on",
        "nopass",
        "+@all",
        "allkeys",
        "resetchannels",
        "&news:*",
    ]);
    let mut r = server.raw();
    assert_reply!(r, ["AUTH", "p", "x"], ok());
    assert_reply!(r, ["PUBLISH", "news:1", "m"], i(0));
    assert_reply!(r, ["PUBLISH", "sport", "m"], e(NOPERM_CHANNELS));
    assert_reply!(r, ["SPUBLISH", "sport", "m"], e(NOPERM_CHANNELS));
    // A pattern subscription must match an allowed pattern literally.
    assert_reply!(r, ["PSUBSCRIBE", "news:1*"], e(NOPERM_CHANNELS));
    let mut sub = server.raw();
    assert_reply!(sub, ["AUTH", "p", "x"], ok());
    sub.cmd(&["CLIENT", "SETNAME", "subscriber"]);
    let confirmation = sub.cmd(&["SUBSCRIBE", "news:1"]);
    assert_eq!(confirmation.as_array()[1], b("news:1"));
    // Narrower rules that still cover the subscription keep it.
    admin.cmd(&["ACL", "SETUSER", "p", "&news:*", "&more"]);
    assert!(!sub.closed_within(Duration::from_millis(200)));
    // Revoking it closes the subscriber.
    admin.cmd(&["ACL", "SETUSER", "p", "resetchannels"]);
    assert!(sub.closed_within(Duration::from_secs(5)));
    assert!(
        !admin
            .cmd(&["CLIENT", "LIST"])
            .as_text()
            .contains("subscriber")
    );
    // acl-pubsub-default decides what new users get.
    assert_reply!(
        admin,
        ["CONFIG", "SET", "acl-pubsub-default", "allchannels"],
        ok()
    );
    admin.cmd(&["ACL", "SETUSER", "q"]);
    let user = admin.cmd(&["ACL", "GETUSER", "q"]);
    assert_eq!(field(&user, "channels"), b("&*"));
    assert_reply!(
        admin,
        ["ACL", "SETUSER", "q", "&x"],
        e(
            "ERR Error in ACL SETUSER modifier '&x': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
        )
    );
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn acl_log_records_denials_in_their_context() {
    let server = TestServer::start();
    let mut admin = server.raw();
    admin.cmd(&[
        "ACL", "SETUSER", "ant", "on", ">foo", "+set", "+multi", "+exec", "+eval", "~obj:*",
    ]);
    let mut r = server.raw();
    assert_reply!(r, ["AUTH", "ant", "foo"], ok());
    for _ in 0..3 {
        assert_reply!(r, ["GET", "x"], noperm("get"));
    }
    let entry = |admin: &mut common::Raw| admin.cmd(&["ACL", "LOG", "1"]).as_array()[0].clone();
    let first = entry(&mut admin);
    assert_eq!(field(&first, "reason"), b("command"));
    assert_eq!(field(&first, "context"), b("toplevel"));
    assert_eq!(field(&first, "object"), b("get"));
    assert_eq!(field(&first, "username"), b("ant"));
    assert_eq!(field(&first, "count"), i(3));
    assert!(field(&first, "client-info").as_text().contains("user=ant"));
    assert_reply!(r, ["SET", "secret", "1"], e(NOPERM_KEYS));
    let key = entry(&mut admin);
    assert_eq!(field(&key, "reason"), b("key"));
    assert_eq!(field(&key, "object"), b("secret"));
    // Queued in MULTI: refused then, logged as multi.
    assert_reply!(r, ["MULTI"], ok());
    assert_reply!(r, ["INCR", "obj:1"], noperm("incr"));
    assert_reply!(
        r,
        ["EXEC"],
        e("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(field(&entry(&mut admin), "context"), b("multi"));
    // Rules changed between queuing and EXEC: the command fails there.
    admin.cmd(&["ACL", "SETUSER", "ant", "+incr"]);
    assert_reply!(r, ["MULTI"], ok());
    assert_reply!(r, ["INCR", "obj:1"], Reply::simple("QUEUED"));
    admin.cmd(&["ACL", "SETUSER", "ant", "-incr"]);
    let exec = r.cmd(&["EXEC"]);
    assert_eq!(
        exec,
        Reply::Array(vec![e(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand"
        )])
    );
    // Scripts: the call fails inside the script, logged as lua.
    let script = r.cmd(&["EVAL", "return redis.call('incr', 'obj:1')", "0"]);
    let Reply::Error(text) = script else {
        panic!("{script:?}")
    };
    assert!(
        text.starts_with("ERR The user executing the script can't run this command or subcommand"),
        "{text}"
    );
    let lua = entry(&mut admin);
    assert_eq!(field(&lua, "context"), b("lua"));
    assert_eq!(field(&lua, "object"), b("incr"));
    // redis.acl_check_cmd asks the same question without running it.
    admin.cmd(&["ACL", "SETUSER", "ant", "+@scripting"]);
    assert_reply!(
        r,
        [
            "EVAL",
            "return redis.acl_check_cmd('set', 'obj:1', 'v')",
            "0"
        ],
        i(1)
    );
    assert_reply!(
        r,
        [
            "EVAL",
            "return redis.acl_check_cmd('set', 'other', 'v')",
            "0"
        ],
        Reply::NullBulk
    );
    let invalid = r.cmd(&["EVAL", "return redis.acl_check_cmd('nosuch')", "0"]);
    assert!(
        invalid
            .as_text()
            .starts_with("ERR Invalid command passed to redis.acl_check_cmd()"),
        "{invalid:?}"
    );
    // Failed AUTH.
    assert_reply!(r, ["AUTH", "ant", "wrong"], e(WRONGPASS));
    let auth = entry(&mut admin);
    assert_eq!(field(&auth, "reason"), b("auth"));
    assert_eq!(field(&auth, "object"), b("AUTH"));
    // INFO counts denials by reason (Redis 7.2's fields).
    let mut info = server.client();
    assert_eq!(
        common::info_u64(&mut info, "stats", "acl_access_denied_auth"),
        1
    );
    assert!(common::info_u64(&mut info, "stats", "acl_access_denied_cmd") >= 5);
    assert_eq!(
        common::info_u64(&mut info, "stats", "acl_access_denied_key"),
        1
    );
    assert_reply!(admin, ["CONFIG", "RESETSTAT"], ok());
    assert_eq!(
        common::info_u64(&mut info, "stats", "acl_access_denied_cmd"),
        0
    );
    // Bounded by acllog-max-len; RESET empties it.
    assert_reply!(admin, ["CONFIG", "SET", "acllog-max-len", "2"], ok());
    assert_eq!(admin.cmd(&["ACL", "LOG"]).as_array().len(), 2);
    assert_reply!(admin, ["ACL", "LOG", "RESET"], ok());
    assert_reply!(admin, ["ACL", "LOG"], Reply::Array(vec![]));
}

#[test]
fn dryrun_genpass_and_deleting_a_user_in_use() {
    let server = TestServer::start();
    let mut admin = server.raw();
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "t",
        "on",
        "nopass",
        "+@all",
        "%R~read*",
        "%W~write*",
        "%RW~rw*",
    ]);
    assert_reply!(admin, ["ACL", "DRYRUN", "t", "GET", "read"], ok());
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "GET", "write"],
        b("This user has no permissions to access the 'write' key")
    );
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "SORT", "read", "STORE", "write"],
        ok()
    );
    assert_reply!(admin, ["ACL", "DRYRUN", "t", "EVAL", "", "1", "rw1"], ok());
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "EVAL", "", "1", "read"],
        b("This user has no permissions to access the 'read' key")
    );
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "EVAL_RO", "", "1", "read"],
        ok()
    );
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "nobody", "GET", "x"],
        e("ERR User 'nobody' not found")
    );
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "NOSUCH", "x"],
        e("ERR Command 'NOSUCH' not found")
    );
    assert_reply!(
        admin,
        ["ACL", "DRYRUN", "t", "SET", "x"],
        e("ERR wrong number of arguments for 'set' command")
    );
    let password = admin.cmd(&["ACL", "GENPASS"]).as_text();
    assert_eq!(password.len(), 64);
    assert!(password.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(admin.cmd(&["ACL", "GENPASS", "5"]).as_text().len(), 2);
    assert_ne!(admin.cmd(&["ACL", "GENPASS"]).as_text(), password);
    assert_reply!(
        admin,
        ["ACL", "GENPASS", "5000"],
        e(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"
        )
    );
    // A deleted user's connections close; the deleting one after its reply.
    let mut other = server.raw();
    assert_reply!(other, ["AUTH", "t", "x"], ok());
    assert_reply!(admin, ["AUTH", "t", "x"], ok());
    assert_reply!(admin, ["ACL", "DELUSER", "t", "nobody"], i(1));
    assert!(admin.closed_within(Duration::from_secs(5)));
    assert!(other.closed_within(Duration::from_secs(5)));
}

#[test]
fn default_user_and_requirepass_are_one() {
    let server = TestServer::start();
    let mut admin = server.raw();
    assert_reply!(admin, ["CONFIG", "SET", "requirepass", "pw"], ok());
    let user = admin.cmd(&["ACL", "GETUSER", "default"]);
    assert_eq!(field(&user, "passwords").as_array().len(), 1);
    let mut fresh = server.raw();
    assert_reply!(fresh, ["GET", "k"], e("NOAUTH Authentication required."));
    assert_reply!(fresh, ["AUTH", "default", "pw"], ok());
    // The default user switched off: new connections must log in as
    // another user.
    admin.cmd(&["ACL", "SETUSER", "root", "on", ">r", "+@all", "allkeys"]);
    admin.cmd(&["ACL", "SETUSER", "default", "nopass", "off"]);
    let mut late = server.raw();
    assert_reply!(late, ["PING"], e("NOAUTH Authentication required."));
    // `nopass` still: AUTH without a username is refused as Redis does.
    assert_reply!(
        late,
        ["AUTH", "x"],
        e(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
        )
    );
    assert_reply!(late, ["AUTH", "default", "x"], e(WRONGPASS));
    assert_reply!(late, ["AUTH", "root", "r"], ok());
    assert_reply!(late, ["PING"], Reply::simple("PONG"));
}

#[test]
fn acl_file_load_and_save() {
    let dir = common::temp_dir();
    let file = dir.join("users.acl");
    std::fs::write(
        &file,
        "user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\nuser default on nopass ~* &* +@all\n",
    )
    .unwrap();
    let file_arg = file.display().to_string();
    let server = TestServer::start_with(&["--aclfile", &file_arg]);
    let mut r = server.raw();
    assert_reply!(r, ["AUTH", "bob", "bob"], ok());
    assert_reply!(r, ["SADD", "set1", "a"], i(1));
    assert_reply!(r, ["SET", "k", "v"], noperm("set"));
    assert_reply!(
        r,
        ["ACL", "SETUSER", "eve", "on", ">eve", "+get", "allkeys"],
        ok()
    );
    assert_reply!(r, ["ACL", "SAVE"], ok());
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("user eve on #"), "{saved}");
    // LOAD replaces every user and closes the connections of all but
    // the default user.
    assert_reply!(r, ["ACL", "LOAD"], ok());
    assert!(r.closed_within(Duration::from_secs(5)));
    let mut r = server.raw();
    assert_reply!(r, ["AUTH", "eve", "eve"], ok());
    assert_reply!(r, ["GET", "k"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v"], noperm("set"));
    // A bad file changes nothing and says why.
    std::fs::write(
        &file,
        "user alice on +@all\nuser alice off\nnot a user line\n",
    )
    .unwrap();
    let mut admin = server.raw();
    let Reply::Error(text) = admin.cmd(&["ACL", "LOAD"]) else {
        panic!("ACL LOAD accepted a bad file")
    };
    assert!(
        text.contains("Duplicate user 'alice' found on line 2"),
        "{text}"
    );
    assert!(text.contains("should start with user keyword"), "{text}");
    // Eve is still as loaded before.
    assert_reply!(r, ["GET", "k"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v"], noperm("set"));
    drop(server);
    // At start-up a bad file stops the server; so do `user` lines beside
    // an aclfile.
    let (code, output) = refused_start(&["--aclfile", &file_arg]);
    assert_ne!(code, 0);
    assert!(output.contains("Duplicate user"), "{output}");
    let (code, output) = refused_start(&["--aclfile", &file_arg, "--user", "x", "on"]);
    assert_ne!(code, 0);
    assert!(output.contains("but not both"), "{output}");
    // Without a file, LOAD and SAVE say so.
    let plain = TestServer::start();
    let mut p = plain.raw();
    let Reply::Error(text) = p.cmd(&["ACL", "LOAD"]) else {
        panic!()
    };
    assert!(text.contains("not configured to use an ACL file"), "{text}");
}

#[test]
fn user_lines_in_the_config_survive_rewrite_and_restart() {
    let dir = common::temp_dir();
    let config = dir.join("strata.conf");
    std::fs::write(&config, "user default on nopass ~* &* +@all -flushdb\n").unwrap();
    let config_arg = config.display().to_string();
    let server = TestServer::spawn(dir.clone(), &[&config_arg], None, common::READY);
    let mut r = server.raw();
    assert_reply!(r, ["FLUSHDB"], noperm("flushdb"));
    assert_reply!(
        r,
        ["ACL", "SETUSER", "ops", "on", ">o", "+@all", "~*"],
        ok()
    );
    assert_reply!(r, ["CONFIG", "REWRITE"], ok());
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("user ops on #"), "{text}");
    assert!(text.contains("-flushdb"), "{text}");
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[&config_arg], None, common::READY);
    let mut r = server.raw();
    assert_reply!(r, ["FLUSHDB"], noperm("flushdb"));
    assert_reply!(r, ["AUTH", "ops", "o"], ok());
    assert_reply!(r, ["FLUSHDB"], ok());
    // A user defined twice stops start-up.
    let (code, output) = refused_start(&["--user", "foo", "on", "--user", "foo", "off"]);
    assert_ne!(code, 0);
    assert!(output.contains("Duplicate user"), "{output}");
}

/// Runs a server expected to refuse to start: its exit code and output.
fn refused_start(args: &[&str]) -> (i32, String) {
    let dir = common::temp_dir();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"));
    command
        .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(dir.join("data"))
        .args(args);
    common::run_bounded(&mut command)
}
