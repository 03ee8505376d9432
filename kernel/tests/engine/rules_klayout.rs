//! Width/space results equal KLayout's batch DRC (Euclidean, `transparent` = no shielding):
//! same count, marker edges within 1 dbu (docs/DECISIONS.md D18).
//!
//! - width: KLayout's `width` on the layer as drawn (KLayout merges it first);
//! - space: KLayout's `space` on the merged layer (`input(…).merged`). On a layer whose
//!   shapes overlap or abut, KLayout 0.28's flat `space` on the raw layer also reports
//!   "split duplicates": for every drawn shape that contributes to a violating boundary
//!   edge, the pair again, with that shape's part of the edge. Those are checked too: each
//!   one must lie inside one of reticle's pairs (within 1 dbu), and a layout whose shapes
//!   neither overlap nor abut (gcd_45nm metal1, the .glp clips) must give exactly the same
//!   pairs either way.
//!
//! Skips (with `SKIP:` on stderr) when `klayout` is not installed; the ICCAD-2013 clips and
//! gcd_45nm also need the reference data (`RETICLE_DATA_DIR`, default `../shared/data`).

use std::path::{Path, PathBuf};
use std::process::Command;

use reticle_kernel::rules::{Edge, EdgePairHit, Metric, Region, space, width};
use reticle_layout::{
    BBox, FlattenOptions, LayerKey, Library, Limits, Point, Polygon, flatten, glp, model::Cell,
    model::Shape, read_layout, write_gds,
};

const KLAYOUT: &str = "/usr/bin/klayout";

const DECK: &str = r#"
source($input)
report("reticle cross-check", $report)
l = input($layer.to_i, $datatype.to_i)
l.width($width_um.to_f.um, euclidian, transparent).output("width")
l.space($space_um.to_f.um, euclidian, transparent).output("space")
l.merged.space($space_um.to_f.um, euclidian, transparent).output("space_merged")
"#;

fn klayout_available() -> bool {
    Path::new(KLAYOUT).exists()
}

fn data_dir() -> PathBuf {
    crate::common::data_dir_setting()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"))
}

/// An edge pair as two undirected edges in dbu, in a canonical order.
type Pair = [(i64, i64, i64, i64); 2];

fn canon_edge(x1: i64, y1: i64, x2: i64, y2: i64) -> (i64, i64, i64, i64) {
    if (x1, y1) <= (x2, y2) {
        (x1, y1, x2, y2)
    } else {
        (x2, y2, x1, y1)
    }
}

fn canon_pair(a: (i64, i64, i64, i64), b: (i64, i64, i64, i64)) -> Pair {
    if a <= b { [a, b] } else { [b, a] }
}

fn ours(hit: &EdgePairHit) -> Pair {
    let e = |e: Edge| canon_edge(e.p1.x, e.p1.y, e.p2.x, e.p2.y);
    canon_pair(e(hit.first), e(hit.second))
}

/// Edge pairs of one category from a `.lyrdb` report, in dbu.
fn klayout_pairs(report: &str, category: &str, dbu_um: f64) -> Vec<Pair> {
    let mut out = Vec::new();
    for item in report.split("<item>").skip(1) {
        let cat = item
            .split("<category>")
            .nth(1)
            .and_then(|s| s.split("</category>").next())
            .map(|s| s.trim_matches('\''));
        if cat != Some(category) {
            continue;
        }
        for v in item.split("<value>").skip(1) {
            let v = v.split("</value>").next().unwrap_or("");
            let Some(body) = v.strip_prefix("edge-pair: ") else {
                continue;
            };
            let nums: Vec<i64> = body
                .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
                .filter(|s| !s.is_empty())
                .map(|s| (s.parse::<f64>().unwrap() / dbu_um).round() as i64)
                .collect();
            assert_eq!(nums.len(), 8, "unparsed edge pair {v}");
            out.push(canon_pair(
                canon_edge(nums[0], nums[1], nums[2], nums[3]),
                canon_edge(nums[4], nums[5], nums[6], nums[7]),
            ));
        }
    }
    out
}

fn close(a: &Pair, b: &Pair) -> bool {
    let near = |x: &(i64, i64, i64, i64), y: &(i64, i64, i64, i64)| {
        (x.0 - y.0).abs() <= 1
            && (x.1 - y.1).abs() <= 1
            && (x.2 - y.2).abs() <= 1
            && (x.3 - y.3).abs() <= 1
    };
    (near(&a[0], &b[0]) && near(&a[1], &b[1])) || (near(&a[0], &b[1]) && near(&a[1], &b[0]))
}

