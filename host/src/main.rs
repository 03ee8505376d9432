//! `reticle`: the MCP stdio host and command-line interface.

fn main() {}
