//! Geo commands on sorted sets: GEOADD, GEOPOS, GEODIST, GEOHASH,
//! GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their _RO
//! forms.
//!
//! A position is a member whose score is its 52-bit geohash
//! (`crate::geohash`), so a geo key is an ordinary sorted set (TYPE says
//! `zset`) and GEOADD is ZADD with computed scores. A search reads the
//! score ranges of the centre's cell and its neighbours
//! ([`geohash::search_ranges`]) and keeps the members inside the shape:
//! O(N + log M) as Redis documents, for N members in those cells.
//! Differences: the cells' step is chosen with a simpler rule than Redis'
//! (the same estimate, made coarser until the neighbours cover the
//! shape), so without ASC/DESC the order of results may differ.

use bytes::Bytes;
use strata_engine::types::collection::ZSet;
use strata_engine::types::zset::ZSetValue;
use strata_resp::ReplyWriter;

use super::zsets::{self, parse_double};
use super::{CmdError, CmdResult, Ctx, ERR_NOT_FLOAT, ERR_SYNTAX, is, parse_i64};
use crate::geohash::{self, LAT_MAX, LAT_MIN, LON_MAX, LON_MIN, Shape};
use crate::long_double;

const ERR_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
const ERR_NO_MEMBER: &str = "ERR could not decode requested zset member";

/// Metres per unit.
fn parse_unit(arg: &[u8]) -> Result<f64, CmdError> {
    if is(arg, "m") {
        Ok(1.0)
    } else if is(arg, "km") {
        Ok(1000.0)
    } else if is(arg, "ft") {
        Ok(0.3048)
    } else if is(arg, "mi") {
        Ok(1609.34)
    } else {
        Err(ERR_UNIT.into())
    }
}

/// A longitude and latitude pair, with Redis' errors.
fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = parse_double(lon).ok_or(CmdError::from(ERR_NOT_FLOAT))?;
    let lat = parse_double(lat).ok_or(CmdError::from(ERR_NOT_FLOAT))?;
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}").into());
    }
    Ok((lon, lat))
}

/// A distance and its unit: (metres per unit, distance in units).
fn parse_distance(value: &[u8], unit: &[u8], what: &str) -> Result<(f64, f64), CmdError> {
    let distance =
        parse_double(value).ok_or_else(|| CmdError::from(format!("ERR need numeric {what}")))?;
    if distance < 0.0 {
        return Err("ERR radius cannot be negative".into());
    }
    Ok((parse_unit(unit)?, distance))
}

fn write_distance(out: &mut ReplyWriter, metres: f64, per_unit: f64) {
    out.bulk(format!("{:.4}", metres / per_unit).as_bytes());
}

fn write_coord(out: &mut ReplyWriter, lon: f64, lat: f64) {
    out.array(2);
    out.double_text(&long_double::human(lon));
    out.double_text(&long_double::human(lat));
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with the
/// members' geohashes as scores.
pub fn geoadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut at = 2;
    let (mut nx, mut xx) = (false, false);
    while let Some(arg) = args.get(at) {
        if is(arg, "nx") {
            nx = true;
        } else if is(arg, "xx") {
            xx = true;
        } else if !is(arg, "ch") {
            break;
        }
        at += 1;
    }
    let triples = &args[at..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) {
        return Err(
            "ERR syntax error. Try GEOADD key [x1] [y1] [name1] [x2] [y2] [name2] ... ".into(),
        );
    }
    if nx && xx {
        return Err(ERR_SYNTAX.into());
    }
    let mut zadd: Vec<Bytes> = args[..at].to_vec();
    zadd[0] = Bytes::from_static(b"ZADD");
    for triple in triples.chunks(3) {
        let (lon, lat) = parse_lon_lat(&triple[0], &triple[1])?;
        let score = geohash::encode_wgs84(lon, lat).expect("checked in range");
        zadd.push(Bytes::from(score.to_string()));
        zadd.push(triple[2].clone());
    }
    zsets::zadd(ctx, &zadd)
}

