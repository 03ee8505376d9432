//! Unit tests of `reticle_eval::gauges`: the ICCAD EPE settings.

use reticle_eval::gauges::*;
use reticle_kernel::metrics::EpeConfig;

#[test]
fn the_iccad_settings_scale_to_dbu() {
    let nm = iccad_epe_config(1.0);
    assert_eq!(nm.spacing_nm, EpeConfig::ICCAD2013.spacing_nm);
    let half = iccad_epe_config(0.5);
    assert_eq!(half.spacing_nm, 2.0 * EpeConfig::ICCAD2013.spacing_nm);
    assert_eq!(half.tolerance_nm, 2.0 * EpeConfig::ICCAD2013.tolerance_nm);
    assert_eq!(half.search_nm, 2.0 * EpeConfig::ICCAD2013.search_nm);
}
