//! `--probe qemu`: a debug probe that probe-rs drives like any other, whose chip is a QEMU
//! machine. It lets the whole board path (attach, download, reset, run, live reads, SWO, the
//! end handshake) run here without a board, and lets a user rehearse it.
//!
//! QEMU starts stopped (`-S`) with its gdbstub on a private socket and semihosting kept inside
//! QEMU. [`QemuProbe`] implements probe-rs's [`DebugProbe`] and [`RawDapAccess`]: probe-rs's
//! own ARM code powers up the debug port, finds the AHB-AP and the ROM table, and reads and
//! writes memory through CSW/TAR/DRW; [`dap::Port`] turns those transfers into guest memory
//! accesses and serves the debug registers QEMU does not model. The chips are described to
//! probe-rs by `qemu-chips.yaml` (their flash is RAM-backed in QEMU, so probe-rs's download
//! code loads images without a flash algorithm).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use probe_rs::architecture::arm::sequences::ArmDebugSequence;
use probe_rs::architecture::arm::{
    ArmCommunicationInterface, ArmDebugInterface, ArmError, DapError, DapProbe, RawDapAccess,
    RegisterAddress, SwoAccess, SwoConfig,
};
use probe_rs::probe::{DebugProbe, DebugProbeError, WireProtocol};

pub mod dap;
pub mod gdb;
pub mod pcsr;
pub mod swo;

use dap::{Fault, Port, RegMap};
use gdb::Gdb;

/// The target descriptions of the machines, in probe-rs's format.
pub const CHIPS_YAML: &str = include_str!("qemu-chips.yaml");

/// What `--probe` says to use QEMU.
pub const PROBE_NAME: &str = "qemu";

/// The machines the QEMU probe emulates as chips.
pub fn chips() -> Vec<&'static str> {
    CHIPS_YAML
        .lines()
        .filter_map(|l| l.strip_prefix("- name: "))
        .map(str::trim)
        .collect()
}

/// A probe-rs registry with the built-in chips and the QEMU machines.
pub fn registry() -> Result<probe_rs::config::Registry> {
    let mut r = probe_rs::config::Registry::from_builtin_families();
    r.add_target_family_from_yaml(CHIPS_YAML)
        .context("reading the QEMU machines' target description")?;
    Ok(r)
}

/// How to start the emulated chip.
#[derive(Debug, Clone)]
pub struct Emulated {
    pub qemu: PathBuf,
    pub machine: String,
    pub cpu: String,
    pub icount_shift: u8,
    /// Keep virtual time in step with the host's (`-icount align=on`): a host that reads
    /// the core at moments of its own clock then reads it at moments of the core's.
    pub real_time: bool,
    /// Where QEMU's own output and the firmware's UART and semihosting console go.
    pub log: PathBuf,
    /// cargo-sample's QEMU plugin, when the run counts instructions or samples by DWT.
    pub plugin: Option<PathBuf>,
    /// Where the plugin writes the exact per-PC counts (`--truth`), at QEMU's exit.
    pub exact_out: Option<PathBuf>,
    /// With `--truth --stacks`: where the plugin writes the exact call graph, and the
    /// exception handlers' entries it opens exception frames at.
    pub graph: Option<(PathBuf, Vec<u32>)>,
    /// Faults to inject (tests).
    pub faults: dap::Faults,
    /// The DWT PC-sampling plugin and where it writes its ticks (`--method dwt`).
    pub swo: Option<swo::SwoSource>,
    /// `--method pcsr`: where the plugin writes the ticks `DWT_PCSR` is read from.
    pub pcsr: Option<PathBuf>,
}

/// The environment variable that injects faults into the emulated probe (tests):
/// `fail-every:N`, `kill-after:N`, `reset-after:N` (counted in memory reads).
pub const FAULTS_ENV: &str = "CARGO_SAMPLE_QEMU_PROBE_FAULTS";

/// The QEMU process behind the probe; killed when the last handle goes.
struct Vm {
    child: Child,
    monitor: crate::exec::qemu::monitor::endpoint::Addr,
    _dir: tempfile::TempDir,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The QEMU process behind a probe, for whoever ran the capture: how it ended.
#[derive(Clone)]
pub struct VmHandle(Arc<Mutex<Vm>>);

impl std::fmt::Debug for VmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VmHandle")
    }
}

