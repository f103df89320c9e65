//! Shared pieces of the scenarios: the mps2-an385 interrupt table, the CMSDK timers, the
//! workload functions, and the way a scenario ends.
#![no_std]

use core::arch::asm;
use core::ptr::{read_volatile, write_volatile};

use cortex_m_semihosting::debug;

/// One entry of the device part of the vector table.
#[repr(C)]
pub union Vector {
    handler: unsafe extern "C" fn(),
    reserved: usize,
}

unsafe extern "C" {
    fn UARTRX0();
    fn UARTTX0();
    fn UARTRX1();
    fn UARTTX1();
    fn UARTRX2();
    fn UARTTX2();
    fn GPIO0();
    fn GPIO1();
    fn TIMER0();
    fn TIMER1();
    fn DUALTIMER();
    fn SPI0();
    fn UARTOVF();
    fn ETHERNET();
    fn I2S();
    fn TOUCHSCREEN();
    fn IRQ16();
    fn IRQ17();
    fn IRQ18();
    fn IRQ19();
    fn IRQ20();
    fn IRQ21();
    fn IRQ22();
    fn IRQ23();
    fn IRQ24();
    fn IRQ25();
    fn IRQ26();
    fn IRQ27();
    fn IRQ28();
    fn IRQ29();
    fn IRQ30();
    fn IRQ31();
}

/// The 32 device interrupts of the mps2-an385, by the names of its application note. Each
/// defaults to `DefaultHandler` (see `device.x`) unless a bin defines a function of that name.
#[unsafe(link_section = ".vector_table.interrupts")]
#[unsafe(no_mangle)]
pub static __INTERRUPTS: [Vector; 32] = [
    Vector { handler: UARTRX0 },
    Vector { handler: UARTTX0 },
    Vector { handler: UARTRX1 },
    Vector { handler: UARTTX1 },
    Vector { handler: UARTRX2 },
    Vector { handler: UARTTX2 },
    Vector { handler: GPIO0 },
    Vector { handler: GPIO1 },
    Vector { handler: TIMER0 },
    Vector { handler: TIMER1 },
    Vector { handler: DUALTIMER },
    Vector { handler: SPI0 },
    Vector { handler: UARTOVF },
    Vector { handler: ETHERNET },
    Vector { handler: I2S },
    Vector {
        handler: TOUCHSCREEN,
    },
    Vector { handler: IRQ16 },
    Vector { handler: IRQ17 },
    Vector { handler: IRQ18 },
    Vector { handler: IRQ19 },
    Vector { handler: IRQ20 },
    Vector { handler: IRQ21 },
    Vector { handler: IRQ22 },
    Vector { handler: IRQ23 },
    Vector { handler: IRQ24 },
    Vector { handler: IRQ25 },
    Vector { handler: IRQ26 },
    Vector { handler: IRQ27 },
    Vector { handler: IRQ28 },
    Vector { handler: IRQ29 },
    Vector { handler: IRQ30 },
    Vector { handler: IRQ31 },
];

/// Base address of CMSDK APB timer 0 (interrupt 8).
pub const TIMER0_BASE: usize = 0x4000_0000;
/// Base address of CMSDK APB timer 1 (interrupt 9).
pub const TIMER1_BASE: usize = 0x4000_1000;

/// Start timer 1 as a free-running clock (25 MHz on mps2-an385: 40 instructions a tick in QEMU).
pub fn clock_start() {
    // SAFETY: CMSDK timer registers of the mps2 machines.
    unsafe {
        write_volatile((TIMER1_BASE) as *mut u32, 0);
        write_volatile((TIMER1_BASE + 8) as *mut u32, u32::MAX);
        write_volatile((TIMER1_BASE + 4) as *mut u32, u32::MAX);
        write_volatile((TIMER1_BASE) as *mut u32, 1);
    }
}

/// Ticks of timer 1 since [`clock_start`].
#[inline(always)]
pub fn now() -> u32 {
    // SAFETY: reading the down-counter of timer 1.
    !unsafe { read_volatile((TIMER1_BASE + 4) as *const u32) }
}

