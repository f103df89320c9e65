//! The host pipeline on saved runs, recorded captures and committed fixtures: export formats,
//! run comparison, text dumps, SWO/ITM decoding, symbolization against an independent DWARF
//! reading, and the fuzz corpus replayed.

#[path = "../support/mod.rs"]
mod support;

mod corpus;
mod diff;
mod formats;
mod golden;
mod html;
mod itm;
mod settings;
mod symbols;
mod template;
mod textdump;
