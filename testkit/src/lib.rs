pub mod emulator;
pub mod process;
pub mod redis;
pub mod stubs;
pub mod tools;
pub mod wait;
pub mod webhook_receiver;
pub mod yaml;