/// Spin `n` times; the unit of work of every scenario. The label only makes each function's
/// loop distinct, so that the compiler does not fold identical functions into one.
#[macro_export]
macro_rules! spin {
    ($n:expr, $label:literal) => {
        for _ in 0..$n {
            // SAFETY: a no-op instruction (the rest is an assembler comment).
            unsafe {
                core::arch::asm!(
                    concat!("nop @ ", $label),
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
    };
}

/// 70 % of the three-loop program.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_a(n: u32) {
    spin!(n, "hot_a")
}

/// 20 % of the three-loop program.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_b(n: u32) {
    spin!(n, "hot_b")
}

/// 10 % of the three-loop program.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_c(n: u32) {
    spin!(n, "hot_c")
}

// Timer 0 can pace the sampler instead of SysTick: `cargo sample --timer cmsdk`.
#[cfg(feature = "sample")]
mod sampling_timer {
    sampler_rt::cmsdk_timer_interrupt!(TIMER0);
}

/// Wait `ticks` core-clock ticks with SysTick, polling COUNTFLAG, the way
/// `cortex_m::delay::Delay` and many HALs do: SysTick programmed, no SysTick handler. A
/// firmware that calls it owns SysTick.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn systick_delay(ticks: u32) {
    const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
    const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
    const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
    // SAFETY: SysTick belongs to the firmware that calls this; nothing else programs it.
    unsafe {
        write_volatile(SYST_RVR, ticks - 1);
        write_volatile(SYST_CVR, 0);
        // ENABLE | CLKSOURCE (core clock), no interrupt.
        write_volatile(SYST_CSR, 0b101);
        while read_volatile(SYST_CSR) & (1 << 16) == 0 {}
        write_volatile(SYST_CSR, 0);
    }
}

/// CMSDK timer 1 as a timer the firmware drives for the sampler (`sampler_rt::start_with_timer`):
/// start, stop, its reload and flag registers, its 25 MHz clock. The binary that uses it
/// defines the interrupt handler: `sampler_rt::timer_interrupt!(TIMER1, ack = 1)`.
#[cfg(feature = "sample")]
pub mod timer1_pacer {
    use core::ptr::write_volatile;

    use super::TIMER1_BASE;

    const CTRL: usize = TIMER1_BASE;
    const VALUE: usize = TIMER1_BASE + 0x04;
    const RELOAD: usize = TIMER1_BASE + 0x08;
    const INTCLEAR: usize = TIMER1_BASE + 0x0C;
    /// Timer 1's interrupt.
    const IRQ: usize = 9;

    fn start(ticks: u32, priority: u8) {
        // SAFETY: CMSDK timer 1 and its NVIC entries belong to the sampler in this firmware.
        unsafe {
            write_volatile(CTRL as *mut u32, 0);
            write_volatile(RELOAD as *mut u32, ticks);
            write_volatile(VALUE as *mut u32, ticks);
            write_volatile(INTCLEAR as *mut u32, 1);
            write_volatile((0xE000_E400 + IRQ) as *mut u8, priority);
            write_volatile(0xE000_E100 as *mut u32, 1 << IRQ);
            // ENABLE | INTERRUPT ENABLE.
            write_volatile(CTRL as *mut u32, 0b1001);
        }
    }

    fn stop() {
        // SAFETY: as in `start`.
        unsafe {
            write_volatile(CTRL as *mut u32, 0);
            write_volatile(INTCLEAR as *mut u32, 1);
            write_volatile(0xE000_E180 as *mut u32, 1 << IRQ);
            write_volatile(0xE000_E280 as *mut u32, 1 << IRQ);
        }
    }

    /// The timer, for `sampler_rt::start_with_timer`.
    pub static TIMER: sampler_rt::Timer = sampler_rt::Timer {
        start,
        stop,
        reload: RELOAD as u32,
        flag: INTCLEAR as u32,
        hz: 25_000_000,
    };
}

/// CMSDK UART0 of mps2-an385, for the firmware that talks through its UART (`--serial`).
pub mod uart {
    use core::ptr::{read_volatile, write_volatile};

    const UART0: usize = 0x4000_4000;
    const DATA: usize = UART0;
    const STATE: usize = UART0 + 0x4;
    const CTRL: usize = UART0 + 0x8;
    const BAUDDIV: usize = UART0 + 0x10;

