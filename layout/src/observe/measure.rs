//! measure_geometry and analyze_waveguide.
