//! Integration tests of the vocabulary: what each accessor and conversion gives back, and
//! the relations the limits must keep with each other.

mod limits;
mod vocabulary;