/// Every pair of ours matches a distinct KLayout pair within 1 dbu, and vice versa.
fn assert_same(what: &str, mine: &[Pair], theirs: &[Pair]) {
    let mut used = vec![false; theirs.len()];
    let mut unmatched_ours = Vec::new();
    for m in mine {
        let k = theirs
            .iter()
            .enumerate()
            .position(|(i, t)| !used[i] && close(m, t));
        match k {
            Some(i) => used[i] = true,
            None => unmatched_ours.push(*m),
        }
    }
    let unmatched_theirs: Vec<&Pair> = theirs
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(t, _)| t)
        .collect();
    assert!(
        unmatched_ours.is_empty() && unmatched_theirs.is_empty(),
        "{what}: ours {} vs KLayout {}; only ours (first 5): {:?}; only KLayout (first 5): {:?}",
        mine.len(),
        theirs.len(),
        &unmatched_ours[..unmatched_ours.len().min(5)],
        &unmatched_theirs[..unmatched_theirs.len().min(5)]
    );
}

/// Distance from `p` to the segment `e` (dbu).
fn point_segment(p: (i64, i64), e: (i64, i64, i64, i64)) -> f64 {
    let (ax, ay, bx, by) = (e.0 as f64, e.1 as f64, e.2 as f64, e.3 as f64);
    let (px, py) = (p.0 as f64, p.1 as f64);
    let (dx, dy) = (bx - ax, by - ay);
    let l2 = dx * dx + dy * dy;
    let t = if l2 == 0.0 {
        0.0
    } else {
        (((px - ax) * dx + (py - ay) * dy) / l2).clamp(0.0, 1.0)
    };
    (px - ax - t * dx).hypot(py - ay - t * dy)
}

/// `part` lies on `whole` (both ends within 1 dbu of it).
fn part_of(part: &(i64, i64, i64, i64), whole: &(i64, i64, i64, i64)) -> bool {
    point_segment((part.0, part.1), *whole) <= 1.0 && point_segment((part.2, part.3), *whole) <= 1.0
}

/// Every KLayout pair lies inside one of ours (edge by edge, within 1 dbu).
fn assert_covered(what: &str, mine: &[Pair], theirs: &[Pair]) -> usize {
    let uncovered: Vec<&Pair> = theirs
        .iter()
        .filter(|t| {
            !mine.iter().any(|m| {
                (part_of(&t[0], &m[0]) && part_of(&t[1], &m[1]))
                    || (part_of(&t[0], &m[1]) && part_of(&t[1], &m[0]))
            })
        })
        .collect();
    assert!(
        uncovered.is_empty(),
        "{what}: {} of KLayout's {} pairs lie inside none of our {} (first 5): {:?}",
        uncovered.len(),
        theirs.len(),
        mine.len(),
        &uncovered[..uncovered.len().min(5)]
    );
    theirs.len()
}

/// What one cross-check found.
struct Counts {
    width: usize,
    space: usize,
    /// KLayout's `space` pairs on the layer as drawn (split duplicates included).
    space_as_drawn: usize,
}

/// Runs KLayout on `gds` and compares width/space with ours on `polys`. With
/// `drawn_is_merged`, KLayout's `space` on the layer as drawn must equal ours too.
fn cross_check(
    gds: &Path,
    key: LayerKey,
    polys: &[Polygon],
    dbu_um: f64,
    (width_dbu, space_dbu): (i64, i64),
    drawn_is_merged: bool,
) -> Counts {
    let dir = tempfile::tempdir().unwrap();
    let deck = dir.path().join("deck.drc");
    std::fs::write(&deck, DECK).unwrap();
    let report = dir.path().join("report.lyrdb");
    let arg = |k: &str, v: String| format!("{k}={v}");
    let out = Command::new(KLAYOUT)
        .args(["-b", "-r"])
        .arg(&deck)
        .args(["-rd", &arg("input", gds.display().to_string())])
        .args(["-rd", &arg("report", report.display().to_string())])
        .args(["-rd", &arg("layer", key.layer.to_string())])
        .args(["-rd", &arg("datatype", key.datatype.to_string())])
        .args([
            "-rd",
            &arg("width_um", format!("{}", width_dbu as f64 * dbu_um)),
        ])
        .args([
            "-rd",
            &arg("space_um", format!("{}", space_dbu as f64 * dbu_um)),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "klayout failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).unwrap();
    let region = Region::from_polygons(polys);
    let w: Vec<Pair> = width(&region, width_dbu as f64, Metric::Euclidean)
        .iter()
        .map(ours)
        .collect();
    let s: Vec<Pair> = space(&region, space_dbu as f64, Metric::Euclidean)
        .iter()
        .map(ours)
        .collect();
    assert_same("width", &w, &klayout_pairs(&text, "width", dbu_um));
    assert_same("space", &s, &klayout_pairs(&text, "space_merged", dbu_um));
    let drawn = klayout_pairs(&text, "space", dbu_um);
    if drawn_is_merged {
        assert_same("space (layer as drawn)", &s, &drawn);
    }
    let space_as_drawn = assert_covered("space (layer as drawn)", &s, &drawn);
    Counts {
        width: w.len(),
        space: s.len(),
        space_as_drawn,
    }
}

/// Writes `polys` on `key` of a one-cell GDSII file in `dir` (1 nm dbu).
fn gds_of(dir: &Path, name: &str, key: LayerKey, polys: &[Polygon]) -> PathBuf {
    let mut lib = Library::new("CROSSCHECK", 1e-9);
    let mut cell = Cell::new("TOP");
    for p in polys {
        cell.push_shape(key, Shape::Polygon(p.clone()));
    }
    lib.cells.push(cell);
    let gds = dir.join(format!("{name}.gds"));
    std::fs::write(&gds, write_gds(&lib).unwrap()).unwrap();
    gds
}

/// Deterministic pseudo-random numbers (no extra crate).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as i64
    }
}

