//! The geo commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "geoadd",
        arity: -5,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(&["RW", "update"], 1, 0, 1)],
        acl: categories![WRITE, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Adds members with a longitude and latitude to a geo index (a sorted set).",
        complexity: "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        run: Run::Handler(gs::geoadd),
        ..Spec::DEFAULT
    },
    Spec {
        name: "geopos",
        arity: -2,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Gives the coordinates (longitude, latitude) of members of a geo index.",
        complexity: "O(N) where N is the number of members requested.",
        run: Run::Handler(gs::geopos),
        ..Spec::DEFAULT
    },
    Spec {
        name: "geodist",
        arity: -4,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Measures how far apart two members of a geo index are, in a chosen unit.",
        complexity: "O(log(N))",
        run: Run::Handler(gs::geodist),
        ..Spec::DEFAULT
    },
    Spec {
        name: "geohash",
        arity: -2,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Gives the positions of geo index members as geohash strings.",
        complexity: "O(log(N)) for each member requested, where N is the number of elements in the sorted set.",
        run: Run::Handler(gs::geohash_command),
        ..Spec::DEFAULT
    },
    Spec {
        name: "geosearch",
        arity: -7,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "6.2.0",
        summary: "Finds geo index members inside a circle or box around a point or member.",
        complexity: "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        run: Run::Handler(gs::geosearch),
        ..Spec::DEFAULT
    },
    Spec {
        name: "geosearchstore",
        arity: -8,
        flags: flags![WRITE, DENYOOM],
        keys: &[
            range(&["OW", "update"], 1, 0, 1),
            range(&["RO", "access"], 2, 0, 1),
        ],
        acl: categories![WRITE, GEO, SLOW],
        group: "geo",
        since: "6.2.0",
        summary: "Finds geo index members inside a circle or box and stores them in a key.",
        complexity: "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        run: Run::Handler(gs::geosearchstore),
        ..Spec::DEFAULT
    },
    Spec {
        name: "georadius",
        arity: -6,
        flags: flags![WRITE, DENYOOM],
        keys: &[
            range(&["RO", "access"], 1, 0, 1),
            keyword_range(&["OW", "update"], "STORE", 6, 0, 1),
            keyword_range(&["OW", "update"], "STOREDIST", 6, 0, 1),
        ],
        acl: categories![WRITE, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Finds geo index members within a radius of a longitude/latitude point.",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        run: Run::Handler(gs::georadius),
        ..Spec::DEFAULT
    },
    Spec {
        name: "georadius_ro",
        arity: -6,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "3.2.10",
        summary: "Finds geo index members within a radius of a point, without storing them.",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        run: Run::Handler(gs::georadius_ro),
        ..Spec::DEFAULT
    },
    Spec {
        name: "georadiusbymember",
        arity: -5,
        flags: flags![WRITE, DENYOOM],
        keys: &[
            range(&["RO", "access"], 1, 0, 1),
            keyword_range(&["OW", "update"], "STORE", 5, 0, 1),
            keyword_range(&["OW", "update"], "STOREDIST", 5, 0, 1),
        ],
        acl: categories![WRITE, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Finds geo index members within a radius of another member.",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        run: Run::Handler(gs::georadiusbymember),
        ..Spec::DEFAULT
    },
    Spec {
        name: "georadiusbymember_ro",
        arity: -5,
        flags: flags![READONLY],
        keys: &[range(&["RO", "access"], 1, 0, 1)],
        acl: categories![READ, GEO, SLOW],
        group: "geo",
        since: "3.2.10",
        summary: "Finds geo index members within a radius of a member, without storing them.",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        run: Run::Handler(gs::georadiusbymember_ro),
        ..Spec::DEFAULT
    },
];
