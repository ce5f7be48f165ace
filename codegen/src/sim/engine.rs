//! The engine: lanes as green threads over the flat program, a seeded scheduler, rendezvous for
//! barriers and wave reductions, bounded waits, launches per rank, and the visibility checks.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use cranelift_entity::EntityRef;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wavefuse_ir::{Ordering, Scope};

use crate::lowered::{AtomicOp, LoweredKernel, ParamKind, Purpose, ReduceKind, Ty, peer_slot};

use super::clock::{Clock, Place, Release, Stamp, Time, narrower};
use super::eval::Fx;
use super::eval::{self, Ctx};
use super::finding::{FindingKind, Findings};
use super::memory::{HostView, Memory};
use super::program::{CBase, CMem, Inst, Program};
use super::{Granularity, Host, PeerTable, SimOptions};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum St {
    /// Not started (its workgroup waits for residency, or its rank is between launches).
    Idle,
    Ready,
    Barrier,
    Reduce,
    Wait,
    Done,
}

#[derive(Clone, Debug)]
struct Lane {
    pc: u32,
    st: St,
    time: Time,
    vc: Rc<Clock>,
    /// The last release fence: later atomic writes publish it.
    fence: Option<Rc<Release>>,
    /// Releases observed by relaxed atomic reads, for a later acquire fence.
    pending: Vec<Release>,
    /// Loads made by the current wait, its deadline (global step) and location.
    loads: u32,
    deadline: u64,
    wait_at: (u32, u32),
    /// Operand of the wave reduction this lane waits in.
    reduce: u32,
    /// Asynchronous copies (`Stmt::AsyncCopy`) of the open group, and the committed groups
    /// oldest first: (array, element, value) each, written into LDS at the wait that
    /// completes the group.
    copies_open: Vec<(usize, usize, u32)>,
    copies: std::collections::VecDeque<Vec<(usize, usize, u32)>>,
}

#[derive(Clone, Debug, Default)]
struct Group {
    arrived: u32,
    at: Option<u32>,
    finished: u32,
    left: u32,
}

#[derive(Debug)]
struct RankState {
    launch: u32,
    running: bool,
    lanes_left: u32,
    next_wg: u32,
    start_clock: Rc<Clock>,
    end_clock: Clock,
    last_joined: Option<Rc<Clock>>,
    delay_until: u64,
}

/// A set of small integers with O(1) insert, remove and uniform choice.
#[derive(Clone, Debug)]
struct IndexSet {
    items: Vec<u32>,
    pos: Vec<u32>,
}

impl IndexSet {
    fn new(n: usize) -> Self {
        IndexSet {
            items: Vec::new(),
            pos: vec![u32::MAX; n],
        }
    }

    fn insert(&mut self, x: u32) -> bool {
        if self.pos[x as usize] != u32::MAX {
            return false;
        }
        self.pos[x as usize] = self.items.len() as u32;
        self.items.push(x);
        true
    }

    fn remove(&mut self, x: u32) -> bool {
        let p = self.pos[x as usize];
        if p == u32::MAX {
            return false;
        }
        let last = self.items.pop().expect("non-empty");
        if last != x {
            self.items[p as usize] = last;
            self.pos[last as usize] = p;
        }
        self.pos[x as usize] = u32::MAX;
        true
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn pick(&self, rng: &mut ChaCha8Rng) -> u32 {
        self.items[rng.random_range(0..self.items.len())]
    }
}

/// Statistics of one run.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Scheduling decisions.
    pub steps: u64,
    /// Lane instructions executed (of the flat program).
    pub instructions: u64,
    /// Launches that completed, summed over ranks.
    pub launches_completed: u32,
    /// Whether the run stopped early on a structural defect (partial barrier, deadlock on
    /// barriers, out-of-bounds access) or at its step budget.
    pub aborted: bool,
    /// Whether the run stopped unfinished at its step budget ([`super::SimOptions::max_steps`]):
    /// a limit of the simulator, not a finding.
    pub step_limit: bool,
}

/// Bytes of one lane's state besides its registers and clock (for [`super::footprint`]): the
/// lane, its specials, its slots in the ready and parked sets, with margin.
pub(super) const LANE_BYTES: u64 = std::mem::size_of::<Lane>() as u64 + 64;

pub(super) struct Engine<'a> {
    k: &'a LoweredKernel,
    prog: &'a Program,
    opts: &'a SimOptions,
    host: &'a mut dyn Host,
    launches: u32,
    // Layout.
    tp: u32,
    grid: u32,
    wg_size: u32,
    wave_size: u32,
    waves_per_wg: u32,
    lanes_total: u32,
    nregs: usize,
    pub(super) mem: Memory,
    lanes: Vec<Lane>,
    regs: Vec<u32>,
    wgs: Vec<Group>,
    phases: Vec<u32>,
    waves: Vec<Group>,
    ranks: Vec<RankState>,
    ready_lanes: Vec<IndexSet>,
    ready_wgs: Vec<IndexSet>,
    wg_delay: Vec<u64>,
    sync: HashMap<(u32, u32), Vec<Release>>,
    waiters: HashMap<(u32, u32), Vec<u32>>,
    parked: IndexSet,
    next_deadline: u64,
    next_delay: u64,
    step: u64,
    /// Steps skipped by stalls (spinning waits burning their budget with nothing else to run).
    skipped: u64,
    rng: ChaCha8Rng,
    pub(super) findings: Findings,
    aborted: bool,
    step_limit: bool,
    fault: Cell<Option<&'static str>>,
    cands: Vec<u32>,
    completed: u32,
    insts: u64,
    /// Per lane: (local_id, wg_id, num_wgs, lane_id, wave_id) and the rank.
    specials: Vec<([u32; 5], u32)>,
    /// LDS elements with an asynchronous copy in flight, and the copying lane.
    in_flight: HashMap<(usize, usize), u32>,
}

fn is_acquire(o: Ordering) -> bool {
    matches!(o, Ordering::Acquire | Ordering::AcqRel | Ordering::SeqCst)
}

fn is_release(o: Ordering) -> bool {
    matches!(o, Ordering::Release | Ordering::AcqRel | Ordering::SeqCst)
}

/// Merge a release into a location's records: same scope and place join (a release sequence).
fn merge_release(list: &mut Vec<Release>, r: &Release) {
    match list
        .iter_mut()
        .find(|e| e.scope == r.scope && e.from == r.from)
    {
        Some(e) => e.clock.join(&r.clock),
        None => list.push(r.clone()),
    }
}

fn lane_ranges(mut lanes: Vec<u32>) -> String {
    lanes.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lanes.len() {
        let mut j = i;
        while j + 1 < lanes.len() && lanes[j + 1] == lanes[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            lanes[i].to_string()
        } else {
            format!("{}-{}", lanes[i], lanes[j])
        });
        i = j + 1;
    }
    let s = out.join(",");
    if lanes.len() == 1 {
        format!("lane {s}")
    } else {
        format!("lanes {s}")
    }
}

