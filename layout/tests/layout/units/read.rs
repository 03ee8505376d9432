//! Unit tests of `reticle_layout::read`: format names, sniffing, hashing.

use reticle_layout::limits::Limits;
use reticle_layout::read::*;

#[test]
fn format_names_and_sniffing() {
    assert_eq!(Format::from_name("GDSII"), Some(Format::Gds));
    assert_eq!(Format::from_name("oas"), Some(Format::Oasis));
    assert_eq!(Format::from_name("dxf"), None);
    assert_eq!(
        Format::from_path(std::path::Path::new("/a/b.OASIS")),
        Some(Format::Oasis)
    );
    assert_eq!(Format::sniff(b"%SEMI-OASIS\r\n\x01"), Some(Format::Oasis));
    assert_eq!(Format::sniff(&[0, 6, 0, 2, 2, 88]), Some(Format::Gds));
    assert_eq!(Format::sniff(b"RECT"), None);
    assert_eq!(
        read_layout(b"RECT", None, &Limits::default()),
        Err(LayoutError::UnknownFormat)
    );
}

#[test]
fn sha256_of_empty_input() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}