impl VmHandle {
    /// Let the firmware end QEMU by itself within `wait`, else ask QEMU to quit (its exit
    /// handlers run, so the exact counts are written). Returns how it ended.
    pub fn end(&self, wait: Duration) -> String {
        let mut vm = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        loop {
            match vm.child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    return "the firmware ended QEMU (exit status 0)".into();
                }
                Ok(Some(status)) => return format!("QEMU ended ({status})"),
                Ok(None) if started.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break,
            }
        }
        let Vm { child, monitor, .. } = &mut *vm;
        crate::exec::qemu::monitor::quit_cleanly(monitor, child);
        match child.try_wait() {
            Ok(Some(_)) => "QEMU quit when the capture ended".into(),
            _ => "QEMU did not quit; stopped it".into(),
        }
    }

    /// Kill QEMU, as a board that loses power (fault tests).
    pub fn kill(&self) {
        let _ = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .child
            .kill();
    }
}

/// A probe whose target is a QEMU machine.
#[derive(Debug)]
pub struct QemuProbe {
    port: Port,
    protocol: Option<WireProtocol>,
    speed_khz: u32,
    vm: VmHandle,
}

impl QemuProbe {
    /// Start QEMU stopped with its gdbstub and connect to it.
    pub fn launch(e: &Emulated) -> Result<QemuProbe> {
        let dir = tempfile::Builder::new()
            .prefix("cargo-sample-qemu-probe-")
            .tempdir()
            .context("creating QEMU's working directory")?;
        let log = std::fs::File::create(&e.log)
            .with_context(|| format!("creating {}", e.log.display()))?;
        let endpoint = Endpoint::new(dir.path())?;
        let monitor = crate::exec::qemu::monitor::endpoint::Addr::new(dir.path())
            .context("choosing QEMU's monitor address")?;
        let mut cmd = Command::new(&e.qemu);
        cmd.current_dir(dir.path())
            .args(["-machine", &e.machine, "-cpu", &e.cpu])
            .args(["-display", "none", "-serial", "stdio"])
            .arg("-monitor")
            .arg(monitor.qemu_arg())
            .args(["-semihosting-config", "enable=on,target=native"])
            .arg("-icount")
            .arg(format!(
                "shift={}{}",
                e.icount_shift,
                if e.real_time { ",align=on" } else { "" }
            ))
            .arg("-gdb")
            .arg(endpoint.qemu_arg())
            .arg("-S");
        if let Some(plugin) = &e.plugin {
            let mut arg = plugin.display().to_string();
            if let Some(out) = &e.exact_out {
                arg += &format!(",out={}", out.display());
            }
            if let Some((file, handlers)) = &e.graph {
                let list: Vec<String> = handlers.iter().map(|h| format!("{h:x}")).collect();
                arg += &format!(",graph={},handlers={}", file.display(), list.join(":"));
            }
            if let Some(s) = &e.swo {
                arg += &format!(",ticks={}", s.ticks.display());
            } else if let Some(p) = &e.pcsr {
                arg += &format!(",ticks={},tick={}", p.display(), pcsr::TICK);
            }
            cmd.arg("-plugin").arg(arg);
        } else if e.exact_out.is_some() || e.swo.is_some() || e.pcsr.is_some() {
            bail!("internal: counting or DWT emulation without the plugin");
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", e.qemu.display()))?;
        let mut vm = Vm {
            child,
            monitor,
            _dir: dir,
        };
        let io = endpoint.connect(&mut vm.child, &e.log)?;
        let pid = vm.child.id();
        let vm = VmHandle(Arc::new(Mutex::new(vm)));
        let mut g = Gdb::new(io).context("talking to QEMU's gdbstub")?;
        let regs = RegMap::new(gdb::register_numbers(&mut g)?);
        let mut port = Port::new(g, regs);
        port.speed_khz = 4000;
        port.faults = e.faults;
        port.vm_pid = pid;
        if let Some(s) = &e.swo {
            port.swo = Some(swo::Swo::new(s.clone()));
        }
        if let Some(p) = &e.pcsr {
            port.pcsr = Some(pcsr::Timeline::new(
                p.clone(),
                1_000_000_000 >> e.icount_shift,
            ));
        }
        Ok(QemuProbe {
            port,
            protocol: None,
            speed_khz: 4000,
            vm,
        })
    }

    /// The probe, for `Probe::from_specific_probe`, and a handle on its QEMU.
    pub fn into_probe(self) -> (probe_rs::probe::Probe, VmHandle) {
        let vm = self.vm.clone();
        (
            probe_rs::probe::Probe::from_specific_probe(Box::new(self)),
            vm,
        )
    }
}

/// Where QEMU's gdbstub listens.
struct Endpoint {
    #[cfg(unix)]
    path: PathBuf,
    #[cfg(not(unix))]
    port: u16,
}

impl Endpoint {
    #[cfg(unix)]
    fn new(dir: &Path) -> Result<Endpoint> {
        Ok(Endpoint {
            path: dir.join("gdb.sock"),
        })
    }

