//! An stm32f4xx-hal application for QEMU netduinoplus2: a CRC and a sort of its result, 200
//! rounds, with TIM2's interrupt every millisecond, a polled SysTick delay between rounds and a
//! byte to USART1 each round.
#![no_std]
#![no_main]

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering};
use cortex_m::interrupt::Mutex;
use cortex_m_rt::entry;
use cortex_m_semihosting::debug;
use stm32f4xx_hal::{
    pac::{self, interrupt},
    prelude::*,
    timer::{CounterUs, Event},
};

static TICKS: AtomicU32 = AtomicU32::new(0);
static TIMER: Mutex<RefCell<Option<CounterUs<pac::TIM2>>>> = Mutex::new(RefCell::new(None));

#[inline(never)]
fn crc(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = (c >> 1) ^ (0xEDB8_8320 & (c & 1).wrapping_neg());
        }
    }
    !c
}

#[inline(never)]
fn sort(v: &mut [u32]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[interrupt]
fn TIM2() {
    cortex_m::interrupt::free(|cs| {
        if let Some(t) = TIMER.borrow(cs).borrow_mut().as_mut() {
            t.clear_all_flags();
        }
    });
    TICKS.fetch_add(1, Ordering::Relaxed);
}

#[entry]
fn main() -> ! {
    let dp = pac::Peripherals::take().unwrap();
    let cp = cortex_m::Peripherals::take().unwrap();
    let rcc = dp.RCC.constrain();
    let clocks = rcc.cfgr.sysclk(16.MHz()).freeze();
    let gpioa = dp.GPIOA.split();
    let mut tx = dp.USART1.tx(gpioa.pa9, 115_200.bps(), &clocks).unwrap();
    let mut timer = dp.TIM2.counter_us(&clocks);
    timer.start(1.millis()).unwrap();
    timer.listen(Event::Update);
    cortex_m::interrupt::free(|cs| TIMER.borrow(cs).replace(Some(timer)));
    unsafe { pac::NVIC::unmask(pac::Interrupt::TIM2) };
    let mut delay = cp.SYST.delay(&clocks);
    let mut data = [0u8; 512];
    let mut v = [0u32; 64];
    for round in 0..200u32 {
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u32 * 31 + round) as u8;
        }
        let c = crc(&data);
        for (i, x) in v.iter_mut().enumerate() {
            *x = c.rotate_left(i as u32) ^ round;
        }
        sort(&mut v);
        let _ = tx.write(b'.');
        delay.delay_us(50u32);
    }
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}
