//! Integration tests of authoring: parameters, templates, conditions, expansion,
//! validation and rendering.

mod expr;
mod params;
mod template;
