//! The geo commands' entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "geoadd",
        arity: -5,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(&["RW", "update"], 1, 0, 1)],
        acl: categories![WRITE, GEO, SLOW],
        group: "geo",
        since: "3.2.0",
        summary: "Add one or more geospatial items in the geospatial index represented using a sorted set",
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
        summary: "Returns longitude and latitude of members of a geospatial index",
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
        summary: "Returns the distance between two members of a geospatial index",
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
        summary: "Returns members of a geospatial index as standard geohash strings",
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
        summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.",
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
        summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.",
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
        summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point",
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
        summary: "A read-only variant for GEORADIUS",
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
        summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member",
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
        summary: "A read-only variant for GEORADIUSBYMEMBER",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        run: Run::Handler(gs::georadiusbymember_ro),
        ..Spec::DEFAULT
    },
];