impl<'a> Engine<'a> {
    pub(super) fn new(
        k: &'a LoweredKernel,
        prog: &'a Program,
        opts: &'a SimOptions,
        host: &'a mut dyn Host,
        launches: u32,
    ) -> Self {
        let (tp, grid, wg_size, wave_size) = (k.tp, k.grid, k.workgroup_size, k.wave_size());
        let waves_per_wg = wg_size.div_ceil(wave_size);
        let slots_wg = (tp * grid) as usize;
        let lanes_total = tp * grid * wg_size;
        let clock_slots = slots_wg + tp as usize;
        let table = (0..tp)
            .map(|r| {
                (0..tp as usize)
                    .map(|s| match opts.peer_table {
                        PeerTable::Shared => (0..tp)
                            .find(|&p| peer_slot(p) == s)
                            .expect("peer_slot is a bijection"),
                        PeerTable::Rotated => (r + s as u32) % tp,
                    })
                    .collect()
            })
            .collect();
        let fresh = Rc::new(Clock::new(clock_slots));
        let lane = Lane {
            pc: 0,
            st: St::Idle,
            time: 0,
            vc: fresh.clone(),
            fence: None,
            pending: Vec::new(),
            loads: 0,
            deadline: 0,
            wait_at: (0, 0),
            reduce: 0,
            copies_open: Vec::new(),
            copies: Default::default(),
        };
        let ranks = (0..tp)
            .map(|_| RankState {
                launch: 0,
                running: false,
                lanes_left: 0,
                next_wg: 0,
                start_clock: fresh.clone(),
                end_clock: Clock::new(clock_slots),
                last_joined: None,
                delay_until: 0,
            })
            .collect();
        let nregs = prog.num_regs.max(1);
        Engine {
            k,
            prog,
            opts,
            host,
            launches,
            tp,
            grid,
            wg_size,
            wave_size,
            waves_per_wg,
            lanes_total,
            nregs,
            mem: Memory::new(k, table, &opts.preset),
            lanes: vec![lane; lanes_total as usize],
            regs: vec![0; lanes_total as usize * nregs],
            wgs: vec![Group::default(); slots_wg],
            phases: vec![0; clock_slots],
            waves: vec![Group::default(); slots_wg * waves_per_wg as usize],
            ranks,
            ready_lanes: vec![IndexSet::new(wg_size as usize); slots_wg],
            ready_wgs: vec![IndexSet::new(grid as usize); tp as usize],
            wg_delay: vec![0; slots_wg],
            sync: HashMap::new(),
            waiters: HashMap::new(),
            parked: IndexSet::new(lanes_total as usize),
            next_deadline: u64::MAX,
            next_delay: u64::MAX,
            step: 0,
            skipped: 0,
            rng: ChaCha8Rng::seed_from_u64(opts.seed),
            findings: Findings::default(),
            aborted: false,
            step_limit: false,
            fault: Cell::new(None),
            cands: Vec::with_capacity(tp as usize),
            completed: 0,
            insts: 0,
            specials: (0..lanes_total)
                .map(|a| {
                    let (slot, local) = (a / wg_size, a % wg_size);
                    (
                        [
                            local,
                            slot % grid,
                            grid,
                            local % wave_size,
                            local / wave_size,
                        ],
                        slot / grid,
                    )
                })
                .collect(),
            in_flight: HashMap::new(),
        }
    }

    /// Simulated time for spin budgets: scheduling steps plus steps skipped by stalls.
    fn now(&self) -> u64 {
        self.step + self.skipped
    }

    // ---- Layout. ----

    fn slot(&self, a: usize) -> usize {
        a / self.wg_size as usize
    }

    fn place(&self, a: usize) -> Place {
        let slot = self.slot(a) as u32;
        let local = a as u32 % self.wg_size;
        Place {
            rank: slot / self.grid,
            slot,
            wave: local / self.wave_size,
        }
    }

    fn wave_index(&self, a: usize) -> usize {
        let local = a as u32 % self.wg_size;
        self.slot(a) * self.waves_per_wg as usize + (local / self.wave_size) as usize
    }

    fn wave_len(&self, wave_in_wg: u32) -> u32 {
        (self.wg_size - wave_in_wg * self.wave_size).min(self.wave_size)
    }

    fn host_agent(&self, r: u32) -> u32 {
        self.lanes_total + r
    }

    fn host_slot(&self, r: u32) -> u32 {
        self.tp * self.grid + r
    }

    fn who(&self, agent: u32) -> String {
        if agent >= self.lanes_total {
            return format!("the host of rank {}", agent - self.lanes_total);
        }
        let slot = agent / self.wg_size;
        format!(
            "rank {} wg {} lane {}",
            slot / self.grid,
            slot % self.grid,
            agent % self.wg_size
        )
    }

    /// A statement, as a finding's site.
    fn site_key(&self, pc: u32) -> String {
        format!("pc {pc} `{}`", self.prog.text[pc as usize])
    }

    /// "rank r launch e wg g lane l: pc N `stmt`".
    fn site(&self, a: usize, pc: u32) -> String {
        let p = self.place(a);
        let launch = self.ranks[p.rank as usize].launch;
        format!(
            "rank {} launch {} wg {} lane {}: pc {pc} `{}`",
            p.rank,
            launch,
            p.slot % self.grid,
            a as u32 % self.wg_size,
            self.prog.text[pc as usize]
        )
    }

    // ---- The run. ----

    pub(super) fn run(&mut self) -> RunStats {
        if self.tp > 1 && self.opts.skew.max_rank_delay > 0 && self.rng.random_range(0..2) == 0 {
            let r = self.rng.random_range(0..self.tp) as usize;
            self.ranks[r].delay_until = self.rng.random_range(0..=self.opts.skew.max_rank_delay);
        }
        self.schedule_next_delay();
        for r in 0..self.tp {
            self.start_launch(r);
        }
        loop {
            if self.aborted || self.ranks.iter().all(|r| !r.running) {
                break;
            }
            if self.step >= self.opts.max_steps {
                // A budget of the simulator, not a defect: every run ends by itself (counted
                // loops, bounded waits, deadlocks detected when no lane can run).
                self.step_limit = true;
                self.aborted = true;
                break;
            }
            if self.now() >= self.next_deadline {
                self.expire_waits();
            }
            if self.step >= self.next_delay {
                self.delay_someone();
            }
            match self.pick() {
                Some(a) => {
                    self.step_unit(a);
                    self.step += 1;
                }
                None => self.stall(),
            }
        }
        RunStats {
            steps: self.step,
            instructions: self.insts,
            launches_completed: self.completed,
            aborted: self.aborted,
            step_limit: self.step_limit,
        }
    }

    fn schedule_next_delay(&mut self) {
        let gap = self.opts.skew.mean_gap;
        let max = self
            .opts
            .skew
            .max_rank_delay
            .max(self.opts.skew.max_wg_delay);
        self.next_delay = if gap == 0 || max == 0 {
            u64::MAX
        } else {
            self.step + self.rng.random_range(1..=2 * gap)
        };
    }

