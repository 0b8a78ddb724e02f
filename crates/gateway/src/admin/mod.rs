//! The owner's commands, above the requests devices send: `devices list|revoke` and the admin
//! socket a running gateway answers them on (`devices.rs`), `backup` and `export` (`archive/`),
//! `doctor` (`doctor.rs`), and the tables they print (`table.rs`).
//! They run from the command line next to a serving gateway, or inside it for the admin socket;
//! no device reaches them over `/ws`.

pub mod archive;
pub mod devices;
pub mod doctor;
pub mod secrets;
pub mod table;
