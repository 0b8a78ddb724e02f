//! Iris Gateway: a self-hosted server that lets phones and browsers drive an ACP agent over the
//! Iris v1 WebSocket protocol, and never loses a frame.
//!
//! See ARCHITECTURE.md for the bird's-eye view. In short: [`server`] binds and serves, [`conn`]
//! runs one WebSocket, [`handlers`] answer requests, [`hub`] fans durable frames out in cursor
//! order, and the store (crate `iris-store`) is the source of truth.

pub mod agent;
pub mod commands;
pub mod config;
pub mod conn;
pub mod cron;
pub mod devices;
pub mod handlers;
pub mod hub;
pub mod ids;
pub mod media;
pub mod metrics;
pub mod pair;
pub mod push;
pub mod server;
pub mod state;
pub mod web;

pub use config::Config;
pub use server::{Gateway, StartError, TokenSource};
