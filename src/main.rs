//! The `checkpoint-sentinel` command line: parse arguments, set up logging, run a command.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use checkpoint_sentinel::config::Config;
use checkpoint_sentinel::telemetry::{self, LogFormat};

/// Watches Apache Flink checkpoints and tells you what is slow and why.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Format of log lines (on stderr).
    #[arg(long, global = true, value_enum, default_value = "text", env = "SENTINEL_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon.
    Run {
        /// The configuration file (TOML).
        #[arg(long, short, env = "SENTINEL_CONFIG")]
        config: PathBuf,
        /// Listen on this address instead of `server.listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Validate a configuration file and print it resolved, with secrets masked.
    CheckConfig {
        /// The configuration file (TOML).
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    match cli.command {
        Command::CheckConfig { config } => match Config::load(&config) {
            Ok(c) => {
                print!("{}", c.to_masked_toml());
                eprintln!("{}: ok", config.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Run { config: path, listen } => {
            let mut config = match Config::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Some(addr) = listen {
                config.server.listen = addr;
            }
            let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(checkpoint_sentinel::daemon::run(config, Some(path))) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