/// Runs `reply` on the sorted set at `key` under its shard lock.
fn read(
    ctx: &mut Ctx,
    key: &[u8],
    reply: impl FnOnce(&mut ReplyWriter, Option<&ZSetValue>),
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(key), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<ZSet>(db, key, now)?;
    reply(&mut ctx.out, entry.as_ref().and_then(|e| e.value().zset()));
    Ok(())
}

/// The position of `member`, if it is there.
fn position(zset: Option<&ZSetValue>, member: &[u8]) -> Option<(f64, f64)> {
    zset.and_then(|z| z.score(member))
        .map(|score| geohash::decode_wgs84(geohash::score_bits(score)))
}

pub fn geopos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read(ctx, &args[1], |out, zset| {
        out.array(args.len() - 2);
        for member in &args[2..] {
            match position(zset, member) {
                Some((lon, lat)) => write_coord(out, lon, lat),
                None => out.null_array(),
            }
        }
    })
}

pub fn geohash_command(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read(ctx, &args[1], |out, zset| {
        out.array(args.len() - 2);
        for member in &args[2..] {
            match zset.and_then(|z| z.score(member)) {
                Some(score) => out.bulk(&geohash::standard_hash(geohash::score_bits(score))),
                None => out.null_bulk(),
            }
        }
    })
}

/// GEODIST key member1 member2 [M|KM|FT|MI].
pub fn geodist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let per_unit = match &args[4..] {
        [] => 1.0,
        [unit] => parse_unit(unit)?,
        _ => return Err(ERR_SYNTAX.into()),
    };
    read(ctx, &args[1], |out, zset| {
        match (position(zset, &args[2]), position(zset, &args[3])) {
            (Some(a), Some(b)) => {
                write_distance(out, geohash::distance(a.0, a.1, b.0, b.1), per_unit)
            }
            _ => out.null_bulk(),
        }
    })
}

