//! One sample's address stack → interned profile frames, root first: the thread's root, the
//! user stack (JIT code through the JIT index, HotSpot interpreted frames by their method,
//! native code through the symbolizer), then the kernel stack. What repeats across samples
//! (roots, addresses, kernel symbols) is cached.

use std::borrow::Cow;

use super::depth::{self, StackDepths};
use super::frame_cache::{self, FrameCache};
use super::interpreted::INTERPRETER;
use super::jit_index::{self, JitIndex};
use super::kernel::KERNEL_MODULE;
use super::lookup::user_frames;
use super::lookup::Symbolizer;
use super::native::BinaryCache;
use super::process::ProcessModel;
use super::unwind::AddressStack;
use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample, ThreadInfo};

/// One sample with its address stack, as the walk hands it on.
pub(super) struct SampleStack {
    /// File offset of the sample record's header (the key of embedded stacks).
    pub offset: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    /// A switch-out of `record --off-cpu` (period: ns off the CPU).
    pub off_cpu: bool,
    /// Per user-stack entry, the `Method*` of a HotSpot interpreted frame (empty when the
    /// process named no VM methods).
    pub interpreted: Vec<Option<u64>>,
    /// The callchain's user part, before unwinding.
    pub callchain_user: Vec<u64>,
    pub stack: AddressStack,
    /// Where the recording says the stack may have been cut short (it may still be whole).
    pub cut: Option<depth::Cut>,
    /// The cut a report of the recording with its stacks embedded finds (the unwinding's own
    /// end of copy is then not known): what the embedding stores.
    pub cut_when_embedded: Option<depth::Cut>,
}

impl SampleStack {
    /// A kernel thread's sample (`-a`: the idle tasks, kworkers): no user callchain nor user
    /// frames, so no user stack to be whole or cut; left out of the depth counts.
    pub fn of_kernel_thread(&self) -> bool {
        self.callchain_user.is_empty() && self.stack.user.is_empty()
    }
}

pub(super) struct StackBuilder<'a> {
    pub profile: Profile,
    pub symbolizer: Symbolizer<'a>,
    /// Kernel frames seen (for the notes).
    pub kernel_frames: u64,
    /// How deep the stacks reach, per process (for the notes).
    pub depths: StackDepths,
    jit: &'a JitIndex,
    cache: FrameCache,
    /// Repeats of one unmapped address cut from looping frame chains.
    looped_frames: u64,
    /// Only samples of this thread (`--tid`).
    only_tid: Option<u32>,
    /// Only samples of threads of this name (`--comm`).
    only_comm: Option<&'a str>,
}

impl<'a> StackBuilder<'a> {
    /// A builder adding to `profile` the samples of thread `only_tid` and of threads named
    /// `only_comm` (every sample when both are None).
    pub fn new(
        profile: Profile,
        symbolizer: Symbolizer<'a>,
        jit: &'a JitIndex,
        only_tid: Option<u32>,
        only_comm: Option<&'a str>,
    ) -> Self {
        Self {
            profile,
            symbolizer,
            kernel_frames: 0,
            depths: StackDepths::default(),
            jit,
            cache: FrameCache::default(),
            looped_frames: 0,
            only_tid,
            only_comm,
        }
    }