    /// Transmit on, 25 MHz / 217: about 115 200 baud.
    pub fn init() {
        // SAFETY: CMSDK UART0 registers of mps2-an385.
        unsafe {
            write_volatile(BAUDDIV as *mut u32, 217);
            write_volatile(CTRL as *mut u32, 1);
        }
    }

    /// Send `bytes`, waiting while the transmit buffer is full.
    pub fn write(bytes: &[u8]) {
        for &b in bytes {
            // SAFETY: CMSDK UART0 registers.
            unsafe {
                while read_volatile(STATE as *const u32) & 1 != 0 {}
                write_volatile(DATA as *mut u32, b as u32);
            }
        }
    }
}

/// Start the sampler when the firmware is built for `cargo sample`.
pub fn sampling_start() {
    #[cfg(feature = "sample")]
    sampler_rt::start();
}

/// Enable device interrupt `irq` at `priority` (0x80: less urgent than the sampler, which
/// then sees inside its handler).
#[inline(always)]
pub fn enable_irq(irq: u32, priority: u8) {
    // SAFETY: NVIC registers; the scenarios use interrupts the machines leave unused.
    unsafe {
        write_volatile((0xE000_E400 as *mut u8).add(irq as usize), priority);
        write_volatile(0xE000_E100 as *mut u32, 1 << irq);
    }
}

/// Pend device interrupt `irq` (below 32).
#[inline(always)]
pub fn pend_irq(irq: u32) {
    // SAFETY: the NVIC's set-pending register.
    unsafe { write_volatile(0xE000_E200 as *mut u32, 1 << irq) };
}

/// End the scenario: send the samples taken so far (when sampling) and leave QEMU with `code`.
pub fn finish(code: i32) -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::flush();
    if code == 0 {
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        debug::exit(debug::EXIT_FAILURE);
    }
    loop {
        // SAFETY: waiting for an interrupt has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    cortex_m_semihosting::hprintln!("panic: {}", info);
    finish(101)
}

/// The process stack of [`on_process_stack`]: 4 KiB, 8-byte aligned.
#[repr(C, align(8))]
struct ProcessStack([u32; 1024]);

static mut PROCESS_STACK: ProcessStack = ProcessStack([0; 1024]);

/// Run `body` in thread mode on the process stack, as an RTOS runs its tasks: PSP at the top
/// of a stack of its own, CONTROL.SPSEL set. The caller's frame is left behind for good.
pub fn on_process_stack(body: extern "C" fn() -> !) -> ! {
    let top = unsafe { core::ptr::addr_of_mut!(PROCESS_STACK.0).add(1) } as u32;
    // SAFETY: PSP points at the top of a stack nothing else uses; after `msr control` thread
    // mode runs on it, and `body` never returns to the frame left on the main stack.
    unsafe {
        asm!(
            "msr psp, r1",
            "movs r0, #2",
            "msr control, r0",
            "isb",
            // No caller: the stack's root, as an RTOS's task entry has none to return to.
            "movs r0, #0",
            "mov lr, r0",
            "bx r2",
            in("r1") top,
            in("r2") body,
            options(noreturn),
        )
    }
}

/// The `cost` measurement: the same workload (20 000 rounds of `hot_a(1000)`) without and with
/// sampling, timed by timer 1 (40 instructions a tick in QEMU); prints
/// `cost: base_ticks=B sampled_ticks=S samples=N` and ends the run.
pub extern "C" fn measure_cost() -> ! {
    #[inline(never)]
    fn workload() -> u32 {
        let t0 = now();
        for _ in 0..20_000 {
            hot_a(1000);
        }
        now().wrapping_sub(t0)
    }
    clock_start();
    let base = workload();
    sampling_start();
    #[cfg(feature = "sample")]
    let before = sampler_rt::samples_taken();
    let sampled = workload();
    #[cfg(feature = "sample")]
    let samples = sampler_rt::samples_taken() - before;
    #[cfg(not(feature = "sample"))]
    let samples = 0u32;
    cortex_m_semihosting::hprintln!(
        "cost: base_ticks={} sampled_ticks={} samples={}",
        base,
        sampled,
        samples
    );
    finish(0)
}
