//! Project automation: `cargo xtask demo | bench | fuzz`.

fn main() -> anyhow::Result<()> {
    Ok(())
}
