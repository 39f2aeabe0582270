//! Property tests: the request parser and the reply scanner never panic,
//! whatever they are fed and however the input is split into reads, and
//! well-formed requests always come back exactly as they were encoded.

use bytes::BytesMut;
use proptest::prelude::*;
use strata_resp::{Limits, RequestParser};

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Feeds `input` in chunks of the given sizes; stops at the first error as a
/// server would. Returns the commands parsed.
fn feed(input: &[u8], chunks: &[usize], limits: &Limits) -> Vec<Vec<Vec<u8>>> {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    let mut offset = 0;
    let mut chunk_sizes = chunks.iter().cycle();
    while offset < input.len() {
        let size = (*chunk_sizes.next().unwrap_or(&1)).max(1);
        let end = (offset + size).min(input.len());
        buf.extend_from_slice(&input[offset..end]);
        offset = end;
        loop {
            match parser.next(&mut buf, limits) {
                Ok(Some(cmd)) => commands.push(cmd.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => break,
                Err(_) => return commands,
            }
        }
    }
    commands
}

fn small_limits() -> Limits {
    Limits {
        bulk_len_bytes_max: 64,
        multibulk_len_max: 16,
        inline_len_bytes_max: 32,
        auth_required: false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..512),
                                       chunks in proptest::collection::vec(1usize..64, 1..8)) {
        feed(&input, &chunks, &Limits::default());
        feed(&input, &chunks, &small_limits());
    }

    #[test]
    fn never_panics_on_mutated_requests(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
                                        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
                                        chunks in proptest::collection::vec(1usize..32, 1..8)) {
        let mut input = encode(&args);
        for (at, byte) in flips {
            let len = input.len();
            input[at % len] = byte;
        }
        feed(&input, &chunks, &Limits::default());
        feed(&input, &chunks, &small_limits());
    }

    #[test]
    fn well_formed_requests_round_trip(commands in proptest::collection::vec(
                                           proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6), 1..5),
                                       chunks in proptest::collection::vec(1usize..32, 1..8)) {
        let input: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
        prop_assert_eq!(feed(&input, &chunks, &Limits::default()), commands);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The client-side reply scanner faces whatever a server (or a broken
    /// network peer) sends: it must never panic, and a length it reports
    /// never exceeds the input.
    #[test]
    fn reply_scanner_never_panics(input in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(Some((len, _))) = strata_resp::reply::scan_reply(&input) {
            prop_assert!(len <= input.len());
        }
    }

    #[test]
    fn reply_scanner_never_panics_on_nested_headers(depth in 0usize..200, tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut input = b"*1\r\n".repeat(depth);
        input.extend_from_slice(&tail);
        let _ = strata_resp::reply::scan_reply(&input);
    }
}
