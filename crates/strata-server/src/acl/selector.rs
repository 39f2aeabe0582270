//! One ACL selector: which commands, keys and channels it allows.
//!
//! A user has a root selector (the rules written outside parentheses)
//! and any number of further selectors (`(...)`); a command runs when one
//! selector allows all of it: the command, every key it names (with the
//! read or write access the key spec says it needs) and every channel.
//!
//! Commands are a bitmap over the command table's ids (commands and
//! subcommands alike), as in Redis, plus "first arguments" allowed of an
//! otherwise denied command (`+select|0`). `future` is Redis' reserved
//! bit: set only by `+@all`, it says the rules started from everything,
//! which decides whether a description starts with `+@all` or `-@all`.

use crate::acl::categories::{CATEGORIES, Categories};
use crate::commands::catalog::{CommandTable, RunKind};

/// Why a rule was refused, as Redis names it in "Error in ACL SETUSER
/// modifier '<op>': <why>".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeyAfterAllKeys,
    ChannelAfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
        }
    }
}

/// A key pattern with the access it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    /// As ACL LIST writes it: `~p`, `%R~p` or `%W~p`.
    fn describe(&self) -> String {
        let prefix = match (self.read, self.write) {
            (true, false) => "%R~",
            (false, true) => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&self.pattern))
    }
}

/// What a command needs of one key: read, write, or neither (an existence
/// test, a TYPE: any pattern that matches will do).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyNeed {
    pub read: bool,
    pub write: bool,
}

/// How a command names a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelUse {
    /// PUBLISH, SUBSCRIBE: matched against the selector's patterns.
    Name,
    /// PSUBSCRIBE: the pattern must equal one of the selector's literally.
    Pattern,
}

