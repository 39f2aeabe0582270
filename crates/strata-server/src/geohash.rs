//! The geohash arithmetic GEO commands store positions with, as Redis
//! does: longitude and latitude quantized to 26 bits each over
//! [-180, 180] × [-85.05112878, 85.05112878] (the Web Mercator square) and
//! interleaved into a 52-bit integer (latitude in the even bits), which is
//! a sorted set member's score. Nearby points share score prefixes, so a
//! search reads a few score ranges (cells) instead of the whole set.
//!
//! Distances are great-circle distances on Redis' sphere (radius
//! 6 372 797.560856 m) with its formula, so GEODIST and WITHDIST answer
//! Redis' digits.

pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate in a stored score.
pub const STEP_MAX: u32 = 26;
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;

fn rad(degrees: f64) -> f64 {
    degrees * (std::f64::consts::PI / 180.0)
}

fn deg(radians: f64) -> f64 {
    radians / (std::f64::consts::PI / 180.0)
}

/// Spreads the low 32 bits of `x` to the even bit positions.
fn spread(x: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..32 {
        out |= (((x >> i) & 1) as u64) << (2 * i);
    }
    out
}

/// The even bit positions of `x`, packed.
fn squash(x: u64) -> u32 {
    let mut out = 0u32;
    for i in 0..32 {
        out |= (((x >> (2 * i)) & 1) as u32) << i;
    }
    out
}

/// The cell of (`lon`, `lat`) at `step` bits per coordinate over the given
/// ranges, as interleaved bits (latitude even); `None` out of range.
pub fn encode(
    lon: f64,
    lat: f64,
    step: u32,
    lon_range: (f64, f64),
    lat_range: (f64, f64),
) -> Option<u64> {
    if !(lon_range.0..=lon_range.1).contains(&lon) || !(lat_range.0..=lat_range.1).contains(&lat) {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_offset = (lon - lon_range.0) / (lon_range.1 - lon_range.0) * scale;
    Some(spread(lat_offset as u32) | spread(lon_offset as u32) << 1)
}

/// The geohash bits a sorted set's score stands for, as Redis reads them:
/// C's `(uint64_t)` cast of the double as x86-64 makes it. A score need
/// not be a geohash (ZADD can store any): a negative one wraps (-1 is
/// all ones), one of 2^64 or more, or infinite, is 0, and one below
/// -2^63 is 2^63, so GEOPOS and GEOHASH answer what Redis answers.
pub fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let signed = |x: f64| {
        if (-TWO_63..TWO_63).contains(&x) {
            x as i64
        } else {
            i64::MIN
        }
    };
    if score < TWO_63 {
        signed(score) as u64
    } else {
        (signed(score - TWO_63) as u64) ^ (1 << 63)
    }
}

/// The stored score of a position (step 26, Mercator ranges).
pub fn encode_wgs84(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX, (LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX))
}

/// The (lat, lon) cell indexes of interleaved `bits`.
fn split(bits: u64) -> (u32, u32) {
    (squash(bits), squash(bits >> 1))
}

/// The bounds ((lon min, lon max), (lat min, lat max)) of a cell.
fn cell_area(bits: u64, step: u32) -> ((f64, f64), (f64, f64)) {
    let (lat_i, lon_i) = split(bits);
    let scale = (1u64 << step) as f64;
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    (
        (
            LON_MIN + (lon_i as f64 / scale) * lon_scale,
            LON_MIN + ((lon_i as f64 + 1.0) / scale) * lon_scale,
        ),
        (
            LAT_MIN + (lat_i as f64 / scale) * lat_scale,
            LAT_MIN + ((lat_i as f64 + 1.0) / scale) * lat_scale,
        ),
    )
}

