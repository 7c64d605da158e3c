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
    /// Run the daemon: `run --config FILE` (or `run FILE`).
    Run {
        #[command(flatten)]
        config: ConfigFile,
        /// Listen on this address instead of `server.listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Validate a configuration file and print it resolved, with secrets masked:
    /// `check-config --config FILE` (or `check-config FILE`).
    CheckConfig {
        #[command(flatten)]
        config: ConfigFile,
    },
    /// Analyse Flink log files offline: first what failed (failovers, root causes, the subtask
    /// that held checkpoints up, what to do), then alignment, events per kind and a timeline per
    /// checkpoint. Exit code 0 when no checkpoint failed; 1 when checkpoints failed or the job
    /// failed over (as `diagnose` for an unhealthy job); 2 when a file cannot be read; 3 when a
    /// file is not a Flink log (no line starts with a log4j timestamp; the report says which).
    ScanLogs {
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: ScanFormat,
        /// Lines longer than this are cut (and counted).
        #[arg(long, default_value_t = 1 << 20)]
        max_line_bytes: usize,
        /// JobManager and TaskManager log files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the checkpoint coordinator model: what-if (`--interval … --durations …`) or a
    /// replay of a job's history (`--checkpoint-config FILE --history FILE…`).
    Simulate(checkpoint_sentinel::commands::simulate::SimulateArgs),
    /// A one-shot checkpoint health report of a live cluster, without the daemon: statuses,
    /// failures with reasons, blocking subtasks and their TaskManagers, the failure class,
    /// likely causes, the spacing explained, and what to check next. Exit code 0 healthy,
    /// 1 unhealthy, 3 at risk, 2 when the cluster cannot be diagnosed.
    Diagnose(checkpoint_sentinel::commands::diagnose::DiagnoseArgs),
    /// Advice on each job's checkpoint configuration from its own checkpoints: findings with
    /// their evidence, the Flink keys to set, and the reference model's prediction before and
    /// after (spacing, checkpoints and expiries per hour, replay window, alignment). Exit code
    /// 0; 2 when the cluster or the folder cannot be read.
    Advise(checkpoint_sentinel::commands::advise::AdviseArgs),
    /// Run a simulated Flink cluster (driven by the reference model) with the daemon watching
    /// it: real metrics within seconds, without a Flink.
    Demo {
        /// Where the daemon listens.
        #[arg(long, default_value = "127.0.0.1:9717")]
        listen: SocketAddr,
        /// How many simulated jobs (they cycle through the five behaviours).
        #[arg(long, default_value_t = 5)]
        jobs: usize,
        /// Seed of the simulation.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run only the simulated cluster (REST API on `--flink-listen`, log at `--log-file`),
        /// to measure a separately started `checkpoint-sentinel run` against it.
        #[arg(long)]
        no_daemon: bool,
        /// With `--no-daemon`: where the simulated REST API listens.
        #[arg(long, default_value = "127.0.0.1:8081")]
        flink_listen: SocketAddr,
        /// With `--no-daemon`: the JobManager log file to write.
        #[arg(long, default_value = "/tmp/checkpoint-sentinel-demo/flink-demo-standalonesession-0.log")]
        log_file: PathBuf,
        /// Multiply every job's checkpoint interval, min-pause and timeout (30 gives 60 s
        /// intervals, as in production), with the daemon or without it.
        #[arg(long, default_value_t = 1)]
        interval_scale: u64,
        /// With `--no-daemon`: wait this long before every REST answer (e.g. `5ms`, the round
        /// trip to a JobManager in another zone), to measure polling over a slow network.
        #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
        rest_delay: std::time::Duration,
    },
}

/// The configuration file of `run` and `check-config`, given the same way to both: `--config
/// FILE` (or `SENTINEL_CONFIG`), or as the argument.
#[derive(clap::Args)]
struct ConfigFile {
    /// The configuration file (TOML).
    #[arg(long, short, env = "SENTINEL_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The configuration file, as the argument (the same as `--config FILE`).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

impl ConfigFile {
    /// The one file given, or why there is none.
    fn path(self) -> Result<PathBuf, String> {
        match (self.file, self.config) {
            (Some(file), Some(config)) if file != config => Err(format!(
                "two configuration files: {} and --config (or SENTINEL_CONFIG) {}; give one",
                file.display(),
                config.display()
            )),
            (Some(path), _) | (None, Some(path)) => Ok(path),
            (None, None) => Err("no configuration file: give --config FILE".into()),
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScanFormat {
    Text,
    Json,
}

/// The global allocator: jemalloc by default, mimalloc with `--features mimalloc`; with
/// `--no-default-features` the system allocator, which `heap` tunes on glibc (two arenas, a
/// periodic trim). jemalloc returned the most memory at 10,000 jobs (Cargo.toml,
/// docs/performance.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts: a background thread purges freed pages a second
/// after they are freed (instead of on the next allocation that happens to pass by), and two
/// arenas (the default is four per core) keep what one thread freed usable by the others.
/// `_RJEM_MALLOC_CONF` in the environment overrides them.
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8] = b"background_thread:true,narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    match cli.command {
        Command::Demo {
            no_daemon: true,
            flink_listen,
            log_file,
            jobs,
            seed,
            interval_scale,
            rest_delay,
            ..
        } => run_simulator(checkpoint_sentinel::commands::demo::SimulatorOptions {
            listen: flink_listen,
            jobs,
            seed,
            interval_scale,
            log_file,
            rest_delay,
        }),
        Command::Demo { listen, jobs, seed, interval_scale, .. } => {
            run_demo(listen, jobs, seed, interval_scale)
        }
        Command::Diagnose(args) => run_diagnose(&args),
        Command::Simulate(args) => run_simulate(&args),
        Command::Advise(args) => run_advise(&args),
        Command::ScanLogs { format, max_line_bytes, files } => run_scan_logs(format, max_line_bytes, &files),
        Command::CheckConfig { config } => match config.path() {
            Ok(path) => run_check_config(&path),
            Err(e) => usage_error(&e),
        },
        Command::Run { config, listen } => match config.path() {
            Ok(path) => run_daemon(path, listen),
            Err(e) => usage_error(&e),
        },
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn run_diagnose(args: &checkpoint_sentinel::commands::diagnose::DiagnoseArgs) -> ExitCode {
    let runtime = match runtime(1) {
        Ok(r) => r,
        Err(code) => return code,
    };
    ExitCode::from(runtime.block_on(checkpoint_sentinel::commands::diagnose::run(args)))
}

fn run_advise(args: &checkpoint_sentinel::commands::advise::AdviseArgs) -> ExitCode {
    let runtime = match runtime(1) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(checkpoint_sentinel::commands::advise::run(args)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_simulate(args: &checkpoint_sentinel::commands::simulate::SimulateArgs) -> ExitCode {
    match checkpoint_sentinel::commands::simulate::run(args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `scan-logs`: the report on stdout; exit code 1 when checkpoints failed, 2 when a file
/// cannot be read, 3 (after a warning per file) when a file is not a Flink log.
fn run_scan_logs(format: ScanFormat, max_line_bytes: usize, files: &[PathBuf]) -> ExitCode {
    let patterns = checkpoint_sentinel::sources::logs::parse::Patterns::builtin();
    let report = match checkpoint_sentinel::commands::scan_logs::scan_paths_streaming(
        files,
        &patterns,
        max_line_bytes,
    ) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = print_scan_report(&report, format) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let strangers = report.not_flink_logs();
    if strangers.is_empty() {
        return if report.found_failures() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    }
    for f in strangers {
        eprintln!("warning: {} is not a Flink log (no line starts with a log4j timestamp)", f.path.display());
    }
    ExitCode::from(3)
}

/// Writes the scan report to stdout in `format`.
fn print_scan_report(
    report: &checkpoint_sentinel::commands::scan_logs::ScanReport,
    format: ScanFormat,
) -> std::io::Result<()> {
    match format {
        ScanFormat::Text => {
            print!("{}", report.to_text());
            Ok(())
        }
        ScanFormat::Json => {
            use std::io::Write as _;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            report.write_json(&mut out)?;
            writeln!(out)?;
            out.flush()
        }
    }
}

fn run_check_config(config: &std::path::Path) -> ExitCode {
    match load_checked(config) {
        Ok(c) => {
            print!("{}", c.to_masked_toml());
            eprintln!("{}: ok", config.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `run`: the daemon, on `listen` when given instead of `server.listen`.
fn run_daemon(path: PathBuf, listen: Option<SocketAddr>) -> ExitCode {
    let mut config = match load_checked(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(addr) = listen {
        config.server.listen = addr;
    }
    checkpoint_sentinel::heap::limit_arenas();
    checkpoint_sentinel::open_files::raise_to_hard_limit(config.server.max_connections);
    let runtime = match runtime(2) {
        Ok(r) => r,
        Err(code) => return code,
    };
    checkpoint_sentinel::heap::spawn_trimmer(checkpoint_sentinel::heap::TRIM_PERIOD);
    match runtime.block_on(checkpoint_sentinel::daemon::run(config, Some(path))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration at `path`, loaded, validated and checked against this machine
/// (`preflight`): `check-config` and `run` accept and refuse the same files.
fn load_checked(path: &std::path::Path) -> Result<Config, String> {
    let config = Config::load(path).map_err(|e| e.to_string())?;
    let problems = checkpoint_sentinel::preflight::check(&config);
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(format!(
            "{}: cannot run with this configuration:\n{}",
            path.display(),
            problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
        ))
    }
}

/// The async runtime (`threads` workers; one means the current thread), or the exit code after
/// saying why there is none.
fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, ExitCode> {
    let built = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    };
    built.map_err(|e| {
        eprintln!("error: cannot start the runtime: {e}");
        ExitCode::FAILURE
    })
}

fn run_simulator(options: checkpoint_sentinel::commands::demo::SimulatorOptions) -> ExitCode {
    let runtime = match runtime(2) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let stop = checkpoint_sentinel::daemon::shutdown_signal();
        let sim = match checkpoint_sentinel::commands::demo::start_simulator(options).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("simulated Flink REST API: {}", sim.flink_url);
        println!("JobManager log:           {}", sim.log_file.display());
        println!("jobs: {}", sim.jobs.len());
        stop.await;
        sim.shutdown();
        ExitCode::SUCCESS
    })
}

/// `demo`: until Ctrl-C or SIGTERM, after either of which its temporary folder is removed.
fn run_demo(listen: SocketAddr, jobs: usize, seed: u64, interval_scale: u64) -> ExitCode {
    use checkpoint_sentinel::commands::demo::{DemoOptions, start};
    checkpoint_sentinel::open_files::raise_to_hard_limit(
        checkpoint_sentinel::config::DEFAULT_MAX_CONNECTIONS,
    );
    let runtime = match runtime(2) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let stop = checkpoint_sentinel::daemon::shutdown_signal();
        let demo = match start(DemoOptions { listen, jobs, seed, dir: None, interval_scale }).await {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("simulated Flink REST API: {}", demo.flink_url);
        println!("JobManager log:           {}", demo.log_file.display());
        println!("status page:              http://{}/", demo.daemon.addr);
        println!("checkpoint-sentinel:      http://{}/metrics", demo.daemon.addr);
        println!("jobs: {}", demo.jobs.iter().map(|(_, name)| name.as_str()).collect::<Vec<_>>().join(", "));
        println!("Ctrl-C (or SIGTERM) stops the demo and removes {}.", demo.dir.display());
        stop.await;
        demo.shutdown().await;
        ExitCode::SUCCESS
    })
}
