//! `docs/commands.md` is generated from the command table and must match
//! it: this test renders the table and compares. After changing the
//! table, regenerate the page with
//! `STRATA_WRITE_DOCS=1 cargo test -p strata-server --test commands_doc`.

use std::fmt::Write;

use strata_server::commands::keyspec::{BeginSearch, FindKeys, KeySpec};
use strata_server::commands::{CommandTable, Run, Spec};

/// The page, from the table.
fn render(table: &CommandTable) -> String {
    let mut page = String::from(
        "# Commands\n\n\
         Every command Strata serves, generated from the command table\n\
         (`crates/strata-server/src/commands/table/`) by\n\
         `STRATA_WRITE_DOCS=1 cargo test -p strata-server --test commands_doc`;\n\
         a test fails when this page and the table differ, so do not edit it\n\
         by hand. Arity, flags, key specs and ACL categories are Redis 7's (as\n\
         COMMAND INFO reports them); the summaries are Strata's own words.\n\
         Strata's traits say how it treats a command beyond Redis' flags\n\
         (`crates/strata-server/src/commands/spec.rs`).\n\n\
         Arity: the number of arguments including the command's name; -N:\n\
         at least N. Keys: where its key arguments are (index from 1 = the\n\
         first argument after the name).\n",
    );
    let mut groups: Vec<&str> = Vec::new();
    for id in 0..table.len() {
        let group = table.specs[id].group;
        if !group.is_empty() && !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups.sort_unstable();
    writeln!(
        page,
        "\n{} commands and subcommands in {} groups.",
        table.len(),
        groups.len()
    )
    .unwrap();
    for group in groups {
        writeln!(page, "\n## {group}\n").unwrap();
        page.push_str("| command | arity | flags | keys | ACL categories | summary |\n");
        page.push_str("|---|---|---|---|---|---|\n");
        for id in 0..table.len() {
            let spec = table.specs[id];
            if spec.group != group {
                continue;
            }
            row(&mut page, &table.full_names[id], spec);
            for sub in spec.subcommands {
                let name = format!("{}|{}", table.full_names[id], sub.name);
                row(&mut page, &name, sub);
            }
        }
    }
    page
}

fn row(page: &mut String, full_name: &str, spec: &Spec) {
    let name = full_name.replace('|', " ").to_ascii_uppercase();
    let mut flags: Vec<&str> = spec.flags.names().collect();
    flags.extend(spec.traits.names());
    let run = match spec.run {
        Run::Container => " (container)",
        Run::Exec | Run::Script(_) | Run::Handler(_) => "",
    };
    let keys: Vec<String> = spec.keys.iter().map(key_spec).collect();
    let categories: Vec<String> = spec.acl.names().map(|c| format!("@{c}")).collect();
    writeln!(
        page,
        "| `{name}`{run} | {} | {} | {} | {} | {} |",
        spec.arity,
        flags.join(", "),
        keys.join("; "),
        categories.join(" "),
        spec.summary.replace('|', "\\|"),
    )
    .unwrap();
}

/// One key spec in a few words: where the keys begin, how many, flags.
fn key_spec(spec: &KeySpec) -> String {
    let begin = match spec.begin {
        BeginSearch::Index(index) => format!("from {index}"),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => format!("after {keyword} (searched from {start_from})"),
        BeginSearch::Unknown => "found by the command".to_owned(),
    };
    let find = match spec.find {
        FindKeys::Range { last_key: 0, .. } => "one".to_owned(),
        FindKeys::Range {
            last_key: -1, step, ..
        } => format!("to the end, every {step}"),
        FindKeys::Range { last_key, step, .. } => format!("to +{last_key}, every {step}"),
        FindKeys::Keynum {
            keynum_index,
            first_key,
            step,
        } => format!("count at +{keynum_index}, keys from +{first_key}, every {step}"),
        FindKeys::Unknown => String::new(),
    };
    let flags = spec.flags.join(" ");
    match find.is_empty() {
        true => format!("{begin} [{flags}]"),
        false => format!("{begin}, {find} [{flags}]"),
    }
}

#[test]
fn docs_commands_md_is_generated_from_the_table() {
    let table = CommandTable::new();
    let page = render(&table);
    assert!(
        page.contains("| `GET` | 2 | readonly, fast |"),
        "{}",
        &page[..2000.min(page.len())]
    );
    assert!(page.contains("| `CONFIG GET` |"), "subcommands are listed");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/commands.md");
    if std::env::var_os("STRATA_WRITE_DOCS").is_some() {
        std::fs::write(&path, &page).expect("docs/commands.md written");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == page,
        "docs/commands.md differs from the command table: regenerate it with \
         STRATA_WRITE_DOCS=1 cargo test -p strata-server --test commands_doc"
    );
}
