//! Platform events: what the bus carries is declared in `converger_ports::EventType`, and
//! `docs/operations.md` lists it. A delivery's events come from the deliveries table's stream
//! (`changes`); a channel's (a breaker opened or closed, a pause, a disable, a health
//! change) are published by the function that made the change, right after its write.

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// `docs/operations.md`'s table of events lists exactly the declared detail-types.
    #[test]
    fn the_documented_events_are_the_declared_ones() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let documented: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.trim().strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|t| t.starts_with("delivery.") || t.starts_with("channel."))
            .collect();
        let declared: Vec<&str> = converger_ports::EventType::ALL
            .iter()
            .map(|e| e.as_str())
            .collect();
        assert_eq!(documented, declared);
    }
}
