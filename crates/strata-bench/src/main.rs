//! `strata-bench [memtier_benchmark flags]` and `strata-bench report --plot
//! out.svg run.json …`. See the crate documentation.

use clap::Parser;
use strata_bench::config::{Cli, Tool};

fn main() {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Some(Tool::Report { plot, inputs }) => strata_bench::plot_files(&plot, &inputs),
        None => cli
            .run
            .into_config()
            .and_then(|config| strata_bench::run_benchmark(config, true).map(drop)),
    };
    if let Err(e) = outcome {
        eprintln!("strata-bench: {e}");
        std::process::exit(1);
    }
}
