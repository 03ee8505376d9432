//! The Slurm executor's parsing and planning (`src/slurm/mod.rs`, `src/slurm/cli.rs`):
//! `squeue`/`sacct` lines, array sizes, tile file names.

use reticle_dispatch::slurm::{
    element_cause, parse_sacct, parse_squeue, split_ranges, tile_output_name,
};
use reticle_dispatch::supervisor::{DeathCause, ResourceLimit};

#[test]
fn squeue_lines_become_element_states() {
    let states = parse_squeue("12_0 COMPLETED\n12_3 CANCELLED by 0\n12_[4-7] PENDING\n\n");
    assert_eq!(states.len(), 2);
    assert_eq!(states[&("12".to_owned(), 0)], "COMPLETED");
    assert_eq!(states[&("12".to_owned(), 3)], "CANCELLED");
}

#[test]
fn sacct_lines_become_final_element_states() {
    let states = parse_sacct(
        "12_0|COMPLETED\n12_3|CANCELLED by 0\n12_5|OUT_OF_MEMORY\n12_[6-7]|PENDING\n\n",
    );
    assert_eq!(states.len(), 3);
    assert_eq!(states[&("12".to_owned(), 3)], "CANCELLED");
    assert_eq!(states[&("12".to_owned(), 5)], "OUT_OF_MEMORY");
    assert!(matches!(
        element_cause(states.get(&("12".to_owned(), 5)).map(String::as_str)),
        DeathCause::SchedulerEnded {
            limit: Some(ResourceLimit::Memory),
            ..
        }
    ));
}

#[test]
fn ranges_split_into_arrays_of_bounded_size() {
    assert_eq!(
        split_ranges(&[[0, 5], [7, 9]], 3),
        vec![vec![[0, 3]], vec![[3, 5], [7, 8]], vec![[8, 9]]]
    );
    assert_eq!(split_ranges(&[[0, 4]], 10), vec![vec![[0, 4]]]);
    assert!(split_ranges(&[], 10).is_empty());
}

#[test]
fn a_summary_names_its_tile_file() {
    assert_eq!(tile_output_name("8_-9").as_deref(), Some("tile_8_-9.json"));
    assert_eq!(tile_output_name("../x_1"), None);
    assert_eq!(tile_output_name("1_2/x"), None);
    assert_eq!(tile_output_name("T_1_2"), None);
}
