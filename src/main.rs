//! `jprof` command: parse arguments, run, map errors to messages and exit codes.

#![forbid(unsafe_code)]

use jprof::cli::Command;

fn main() -> std::process::ExitCode {
    jprof::sys::memory::return_large_blocks();
    let cli = jprof::cli::parse();
    let result = match cli.command {
        Command::Record(args) => match args.continuous() {
            Ok(Some(continuous)) => jprof::tools::continuous::run(&args.into(), &continuous),
            Ok(None) => jprof::record::run(&args.into()),
            Err(e) => Err(e),
        },
        Command::Report(args) => args
            .into_config()
            .and_then(|config| jprof::report::run(&config))
            .map(|()| 0),
        Command::Push(args) => args
            .into_config()
            .and_then(|config| jprof::fleet::push(&config))
            .map(|()| 0),
        Command::Dump(args) => {
            jprof::tools::dump::run(&args.file, &mut std::io::stdout().lock()).map(|()| 0)
        }
        Command::Symbolize(args) => args.into_config().and_then(|config| {
            jprof::tools::symbolize::run(&config, &mut std::io::stdout().lock()).map(|()| 0)
        }),
        Command::Diff(args) => args
            .into_config()
            .and_then(|config| jprof::report::diff::run(&config))
            .map(|()| 0),
        Command::Top(args) => jprof::tools::top::run(&args.into()),
        Command::Doctor(_) => {
            jprof::tools::doctor::run(&mut std::io::stdout().lock()).map(i32::from)
        }
        Command::Completions(args) => {
            jprof::cli::write_completions(args.shell, &mut std::io::stdout().lock());
            Ok(0)
        }
    };
    match result {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        // The reader went away (`jprof dump FILE | head`): stop quietly, as other tools do.
        Err(jprof::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jprof: error: {}", e.terminal_message());
            std::process::ExitCode::from(2)
        }
    }
}