#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Allowed command ids.
    allowed: Vec<u64>,
    /// Every command allowed (no bit ever cleared since `+@all`): the
    /// check skips the bitmap.
    all_commands: bool,
    /// Redis' reserved "future commands" bit (see the module docs).
    future: bool,
    /// Allowed first arguments of commands otherwise denied, by id.
    first_args: Vec<(usize, Vec<String>)>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector that allows nothing (channels as `acl-pubsub-default`).
    pub fn empty(commands: usize, all_channels: bool) -> Selector {
        Selector {
            allowed: vec![0; commands.div_ceil(64)],
            all_channels,
            ..Selector::default()
        }
    }

    pub fn allows_everything(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    pub fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Allows or denies a command; a container's subcommands follow it.
    fn change<R: RunKind>(&mut self, table: &CommandTable<R>, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.retain(|(of, _)| *of != id);
        for sub in table.subcommand_ids(id) {
            self.set_bit(sub, on);
        }
    }

    fn change_category<R: RunKind>(
        &mut self,
        table: &CommandTable<R>,
        cats: &Categories,
        bit: u32,
        on: bool,
    ) {
        for id in 0..table.len() {
            if cats.of(id) & bit != 0 {
                self.change(table, id, on);
            }
        }
    }

    fn set_everything(&mut self, on: bool) {
        self.allowed
            .iter_mut()
            .for_each(|w| *w = if on { !0 } else { 0 });
        self.all_commands = on;
        self.future = on;
        self.first_args.clear();
    }

    /// Applies one rule that belongs to a selector (not `on`, passwords…).
    pub fn apply<R: RunKind>(
        &mut self,
        table: &CommandTable<R>,
        cats: &Categories,
        op: &[u8],
    ) -> Result<(), RuleError> {
        let word = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if word("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.keys.clear();
        } else if word("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if word("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if word("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if word("allcommands") || word("+@all") {
            self.set_everything(true);
        } else if word("nocommands") || word("-@all") {
            self.set_everything(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAllChannels);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let name = String::from_utf8_lossy(&op[2..]).to_ascii_lowercase();
            let bit = Categories::bit_of(&name).ok_or(RuleError::UnknownCommand)?;
            self.change_category(table, cats, bit, op[0] == b'+');
        } else if op[0] == b'+' {
            self.allow_command(table, &op[1..])?;
        } else if op[0] == b'-' {
            let id = table
                .original_id(&op[1..])
                .ok_or(RuleError::UnknownCommand)?;
            self.change(table, id, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAllKeys);
        }
        let (mut read, mut write) = (true, true);
        let mut offset = 1;
        if op[0] == b'%' {
            (read, write) = (false, false);
            loop {
                match op.get(offset).map(u8::to_ascii_uppercase) {
                    Some(b'R') if !read => read = true,
                    Some(b'W') if !write => write = true,
                    Some(b'~') => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
        }
        let pattern = &op[offset..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    /// `+name`, `+container|sub` or `+command|first-arg`.
    fn allow_command<R: RunKind>(
        &mut self,
        table: &CommandTable<R>,
        name: &[u8],
    ) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = table.original_id(name).ok_or(RuleError::UnknownCommand)?;
            self.change(table, id, true);
            return Ok(());
        };
        let (command, sub) = (&name[..bar], &name[bar + 1..]);
        let id = table
            .original_id(command)
            .ok_or(RuleError::UnknownCommand)?;
        if table.is_subcommand(id) {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        // DEBUG is one command to Redis' ACL (its subcommands are first
        // arguments), so `+debug|digest` works for any of them.
        if table.has_subcommands(id) && id != table.debug_id {
            let sub_id = table.original_id(name).ok_or(RuleError::UnknownCommand)?;
            self.change(table, sub_id, true);
            return Ok(());
        }
        // Allowing one first argument of a command without subcommands
        // (`+select|0`): deprecated in Redis, still honoured.
        let sub = String::from_utf8_lossy(sub).into_owned();
        match self.first_args.iter_mut().find(|(of, _)| *of == id) {
            Some((_, args)) => {
                if !args.iter().any(|a| a.eq_ignore_ascii_case(&sub)) {
                    args.push(sub);
                }
            }
            None => self.first_args.push((id, vec![sub])),
        }
        Ok(())
    }

    /// Whether command `id` may run with these arguments, as far as the
    /// command (not its keys) goes.
    pub fn allows_command<R: RunKind>(
        &self,
        table: &CommandTable<R>,
        id: usize,
        args: &[bytes::Bytes],
    ) -> bool {
        if self.all_commands || self.bit(id) {
            return true;
        }
        // First arguments are only ever allowed of top-level commands
        // (DEBUG's subcommands are its first arguments).
        let owner = table.top_level_of(id);
        let Some(arg) = args.get(1) else {
            return false;
        };
        self.first_args
            .iter()
            .find(|(of, _)| *of == owner)
            .is_some_and(|(_, allowed)| {
                allowed
                    .iter()
                    .any(|a| a.as_bytes().eq_ignore_ascii_case(arg))
            })
    }

    pub fn allows_key(&self, key: &[u8], need: KeyNeed) -> bool {
        self.all_keys
            || self.keys.iter().any(|k| {
                (k.read || !need.read)
                    && (k.write || !need.write)
                    && strata_engine::glob::matches(&k.pattern, key, false)
            })
    }

    /// Whether some pattern gives `need` over every key (`~*`, `%R~*`):
    /// what SORT's BY and GET need, since they read keys no argument names.
    pub fn allows_every_key(&self, need: KeyNeed) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|k| (k.read || !need.read) && (k.write || !need.write) && k.pattern == b"*")
    }

    pub fn allows_channel(&self, channel: &[u8], used: ChannelUse) -> bool {
        self.all_channels || channel_in(&self.channels, channel, used)
    }

    /// The key patterns as ACL GETUSER shows them.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let keys: Vec<String> = self.keys.iter().map(KeyPattern::describe).collect();
        keys.join(" ")
    }

    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let channels: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        channels.join(" ")
    }

    /// The selector in ACL SETUSER's words: keys, channels, then commands.
    pub fn describe<R: RunKind>(&self, table: &CommandTable<R>, cats: &Categories) -> String {
        let mut text = String::new();
        if self.all_keys {
            text.push_str("~* ");
        } else {
            for key in &self.keys {
                text.push_str(&key.describe());
                text.push(' ');
            }
        }
        if self.all_channels {
            text.push_str("&* ");
        } else {
            text.push_str("resetchannels ");
            for channel in &self.channels {
                text.push('&');
                text.push_str(&String::from_utf8_lossy(channel));
                text.push(' ');
            }
        }
        text.push_str(&self.describe_commands(table, cats));
        text
    }

    /// The command rules that rebuild this selector's bitmap: `+@all` or
    /// `-@all`, then the categories that fit best (greedily, as Redis
    /// picks them), then single commands for what remains.
    pub fn describe_commands<R: RunKind>(
        &self,
        table: &CommandTable<R>,
        cats: &Categories,
    ) -> String {
        let additive = !self.future;
        let mut rules = vec![if additive { "-@all" } else { "+@all" }.to_owned()];
        let mut fake = Selector::empty(table.len(), false);
        fake.set_everything(!additive);
        // What is left to explain: categories are taken out of it as
        // they are emitted.
        let mut rest = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best: Option<(usize, usize, usize)> = None;
            for (index, name) in CATEGORIES.iter().enumerate() {
                if applied[index] {
                    continue;
                }
                let bit = Categories::bit_of(name).expect("a category of the list");
                let (mut on, mut off) = (0usize, 0usize);
                for id in 0..table.len() {
                    if cats.of(id) & bit != 0 {
                        if rest.bit(id) { on += 1 } else { off += 1 }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                let better = match best {
                    None => true,
                    Some((_, best_diff, best_same)) => {
                        diff < best_diff || (diff == best_diff && same > best_same)
                    }
                };
                if same > diff && better {
                    best = Some((index, diff, same));
                }
            }
            let Some((index, _, _)) = best else { break };
            let bit = Categories::bit_of(CATEGORIES[index]).expect("a category of the list");
            fake.change_category(table, cats, bit, additive);
            rest.change_category(table, cats, bit, !additive);
            rules.push(format!(
                "{}@{}",
                if additive { '+' } else { '-' },
                CATEGORIES[index]
            ));
            applied[index] = true;
        }
        for id in 0..table.len() {
            let mine = self.bit(id);
            if mine != fake.bit(id) {
                rules.push(format!(
                    "{}{}",
                    if mine { '+' } else { '-' },
                    table.full_names[id]
                ));
                fake.change(table, id, mine);
            }
            if !mine && let Some((_, args)) = self.first_args.iter().find(|(of, _)| *of == id) {
                for arg in args {
                    rules.push(format!("+{}|{arg}", table.full_names[id]));
                }
            }
        }
        debug_assert!(
            fake.allowed == self.allowed,
            "the description rebuilds the bitmap"
        );
        rules.join(" ")
    }
}

/// Whether `channel` is allowed by `patterns` (see [`ChannelUse`]).
pub fn channel_in(patterns: &[Vec<u8>], channel: &[u8], used: ChannelUse) -> bool {
    patterns.iter().any(|p| match used {
        ChannelUse::Pattern => p == channel,
        ChannelUse::Name => strata_engine::glob::matches(p, channel, false),
    })
}

/// Redis refuses spaces and NUL bytes in usernames and patterns, so that
/// ACL LIST's lines split back into the same rules.
pub fn has_spaces(text: &[u8]) -> bool {
    text.iter()
        .any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
}