/// Where a search starts.
enum From {
    Member(Bytes),
    LonLat(f64, f64),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
struct Search {
    from: Option<From>,
    shape: Option<(Shape, f64)>,
    sort: Sort,
    count: usize,
    any: bool,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    store: Option<Bytes>,
    store_dist: bool,
}

/// Which command is searching.
/// The keyspace notification of a search that stores its result.
fn store_event(kind: Kind) -> &'static str {
    match kind {
        Kind::Search | Kind::SearchStore => "geosearchstore",
        _ => "georadiusstore",
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Radius { read_only: bool },
    RadiusByMember { read_only: bool },
    Search,
    SearchStore,
}

/// Parses a search's options from `args[at..]` (Redis' georadiusGeneric).
/// `source` is the sorted set searched, when it exists: FROMMEMBER looks
/// its member up where it stands among the options, as Redis does.
fn parse_options(
    args: &[Bytes],
    at: usize,
    kind: Kind,
    search: &mut Search,
    source: Option<&ZSetValue>,
) -> Result<(), CmdError> {
    let geosearch = matches!(kind, Kind::Search | Kind::SearchStore);
    let can_store = matches!(
        kind,
        Kind::Radius { read_only: false } | Kind::RadiusByMember { read_only: false }
    );
    let mut i = at;
    while i < args.len() {
        let arg = &args[i];
        let left = args.len() - i - 1;
        if is(arg, "withdist") {
            search.with_dist = true;
        } else if is(arg, "withhash") {
            search.with_hash = true;
        } else if is(arg, "withcoord") {
            search.with_coord = true;
        } else if is(arg, "any") {
            search.any = true;
        } else if is(arg, "asc") {
            search.sort = Sort::Asc;
        } else if is(arg, "desc") {
            search.sort = Sort::Desc;
        } else if is(arg, "count") && left >= 1 {
            let n = parse_i64(&args[i + 1])?;
            if n <= 0 {
                return Err("ERR COUNT must be > 0".into());
            }
            search.count = n as usize;
            i += 1;
        } else if can_store && (is(arg, "store") || is(arg, "storedist")) && left >= 1 {
            search.store = Some(args[i + 1].clone());
            search.store_dist = is(arg, "storedist");
            i += 1;
        } else if kind == Kind::SearchStore && is(arg, "storedist") {
            search.store_dist = true;
        } else if geosearch
            && is(arg, "frommember")
            && left >= 1
            && !matches!(search.from, Some(From::LonLat(..)))
        {
            if source.is_some() && position(source, &args[i + 1]).is_none() {
                return Err(ERR_NO_MEMBER.into());
            }
            search.from = Some(From::Member(args[i + 1].clone()));
            i += 1;
        } else if geosearch
            && is(arg, "fromlonlat")
            && left >= 2
            && !matches!(search.from, Some(From::Member(_)))
        {
            let (lon, lat) = parse_lon_lat(&args[i + 1], &args[i + 2])?;
            search.from = Some(From::LonLat(lon, lat));
            i += 2;
        } else if geosearch
            && is(arg, "byradius")
            && left >= 2
            && !matches!(search.shape, Some((Shape::Box { .. }, _)))
        {
            let (per_unit, radius) = parse_distance(&args[i + 1], &args[i + 2], "radius")?;
            search.shape = Some((Shape::Radius(radius * per_unit), per_unit));
            i += 2;
        } else if geosearch
            && is(arg, "bybox")
            && left >= 3
            && !matches!(search.shape, Some((Shape::Radius(_), _)))
        {
            let width =
                parse_double(&args[i + 1]).ok_or(CmdError::from("ERR need numeric width"))?;
            let height =
                parse_double(&args[i + 2]).ok_or(CmdError::from("ERR need numeric height"))?;
            if width < 0.0 || height < 0.0 {
                return Err("ERR height or width cannot be negative".into());
            }
            let per_unit = parse_unit(&args[i + 3])?;
            search.shape = Some((
                Shape::Box {
                    width: width * per_unit,
                    height: height * per_unit,
                },
                per_unit,
            ));
            i += 3;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    check_options(args, kind, search)
}

/// The combinations of options Redis refuses, once all are parsed.
fn check_options(args: &[Bytes], kind: Kind, search: &Search) -> Result<(), CmdError> {
    let geosearch = matches!(kind, Kind::Search | Kind::SearchStore);
    let with_any = search.with_dist || search.with_hash || search.with_coord;
    if (search.store.is_some() || kind == Kind::SearchStore) && with_any {
        let what = if kind == Kind::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )
        .into());
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if geosearch && search.from.is_none() {
        return Err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )
        .into());
    }
    if geosearch && search.shape.is_none() {
        return Err(
            format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}").into(),
        );
    }
    if search.any && search.count == 0 {
        return Err("ERR the ANY argument requires COUNT argument".into());
    }
    Ok(())
}

/// A point found: member, distance in metres, score.
struct Found {
    member: Vec<u8>,
    dist: f64,
    score: u64,
    /// The score as stored (a sorted set's score need not be a geohash):
    /// what STORE keeps and WITHHASH answers, as in Redis.
    stored: f64,
}

fn search_points(zset: &ZSetValue, center: (f64, f64), shape: Shape, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    for (start, end) in geohash::search_ranges(center, shape) {
        let lo = zset.partition_point(|s, _| s < start as f64);
        let hi = zset.partition_point(|s, _| s < end as f64);
        for (score, member) in zset.range(lo, hi) {
            let (lon, lat) = geohash::decode_wgs84(geohash::score_bits(score));
            if let Some(dist) = shape.contains(center, lon, lat) {
                found.push(Found {
                    member: member.to_vec(),
                    dist,
                    score: geohash::score_bits(score),
                    stored: score,
                });
                if limit > 0 && found.len() >= limit {
                    return found;
                }
            }
        }
    }
    found
}

