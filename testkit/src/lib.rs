pub mod emulator;
pub mod redis;
pub mod stubs;
pub mod wait;