    fn delay_someone(&mut self) {
        let sk = self.opts.skew;
        if self.tp > 1
            && sk.max_rank_delay > 0
            && (sk.max_wg_delay == 0 || self.rng.random_range(0..2) == 0)
        {
            let r = self.rng.random_range(0..self.tp) as usize;
            self.ranks[r].delay_until = self.step + self.rng.random_range(1..=sk.max_rank_delay);
        } else if sk.max_wg_delay > 0 {
            let s = self.rng.random_range(0..self.wgs.len());
            self.wg_delay[s] = self.step + self.rng.random_range(1..=sk.max_wg_delay);
        }
        self.schedule_next_delay();
    }

    /// A random ready lane: a rank that is not held back, a workgroup of it, a lane of that.
    fn pick(&mut self) -> Option<usize> {
        self.cands.clear();
        for r in 0..self.tp as usize {
            if !self.ready_wgs[r].is_empty() && self.ranks[r].delay_until <= self.step {
                self.cands.push(r as u32);
            }
        }
        if self.cands.is_empty() {
            for r in 0..self.tp as usize {
                if !self.ready_wgs[r].is_empty() {
                    self.cands.push(r as u32);
                }
            }
        }
        if self.cands.is_empty() {
            return None;
        }
        let r = self.cands[self.rng.random_range(0..self.cands.len())] as usize;
        let mut wg = self.ready_wgs[r].pick(&mut self.rng);
        for _ in 0..3 {
            if self.wg_delay[r * self.grid as usize + wg as usize] <= self.step {
                break;
            }
            wg = self.ready_wgs[r].pick(&mut self.rng);
        }
        let slot = r * self.grid as usize + wg as usize;
        let local = self.ready_lanes[slot].pick(&mut self.rng);
        Some(slot * self.wg_size as usize + local as usize)
    }

    fn step_unit(&mut self, a: usize) {
        match self.opts.granularity {
            Granularity::Lane => self.step_lane(a),
            Granularity::Wave => {
                let first = a - (a % self.wg_size as usize)
                    + (self.place(a).wave * self.wave_size) as usize;
                let len = self.wave_len(self.place(a).wave) as usize;
                for l in first..first + len {
                    if self.lanes[l].st == St::Ready && !self.aborted {
                        self.step_lane(l);
                    }
                }
            }
        }
    }

    fn set_state(&mut self, a: usize, st: St) {
        let old = self.lanes[a].st;
        self.lanes[a].st = st;
        if (old == St::Ready) == (st == St::Ready) {
            return;
        }
        let slot = self.slot(a);
        let local = (a % self.wg_size as usize) as u32;
        let rank = slot / self.grid as usize;
        let wg = (slot % self.grid as usize) as u32;
        if st == St::Ready {
            self.ready_lanes[slot].insert(local);
            self.ready_wgs[rank].insert(wg);
        } else {
            self.ready_lanes[slot].remove(local);
            if self.ready_lanes[slot].is_empty() {
                self.ready_wgs[rank].remove(wg);
            }
        }
    }

    /// Execute the lane's instruction (when it is a scheduling point), then its local
    /// instructions up to the next scheduling point.
    fn step_lane(&mut self, a: usize) {
        let prog = self.prog;
        let pc = self.lanes[a].pc;
        if prog.insts[pc as usize].is_yield() {
            self.exec(a, pc);
        }
        if self.lanes[a].st == St::Ready && !self.aborted {
            self.run_local(a);
        }
    }

    fn eval(&self, a: usize, e: &Fx) -> u32 {
        let cx = Ctx {
            regs: &self.regs[a * self.nregs..(a + 1) * self.nregs],
            scalars: &self.mem.scalars[self.specials[a].1 as usize],
            special: &self.specials[a].0,
            fault: &self.fault,
        };
        e(&cx)
    }

    fn check_fault(&mut self, a: usize, pc: u32) {
        if let Some(what) = self.fault.take() {
            let site = self.site(a, pc);
            self.findings
                .add(FindingKind::Arithmetic, self.site_key(pc), || {
                    format!("{site}: {what}")
                });
        }
    }

    fn run_local(&mut self, a: usize) {
        let prog = self.prog;
        loop {
            let pc = self.lanes[a].pc;
            self.insts += 1;
            match &prog.insts[pc as usize] {
                Inst::Assign { dst, value } => {
                    let v = self.eval(a, value);
                    self.regs[a * self.nregs + *dst as usize] = v;
                    self.lanes[a].pc += 1;
                }
                Inst::Jump(to) => self.lanes[a].pc = *to,
                Inst::BranchFalse { cond, to } => {
                    let c = self.eval(a, cond);
                    self.lanes[a].pc = if c != 0 { pc + 1 } else { *to };
                }
                Inst::Load {
                    dst,
                    mem,
                    local: true,
                } => {
                    self.load(a, pc, dst, mem);
                    self.lanes[a].pc += 1;
                }
                Inst::Prefetch { mem } => {
                    // Out of its array: a finding (and the run aborted), as for a load.
                    let _ = self.resolve(a, pc, mem, 1);
                    self.lanes[a].pc += 1;
                }
                Inst::End => {
                    self.finish(a);
                    return;
                }
                _ => return,
            }
            self.check_fault(a, pc);
            if self.aborted {
                return;
            }
        }
    }

