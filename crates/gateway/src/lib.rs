//! Iris Gateway: a self-hosted server that lets phones and browsers drive an ACP agent over the
//! Iris v1 WebSocket protocol, and never loses a frame.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the layers of this crate. In short, from the
//! top: [`server`] binds and serves; [`conn`] runs one WebSocket; [`admin`] holds the owner's
//! commands (devices, backup, export); [`handlers`] answer requests; [`agent`] drives the agent's
//! lanes; [`media`], [`push`] and [`cron`] are services; and the ground floor ([`outbox`],
//! [`hub`], [`wire`], [`command`], [`config`], …) imports nothing above it. The store (crate `iris-store`) is the source of truth.

// Server layer.
pub mod action_route;
pub mod announce;
pub mod listener;
pub mod pair;
pub mod reach;
pub mod redirect;
pub mod relay;
pub mod server;
pub mod web;
// Connection layer.
pub mod conn;
// Admin layer.
pub mod admin;
// Request layer.
pub mod handlers;
// Agent layer.
pub mod agent;
// Services.
pub mod cron;
pub mod files;
pub mod media;
pub mod push;
// Ground floor.
pub mod acme;
pub mod actions;
pub mod clock;
pub mod command;
pub mod config;
pub mod credentials;
pub mod guard;
pub mod harden;
pub mod hub;
pub mod ids;
pub mod keyfile;
pub mod metrics;
pub mod outbox;
pub mod revoke;
pub mod state;
pub mod text;
pub mod tls;
pub mod wire;

pub use config::Config;
pub use server::{Gateway, StartError, TokenSource};
