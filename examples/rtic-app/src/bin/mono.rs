//! An application whose time base is RTIC's SysTick monotonic: a software task wakes every
//! millisecond with `Mono::delay`, two hardware tasks at higher priorities (sharing a resource
//! with `idle` through `lock`) do work when pended, and `idle` crunches numbers between them.
//! SysTick belongs to the application here.
#![no_std]
#![no_main]

use panic_semihosting as _;

/// Ticks of the monotonic the application waits for in all.
const TICKS: u32 = 400;

include!("../mono_app.rs");
