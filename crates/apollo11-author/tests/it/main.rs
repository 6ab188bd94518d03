//! Integration tests of authoring: parameters, templates, conditions, expansion,
//! validation and rendering.

mod expand;
mod expr;
mod params;
mod spec;
mod template;