    /// Adds the sample to the profile, unless its thread is not the one asked for.
    pub fn add(&mut self, model: &ProcessModel, binaries: &mut BinaryCache, s: &SampleStack) {
        // Samples come in time order: the first one, before any filter, is the start.
        self.profile.start_time.get_or_insert(s.time);
        let comm: Cow<'_, str> = match model.thread(s.tid) {
            Some(t) if !t.comm.is_empty() => Cow::Borrowed(&t.comm),
            _ => Cow::Owned(format!(":{}", s.tid)),
        };
        if self.only_tid.is_some_and(|tid| tid != s.tid)
            || self.only_comm.is_some_and(|c| c != comm)
        {
            return;
        }
        let mut stack = vec![self.root(s.tid, comm.clone())];
        self.push_user(model, binaries, s, &mut stack);
        if !s.off_cpu && !s.of_kernel_thread() {
            let whole = self.whole(&stack[1..]);
            self.depths.observe(s.pid, s.tid, &comm, whole, s.cut);
        }
        self.push_kernel(s, &mut stack);
        // A frame chain that loops on itself (a frame pointer pointing at itself, as in
        // code built without frame pointers) repeats one unmapped address: keep it once.
        let before = stack.len();
        let profile = &self.profile;
        stack.dedup_by(|a, b| {
            a == b && {
                let f = profile.frame(*a);
                f.kind == FrameKind::Unknown && f.name.starts_with("[unknown] (0x")
            }
        });
        self.looped_frames += (before - stack.len()) as u64;
        let stack = self.profile.intern_stack(&stack);
        self.profile.samples.push(ProfileSample {
            pid: s.pid,
            tid: s.tid,
            time: s.time,
            cpu: s.cpu,
            weight: s.period,
            stack,
            off_cpu: s.off_cpu,
        });
    }

    /// Whether user frames (outermost first) go from the thread's start to the leaf, every
    /// one named.
    fn whole(&self, user: &[FrameId]) -> bool {
        let profile = &self.profile;
        user.first()
            .is_some_and(|&id| depth::is_thread_entry(&profile.frame(id).name))
            && user.iter().all(|&id| {
                let f = profile.frame(id);
                f.kind != FrameKind::Unknown && !(f.kind == FrameKind::Jit && f.name == INTERPRETER)
            })
    }

    /// The thread's root frame, named by its comm as it was at the sample.
    fn root(&mut self, tid: u32, comm: Cow<'_, str>) -> FrameId {
        match self.cache.roots.get(&tid) {
            Some((name, id)) if **name == *comm => *id,
            _ => {
                let id = self.profile.intern(Frame {
                    name: comm.to_string(),
                    kind: FrameKind::Root,
                    module: None,
                    file: None,
                    line: None,
                });
                self.cache.roots.insert(tid, (comm.into_owned(), id));
                id
            }
        }
    }

    fn push_user(
        &mut self,
        model: &ProcessModel,
        binaries: &mut BinaryCache,
        s: &SampleStack,
        stack: &mut Vec<FrameId>,
    ) {
        for (i, &addr) in s.stack.user.iter().enumerate().rev() {
            let exact = i == 0;
            // JIT code lives in anonymous memory; the index knows what was there when.
            let probe = if exact { addr } else { addr.wrapping_sub(1) };
            if let Some(code) = self.jit.lookup(s.pid, probe, s.time) {
                self.push_jit(code, s, i, probe, stack);
                continue;
            }
            let address_key = (s.pid, model.generation(s.pid), addr, exact);
            if let Some(hit) = self.cache.by_address.get_mut(&address_key) {
                hit.repeats += 1;
                stack.extend_from_slice(&hit.ids);
                continue;
            }
            // Counts unknown frames inside; repeats answered by `by_address` are added
            // after the walk.
            let found = self.symbolizer.user(model, binaries, s.pid, addr, exact);
            let key = match &found.path {
                Some(path) => (
                    Some(frame_cache::SamePath(path.clone())),
                    found.offset,
                    found.shown_offset,
                ),
                None => (None, addr, addr),
            };
            let profile = &mut self.profile;
            let ids = self.cache.user.entry(key).or_insert_with(|| {
                user_frames(&found, addr)
                    .into_iter()
                    .map(|frame| profile.intern(frame))
                    .collect()
            });
            stack.extend_from_slice(ids);
            let unknown = found.frames.is_empty().then(|| found.path.clone());
            self.cache.by_address.insert(
                address_key,
                frame_cache::AddressHit {
                    ids: ids.clone(),
                    unknown,
                    repeats: 0,
                },
            );
        }
    }

    /// JIT code at user-stack entry `i`: a HotSpot interpreted frame named by the method it
    /// runs, else the compiled body and what is inlined in it.
    fn push_jit(
        &mut self,
        code: &jit_index::JitCode,
        s: &SampleStack,
        i: usize,
        probe: u64,
        stack: &mut Vec<FrameId>,
    ) {
        let method = s.interpreted.get(i).copied().flatten();
        let named = method
            .filter(|_| code.name == INTERPRETER)
            .and_then(|m| self.jit.method_name(s.pid, m, s.time));
        if let Some(name) = named {
            stack.push(self.profile.intern(Frame {
                name: name.to_string(),
                kind: FrameKind::Interpreter,
                module: Some(code.source.to_string()),
                file: None,
                line: None,
            }));
            return;
        }
        for frame in JitIndex::code_frames(code, probe).into_iter().rev() {
            // The tier belongs to the compiled body, not to what is inlined in it.
            let tier = (frame.kind == FrameKind::Jit)
                .then(|| code.tier.clone())
                .flatten();
            stack.push(self.profile.intern_tiered(frame, tier));
        }
    }

    fn push_kernel(&mut self, s: &SampleStack, stack: &mut Vec<FrameId>) {
        self.kernel_frames += s.stack.kernel.len() as u64;
        for (i, &addr) in s.stack.kernel.iter().enumerate().rev() {
            let exact = i == 0;
            if let Some(&(id, named)) = self.cache.kernel.get(&(addr, exact)) {
                if !named {
                    self.symbolizer.unknown.kernel += 1;
                }
                stack.push(id);
                continue;
            }
            let name = self.symbolizer.kernel(addr, exact);
            let named = name.is_some();
            let id = self.profile.intern(Frame {
                name: name.unwrap_or_else(|| format!("[unknown] ({addr:#x})")),
                kind: FrameKind::Kernel,
                module: Some(KERNEL_MODULE.to_string()),
                file: None,
                line: None,
            });
            self.cache.kernel.insert((addr, exact), (id, named));
            stack.push(id);
        }
    }

    /// After the walk: the threads' names, the repeats of unknown addresses counted into the
    /// symbolizer's totals, the looped-chain note.
    pub fn finish(mut self, model: &ProcessModel) -> Self {
        if self.looped_frames > 0 {
            self.profile.notes.push(format!(
                "{} repeats of an unmapped address (frame chains that loop on themselves) \
                 were cut, each kept once",
                self.looped_frames
            ));
        }
        for (tid, t) in model.threads() {
            self.profile.threads.insert(
                tid,
                ThreadInfo {
                    pid: t.pid,
                    comm: t.comm.clone(),
                },
            );
        }
        let unknown = &mut self.symbolizer.unknown;
        for hit in self.cache.by_address.values() {
            match &hit.unknown {
                Some(Some(path)) if hit.repeats > 0 => {
                    *unknown.by_module.entry(path.to_string()).or_default() += hit.repeats;
                }
                Some(None) => unknown.unmapped += hit.repeats,
                _ => {}
            }
        }
        self
    }
}
