//! The ACL family's entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[Spec {
    name: "acl",
    arity: -2,
    flags: flags![],
    acl: categories![SLOW],
    group: "server",
    since: "6.0.0",
    summary: "A container for Access List Control commands ",
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
        summary: "List the ACL categories or the commands inside a category",
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
        summary: "Remove the specified ACL users and the associated rules",
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
        summary: "Returns whether the user can execute the given command without executing the command.",
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
        summary: "Generate a pseudorandom secure password to use for ACL users",
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
        summary: "Get the rules for a specific ACL user",
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
        summary: "Show helpful text about the different subcommands",
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
        summary: "List the current ACL rules in ACL config file format",
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
        summary: "Reload the ACLs from the configured ACL file",
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
        summary: "List latest events denied because of ACLs in place",
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
        summary: "Save the current ACL rules in the configured ACL file",
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
        summary: "Modify or create the rules for a specific ACL user",
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
        summary: "List the username of all the configured ACL rules",
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
        summary: "Return the name of the user associated to the current connection",
        complexity: "O(1)",
        run: Run::Handler(ac::acl_whoami),
        ..Spec::DEFAULT
    },
];
