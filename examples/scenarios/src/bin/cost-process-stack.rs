//! `cost` with thread mode on the process stack (as under an RTOS): the sampler then finds
//! each exception frame by EXC_RETURN. Prints the same `cost:` line.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::on_process_stack;

#[entry]
fn main() -> ! {
    on_process_stack(scenarios::measure_cost)
}
