//! `--schedule default|tuned`: which schedule the commands that generate code use.
//!
//! `wavefuse ab`, `wavefuse run` and `wavefuse emit` take `--schedule`. `default` (the default)
//! is [`Schedule::default_for`]; snapshot tests and `wavefuse check` always use that, so they stay
//! deterministic. `tuned` installs a process-wide selector built from the stores (see
//! [`super::store`]) and the device name; [`crate::suite::schedule`] asks it for each model-shape
//! case, and it says on stderr, once per kernel and shape, which schedule it used and why.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use wavefuse::ir::Kernel;
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Schedule, lower};

use super::store::{Lookup, Store, StoreError};

/// Which schedule generated code uses.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScheduleChoice {
    /// `Schedule::default_for` the target.
    #[default]
    Default,
    /// The tuned-schedule store's entry for this kernel, shape, arch and device when there is one,
    /// else the default.
    Tuned,
}

/// `--schedule default|tuned [--tuned-store PATH]`, for the commands that generate code.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ScheduleArgs {
    /// default: `Schedule::default_for` the target; tuned: the tuned-schedule store's entry for
    /// this kernel, shape, arch and device when there is one, else the default (it says which).
    #[arg(long, value_enum, default_value_t = ScheduleChoice::Default)]
    pub schedule: ScheduleChoice,
    /// With --schedule tuned: also read this store (over the committed one and the cache
    /// directory's).
    #[arg(long, requires = "schedule")]
    pub tuned_store: Option<std::path::PathBuf>,
}

impl ScheduleArgs {
    /// Installs the choice for this process ([`install`]), the device detected for `arch`.
    pub fn install(&self, arch: Arch) -> Result<(), StoreError> {
        let device = match self.schedule {
            ScheduleChoice::Default => None,
            ScheduleChoice::Tuned => detect_device(arch),
        };
        install(self.schedule, self.tuned_store.as_deref(), device)
    }
}

struct Selector {
    store: Store,
    device: Option<String>,
    said: Mutex<HashSet<String>>,
}

static SELECTOR: RwLock<Option<Selector>> = RwLock::new(None);

/// The stores merged in order (committed, cache directory, `explicit`), and notes on those that
/// could not be read. Only an unreadable `explicit` store is an error.
pub fn load_stores(explicit: Option<&Path>) -> Result<(Store, Vec<String>), StoreError> {
    let mut notes = Vec::new();
    let mut store = Store::committed().unwrap_or_else(|e| {
        notes.push(format!("ignoring the committed store: {e}"));
        Store::default()
    });
    match Store::load(&Store::cache_path()) {
        Ok(s) => store.merge(s),
        Err(e) => notes.push(format!("ignoring the cache directory's store: {e}")),
    }
    if let Some(p) = explicit {
        // A store named on the command line must exist: a typo is not an empty store.
        std::fs::metadata(p).map_err(|source| StoreError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        store.merge(Store::load(p)?);
    }
    Ok((store, notes))
}

/// Installs `choice` for this process. With [`ScheduleChoice::Tuned`], reads the stores and uses
/// `device` (None: unknown, see [`Store::lookup`]); notes go to stderr.
pub fn install(
    choice: ScheduleChoice,
    explicit: Option<&Path>,
    device: Option<String>,
) -> Result<(), StoreError> {
    let selector = match choice {
        ScheduleChoice::Default => None,
        ScheduleChoice::Tuned => {
            let (store, notes) = load_stores(explicit)?;
            for n in notes {
                eprintln!("warning: {n}");
            }
            eprintln!(
                "schedule: tuned where the store has an entry ({} entries; device {})",
                store.entries.len(),
                device.as_deref().unwrap_or("unknown")
            );
            Some(Selector {
                store,
                device,
                said: Mutex::new(HashSet::new()),
            })
        }
    };
    *SELECTOR.write().unwrap_or_else(|e| e.into_inner()) = selector;
    Ok(())
}

/// The name of the device `arch` would run on here, when there is one (sm90: CUDA device 0).
pub fn detect_device(arch: Arch) -> Option<String> {
    match arch {
        Arch::Sm90 => {
            use wavefuse_runtime::Device as _;
            wavefuse_runtime::CudaDevice::new(0)
                .ok()
                .map(|d| d.info().name.clone())
        }
        Arch::Gfx906 => None,
    }
}

/// The installed selector's schedule for `kernel` at `shape` on `arch` (None: use the default),
/// saying once on stderr which it used.
pub fn tuned(kernel: &str, shape: &str, arch: Arch, ir: &Kernel) -> Option<Schedule> {
    let guard = SELECTOR.read().unwrap_or_else(|e| e.into_inner());
    let sel = guard.as_ref()?;
    let (schedule, note) = choose(&sel.store, kernel, shape, arch, sel.device.as_deref(), ir);
    let first = sel
        .said
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(format!("{kernel}@{shape}/{arch}"));
    if first {
        eprintln!("{note}");
    }
    schedule
}

/// The store's schedule for the key, if it still lowers, and a line saying what was used.
pub fn choose(
    store: &Store,
    kernel: &str,
    shape: &str,
    arch: Arch,
    device: Option<&str>,
    ir: &Kernel,
) -> (Option<Schedule>, String) {
    let what = format!("{kernel}@{shape} for {arch}");
    let (entry, whence) = match store.lookup(kernel, shape, arch.name(), device) {
        Lookup::Exact(e) => (e, format!("tuned on {}", e.key.device)),
        Lookup::OtherDevice(e) => (
            e,
            format!(
                "tuned on {} (this machine's device is unknown)",
                e.key.device
            ),
        ),
        Lookup::Missing(others) => {
            let also = if others.is_empty() {
                String::new()
            } else {
                format!("; entries exist for {}", others.join(", "))
            };
            let dev = device.unwrap_or("an unknown device");
            return (
                None,
                format!("schedule: default for {what} (no tuned entry for {dev}{also})"),
            );
        }
    };
    match lower(ir, arch, &entry.schedule) {
        Ok(_) => (
            Some(entry.schedule.clone()),
            format!(
                "schedule: tuned for {what} ({whence}, commit {})",
                entry.commit
            ),
        ),
        Err(e) => (
            None,
            format!("schedule: default for {what} (the tuned entry no longer lowers: {e})"),
        ),
    }
}