/// The position a stored score stands for: its cell's centre.
pub fn decode_wgs84(bits: u64) -> (f64, f64) {
    let ((lon_min, lon_max), (lat_min, lat_max)) = cell_area(bits, STEP_MAX);
    let lon = ((lon_min + lon_max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((lat_min + lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The 11-character standard geohash of a stored score (re-encoded over
/// [-90, 90] latitude, the eleventh character always `0`, as Redis does).
pub fn standard_hash(bits: u64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_wgs84(bits);
    let bits = encode(lon, lat, STEP_MAX, (-180.0, 180.0), (-90.0, 90.0)).unwrap_or(0);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// Metres between latitudes on one meridian.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (rad(lat2) - rad(lat1)).abs()
}

/// Great-circle metres between two positions (Redis' haversine).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((rad(lon2) - rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (rad(lat1), rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers, in metres.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

impl Shape {
    /// The distance from `center` to (`lon`, `lat`) when inside the shape.
    pub fn contains(&self, center: (f64, f64), lon: f64, lat: f64) -> Option<f64> {
        match *self {
            Shape::Radius(radius) => {
                let d = distance(center.0, center.1, lon, lat);
                (d <= radius).then_some(d)
            }
            Shape::Box { width, height } => {
                if lat_distance(lat, center.1) > height / 2.0 {
                    return None;
                }
                if distance(lon, lat, center.0, lat) > width / 2.0 {
                    return None;
                }
                Some(distance(center.0, center.1, lon, lat))
            }
        }
    }

    /// Half the extent in degrees: (longitude, latitude).
    fn half_extent_degrees(&self, lat: f64) -> (f64, f64) {
        let (half_w, half_h) = match *self {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (width / 2.0, height / 2.0),
        };
        let lat_delta = deg(half_h / EARTH_RADIUS_M);
        let widest = (lat + lat_delta)
            .abs()
            .max((lat - lat_delta).abs())
            .min(90.0);
        let lon_delta = deg(half_w / EARTH_RADIUS_M / rad(widest).cos());
        (lon_delta, lat_delta)
    }
}

/// The score ranges `[start, end)` a search of `shape` around `center`
/// must read: the centre's cell and its eight neighbours, at the finest
/// step whose cells are at least as large as the shape's half extent
/// (Redis' estimate, made smaller until the neighbours cover the shape).
pub fn search_ranges(center: (f64, f64), shape: Shape) -> Vec<(u64, u64)> {
    let radius = match shape {
        Shape::Radius(r) => r,
        Shape::Box { width, height } => ((width / 2.0).powi(2) + (height / 2.0).powi(2)).sqrt(),
    };
    let mut step = estimate_step(radius, center.1);
    let (lon_half, lat_half) = shape.half_extent_degrees(center.1);
    while step > 1 {
        let cells = (1u64 << step) as f64;
        let (cell_lon, cell_lat) = ((LON_MAX - LON_MIN) / cells, (LAT_MAX - LAT_MIN) / cells);
        if cell_lon >= lon_half && cell_lat >= lat_half {
            break;
        }
        step -= 1;
    }
    let Some(bits) = encode(
        center.0,
        center.1,
        step,
        (LON_MIN, LON_MAX),
        (LAT_MIN, LAT_MAX),
    ) else {
        return Vec::new();
    };
    let (lat_i, lon_i) = split(bits);
    let cells = 1i64 << step;
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(9);
    // Redis' order: centre, north, south, east, west, then the corners.
    for (dlat, dlon) in [
        (0, 0),
        (1, 0),
        (-1, 0),
        (0, 1),
        (0, -1),
        (1, 1),
        (1, -1),
        (-1, 1),
        (-1, -1),
    ] {
        // A coordinate exactly at its range's top (longitude 180, latitude
        // 85.05112878) encodes one cell past the last, as in Redis: that
        // row is searched with the last one, and that column (points on
        // the antimeridian) with the cells on either side of it.
        let lat = lat_i as i64 + dlat;
        if !(0..=cells).contains(&lat) {
            continue;
        }
        let wrapped = (lon_i as i64 + dlon).rem_euclid(cells);
        let antimeridian = (wrapped == 0 || wrapped == cells - 1).then_some(cells);
        for lon in std::iter::once(wrapped).chain(antimeridian) {
            let cell = spread(lat as u32) | spread(lon as u32) << 1;
            let shift = 2 * (STEP_MAX - step);
            let range = (cell << shift, (cell + 1) << shift);
            if !ranges.contains(&range) {
                ranges.push(range);
            }
        }
    }
    ranges
}

fn estimate_step(mut range_m: f64, lat: f64) -> u32 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_become_bits_as_cs_cast_makes_them() {
        assert_eq!(score_bits(1.5), 1);
        assert_eq!(score_bits(-1.5), u64::MAX);
        assert_eq!(score_bits(1e19), 10_000_000_000_000_000_000);
        assert_eq!(score_bits(1e20), 0);
        assert_eq!(score_bits(f64::INFINITY), 0);
        assert_eq!(score_bits(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(score_bits(-1e300), 1 << 63);
    }

    #[test]
    fn positions_encode_as_redis_stores_them() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" stores this score in
        // Redis, and GEOHASH answers sqc8b49rny0.
        let bits = encode_wgs84(13.361389, 38.115556).unwrap();
        assert_eq!(bits, 3_479_099_956_230_698);
        assert_eq!(&standard_hash(bits), b"sqc8b49rny0");
        let (lon, lat) = decode_wgs84(bits);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        let catania = decode_wgs84(encode_wgs84(15.087269, 37.502669).unwrap());
        let d = distance(lon, lat, catania.0, catania.1);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(encode_wgs84(0.0, 86.0), None);
    }

    #[test]
    fn search_ranges_cover_the_shape() {
        let center = (13.5, 37.8);
        let shape = Shape::Radius(200_000.0);
        let ranges = search_ranges(center, shape);
        for (lon, lat) in [(15.087269, 37.502669), (13.361389, 38.115556), (12.0, 38.9)] {
            let score = encode_wgs84(lon, lat).unwrap();
            if shape.contains(center, lon, lat).is_some() {
                assert!(
                    ranges.iter().any(|(a, b)| (*a..*b).contains(&score)),
                    "{lon},{lat}"
                );
            }
        }
    }
}
