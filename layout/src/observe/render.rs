//! set_view and render_view.
