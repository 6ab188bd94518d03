//! Integration tests of authoring: parameters, templates, conditions, expansion,
//! validation and rendering.

mod params;
mod template;