    #[cfg(not(unix))]
    fn new(_dir: &Path) -> Result<Endpoint> {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        Ok(Endpoint {
            port: l.local_addr()?.port(),
        })
    }

    fn qemu_arg(&self) -> String {
        #[cfg(unix)]
        return format!("unix:{},server=on,wait=off", self.path.display());
        #[cfg(not(unix))]
        return format!("tcp:127.0.0.1:{},server=on,wait=off", self.port);
    }

    /// Connect once QEMU listens; if QEMU exits first, its output says why.
    fn connect(&self, child: &mut Child, log: &Path) -> Result<Box<dyn gdb::Stream>> {
        let started = Instant::now();
        loop {
            #[cfg(unix)]
            let c = std::os::unix::net::UnixStream::connect(&self.path)
                .map(|s| Box::new(s) as Box<dyn gdb::Stream>);
            #[cfg(not(unix))]
            let c = std::net::TcpStream::connect(("127.0.0.1", self.port))
                .map(|s| Box::new(s) as Box<dyn gdb::Stream>);
            if let Ok(s) = c {
                return Ok(s);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let out = std::fs::read_to_string(log).unwrap_or_default();
                bail!(
                    "QEMU ended before the probe could attach ({status}): {}",
                    out.trim()
                );
            }
            if started.elapsed() > Duration::from_secs(10) {
                bail!("QEMU did not open its debug port within 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn arm_error(f: Fault) -> ArmError {
    match f {
        Fault::Bus(_) => ArmError::Dap(DapError::FaultResponse),
        Fault::Lost(why) => ArmError::Other(why),
    }
}

impl RawDapAccess for QemuProbe {
    fn raw_read_register(&mut self, address: RegisterAddress) -> Result<u32, ArmError> {
        match address {
            RegisterAddress::DpRegister(r) => Ok(self.port.dp_read(r.address, r.bank.unwrap_or(0))),
            RegisterAddress::ApRegister(r) => self.port.ap_read(r).map_err(arm_error),
        }
    }

    fn raw_read_block(
        &mut self,
        address: RegisterAddress,
        values: &mut [u32],
    ) -> Result<(), ArmError> {
        match address {
            RegisterAddress::ApRegister(r) => self.port.ap_read_block(r, values).map_err(arm_error),
            dp => {
                for v in values {
                    *v = self.raw_read_register(dp)?;
                }
                Ok(())
            }
        }
    }

    fn raw_write_register(&mut self, address: RegisterAddress, value: u32) -> Result<(), ArmError> {
        match address {
            RegisterAddress::DpRegister(r) => {
                self.port.dp_write(r.address, value);
                Ok(())
            }
            RegisterAddress::ApRegister(r) => self.port.ap_write(r, value).map_err(arm_error),
        }
    }

    fn raw_write_block(
        &mut self,
        address: RegisterAddress,
        values: &[u32],
    ) -> Result<(), ArmError> {
        match address {
            RegisterAddress::ApRegister(r) => {
                self.port.ap_write_block(r, values).map_err(arm_error)
            }
            dp => {
                for v in values {
                    self.raw_write_register(dp, *v)?;
                }
                Ok(())
            }
        }
    }

    fn jtag_sequence(&mut self, _cycles: u8, _tms: bool, _tdi: u64) -> Result<(), DebugProbeError> {
        Ok(())
    }

    fn swj_sequence(&mut self, _bit_len: u8, _bits: u64) -> Result<(), DebugProbeError> {
        Ok(())
    }

    fn swj_pins(
        &mut self,
        pin_out: u32,
        _pin_select: u32,
        _pin_wait: u32,
    ) -> Result<u32, DebugProbeError> {
        Ok(pin_out)
    }

    fn into_probe(self: Box<Self>) -> Box<dyn DebugProbe> {
        self
    }

    fn core_status_notification(
        &mut self,
        _state: probe_rs::CoreStatus,
    ) -> Result<(), DebugProbeError> {
        Ok(())
    }
}

impl DebugProbe for QemuProbe {
    fn get_name(&self) -> &str {
        "QEMU (cargo-sample)"
    }

    fn speed_khz(&self) -> u32 {
        self.speed_khz
    }

    fn set_speed(&mut self, speed_khz: u32) -> Result<u32, DebugProbeError> {
        self.speed_khz = speed_khz;
        self.port.speed_khz = speed_khz;
        Ok(speed_khz)
    }

    fn attach(&mut self) -> Result<(), DebugProbeError> {
        Ok(())
    }

    fn detach(&mut self) -> Result<(), probe_rs::Error> {
        Ok(())
    }

    fn target_reset(&mut self) -> Result<(), DebugProbeError> {
        Err(DebugProbeError::NotImplemented {
            function_name: "target_reset",
        })
    }

    fn target_reset_assert(&mut self) -> Result<(), DebugProbeError> {
        Ok(())
    }

    fn target_reset_deassert(&mut self) -> Result<(), DebugProbeError> {
        Ok(())
    }

    fn select_protocol(&mut self, protocol: WireProtocol) -> Result<(), DebugProbeError> {
        match protocol {
            WireProtocol::Swd => {
                self.protocol = Some(protocol);
                Ok(())
            }
            other => Err(DebugProbeError::UnsupportedProtocol(other)),
        }
    }

    fn active_protocol(&self) -> Option<WireProtocol> {
        Some(self.protocol.unwrap_or(WireProtocol::Swd))
    }

    fn has_arm_interface(&self) -> bool {
        true
    }

    fn try_get_arm_debug_interface<'probe>(
        self: Box<Self>,
        sequence: Arc<dyn ArmDebugSequence>,
    ) -> Result<Box<dyn ArmDebugInterface + 'probe>, (Box<dyn DebugProbe>, ArmError)> {
        Ok(ArmCommunicationInterface::create(self, sequence, false))
    }

    fn get_swo_interface(&self) -> Option<&dyn SwoAccess> {
        self.port.swo.as_ref().map(|_| self as &dyn SwoAccess)
    }

    fn get_swo_interface_mut(&mut self) -> Option<&mut dyn SwoAccess> {
        if self.port.swo.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn into_probe(self: Box<Self>) -> Box<dyn DebugProbe> {
        self
    }

    fn try_as_dap_probe(&mut self) -> Option<&mut dyn DapProbe> {
        Some(self)
    }
}

impl DapProbe for QemuProbe {}

impl SwoAccess for QemuProbe {
    fn enable_swo(&mut self, config: &SwoConfig) -> Result<(), ArmError> {
        match &mut self.port.swo {
            Some(s) => s
                .enable(config)
                .map_err(|e| ArmError::Other(format!("{e:#}"))),
            None => Err(ArmError::Other(
                "this emulated chip has no trace port".into(),
            )),
        }
    }

    fn disable_swo(&mut self) -> Result<(), ArmError> {
        if let Some(s) = &mut self.port.swo {
            s.disable();
        }
        Ok(())
    }

    fn read_swo_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, ArmError> {
        let halted = self.port.halted();
        let bytes = match &mut self.port.swo {
            Some(s) => s
                .read(timeout, halted)
                .map_err(|e| ArmError::Other(format!("{e:#}")))?,
            None => Vec::new(),
        };
        if bytes.is_empty() {
            // Nothing more will come from a chip that is gone.
            self.port.check_alive().map_err(arm_error)?;
        }
        Ok(bytes)
    }
}
