#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod params;

pub use params::{
    bind, check_value, has_kind, kind_label, parse_assignment, parse_cli, value_type, ParamError,
};
