#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod error;
mod expand;
mod expr;
mod grow;
mod items;
mod params;
mod reference;
mod render;
mod rewrite;
mod scope;
mod syntax;
mod template;
mod validate;

pub use error::AuthorError;
pub use expand::instantiate;
pub use expr::{check, eval, Condition, ExprError};
pub use grow::{grow, output_items};
pub use items::{gate_name, item_key, item_name};
pub use params::{
    bind, check_value, has_kind, kind_label, parse_assignment, parse_cli, value_type, ParamError,
};
pub use reference::Ref;
pub use render::{graph_dot, graph_mermaid, graph_text};
pub use scope::{readable_steps, secret_var, walk, Missing, Scope};
pub use template::{
    references, render, shell_quote, text_of, Mode, Template, TemplateError, TemplateProblem,
};
pub use validate::{validate, TemplateField};
