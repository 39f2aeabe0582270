//! Compiles `csrc/long_double.c`: INCRBYFLOAT's arithmetic in C's long
//! double, which Rust does not have (see `src/long_double.rs`).

fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .warnings(true)
        .compile("strata_long_double");
}