#[test]
fn random_manhattan_layout_matches_klayout() {
    if !klayout_available() {
        eprintln!("SKIP: {KLAYOUT} not installed");
        return;
    }
    // Overlapping, abutting and nearby rectangles plus some L shapes on a 1 nm grid.
    let mut rng = Lcg(7);
    let mut polys = Vec::new();
    for _ in 0..400 {
        let (x, y) = (rng.next(3000), rng.next(3000));
        let (w, h) = (10 + rng.next(120), 10 + rng.next(120));
        polys.push(Polygon::rect(BBox {
            left: x,
            bottom: y,
            right: x + w,
            top: y + h,
        }));
        if rng.next(4) == 0 {
            // Abut a neighbour exactly on the right edge.
            polys.push(Polygon::rect(BBox {
                left: x + w,
                bottom: y,
                right: x + w + 30,
                top: y + h / 2 + 5,
            }));
        }
    }
    let key = LayerKey::new(1, 0);
    let dir = tempfile::tempdir().unwrap();
    let gds = gds_of(dir.path(), "random", key, &polys);
    let c = cross_check(&gds, key, &polys, 0.001, (40, 40), false);
    eprintln!(
        "random layout: {} width and {} space markers, equal to KLayout's ({} space pairs on the layer as drawn, all inside ours)",
        c.width, c.space, c.space_as_drawn
    );
    assert!(
        c.width > 10 && c.space > 10,
        "the layout should exercise both checks (w={}, s={})",
        c.width,
        c.space
    );
}

#[test]
fn gcd_45nm_metal1_matches_klayout() {
    if !klayout_available() {
        eprintln!("SKIP: {KLAYOUT} not installed");
        return;
    }
    let gds = data_dir().join("gds/gcd_45nm.gds");
    let Ok(bytes) = std::fs::read(&gds) else {
        eprintln!("SKIP: {} not found (set RETICLE_DATA_DIR)", gds.display());
        return;
    };
    let lib = read_layout(&bytes, None, &Limits::default()).unwrap();
    let top = lib.top_cells()[0];
    let key = LayerKey::new(11, 0);
    let opts = FlattenOptions {
        layers: Some([key].into_iter().collect()),
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, top, &opts).unwrap();
    let polys = flat.polygons.get(&key).cloned().unwrap_or_default();
    assert!(!polys.is_empty(), "metal1 is empty");
    let dbu_um = lib.dbu_um();
    // 45 nm metal1: minimum width/space 65 nm; check at 80 nm so there are markers.
    let d = (0.080 / dbu_um).round() as i64;
    let c = cross_check(&gds, key, &polys, dbu_um, (d, d), true);
    eprintln!(
        "gcd_45nm metal1 ({} polygons): {} width and {} space markers, equal to KLayout's",
        polys.len(),
        c.width,
        c.space
    );
    assert!(c.width + c.space > 0, "expected some markers at 80 nm");
}

/// The shipped fixture and the ten ICCAD-2013 M1 clips (1 nm dbu), side by side in one
/// layout (one KLayout run), at 100 nm: above their drawn widths and spaces, so that
/// every line end, jog and corner of the clips gives markers.
#[test]
fn glp_layouts_match_klayout() {
    if !klayout_available() {
        eprintln!("SKIP: {KLAYOUT} not installed");
        return;
    }
    let mut files =
        vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/layouts/lines_and_pad.glp")];
    let iccad = data_dir().join("iccad13/layouts");
    if iccad.is_dir() {
        files.extend((1..=10).map(|i| iccad.join(format!("M1_test{i}.glp"))));
    } else {
        eprintln!(
            "SKIP: {} not found (set RETICLE_DATA_DIR); checking the fixture only",
            iccad.display()
        );
    }
    // Clips are at most 2048 nm wide: a 5 µm pitch keeps them 100 nm apart and more.
    let mut polys = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let dx = 5_000 * i as i64;
        for p in glp::parse(&std::fs::read(file).unwrap())
            .unwrap()
            .polygons(None)
        {
            polys.push(Polygon::new(
                p.points.iter().map(|q| Point::new(q.x + dx, q.y)).collect(),
            ));
        }
    }
    let key = LayerKey::new(1, 0);
    let dir = tempfile::tempdir().unwrap();
    let gds = gds_of(dir.path(), "glp", key, &polys);
    let c = cross_check(&gds, key, &polys, 0.001, (100, 100), true);
    eprintln!(
        "{} .glp layouts at 100 nm: {} width and {} space markers, equal to KLayout's",
        files.len(),
        c.width,
        c.space
    );
    assert!(
        c.width > 0 && c.space > 0,
        "the clips should exercise both checks"
    );
}
