//! Integration tests of authoring: parameters, templates, conditions, expansion,
//! validation and rendering.

mod expand;
mod expr;
mod params;
mod props;
mod render;
mod replay;
mod spec;
mod template;
mod validate;
