//! The jobs a scheduler knows, by id. Ids count up from 0 and are never reused. A job
//! that has ended can be forgotten, so a long run keeps only the jobs in flight: the
//! store holds a window from the oldest job not forgotten to the newest, in which a
//! forgotten job costs one empty pointer.

use crate::jobs::{Job, JobId};
use gpol_compiler::schema::Sym;
use std::collections::VecDeque;

#[derive(Clone, Debug, Default)]
pub struct JobStore {
    /// The id of `slots[0]`: every job before it is forgotten.
    base: JobId,
    /// Boxed, so that a forgotten job inside the window costs a null pointer, not a job.
    slots: VecDeque<Option<Box<Entry>>>,
    live: usize,
}

/// A job and what the scheduler derives from it once, at submission.
#[derive(Clone, Debug)]
struct Entry {
    job: Job,
    /// Label values in the policy's slot order.
    labels: Vec<Sym>,
    /// An index into the scheduler's shapes.
    shape: usize,
}

impl JobStore {
    /// Adds a job; its id is the number of jobs added before it.
    pub(crate) fn push(&mut self, job: Job, labels: Vec<Sym>, shape: usize) -> JobId {
        let id = self.len();
        self.slots.push_back(Some(Box::new(Entry { job, labels, shape })));
        self.live += 1;
        id
    }

    /// How many ids were given out: every job ever added, forgotten or not.
    pub fn len(&self) -> usize {
        self.base + self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many jobs are held (not forgotten).
    pub fn live(&self) -> usize {
        self.live
    }

    /// The job, unless it was forgotten or never added.
    pub fn get(&self, id: JobId) -> Option<&Job> {
        self.entry(id).map(|e| &e.job)
    }

    /// Drops an ended job's record, and returns it.
    pub(crate) fn remove(&mut self, id: JobId) -> Option<Job> {
        let slot = id.checked_sub(self.base).and_then(|i| self.slots.get_mut(i))?;
        let entry = slot.take()?;
        self.live -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(entry.job)
    }

    /// The held jobs, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Job> + '_ {
        self.slots.iter().flatten().map(|e| &e.job)
    }

    /// The held jobs with their ids, oldest first.
    pub fn with_ids(&self) -> impl Iterator<Item = (JobId, &Job)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (self.base + i, &e.job)))
    }

    pub(crate) fn labels(&self, id: JobId) -> &[Sym] {
        &self.held(id).labels
    }

    pub(crate) fn shape(&self, id: JobId) -> usize {
        self.held(id).shape
    }

    fn entry(&self, id: JobId) -> Option<&Entry> {
        id.checked_sub(self.base).and_then(|i| self.slots.get(i)).and_then(Option::as_deref)
    }

    /// A job the scheduler still refers to: it is held, or the scheduler forgot a job it
    /// still refers to, which is a bug in the scheduler, never in its input.
    fn held(&self, id: JobId) -> &Entry {
        self.entry(id).unwrap_or_else(|| panic!("job {id} is referred to after it was forgotten"))
    }
}

impl std::ops::Index<JobId> for JobStore {
    type Output = Job;

    fn index(&self, id: JobId) -> &Job {
        &self.held(id).job
    }
}

impl std::ops::IndexMut<JobId> for JobStore {
    fn index_mut(&mut self, id: JobId) -> &mut Job {
        let slot = id.checked_sub(self.base).and_then(|i| self.slots.get_mut(i)).and_then(Option::as_deref_mut);
        &mut slot.unwrap_or_else(|| panic!("job {id} is referred to after it was forgotten")).job
    }
}

impl<'a> IntoIterator for &'a JobStore {
    type Item = &'a Job;
    type IntoIter = Box<dyn Iterator<Item = &'a Job> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job as the scheduler makes it from the one job model's defaults.
    fn job(name: &str) -> Job {
        let policy =
            gpol_compiler::load::compile_text("p.gpol", "policy p\n", gpol_compiler::engine::EngineKind::Interp)
                .expect("the empty policy compiles");
        let mut s = crate::Scheduler::new(policy);
        let id = s.submit(gpol_compiler::spec::JobSpec::named(name)).expect("a default job is valid");
        s.job(id).clone()
    }

    #[test]
    fn forgetting_shrinks_the_window_but_never_reuses_an_id() {
        let mut store = JobStore::default();
        let ids: Vec<JobId> = ["a", "b", "c", "d"].into_iter().map(|n| store.push(job(n), Vec::new(), 0)).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(store.remove(1).map(|j| j.ask.name), Some("b".to_string()));
        assert_eq!((store.slots.len(), store.live()), (4, 3), "an older job keeps the window open");
        assert!(store.remove(1).is_none(), "a job is forgotten once");
        store.remove(0);
        assert_eq!((store.base, store.slots.len()), (2, 2), "the window starts at the oldest held job");
        assert!(store.get(0).is_none() && store.get(1).is_none());
        assert_eq!(store.push(job("e"), Vec::new(), 0), 4);
        let held: Vec<(JobId, &str)> = store.with_ids().map(|(i, j)| (i, j.ask.name.as_str())).collect();
        assert_eq!(held, [(2, "c"), (3, "d"), (4, "e")]);
        assert_eq!(store[3].ask.name, "d");
        assert_eq!(store.len(), 5);
    }
}