    fn exec(&mut self, a: usize, pc: u32) {
        let prog = self.prog;
        match &prog.insts[pc as usize] {
            Inst::Load { dst, mem, .. } => {
                self.load(a, pc, dst, mem);
                self.lanes[a].pc += 1;
            }
            Inst::Store { mem, values } => {
                self.store(a, pc, mem, values);
                self.lanes[a].pc += 1;
            }
            Inst::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                scope,
            } => {
                self.atomic(a, pc, *dst, *op, mem, value.as_ref(), *ordering, *scope);
                self.lanes[a].pc += 1;
            }
            Inst::Fence { ordering, scope } => {
                self.fence(a, *ordering, *scope);
                self.lanes[a].pc += 1;
            }
            Inst::WaitGe {
                mem,
                target,
                ordering,
                scope,
                budget,
                error,
                code,
            } => {
                self.wait(a, pc, mem, target, *ordering, *scope, *budget, error, *code);
            }
            Inst::WaveReduce { value, .. } => {
                let v = self.eval(a, value);
                self.lanes[a].reduce = v;
                self.arrive_reduce(a, pc);
            }
            // The fragments stay in the waiting lanes' registers until the whole wave arrives.
            Inst::Mma { .. } => self.arrive_reduce(a, pc),
            Inst::Barrier => self.arrive_barrier(a, pc),
            Inst::AsyncCopy { dst, src, elems } => {
                self.async_copy(a, pc, dst, src, *elems as usize);
                self.lanes[a].pc += 1;
            }
            Inst::AsyncCommit => {
                let open = std::mem::take(&mut self.lanes[a].copies_open);
                self.lanes[a].copies.push_back(open);
                self.lanes[a].pc += 1;
            }
            Inst::AsyncWait { pending } => {
                while self.lanes[a].copies.len() > *pending as usize {
                    let group = self.lanes[a].copies.pop_front().expect("a group");
                    self.complete_copies(a, group);
                }
                self.lanes[a].pc += 1;
            }
            _ => unreachable!("not a scheduling point"),
        }
        self.check_fault(a, pc);
    }

    // ---- Memory accesses and the visibility checks. ----

    /// The array instance and first element of an access of `n` elements, or a finding.
    fn resolve(&mut self, a: usize, pc: u32, mem: &CMem, n: usize) -> Option<(usize, usize)> {
        let p = self.place(a);
        let arr = match &mem.base {
            CBase::Array(param) => self.mem.param_arrays[*param as usize][p.rank as usize],
            CBase::Peer(param, rank) => {
                let peer = self.eval(a, rank);
                if peer >= self.tp {
                    let site = self.site(a, pc);
                    let tp = self.tp;
                    self.findings
                        .add(FindingKind::OutOfBounds, self.site_key(pc), || {
                            format!("{site}: peer rank {peer} outside the group of {tp}")
                        });
                    self.aborted = true;
                    return None;
                }
                let owner = self.mem.peer_table[p.rank as usize][peer_slot(peer)];
                self.mem.param_arrays[*param as usize][owner as usize]
            }
            CBase::Lds(l) => self.mem.lds_base + p.slot as usize * self.mem.num_lds + *l as usize,
        };
        let index = self.eval(a, &mem.index) as usize;
        let len = self.mem.arrays[arr].vals.len();
        if index.checked_add(n).is_none_or(|end| end > len) {
            let site = self.site(a, pc);
            let name = self.mem.arrays[arr].name.clone();
            self.findings
                .add(FindingKind::OutOfBounds, self.site_key(pc), || {
                    format!(
                        "{site}: elements {index}..{} of {name}, which has {len}",
                        index as u64 + n as u64
                    )
                });
            self.aborted = true;
            return None;
        }
        Some((arr, index))
    }

    fn visible(&self, a: usize, s: &Stamp) -> bool {
        s.is_initial() || s.agent == a as u32 || self.lanes[a].vc.covers(s.agent, s.slot(), s.time)
    }

    fn check_read(&mut self, a: usize, pc: u32, arr: usize, e: usize) {
        if !self.in_flight.is_empty() {
            self.check_in_flight(a, pc, arr, e, "reads");
        }
        // LDS and written data arrays: the read recorded (the lane's last one replaces its
        // earlier ones) for the write-after-read check of the next write by another lane.
        if !self.mem.arrays[arr].reads.is_empty() {
            let stamp = self.stamp(a, false);
            let reads = &mut self.mem.arrays[arr].reads[e];
            match reads.iter_mut().find(|r| r.agent == a as u32) {
                Some(r) => *r = stamp,
                None => reads.push(stamp),
            }
        }
        let s = self.mem.arrays[arr].stamps[e];
        if s.is_uninit() {
            let site = self.site(a, pc);
            let name = &self.mem.arrays[arr].name;
            let msg = || {
                format!(
                    "{site}: reads {name}[{e}], which no lane of this workgroup wrote in this launch (LDS is workgroup-local, §5.2)"
                )
            };
            self.findings
                .add(FindingKind::UninitRead, self.site_key(pc), msg);
        } else if !self.visible(a, &s) {
            let site = self.site(a, pc);
            let name = &self.mem.arrays[arr].name;
            let writer = self.who(s.agent);
            let how = if s.atomic() {
                "atomically written"
            } else {
                "last written"
            };
            let msg = || {
                format!(
                    "{site}: reads {name}[{e}], {how} by {writer} with no release→acquire chain or barrier to this lane"
                )
            };
            self.findings
                .add(FindingKind::StaleRead, self.site_key(pc), msg);
        }
    }

    fn check_write(&mut self, a: usize, pc: u32, arr: usize, e: usize, race: bool) {
        if race && !self.in_flight.is_empty() {
            self.check_in_flight(a, pc, arr, e, "writes");
        }
        let array = &self.mem.arrays[arr];
        if array.read_only {
            let site = self.site(a, pc);
            let name = array.name.clone();
            self.findings
                .add(FindingKind::ReadOnlyWrite, self.site_key(pc), || {
                    format!("{site}: writes read-only {name}")
                });
        }
        let s = self.mem.arrays[arr].stamps[e];
        if race && !s.is_uninit() && !self.visible(a, &s) {
            let site = self.site(a, pc);
            let name = &self.mem.arrays[arr].name;
            let writer = self.who(s.agent);
            let msg = || {
                format!(
                    "{site}: writes {name}[{e}], last written by {writer} and not ordered before this write"
                )
            };
            self.findings
                .add(FindingKind::WriteRace, self.site_key(pc), msg);
        }
        // Write after read (LDS, written data arrays): every other lane's read of the element
        // since its last write must be ordered before this write (a barrier, a release→acquire
        // chain), or the reader may have read this write's value instead of the one it was
        // meant to (§5.2).
        if race && !self.mem.arrays[arr].reads.is_empty() {
            let reads = std::mem::take(&mut self.mem.arrays[arr].reads[e]);
            if let Some(r) = reads
                .iter()
                .find(|r| r.agent != a as u32 && !self.visible(a, r))
            {
                let site = self.site(a, pc);
                let name = &self.mem.arrays[arr].name;
                let reader = self.who(r.agent);
                let msg = || {
                    format!(
                        "{site}: writes {name}[{e}], read by {reader} with no barrier or release→acquire chain between that read and this write"
                    )
                };
                self.findings
                    .add(FindingKind::WriteRace, self.site_key(pc), msg);
            }
        }
    }

    fn stamp(&self, a: usize, atomic: bool) -> Stamp {
        Stamp::new(a as u32, self.slot(a) as u32, self.lanes[a].time, atomic)
    }

    fn load(&mut self, a: usize, pc: u32, dst: &[u32], mem: &CMem) {
        let Some((arr, first)) = self.resolve(a, pc, mem, dst.len()) else {
            return;
        };
        for (i, &d) in dst.iter().enumerate() {
            self.check_read(a, pc, arr, first + i);
            self.regs[a * self.nregs + d as usize] = self.mem.arrays[arr].vals[first + i];
        }
    }

    /// [`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy): the source is read now (it is
    /// read-only), the destination marked in flight until the lane's wait completes the group:
    /// any access to it before then is a finding, as is a second copy into it.
    fn async_copy(&mut self, a: usize, pc: u32, dst: &CMem, src: &CMem, n: usize) {
        let Some((from, first)) = self.resolve(a, pc, src, n) else {
            return;
        };
        let vals: Vec<u32> = (0..n)
            .map(|i| {
                self.check_read(a, pc, from, first + i);
                self.mem.arrays[from].vals[first + i]
            })
            .collect();
        let Some((to, at)) = self.resolve(a, pc, dst, n) else {
            return;
        };
        for (i, v) in vals.into_iter().enumerate() {
            let e = at + i;
            self.check_write(a, pc, to, e, true);
            self.in_flight.insert((to, e), a as u32);
            self.lanes[a].copies_open.push((to, e, v));
        }
    }

    /// A completed group's LDS words, written as the lane's stores at the wait.
    fn complete_copies(&mut self, a: usize, group: Vec<(usize, usize, u32)>) {
        let stamp = self.stamp(a, false);
        for (arr, e, v) in group {
            self.in_flight.remove(&(arr, e));
            self.mem.arrays[arr].vals[e] = v;
            self.mem.arrays[arr].stamps[e] = stamp;
            self.wake(arr, e);
        }
    }

    /// A finding where `arr[e]` has an asynchronous copy in flight (accessed before the wait
    /// that completes it).
    fn check_in_flight(&mut self, a: usize, pc: u32, arr: usize, e: usize, what: &str) {
        if let Some(&other) = self.in_flight.get(&(arr, e)) {
            let site = self.site(a, pc);
            let name = self.mem.arrays[arr].name.clone();
            let writer = self.who(other);
            let kind = if what == "reads" {
                FindingKind::StaleRead
            } else {
                FindingKind::WriteRace
            };
            self.findings.add(kind, self.site_key(pc), || {
                format!(
                    "{site}: {what} {name}[{e}] while an asynchronous copy of {writer} into it is in flight (no async_wait completed its group)"
                )
            });
        }
    }

    fn store(&mut self, a: usize, pc: u32, mem: &CMem, values: &[Fx]) {
        let vals: Vec<u32> = values.iter().map(|v| self.eval(a, v)).collect();
        let Some((arr, first)) = self.resolve(a, pc, mem, vals.len()) else {
            return;
        };
        let stamp = self.stamp(a, false);
        for (i, v) in vals.into_iter().enumerate() {
            self.check_write(a, pc, arr, first + i, true);
            self.mem.arrays[arr].vals[first + i] = v;
            self.mem.arrays[arr].stamps[first + i] = stamp;
            self.wake(arr, first + i);
        }
    }

    /// The lane's clock including its own writes so far: what a release publishes.
    fn lane_clock(&self, a: usize) -> Clock {
        let mut c = (*self.lanes[a].vc).clone();
        c.add_partial(a as u32, self.slot(a) as u32, self.lanes[a].time);
        c
    }

    fn acquire(&mut self, a: usize, key: (u32, u32), scope: Scope) {
        let me = self.place(a);
        let Some(list) = self.sync.get(&key) else {
            return;
        };
        let mut joined: Option<Clock> = None;
        for r in list {
            if r.from.shares(me, narrower(r.scope, scope)) {
                let mine = joined.as_ref().unwrap_or(&self.lanes[a].vc);
                if !mine.includes(&r.clock) {
                    joined
                        .get_or_insert_with(|| (*self.lanes[a].vc).clone())
                        .join(&r.clock);
                }
            }
        }
        if let Some(c) = joined {
            self.lanes[a].vc = Rc::new(c);
        }
    }

    fn note_relaxed_read(&mut self, a: usize, key: (u32, u32)) {
        if let Some(list) = self.sync.get(&key) {
            for r in list {
                merge_release(&mut self.lanes[a].pending, r);
            }
        }
    }

    /// Record the release side of an atomic write: a store starts a new release sequence, an RMW
    /// continues it.
    fn publish(
        &mut self,
        a: usize,
        key: (u32, u32),
        is_store: bool,
        ordering: Ordering,
        scope: Scope,
    ) {
        let rel = is_release(ordering).then(|| Release {
            scope,
            from: self.place(a),
            clock: self.lane_clock(a),
        });
        let fence = self.lanes[a].fence.clone();
        let list = self.sync.entry(key).or_default();
        if is_store {
            list.clear();
        }
        if let Some(r) = &rel {
            merge_release(list, r);
        }
        if let Some(f) = &fence {
            merge_release(list, f);
        }
        if rel.is_some() {
            self.lanes[a].time += 1;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        a: usize,
        pc: u32,
        dst: Option<u32>,
        op: AtomicOp,
        mem: &CMem,
        value: Option<&Fx>,
        ordering: Ordering,
        scope: Scope,
    ) {
        let operand = value.map(|v| self.eval(a, v));
        let Some((arr, e)) = self.resolve(a, pc, mem, 1) else {
            return;
        };
        let rank = self.place(a).rank;
        if matches!(op, AtomicOp::Add | AtomicOp::Max) && self.mem.arrays[arr].rank != rank {
            let site = self.site(a, pc);
            let name = self.mem.arrays[arr].name.clone();
            self.findings
                .add(FindingKind::PeerRmw, self.site_key(pc), || {
                    format!("{site}: RMW on {name} (§5.12)")
                });
        }
        let key = (arr as u32, e as u32);
        let old = self.mem.arrays[arr].vals[e];
        // Atomics never race with atomics; against a plain write they are checked like plain
        // accesses.
        let after_plain = !self.mem.arrays[arr].stamps[e].atomic();
        match op {
            AtomicOp::Load if after_plain => self.check_read(a, pc, arr, e),
            AtomicOp::Load => {}
            _ => self.check_write(a, pc, arr, e, after_plain),
        }
        if op != AtomicOp::Store {
            if is_acquire(ordering) {
                self.acquire(a, key, scope);
            } else {
                self.note_relaxed_read(a, key);
            }
            if let Some(d) = dst {
                self.regs[a * self.nregs + d as usize] = old;
            }
        }
        if op == AtomicOp::Load {
            return;
        }
        let v = operand.expect("checked at compile time");
        let elem = self.mem.arrays[arr].elem;
        let new = match op {
            AtomicOp::Store => v,
            AtomicOp::Add => eval::bin(crate::lowered::BinOp::Add, elem, old, v, &self.fault),
            AtomicOp::Max => eval::bin(crate::lowered::BinOp::Max, elem, old, v, &self.fault),
            AtomicOp::Load => unreachable!(),
        };
        let stamp = self.stamp(a, true);
        self.mem.arrays[arr].vals[e] = new;
        self.mem.arrays[arr].stamps[e] = stamp;
        self.publish(a, key, op == AtomicOp::Store, ordering, scope);
        self.wake(arr, e);
    }

    fn fence(&mut self, a: usize, ordering: Ordering, scope: Scope) {
        if is_acquire(ordering) && !self.lanes[a].pending.is_empty() {
            let me = self.place(a);
            let mut c = (*self.lanes[a].vc).clone();
            for r in &self.lanes[a].pending {
                if r.from.shares(me, narrower(r.scope, scope)) {
                    c.join(&r.clock);
                }
            }
            self.lanes[a].vc = Rc::new(c);
        }
        if is_release(ordering) {
            let r = Release {
                scope,
                from: self.place(a),
                clock: self.lane_clock(a),
            };
            self.lanes[a].fence = Some(Rc::new(r));
            self.lanes[a].time += 1;
        }
    }

    // ---- Bounded waits. ----

    #[allow(clippy::too_many_arguments)]
    fn wait(
        &mut self,
        a: usize,
        pc: u32,
        mem: &CMem,
        target: &Fx,
        ordering: Ordering,
        scope: Scope,
        budget: u32,
        error: &CMem,
        code: u32,
    ) {
        let t = self.eval(a, target);
        let Some((arr, e)) = self.resolve(a, pc, mem, 1) else {
            return;
        };
        if !self.mem.arrays[arr].stamps[e].atomic() {
            self.check_read(a, pc, arr, e);
        }
        let key = (arr as u32, e as u32);
        let v = self.mem.arrays[arr].vals[e];
        self.lanes[a].loads += 1;
        if v.wrapping_sub(t) as i32 >= 0 {
            // The wait synchronises through the load that satisfies it (earlier loads of the
            // spin are not credited: stricter, never more lenient, than crediting every load).
            if is_acquire(ordering) {
                self.acquire(a, key, scope);
            } else {
                self.note_relaxed_read(a, key);
            }
            self.lanes[a].loads = 0;
            self.lanes[a].pc += 1;
            return;
        }
        let budget = budget.min(self.opts.spin_budget).max(1);
        if self.lanes[a].loads >= budget {
            self.time_out(a, pc, error, code, v, t);
            return;
        }
        let deadline = self.now() + u64::from(budget - self.lanes[a].loads);
        self.lanes[a].deadline = deadline;
        self.lanes[a].wait_at = key;
        self.next_deadline = self.next_deadline.min(deadline);
        self.waiters.entry(key).or_default().push(a as u32);
        self.parked.insert(a as u32);
        self.set_state(a, St::Wait);
    }

    fn time_out(&mut self, a: usize, pc: u32, error: &CMem, code: u32, value: u32, target: u32) {
        let site = self.site(a, pc);
        let epoch = self
            .k
            .epoch
            .map(|p| self.mem.scalars[self.place(a).rank as usize][p.index()]);
        let epoch = epoch.map(|e| format!(" (epoch {e})")).unwrap_or_default();
        self.findings.add(FindingKind::Timeout, self.site_key(pc), || {
            format!("{site}{epoch}: the location holds {value}, the wait needs {target}; error word := {code}")
        });
        self.lanes[a].loads = 0;
        if let Some((arr, e)) = self.resolve(a, pc, error, 1) {
            let stamp = self.stamp(a, true);
            self.mem.arrays[arr].vals[e] = code;
            self.mem.arrays[arr].stamps[e] = stamp;
            self.publish(
                a,
                (arr as u32, e as u32),
                true,
                Ordering::Relaxed,
                Scope::System,
            );
            self.wake(arr, e);
        }
        self.lanes[a].pc = pc + 1;
    }

    fn wake(&mut self, arr: usize, e: usize) {
        if self.waiters.is_empty() {
            return;
        }
        if let Some(ws) = self.waiters.remove(&(arr as u32, e as u32)) {
            for l in ws {
                if self.lanes[l as usize].st == St::Wait {
                    self.parked.remove(l);
                    self.set_state(l as usize, St::Ready);
                }
            }
        }
    }

    /// Time out every parked wait whose budget is spent by now.
    fn expire_waits(&mut self) {
        let now = self.now();
        let expired: Vec<u32> = self
            .parked
            .items
            .iter()
            .copied()
            .filter(|&l| self.lanes[l as usize].deadline <= now)
            .collect();
        for l in expired {
            let a = l as usize;
            self.parked.remove(l);
            let key = self.lanes[a].wait_at;
            if let Some(ws) = self.waiters.get_mut(&key) {
                ws.retain(|&x| x != l);
            }
            let pc = self.lanes[a].pc;
            let Inst::WaitGe {
                mem,
                target,
                error,
                code,
                ..
            } = &self.prog.insts[pc as usize]
            else {
                unreachable!("parked lanes sit at a wait")
            };
            let t = self.eval(a, target);
            let v = self
                .resolve(a, pc, mem, 1)
                .map_or(0, |(arr, e)| self.mem.arrays[arr].vals[e]);
            self.time_out(a, pc, error, *code, v, t);
            self.set_state(a, St::Ready);
        }
        self.next_deadline = self
            .parked
            .items
            .iter()
            .map(|&l| self.lanes[l as usize].deadline)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// No lane can run: report who waits where; spinning waits then run out of budget.
    fn stall(&mut self) {
        let (key, text) = self.describe_blocked();
        let spinning = !self.parked.is_empty();
        let msg = || {
            let tail = if spinning {
                "; the spinning waits run out of budget"
            } else {
                ""
            };
            format!("no lane can run: {text}{tail}")
        };
        self.findings.add(FindingKind::Deadlock, key, msg);
        if spinning {
            let first = self
                .parked
                .items
                .iter()
                .map(|&l| self.lanes[l as usize].deadline)
                .min()
                .expect("parked");
            self.skipped += first.saturating_sub(self.now());
            self.expire_waits();
        } else {
            self.aborted = true;
        }
    }

    fn describe_blocked(&self) -> (String, String) {
        let mut groups: Vec<((u32, u32, u32), Vec<u32>)> = Vec::new();
        for (a, l) in self.lanes.iter().enumerate() {
            if matches!(l.st, St::Barrier | St::Reduce | St::Wait) {
                let slot = self.slot(a) as u32;
                let g = (slot, l.pc, 0);
                match groups.iter_mut().find(|(k, _)| *k == g) {
                    Some((_, v)) => v.push(a as u32 % self.wg_size),
                    None => groups.push((g, vec![a as u32 % self.wg_size])),
                }
            }
        }
        let mut key: Vec<u32> = groups.iter().map(|((_, pc, _), _)| *pc).collect();
        key.sort_unstable();
        key.dedup();
        let parts: Vec<String> = groups
            .iter()
            .take(8)
            .map(|((slot, pc, _), lanes)| {
                let first = (*slot * self.wg_size + lanes[0]) as usize;
                let extra = match &self.prog.insts[*pc as usize] {
                    Inst::WaitGe { mem, target, .. } => {
                        let t = self.eval(first, target);
                        let v = self
                            .peek(first, mem)
                            .map(|v| v.to_string())
                            .unwrap_or("?".into());
                        format!(" (holds {v}, needs {t})")
                    }
                    _ => String::new(),
                };
                format!(
                    "rank {} wg {} {} at pc {pc} `{}`{extra}",
                    slot / self.grid,
                    slot % self.grid,
                    lane_ranges(lanes.clone()),
                    self.prog.text[*pc as usize]
                )
            })
            .collect();
        let more = if groups.len() > 8 {
            format!("; … {} more groups", groups.len() - 8)
        } else {
            String::new()
        };
        (
            format!("waits at pcs {key:?}"),
            format!("{}{more}", parts.join("; ")),
        )
    }

    /// A location's value without side effects (for messages).
    fn peek(&self, a: usize, mem: &CMem) -> Option<u32> {
        let p = self.place(a);
        let arr = match &mem.base {
            CBase::Array(param) => self.mem.param_arrays[*param as usize][p.rank as usize],
            CBase::Peer(param, rank) => {
                let peer = self.eval(a, rank);
                let owner = *self.mem.peer_table[p.rank as usize].get(peer_slot(peer))?;
                self.mem.param_arrays[*param as usize][owner as usize]
            }
            CBase::Lds(l) => self.mem.lds_base + p.slot as usize * self.mem.num_lds + *l as usize,
        };
        self.mem.arrays[arr]
            .vals
            .get(self.eval(a, &mem.index) as usize)
            .copied()
    }

    // ---- Rendezvous. ----

    fn partial(&mut self, a: usize, pc: u32, what: &str) {
        let slot = self.slot(a);
        let mut at: Vec<String> = Vec::new();
        let base = slot * self.wg_size as usize;
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        for l in base..base + self.wg_size as usize {
            let lane = &self.lanes[l];
            let where_ = match lane.st {
                St::Done => "finished".to_owned(),
                St::Barrier | St::Reduce | St::Wait => {
                    format!("at pc {} `{}`", lane.pc, self.prog.text[lane.pc as usize])
                }
                _ => continue,
            };
            match groups.iter_mut().find(|(w, _)| *w == where_) {
                Some((_, v)) => v.push((l - base) as u32),
                None => groups.push((where_, vec![(l - base) as u32])),
            }
        }
        for (w, lanes) in groups {
            at.push(format!("{} {w}", lane_ranges(lanes)));
        }
        let site = self.site(a, pc);
        let what = what.to_owned();
        self.findings
            .add(FindingKind::PartialBarrier, self.site_key(pc), || {
                format!("{site}: {what}; {}", at.join("; "))
            });
        self.aborted = true;
    }

    fn arrive_barrier(&mut self, a: usize, pc: u32) {
        self.set_state(a, St::Barrier);
        let slot = self.slot(a);
        let g = &self.wgs[slot];
        if g.finished > 0 || g.at.is_some_and(|p| p != pc) {
            self.partial(
                a,
                pc,
                "workgroup barrier reached by part of the workgroup (§5.8)",
            );
            return;
        }
        let g = &mut self.wgs[slot];
        g.at = Some(pc);
        g.arrived += 1;
        if g.arrived == self.wg_size {
            self.complete_barrier(slot);
        }
    }

    fn complete_barrier(&mut self, slot: usize) {
        self.wgs[slot].arrived = 0;
        self.wgs[slot].at = None;
        self.phases[slot] += 1;
        let phase = self.phases[slot];
        let base = slot * self.wg_size as usize;
        let mut joined = (*self.lanes[base].vc).clone();
        let mut last = Rc::as_ptr(&self.lanes[base].vc);
        for l in base + 1..base + self.wg_size as usize {
            let vc = &self.lanes[l].vc;
            if Rc::as_ptr(vc) != last {
                if !joined.includes(vc) {
                    joined.join(vc);
                }
                last = Rc::as_ptr(vc);
            }
        }
        joined.full[slot] = phase;
        joined.prune();
        let shared = Rc::new(joined);
        for l in base..base + self.wg_size as usize {
            let lane = &mut self.lanes[l];
            lane.vc = shared.clone();
            lane.time = u64::from(phase) << 32;
            lane.pc += 1;
            self.set_state(l, St::Ready);
        }
    }

    fn arrive_reduce(&mut self, a: usize, pc: u32) {
        self.set_state(a, St::Reduce);
        let w = self.wave_index(a);
        let g = &self.waves[w];
        if g.finished > 0 || g.at.is_some_and(|p| p != pc) {
            self.partial(a, pc, "wave reduction reached by part of the wave");
            return;
        }
        let g = &mut self.waves[w];
        g.at = Some(pc);
        g.arrived += 1;
        let len = self.wave_len(self.place(a).wave);
        if self.waves[w].arrived == len {
            self.complete_reduce(a, pc, len);
        }
    }

    fn complete_reduce(&mut self, a: usize, pc: u32, len: u32) {
        if let Inst::Mma { acc, a: fa, b: fb } = &self.prog.insts[pc as usize] {
            return self.complete_mma(a, pc, len, *acc, *fa, *fb);
        }
        let Inst::WaveReduce { dst, op, ty, .. } = &self.prog.insts[pc as usize] else {
            unreachable!()
        };
        let (dst, op, ty) = (*dst, *op, *ty);
        let w = self.wave_index(a);
        self.waves[w].arrived = 0;
        self.waves[w].at = None;
        let first =
            a - (a % self.wg_size as usize) + (self.place(a).wave * self.wave_size) as usize;
        let identity = match (op, ty) {
            (ReduceKind::Sum, Ty::F32 | Ty::F16) => 0f32.to_bits(),
            (ReduceKind::Sum, _) => 0,
            (ReduceKind::Max, Ty::F32 | Ty::F16) => f32::NEG_INFINITY.to_bits(),
            (ReduceKind::Max, Ty::U32) => 0,
            (ReduceKind::Max, _) => i32::MIN as u32,
        };
        let width = self.wave_size.next_power_of_two() as usize;
        let mut v: Vec<u32> = (0..width)
            .map(|i| {
                if i < len as usize {
                    self.lanes[first + i].reduce
                } else {
                    identity
                }
            })
            .collect();
        let bop = match op {
            ReduceKind::Sum => crate::lowered::BinOp::Add,
            ReduceKind::Max => crate::lowered::BinOp::Max,
        };
        // A butterfly (xor-shuffle) tree, as DPP / shfl_xor reductions do: every lane ends with
        // the same bits.
        let mut off = width / 2;
        while off >= 1 {
            v = (0..width)
                .map(|i| eval::bin(bop, ty, v[i], v[i ^ off], &self.fault))
                .collect();
            off /= 2;
        }
        for (i, &result) in v.iter().enumerate().take(len as usize) {
            let l = first + i;
            self.regs[l * self.nregs + dst as usize] = result;
            self.lanes[l].pc += 1;
            self.set_state(l, St::Ready);
        }
    }

    /// `acc += A·B` over the wave's fragments (the layout of [`crate::lowered::Stmt::MmaF16`]),
    /// products exact, sums in f32 in k order.
    fn complete_mma(
        &mut self,
        a: usize,
        pc: u32,
        len: u32,
        acc: [u32; 4],
        fa: [u32; 4],
        fb: [u32; 2],
    ) {
        let w = self.wave_index(a);
        self.waves[w].arrived = 0;
        self.waves[w].at = None;
        let first =
            a - (a % self.wg_size as usize) + (self.place(a).wave * self.wave_size) as usize;
        if len != 32 {
            self.partial(a, pc, "mma needs a full 32-lane wave");
            return;
        }
        let reg = |s: &Self, lane: usize, r: u32| s.regs[(first + lane) * s.nregs + r as usize];
        let (mut am, mut bm) = ([[0f32; 16]; 16], [[0f32; 8]; 16]);
        for l in 0..32 {
            let (g, t) = (l / 4, l % 4);
            let pairs: Vec<[f32; 2]> = fa
                .iter()
                .map(|&r| eval::unpack_half2(reg(self, l, r)))
                .collect();
            for (i, (row, col)) in [
                (g, 2 * t),
                (g + 8, 2 * t),
                (g, 2 * t + 8),
                (g + 8, 2 * t + 8),
            ]
            .into_iter()
            .enumerate()
            {
                am[row][col] = pairs[i][0];
                am[row][col + 1] = pairs[i][1];
            }
            for (i, k) in [2 * t, 2 * t + 8].into_iter().enumerate() {
                let p = eval::unpack_half2(reg(self, l, fb[i]));
                bm[k][g] = p[0];
                bm[k + 1][g] = p[1];
            }
        }
        let mut out = vec![[0u32; 4]; 32];
        for (l, o) in out.iter_mut().enumerate() {
            let (g, t) = (l / 4, l % 4);
            for (i, (row, col)) in [
                (g, 2 * t),
                (g, 2 * t + 1),
                (g + 8, 2 * t),
                (g + 8, 2 * t + 1),
            ]
            .into_iter()
            .enumerate()
            {
                let mut d = f32::from_bits(reg(self, l, acc[i]));
                for k in 0..16 {
                    d += am[row][k] * bm[k][col];
                }
                o[i] = d.to_bits();
            }
        }
        for (l, o) in out.iter().enumerate() {
            for i in 0..4 {
                self.regs[(first + l) * self.nregs + acc[i] as usize] = o[i];
            }
            self.lanes[first + l].pc += 1;
            self.set_state(first + l, St::Ready);
        }
    }

    // ---- Lanes finishing, launches. ----

    fn finish(&mut self, a: usize) {
        self.set_state(a, St::Done);
        // Copies never waited for write nothing anyone may read: the LDS ends with the
        // workgroup.
        let lane = &mut self.lanes[a];
        let left: Vec<_> = lane
            .copies
            .drain(..)
            .flatten()
            .chain(lane.copies_open.drain(..))
            .collect();
        for (arr, e, _) in left {
            self.in_flight.remove(&(arr, e));
        }
        let slot = self.slot(a);
        let w = self.wave_index(a);
        self.wgs[slot].finished += 1;
        self.waves[w].finished += 1;
        let pc = self.lanes[a].pc;
        if self.wgs[slot].arrived > 0 {
            self.partial(
                a,
                pc,
                "a lane finished while others of its workgroup wait at a barrier (§5.8)",
            );
            return;
        }
        if self.waves[w].arrived > 0 {
            self.partial(
                a,
                pc,
                "a lane finished while others of its wave wait in a wave reduction",
            );
            return;
        }
        let rank = slot / self.grid as usize;
        // What the lane knew joins the rank's end-of-launch clock (its own writes are covered by
        // the kernel boundary); lanes that share a clock join once.
        let vc = &self.lanes[a].vc;
        if !self.ranks[rank]
            .last_joined
            .as_ref()
            .is_some_and(|l| Rc::ptr_eq(l, vc))
        {
            let vc = vc.clone();
            if !self.ranks[rank].end_clock.includes(&vc) {
                self.ranks[rank].end_clock.join(&vc);
            }
            self.ranks[rank].last_joined = Some(vc);
        }
        self.wgs[slot].left -= 1;
        if self.wgs[slot].left == 0 && self.ranks[rank].next_wg < self.grid {
            let next = rank * self.grid as usize + self.ranks[rank].next_wg as usize;
            self.ranks[rank].next_wg += 1;
            self.start_wg(next);
        }
        self.ranks[rank].lanes_left -= 1;
        if self.ranks[rank].lanes_left == 0 {
            self.end_launch(rank as u32);
        }
    }

    fn host_view(&mut self, r: u32) -> (HostView<'_>, &mut dyn Host) {
        let launch = self.ranks[r as usize].launch;
        let stamp = Stamp::new(
            self.host_agent(r),
            self.host_slot(r),
            u64::from(launch) << 32,
            false,
        );
        (
            HostView {
                mem: &mut self.mem,
                kernel: self.k,
                rank: r,
                stamp,
            },
            &mut *self.host,
        )
    }

    fn start_launch(&mut self, r: u32) {
        let launch = self.ranks[r as usize].launch;
        for (p, d) in self.k.params.iter() {
            if let ParamKind::Scalar { purpose, .. } = &d.kind {
                let v = match purpose {
                    Purpose::Rank => r,
                    Purpose::Epoch => self.opts.first_epoch.wrapping_add(launch),
                    _ => continue,
                };
                self.mem.scalars[r as usize][p.index()] = v;
            }
        }
        let (mut view, host) = self.host_view(r);
        host.before_launch(launch, &mut view);
        // The kernel boundary: everything this rank did and knew happens before the new launch.
        let mut c = self.ranks[r as usize].end_clock.clone();
        for wg in 0..self.grid {
            let slot = (r * self.grid + wg) as usize;
            self.phases[slot] += 1;
            c.full[slot] = self.phases[slot];
            self.mem.reset_lds(slot);
        }
        let hs = self.host_slot(r) as usize;
        c.full[hs] = launch + 1;
        c.prune();
        self.ranks[r as usize].end_clock = c.clone();
        let rs = &mut self.ranks[r as usize];
        rs.start_clock = Rc::new(c);
        rs.running = true;
        rs.lanes_left = self.grid * self.wg_size;
        // A real device starts at most its capacity of workgroups and the next one when one
        // finishes: a wait on a workgroup that is not resident never returns (§5.9).
        let resident = self
            .opts
            .resident_workgroups
            .unwrap_or_else(|| {
                self.k
                    .device_capacity(crate::lowered::Occupancy::HardwareMax)
            })
            .clamp(1, self.grid);
        rs.next_wg = resident;
        for wg in 0..resident {
            self.start_wg((r * self.grid + wg) as usize);
        }
    }

    fn start_wg(&mut self, slot: usize) {
        let rank = slot / self.grid as usize;
        self.wgs[slot] = Group {
            left: self.wg_size,
            ..Group::default()
        };
        for w in 0..self.waves_per_wg as usize {
            self.waves[slot * self.waves_per_wg as usize + w] = Group::default();
        }
        let clock = self.ranks[rank].start_clock.clone();
        let time = u64::from(self.phases[slot]) << 32;
        let base = slot * self.wg_size as usize;
        for l in base..base + self.wg_size as usize {
            let lane = &mut self.lanes[l];
            lane.pc = 0;
            lane.time = time;
            lane.vc = clock.clone();
            lane.fence = None;
            lane.pending.clear();
            lane.loads = 0;
            lane.copies_open.clear();
            lane.copies.clear();
            self.regs[l * self.nregs..(l + 1) * self.nregs].fill(0);
            self.set_state(l, St::Ready);
        }
    }

    fn end_launch(&mut self, r: u32) {
        let launch = self.ranks[r as usize].launch;
        if let Some(p) = self.k.error_word {
            let arr = self.mem.param_arrays[p.index()][r as usize];
            let code = self.mem.arrays[arr].vals[0];
            if code != 0 {
                let epoch = self.opts.first_epoch.wrapping_add(launch);
                let name = self.k.name.clone();
                self.findings.add(FindingKind::ErrorWord, format!("error word {code}"), || {
                    format!("rank {r}: barrier timeout in kernel {name}, epoch {epoch} (error word = {code})")
                });
            }
        }
        let error_word = self.k.error_word;
        let (mut view, host) = self.host_view(r);
        host.after_launch(launch, &mut view);
        if let Some(p) = error_word {
            view.write_bits(p, 0, 0);
        }
        self.completed += 1;
        let rs = &mut self.ranks[r as usize];
        rs.launch += 1;
        rs.running = false;
        if rs.launch < self.launches {
            self.start_launch(r);
        }
    }
}
