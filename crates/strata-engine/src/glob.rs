//! Redis' glob-style matching (`stringmatchlen`): `*`, `?`, `[abc]`,
//! `[^abc]`, `[a-z]`, and `\x` to match `x` literally.
//!
//! Implemented with the two-pointer method (backtrack only to the most
//! recent `*`), so a hostile pattern such as `a*a*a*a*b` costs O(n·m) at
//! worst instead of Redis' exponential recursion.

/// Redis gives up on a pattern whose matching reaches its 1 001st run of
/// `*` that is not the pattern's end while text remains (its recursion
/// depth limit, "protection against abusive patterns"): such a pattern
/// matches nothing there, and so here.
const STAR_RUNS_MAX: usize = 1000;

pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    // Runs of `*` passed so far, and the furthest `*` counted: backtracking
    // returns to a `*` already counted, never before it.
    let (mut star_runs, mut furthest_star) = (0usize, None::<usize>);
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    if furthest_star.is_none_or(|f| p > f) {
                        let continues_run = p > 0 && furthest_star == Some(p - 1);
                        if !continues_run {
                            star_runs += 1;
                            let ends_pattern = pattern[p..].iter().all(|&b| b == b'*');
                            if star_runs > STAR_RUNS_MAX && !ends_pattern {
                                return false;
                            }
                        }
                        furthest_star = Some(p);
                    }
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {
                    if let Some(next_p) = match_one(pattern, p, text[t], nocase) {
                        p = next_p;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches one text byte against the pattern element at `p` (a literal, an
/// escape or a class). Returns the index after the element on a match.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern[p] {
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut matched = false;
            while i < pattern.len() && pattern[i] != b']' {
                if pattern[i] == b'\\' && i + 1 < pattern.len() {
                    matched |= eq(pattern[i + 1], c);
                    i += 2;
                } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']'
                {
                    let (mut lo, mut hi) = (pattern[i], pattern[i + 2]);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let in_range = |x: u8| lo <= x && x <= hi;
                    matched |= in_range(c)
                        || (nocase
                            && (in_range(c.to_ascii_lowercase())
                                || in_range(c.to_ascii_uppercase())));
                    i += 3;
                } else {
                    matched |= eq(pattern[i], c);
                    i += 1;
                }
            }
            // An unterminated class ends at the end of the pattern, as in Redis.
            let after = if i < pattern.len() { i + 1 } else { i };
            (matched != negate).then_some(after)
        }
        literal => eq(literal, c).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    /// As Redis 7.4 answers them (checked against redis-server): 1 000
    /// runs of `*` before more pattern match, 1 001 do not, and a run that
    /// ends the pattern does not count.
    #[test]
    fn more_than_a_thousand_runs_of_star_match_nothing() {
        let text = vec![b'a'; 1100];
        let runs = |n: usize| b"*a".repeat(n);
        assert!(matches(&runs(1000), &text, false));
        assert!(!matches(&runs(1001), &text, false));
        assert!(matches(&[runs(1000), b"*".to_vec()].concat(), &text, false));
        assert!(!matches(
            &[runs(1001), b"**".to_vec()].concat(),
            &text,
            false
        ));
        // Consecutive stars are one run; an escaped one is no star.
        assert!(matches(&b"**a".repeat(1000), &text, false));
        let escaped = [b"\\*".to_vec(), runs(1000)].concat();
        assert!(matches(
            &escaped,
            &[b"*".to_vec(), text.clone()].concat(),
            false
        ));
        // Redis' own regression case: "*?" x 50 000 against 50 000 bytes.
        assert!(!matches(&b"*?".repeat(50_000), &vec![b'a'; 50_000], false));
    }

    #[test]
    fn redis_glob_cases() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "abc"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h\\*llo", "h*llo"),
            ("*a*b", "xaxxb"),
            ("user:*", "user:1000"),
            ("[z-a]", "m"),
        ];
        for (p, t) in yes {
            assert!(
                matches(p.as_bytes(), t.as_bytes(), false),
                "{p} should match {t}"
            );
        }
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("a*b", "axxbc"),
            ("h\\*llo", "hello"),
            ("", "a"),
        ];
        for (p, t) in no {
            assert!(
                !matches(p.as_bytes(), t.as_bytes(), false),
                "{p} should not match {t}"
            );
        }
        assert!(matches(b"HeLLo", b"hello", true));
    }

    #[test]
    fn hostile_pattern_is_fast() {
        let text = vec![b'a'; 10_000];
        assert!(!matches(b"a*a*a*a*a*a*a*a*b", &text, false));
    }
}
