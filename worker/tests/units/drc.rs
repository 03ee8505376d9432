//! Unit tests of KLayout DRC report parsing (`reticle_worker::ops::drc`).

use reticle_layout::observe::MicronBox;
use reticle_protocol::error::ErrorCode;
use reticle_worker::ops::drc::{parse_lyrdb, rule_counts};

const REPORT: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<report-database>
 <description>width &amp; space &#60;</description>
 <categories>
  <category><name>wg_min_width</name><description>WG &lt; 0.3</description><categories></categories></category>
 </categories>
 <cells><cell><name>TOP</name><variant/><references></references></cell></cells>
 <items>
  <item><tags/><category>wg_min_width</category><cell>TOP</cell><visited>false</visited>
   <multiplicity>1</multiplicity><image/>
   <values><value>edge-pair: (10,5;10,8)|(10.2,8;10.2,5)</value></values></item>
  <item><tags/><category>'a.b'.c</category><cell>TOP</cell><values><value>box: (-1.5,2;3,4e0)</value></values></item>
  <item><tags/><category>text_only</category><cell>TOP</cell><values><value>text: 'hello'</value></values></item>
 </items>
</report-database>"#;

#[test]
fn parses_items_with_categories_and_boxes() {
    let m = parse_lyrdb(REPORT).unwrap();
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0].rule, "wg_min_width");
    assert_eq!(m[0].cell, "TOP");
    assert_eq!(
        m[0].box_um,
        MicronBox {
            left: 10.0,
            bottom: 5.0,
            right: 10.2,
            top: 8.0
        }
    );
    assert_eq!(m[1].rule, "a.b.c");
    assert_eq!(m[1].box_um.left, -1.5);
    assert_eq!(m[1].box_um.top, 4.0);
    let counts = rule_counts(&m);
    assert_eq!(counts["wg_min_width"], 1);
}

#[test]
fn malformed_xml_is_a_drc_failure() {
    let e = parse_lyrdb("<report-database><items><item></items>").unwrap_err();
    assert_eq!(e.code, ErrorCode::DrcRunFailed);
}
