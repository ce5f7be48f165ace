//! Where generated code's schedules come from (`--schedule default|tuned [--tuned-store PATH]`,
//! parsed by the cli into a [`SchedulePolicy`](crate::policy::SchedulePolicy) value with [`tuned_for`] and [`detect_device`]).
//!
//! `default` (the default) is the target's default ([`wavefuse_codegen::lower::defaults`]);
//! `tuned` consults the stores (see [`super::store`]) for the device found here; the policy's
//! note ([`SchedulePolicy::note`](crate::policy::SchedulePolicy::note)) says on stderr, once per
//! kernel and shape, which schedule it used and why.

use std::path::Path;

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::Schedule;

use super::store::{Lookup, Store, StoreError};

/// Which schedule generated code uses.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScheduleChoice {
    /// The target's default.
    #[default]
    Default,
    /// The tuned-schedule store's entry for this kernel, shape, arch and device when there is one,
    /// else the default.
    Tuned,
}

/// A tuned-schedule store and the device it is consulted for.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// The merged stores.
    pub store: Store,
    /// The device name to look entries up for (None: unknown).
    pub device: Option<String>,
}

impl Tuned {
    /// A store consulted for `device`.
    pub fn new(store: Store, device: Option<String>) -> Tuned {
        Tuned { store, device }
    }
}

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

/// The tuned part of a policy for `choice`: with [`ScheduleChoice::Tuned`], the stores merged
/// ([`load_stores`]) for `device` (None: unknown, see [`Store::lookup`]); notes go to stderr.
pub fn tuned_for(
    choice: ScheduleChoice,
    explicit: Option<&Path>,
    device: Option<String>,
) -> Result<Option<Tuned>, StoreError> {
    match choice {
        ScheduleChoice::Default => Ok(None),
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
            Ok(Some(Tuned::new(store, device)))
        }
    }
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

/// What a tuned store holds for one kernel, shape and target.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// An entry: codegen uses its schedule when it still lowers
    /// ([`ScheduleSource::Preferred`](wavefuse_codegen::lower::ScheduleSource::Preferred)).
    Entry {
        /// The tuned schedule.
        schedule: Schedule,
        /// `kernel@shape for arch`, for the line when the entry no longer lowers.
        what: String,
        /// The line saying it was used.
        used: String,
    },
    /// None: the line saying the default is used, and why.
    Missing(String),
}

/// The store's entry for the key (looked up only: codegen decides whether it still lowers).
pub fn lookup(
    store: &Store,
    kernel: &str,
    shape: &str,
    arch: Arch,
    device: Option<&str>,
) -> Choice {
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
            return Choice::Missing(format!(
                "schedule: default for {what} (no tuned entry for {dev}{also})"
            ));
        }
    };
    Choice::Entry {
        schedule: entry.schedule.clone(),
        used: format!(
            "schedule: tuned for {what} ({whence}, commit {})",
            entry.commit
        ),
        what,
    }
}