fn georadius_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind) -> CmdResult {
    let mut search = Search {
        from: None,
        shape: None,
        sort: Sort::None,
        count: 0,
        any: false,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        store: None,
        store_dist: false,
    };
    let (source, options_at) = match kind {
        Kind::Radius { .. } => {
            let (lon, lat) = parse_lon_lat(&args[2], &args[3])?;
            search.from = Some(From::LonLat(lon, lat));
            let (per_unit, radius) = parse_distance(&args[4], &args[5], "radius")?;
            search.shape = Some((Shape::Radius(radius * per_unit), per_unit));
            (&args[1], 6)
        }
        Kind::RadiusByMember { .. } => {
            search.from = Some(From::Member(args[2].clone()));
            (&args[1], 5)
        }
        Kind::Search => (&args[1], 2),
        Kind::SearchStore => {
            search.store = Some(args[1].clone());
            (&args[2], 3)
        }
    };
    // The source's type first, as Redis looks it up before the options;
    // a member to search from is looked up before what follows it.
    let (db, key, now) = (ctx.db(), ctx.key(source), ctx.now_ms);
    let exists = {
        let entry = ctx.keys.shard(key).get_as::<ZSet>(db, key, now)?;
        let zset = entry.as_ref().and_then(|e| e.value().zset());
        if let (Kind::RadiusByMember { .. }, Some(_)) = (kind, zset) {
            if position(zset, &args[2]).is_none() {
                return Err(ERR_NO_MEMBER.into());
            }
            let (per_unit, radius) = parse_distance(&args[3], &args[4], "radius")?;
            search.shape = Some((Shape::Radius(radius * per_unit), per_unit));
        }
        parse_options(args, options_at, kind, &mut search, zset)?;
        zset.is_some()
    };
    if !exists {
        match &search.store {
            Some(destination) => return zsets::store(ctx, destination, &[], store_event(kind)),
            None => ctx.out.array(0),
        }
        return Ok(());
    }
    let (shape, per_unit) = search.shape.expect("parsed");
    let entry = ctx
        .keys
        .shard(key)
        .get_as::<ZSet>(db, key, now)?
        .expect("exists");
    let zset = entry.value().zset().expect("a sorted set");
    let center = match search.from.as_ref().expect("parsed") {
        From::LonLat(lon, lat) => (*lon, *lat),
        From::Member(member) => match position(Some(zset), member) {
            Some(center) => center,
            None => return Err(ERR_NO_MEMBER.into()),
        },
    };
    if search.count > 0 && search.sort == Sort::None && !search.any {
        search.sort = Sort::Asc;
    }
    let mut found = search_points(
        zset,
        center,
        shape,
        if search.any { search.count } else { 0 },
    );
    match search.sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if search.count > 0 {
        found.truncate(search.count);
    }
    if let Some(destination) = search.store {
        let entries: Vec<(f64, Vec<u8>)> = found
            .into_iter()
            .map(|f| {
                let score = if search.store_dist {
                    f.dist / per_unit
                } else {
                    f.stored
                };
                (score, f.member)
            })
            .collect();
        return zsets::store(ctx, &destination, &entries, store_event(kind));
    }
    write_found(&mut ctx.out, &search, &found, per_unit);
    Ok(())
}

/// The points found, each with the WITH… fields asked for.
fn write_found(out: &mut ReplyWriter, search: &Search, found: &[Found], per_unit: f64) {
    let options =
        search.with_dist as usize + search.with_hash as usize + search.with_coord as usize;
    out.array(found.len());
    for point in found {
        if options > 0 {
            out.array(options + 1);
        }
        out.bulk(&point.member);
        if search.with_dist {
            write_distance(out, point.dist, per_unit);
        }
        if search.with_hash {
            out.int(point.stored as i64);
        }
        if search.with_coord {
            let (lon, lat) = geohash::decode_wgs84(point.score);
            write_coord(out, lon, lat);
        }
    }
}

pub fn georadius(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::Radius { read_only: false })
}

pub fn georadius_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::Radius { read_only: true })
}

pub fn georadiusbymember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::RadiusByMember { read_only: false })
}

pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::RadiusByMember { read_only: true })
}

pub fn geosearch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::Search)
}

pub fn geosearchstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    georadius_generic(ctx, args, Kind::SearchStore)
}
