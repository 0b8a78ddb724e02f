//! House rules for the Iris Gateway source tree.
//!
//! The scanners are not parsers: they work on the source with comments and literals blanked
//! out ([`lex`]), which is enough for the way this code base is written.

pub mod graph;
pub mod js;
pub mod lex;
pub mod rust;
