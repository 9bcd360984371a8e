//! `converger`: the tenant API from a terminal (see `converger --help`).

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |k: &str| std::env::var(k).ok();
    let mut out = std::io::stdout();
    let code = converger_client::cli::main(&args, &env, &mut out).await;
    std::process::exit(code);
}
