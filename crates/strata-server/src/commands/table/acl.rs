//! The ACL family's entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[Spec {
    name: "acl",
    arity: -2,
    flags: flags![],
    acl: categories![SLOW],
    group: "server",
    since: "6.0.0",
    summary: "Groups the subcommands that inspect and manage ACL users and their rules.",
    complexity: "Depends on subcommand.",
    run: Run::Container,
    subcommands: ACL_SUBCOMMANDS,
    ..Spec::DEFAULT
}];

const ACL_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "cat",
        arity: -2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW],
        since: "6.0.0",
        summary: "Names the ACL command categories, or the commands in a given one.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_cat),
        ..Spec::DEFAULT
    },
    Spec {
        name: "deluser",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Deletes ACL users together with the rules attached to them.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_deluser),
        ..Spec::DEFAULT
    },
    Spec {
        name: "dryrun",
        arity: -4,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "7.0.0",
        summary: "Checks whether a user may run a given command, without running it.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_dryrun),
        ..Spec::DEFAULT
    },
    Spec {
        name: "genpass",
        arity: -2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW],
        since: "6.0.0",
        summary: "Produces a strong random password as a hex string (256 bits by default).",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_genpass),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getuser",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Shows the rules defined for one ACL user.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_getuser),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW],
        since: "6.0.0",
        summary: "Lists the ACL subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_help),
        ..Spec::DEFAULT
    },
    Spec {
        name: "list",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Prints every ACL user's rules in the format of an ACL file.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_list),
        ..Spec::DEFAULT
    },
    Spec {
        name: "load",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Replaces the current users and rules with the contents of the ACL file.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_load),
        ..Spec::DEFAULT
    },
    Spec {
        name: "log",
        arity: -2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Shows, or clears, the log of recent ACL denials and failed logins.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_log),
        ..Spec::DEFAULT
    },
    Spec {
        name: "save",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Writes every user and its rules out to the ACL file.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_save),
        ..Spec::DEFAULT
    },
    Spec {
        name: "setuser",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Creates an ACL user or changes an existing user's rules.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_setuser),
        ..Spec::DEFAULT
    },
    Spec {
        name: "users",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "6.0.0",
        summary: "Lists the names of all ACL users.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_users),
        ..Spec::DEFAULT
    },
    Spec {
        name: "whoami",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW],
        since: "6.0.0",
        summary: "Replies with the username the connection is authenticated as.",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_whoami),
        ..Spec::DEFAULT
    },
];
